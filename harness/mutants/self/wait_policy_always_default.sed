# file: harness/fuzz/run.c
# bug: the wait policy read at load is never recorded, always "default", so a case found under OMP_WAIT_POLICY=active names no policy in case.json or its REPRO line (caught by the self check of the policy recorded)
s/    if (policy \&\& strcasecmp(policy, "active") == 0) wait_policy = "active";/    if (0) wait_policy = "active";/
s/    else if (policy \&\& strcasecmp(policy, "passive") == 0) wait_policy = "passive";/    else if (0 \&\& policy) wait_policy = "passive";/

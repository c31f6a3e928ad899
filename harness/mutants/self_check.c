/* The self checks of code a differential campaign cannot judge, as one
 * program: the shared validator and layout helpers against a second
 * reading of SPEC.md (tests/validate/spec_property.h,
 * tests/layout/layout_property.h), the history and permutation checks
 * against candidates and cases made for them, the generator's ring
 * chunks, the wait policy recorded and the pooled histories' sizes
 * (tests/fuzz/harness_property.h).  The unit tests run the same checks;
 * mk/selfcheck.mk builds this program once per mutant of
 * harness/mutants/self/, against the mutant's copy of the code, and
 * harness/mutants/self_check.sh expects it to fail.
 * It restarts itself under OMP_WAIT_POLICY=active unless started under
 * a policy, so that the wait policy recorded is one read at load.
 * Exit status: 0 when every check holds, 1 otherwise (each failing check
 * prints why). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/fuzz/harness_property.h"
#include "tests/layout/layout_property.h"
#include "tests/validate/spec_property.h"

static int report(const char *name, int failed, const char *why) {
    printf("%s %s%s%s\n", failed ? "FAIL" : "ok  ", name, failed ? ": " : "", failed ? why : "");
    return failed != 0;
}

int main(int argc, char **argv) {
    (void)argc;
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "active", 1);
        execv("/proc/self/exe", argv);
        perror("self check: restarting under OMP_WAIT_POLICY=active");
        return 1;
    }
    int failed = 0;
    static prop_run validator, fields;
    prop_validator_cases(&validator, 20261129, 100000);
    failed += report("validator against SPEC.md 8", validator.disagreements != 0, validator.why);
    prop_fields_cases(&fields, 20261130, 20000);
    failed += report("validator field checks at the count bounds", fields.disagreements != 0, fields.why);
    layout_run addressing = {0}, slots = {0}, ring = {0};
    layout_addressing_cases(&addressing, 20261129, 400);
    failed += report("page addressing against SPEC.md 3", addressing.disagreements != 0, addressing.why);
    layout_state_slot_cases(&slots, 20261129, 5000);
    failed += report("V4 state slots against SPEC.md 3", slots.disagreements != 0, slots.why);
    layout_ring_store_cases(&ring, 20261129, 600);
    failed += report("V4.1 ring store against SPEC.md 5.1", ring.disagreements != 0, ring.why);
    char why[700] = "";
    failed += report("history check sees a ring that alone differs", harness_history_sees_the_ring(why, sizeof why), why);
    why[0] = 0;
    failed += report("permutation moves pages", harness_permutation_moves_pages(why, sizeof why), why);
    why[0] = 0;
    failed += report("V4.1 ring chunks past CAP are a regular draw", harness_ring_chunks_past_cap(why, sizeof why), why);
    why[0] = 0;
    failed += report("wait policy recorded is the one at load", harness_wait_policy_recorded(why, sizeof why), why);
    why[0] = 0;
    failed += report("histories under a geometry pool are sized for a power of two", harness_history_pooled_sizes(why, sizeof why), why);
    return failed ? 1 : 0;
}

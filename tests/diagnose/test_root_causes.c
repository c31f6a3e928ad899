/* One signature per root cause, named only when the name is proven
 * (docs/diagnosis.md): campaigns of candidates whose bug is known, run
 * by the kvcmp of the test binary's own build.
 *
 *   a plain insert written on its own (tests/plugins/plain_insert.c)
 *   that rounds fp8 subnormal ties away from zero: named by the
 *   catalogue's entry for that; one that truncates fp8 subnormals, which
 *   the catalogue lacks: no name, in the summary and in replay alike;
 *   kernels written on their own with one bug of each family in their
 *   own code (rounding: bf16 and fp8 ties away, bf16 and fp8 truncation;
 *   NaN: a payload kept, a block maximum that drops NaN; window: one row
 *   early, tests/plugins/compress_window.c): each one signature, named
 *   by the catalogue's entry for its bug and by no other;
 *   an exp within an ulp but not correctly rounded
 *   (harness/mutants/softmax_exp_approximate.sed): one last-bit
 *   signature per stage that pools, no name;
 *   a window shifted by one row and an R = 4 half mix-up
 *   (harness/mutants/window_start_off_by_one.sed, r4_half_offset.sed):
 *   one signature each, by its own name;
 *   a candidate that crashes on every call: its crashes on valid inputs
 *   and on inputs corrupted on purpose are two signatures. */
#include <cjson/cJSON.h>
#include <libgen.h>
#include <sys/wait.h>

#include "tests/test_support.h"

/* build/kvcmp beside the test binary's build (BUILD/asan/unit-tests). */
static void kvcmp_binary(char *out, size_t size) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = 0;
    snprintf(out, size, "%s/kvcmp", dirname(dirname(self)));
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds it)", out);
}

static void test_plugin(const char *kind, char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/%s.so", dir && dir[0] ? dir : "build/test-plugins", kind);
    cr_assert(support_file_exists(out), "%s is missing: make test builds it (or set KVCMP_TEST_PLUGINS)", out);
}

static void mutant(const char *name, char *out, size_t size) {
    snprintf(out, size, "build/mutants/%s.so", name);
    if (!support_file_exists(out)) cr_skip_test("%s not built (make mutants)", out);
}

typedef struct {
    char dir[64], json[128], save[128];
    char *log;
    cJSON *summary;
    const cJSON *signatures;
} campaign;

/* kvcmp fuzz --candidate CANDIDATE --seed SEED --cases CASES [more...]
 * --jobs 2 --max-failures 50, its summary and log. */
static void run_campaign(const char *candidate, const char *seed, const char *cases, char *const *more, int num_more, campaign *c) {
    char binary[4096], log[160];
    kvcmp_binary(binary, sizeof binary);
    support_temp_dir(c->dir, sizeof c->dir);
    snprintf(c->json, sizeof c->json, "%s/summary.json", c->dir);
    snprintf(c->save, sizeof c->save, "%s/saved", c->dir);
    snprintf(log, sizeof log, "%s/log.txt", c->dir);
    char *argv[40] = {binary, "fuzz", "--candidate", (char *)candidate, "--seed", (char *)seed, "--cases", (char *)cases, "--jobs", "2",
                      "--max-failures", "50", "--shrink-seconds", "1", "--quiet", "--save", c->save, "--json", c->json};
    int argc = 19;
    for (int i = 0; i < num_more; i++) argv[argc++] = more[i];
    argv[argc] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execv(binary, argv);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    c->log = support_read_file(log);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s: kvcmp fuzz did not report failures (status %d):\n%s", candidate, status,
              c->log);
    char *text = support_read_file(c->json);
    c->summary = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(c->summary);
    c->signatures = cJSON_GetObjectItem(c->summary, "signatures");
}

static void campaign_free(campaign *c) {
    cJSON_Delete(c->summary);
    free(c->log);
    support_remove_tree(c->dir);
}

static const char *string_of(const cJSON *o, const char *key) {
    const cJSON *item = cJSON_GetObjectItem(o, key);
    return cJSON_IsString(item) ? item->valuestring : "";
}

static double number_of(const cJSON *o, const char *key) {
    const cJSON *item = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(item) ? item->valuedouble : -1;
}

/* The signature explained by exactly `name` and proven on its cases. */
static void expect_named_by(const cJSON *sig, const char *name, const char *log) {
    const cJSON *names = cJSON_GetObjectItem(sig, "explained_by");
    cr_assert_eq(cJSON_GetArraySize(names), 1, "%s:\n%s", string_of(sig, "signature"), log);
    cr_expect_str_eq(cJSON_GetArrayItem(names, 0)->valuestring, name);
    const cJSON *proof = cJSON_GetObjectItem(sig, "explanation_proof");
    cr_expect_geq(number_of(proof, "failing_cases_checked"), 2);
    cr_expect_gt(number_of(proof, "passing_cases_checked"), 0);
    cr_expect_eq(number_of(proof, "cases_held"), number_of(proof, "cases_checked"));
}

Test(root_causes, an_independent_kernel_with_a_catalogued_bug_is_named_by_it, .timeout = 300) {
    char candidate[512];
    test_plugin("fp8_subnormal_ties_away", candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "1", "3000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 1, "%s", c.log);
    expect_named_by(cJSON_GetArrayItem(c.signatures, 0), "fp8-subnormal-ties-away", c.log);
    cr_expect(strstr(c.log, "      explained by: fp8-subnormal-ties-away (SPEC 1 fp8); held on ") != NULL, "%s", c.log);
    campaign_free(&c);
}

/* A campaign of test candidate `kind` (a kernel written on its own with
 * one bug) finds one signature, explained by exactly `name`. */
static void expect_independent_kernel_named(const char *kind, const char *name) {
    char candidate[512];
    test_plugin(kind, candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "1", "3000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 1, "%s:\n%s", kind, c.log);
    expect_named_by(cJSON_GetArrayItem(c.signatures, 0), name, c.log);
    campaign_free(&c);
}

Test(root_causes, independent_bf16_ties_away_is_named_bf16_half_away, .timeout = 300) {
    expect_independent_kernel_named("bf16_ties_away", "bf16-half-away");
}

Test(root_causes, independent_bf16_truncation_is_named_by_it, .timeout = 300) {
    expect_independent_kernel_named("bf16_truncation", "bf16-truncation");
}

Test(root_causes, independent_fp8_ties_away_is_named_by_it, .timeout = 300) {
    expect_independent_kernel_named("fp8_ties_away", "fp8-ties-away");
}

Test(root_causes, independent_fp8_truncation_is_named_by_it, .timeout = 300) {
    expect_independent_kernel_named("fp8_truncation", "fp8-truncation");
}

Test(root_causes, independent_bf16_nan_payload_kept_is_named_by_it, .timeout = 300) {
    expect_independent_kernel_named("bf16_nan_payload_kept", "bf16-nan-payload-kept");
}

Test(root_causes, independent_block_max_dropping_nan_is_named_by_it, .timeout = 300) {
    expect_independent_kernel_named("block_max_drops_nan", "block-max-drops-nan");
}

Test(root_causes, independent_window_one_row_early_is_named_window_starts_early, .timeout = 300) {
    expect_independent_kernel_named("compress_window", "window-starts-early");
}

/* The first case.json under dir, read whole (NULL when none). */
static char *first_saved_case_json(const char *dir) {
    char command[512];
    snprintf(command, sizeof command, "find %s -name case.json | sort | head -1", dir);
    FILE *p = popen(command, "r");
    cr_assert_not_null(p);
    char path[400] = "";
    if (!fgets(path, sizeof path, p)) path[0] = 0;
    pclose(p);
    path[strcspn(path, "\n")] = 0;
    return path[0] ? support_read_file(path) : NULL;
}

/* libgomp reads OMP_WAIT_POLICY once per process: a campaign run under
 * the active policy says so per case (coverage, case.json meta replay)
 * and its __REPRO lines set it; one without a policy runs under passive
 * (kvcmp fuzz re-executes itself) and says that. */
Test(root_causes, the_wait_policy_a_case_ran_under_is_recorded_and_reproduced, .timeout = 300) {
    char candidate[512];
    test_plugin("fp8_ties_away", candidate, sizeof candidate);
    const char *policies[] = {"active", "passive"};
    for (int i = 0; i < 2; i++) {
        if (i == 0) setenv("OMP_WAIT_POLICY", "active", 1);
        else unsetenv("OMP_WAIT_POLICY");
        campaign c;
        run_campaign(candidate, "1", "600", NULL, 0, &c);
        unsetenv("OMP_WAIT_POLICY");
        const cJSON *counts = cJSON_GetObjectItem(cJSON_GetObjectItem(c.summary, "coverage"), "omp_wait_policy");
        cr_assert_not_null(counts, "no coverage.omp_wait_policy:\n%s", c.log);
        cr_expect_eq(number_of(counts, policies[i]), 600, "%s", c.log);
        cr_expect_eq(number_of(counts, policies[1 - i]), 0, "%s", c.log);
        int prefixed = strstr(c.log, "__REPRO: OMP_WAIT_POLICY=active ") != NULL;
        cr_expect_eq(prefixed, i == 0, "%s", c.log);
        cr_expect(strstr(c.log, "__REPRO: ") != NULL, "%s", c.log);
        char *json = first_saved_case_json(c.save);
        cr_assert_not_null(json, "no case saved under %s", c.save);
        cJSON *saved = cJSON_Parse(json);
        const cJSON *replay = cJSON_GetObjectItem(cJSON_GetObjectItem(saved, "meta"), "replay");
        cr_expect_str_eq(string_of(replay, "omp_wait_policy"), policies[i]);
        cJSON_Delete(saved);
        free(json);
        campaign_free(&c);
    }
}

/* Each FAIL line of `kvcmp replay --impl candidate` over the saved cases. */
static char *replay_saved(const char *candidate, const char *save) {
    char binary[4096], command[5000];
    kvcmp_binary(binary, sizeof binary);
    snprintf(command, sizeof command, "%s replay --impl %s %s 2>&1", binary, candidate, save);
    FILE *p = popen(command, "r");
    cr_assert_not_null(p);
    size_t size = 0, used = 0;
    char *out = NULL, chunk[4096];
    for (size_t got; (got = fread(chunk, 1, sizeof chunk, p)) > 0; used += got) {
        if (used + got + 1 > size) out = realloc(out, size = 2 * (used + got) + 1);
        memcpy(out + used, chunk, got);
    }
    pclose(p);
    if (!out) out = calloc(1, 1);
    else out[used] = 0;
    return out;
}

Test(root_causes, a_bug_the_catalogue_lacks_gets_no_name_in_the_summary_or_replay, .timeout = 300) {
    char candidate[512];
    test_plugin("fp8_subnormals_truncated", candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "1", "3000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 1, "%s", c.log);
    const cJSON *sig = cJSON_GetArrayItem(c.signatures, 0);
    cr_expect_str_eq(string_of(sig, "signature"), "v41.rope_plain_insert bytes: last bit");
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(sig, "diagnosed")));
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sig, "explained_by")), 0, "%s", c.log);
    const cJSON *proof = cJSON_GetObjectItem(sig, "explanation_proof");
    cr_expect_geq(number_of(proof, "cases_checked"), 2);
    cr_expect_eq(number_of(proof, "cases_held"), 0);
    /* fp8-truncation writes the bytes of a case whose differences are all subnormal, not those of the others. */
    const cJSON *refuted = cJSON_GetObjectItem(proof, "refuted"), *name;
    int truncation = 0;
    cJSON_ArrayForEach(name, refuted) truncation |= strcmp(name->valuestring, "fp8-truncation") == 0;
    cr_expect(truncation, "%s", c.log);
    /* Replayed, every saved case says what the summary says. */
    char *replayed = replay_saved(candidate, c.save);
    cr_expect(strstr(replayed, "FAIL ") != NULL, "%s", replayed);
    cr_expect(strstr(replayed, "explained by:") == NULL, "%s", replayed);
    int lines = 0, unexplained = 0;
    for (const char *at = strstr(replayed, "FAIL "); at; at = strstr(at + 1, "FAIL ")) {
        lines++;
        const char *end = strchr(at, '\n');
        const char *u = strstr(at, "; unexplained by the deviation catalogue (as the campaign found on ");
        unexplained += u && (!end || u < end);
    }
    cr_expect_eq(unexplained, lines, "%s", replayed);
    free(replayed);
    campaign_free(&c);
}

Test(root_causes, an_approximate_exp_is_one_last_bit_signature_per_stage, .timeout = 300) {
    char candidate[512];
    mutant("softmax_exp_approximate", candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "1", "4000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 2, "%s", c.log);
    int compress = 0, norm = 0;
    const cJSON *sig;
    cJSON_ArrayForEach(sig, c.signatures) {
        const char *key = string_of(sig, "signature");
        compress += strcmp(key, "v4.compress bytes: last bit") == 0;
        norm += strcmp(key, "v41.save_compress_norm bytes: last bit") == 0;
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sig, "explained_by")), 0, "%s is named:\n%s", key, c.log);
        /* Localised: where the differences are and in which steps they arise. */
        const cJSON *where = cJSON_GetObjectItem(sig, "where");
        cr_expect(strstr(string_of(where, "arises"), "pooled or normed values") != NULL, "%s", c.log);
        cr_expect_gt(number_of(where, "last_bit"), 0);
    }
    cr_expect(compress == 1 && norm == 1, "%s", c.log);
    campaign_free(&c);
}

Test(root_causes, a_window_shifted_by_one_row_is_one_signature, .timeout = 300) {
    char candidate[512];
    mutant("window_start_off_by_one", candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "4", "3000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 1, "%s", c.log);
    expect_named_by(cJSON_GetArrayItem(c.signatures, 0), "window-starts-early", c.log);
    campaign_free(&c);
}

Test(root_causes, an_r4_half_mix_up_is_one_signature, .timeout = 300) {
    char candidate[512];
    mutant("r4_half_offset", candidate, sizeof candidate);
    campaign c;
    run_campaign(candidate, "1", "3000", NULL, 0, &c);
    cr_assert_eq(cJSON_GetArraySize(c.signatures), 1, "%s", c.log);
    expect_named_by(cJSON_GetArrayItem(c.signatures, 0), "r4-halves-swapped", c.log);
    campaign_free(&c);
}

Test(root_causes, failures_on_valid_and_on_corrupted_inputs_are_two_signatures, .timeout = 300) {
    char candidate[512];
    test_plugin("crash", candidate, sizeof candidate);
    char *more[] = {"--stage", "v41.rope_plain_insert/bf16", "--invalid-rate", "500"};
    campaign c;
    run_campaign(candidate, "1", "40", more, 4, &c);
    int valid = 0, rejected = 0;
    const cJSON *sig;
    cJSON_ArrayForEach(sig, c.signatures) {
        const char *key = string_of(sig, "signature"), *input = string_of(sig, "input");
        if (strcmp(key, "v41.rope_plain_insert crash: signal 9") == 0) {
            valid++;
            cr_expect_str_eq(input, "valid");
        }
        if (strcmp(key, "v41.rope_plain_insert crash: signal 9 [on inputs the contract rejects]") == 0) {
            rejected++;
            cr_expect_str_eq(input, "rejected by the contract");
        }
    }
    cr_expect(valid == 1 && rejected == 1, "%s", c.log);
    campaign_free(&c);
}

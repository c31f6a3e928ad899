/* kvcmp gen: the fuzzer's cases written out, case i of seed S equal to
 * the generator's case i, must-reject cases without outputs, options
 * refused with a message naming them. */
#include "tests/cli/cli_support.h"

static captured_run gen(int argc, char **argv) { return support_capture(kvc_cmd_gen, argc, argv); }

static void expect_gen_error(int argc, char **argv, const char *needle) {
    captured_run run = gen(argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d", run.status);
    expect_contains(run.err, needle, "stderr");
    support_free_run(&run);
}

Test(gen_command, refuses_bad_options) {
    char *no_count[] = {"--out", "/tmp/x"};
    expect_gen_error(ARGC(no_count), no_count, "say how many cases: --cases N or --seconds T");
    char *no_out[] = {"--cases", "3"};
    expect_gen_error(ARGC(no_out), no_out, "--out DIR is required");
    char *bad_seed[] = {"--seed", "-1", "--cases", "3", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_seed), bad_seed, "--seed takes a whole number from 0 to 2^64-1 (decimal or 0x hex), not '-1'");
    char *bad_seed2[] = {"--seed", "12z", "--cases", "3", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_seed2), bad_seed2, "not '12z'");
    char *bad_cases[] = {"--cases", "3k", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_cases), bad_cases, "--cases takes a whole number from 0 to 9223372036854775807, not '3k'");
    char *bad_seconds[] = {"--seconds", "0", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_seconds), bad_seconds, "--seconds takes a number from 0.001 to 1e+07, not '0'");
    char *bad_rate[] = {"--invalid-rate", "1001", "--cases", "1", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_rate), bad_rate, "--invalid-rate takes a whole number from 0 to 1000, not '1001'");
    char *bad_shard[] = {"--shard", "2/2", "--cases", "1", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_shard), bad_shard, "--shard takes I/N with 0 <= I < N, e.g. --shard 0/4, not '2/2'");
    char *bad_stage[] = {"--stage", "v5", "--cases", "1", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_stage), bad_stage, "--stage item 'v5' matches no variant");
    char *bad_family[] = {"--family", "odd", "--cases", "1", "--out", "/tmp/x"};
    expect_gen_error(ARGC(bad_family), bad_family, "--family item 'odd' matches no value family");
    char *unknown[] = {"--cases", "1", "--out", "/tmp/x", "--fast"};
    expect_gen_error(ARGC(unknown), unknown, "unknown option '--fast'");
    char *no_value[] = {"--out", "/tmp/x", "--cases"};
    expect_gen_error(ARGC(no_value), no_value, "--cases needs a value");
    char *extra[] = {"--cases", "1", "--out", "/tmp/x", "cases"};
    expect_gen_error(ARGC(extra), extra, "unexpected argument 'cases'");
    char *help[] = {"--help"};
    captured_run run = gen(ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.out, "usage: kvcmp gen", "stdout");
    support_free_run(&run);
}

/* Shard 1 of 2 of 12 cases: the odd ones, each the generator's case. */
Test(gen_command, writes_the_fuzzers_cases) {
    char root[128], out[256];
    support_temp_dir(root, sizeof root);
    snprintf(out, sizeof out, "%s/cases", root);
    char *argv[] = {"--seed", "9", "--cases", "12", "--shard", "1/2", "--stage", "v4.compress,v41", "--family", "normal,tiny",
                    "--invalid-rate", "0", "--out", out};
    captured_run run = gen(ARGC(argv), argv);
    cr_assert_eq(run.status, 0, "%s", run.err);
    expect_contains(run.out, "gen: 6 cases written", "stdout");
    expect_contains(run.out, "0 must be rejected", "stdout");
    expect_contains(run.out, "build/kvcmp replay --outputs OUT", "stdout");
    support_free_run(&run);
    char error[512];
    kvc_gen_config config = {.seed = 9, .variant_mask = kvc_variant_mask("v4.compress,v41", error, sizeof error),
                             .family_mask = kvc_family_mask("normal,tiny", error, sizeof error)};
    for (int64_t index = 1; index < 12; index += 2) {
        kvc_gen_case g;
        kvc_gen_make(&config, index, &g);
        char name[128], dir[512];
        kvc_gen_case_name(9, index, g.variant, name, sizeof name);
        snprintf(dir, sizeof dir, "%s/%s", out, name);
        kvc_case saved;
        cr_assert_eq(kvc_case_load(dir, &saved, error, sizeof error), 0, "%s", error);
        for (int i = 0; i < g.c.num_tensors; i++) {
            kvc_array *a = &g.c.tensors[i].array, *b = kvc_case_get(&saved, g.c.tensors[i].name);
            cr_assert(b && a->count == b->count && memcmp(a->data, b->data, (size_t)a->count * (size_t)kvc_dtype_size(a->dtype)) == 0,
                      "case %lld tensor %s", (long long)index, g.c.tensors[i].name);
        }
        const char *outputs[KVC_MAX_OUTPUTS];
        int n = kvc_stage_outputs(&g.c, outputs);
        cr_assert_eq(saved.num_tensors, g.c.num_tensors + n, "case %lld: inputs and one .out per output", (long long)index);
        for (int i = 0; i < n; i++) {
            char out_name[64];
            snprintf(out_name, sizeof out_name, "%s.out", outputs[i]);
            cr_assert_not_null(kvc_case_get(&saved, out_name), "case %lld lacks %s", (long long)index, out_name);
        }
        cr_assert(strstr(saved.meta_json, "\"generator\":\"kvcmp gen\""), "%s", saved.meta_json);
        kvc_case_free(&saved);
        kvc_gen_free(&g);
    }
    /* The even cases are another shard's. */
    char **dirs;
    cr_assert_eq(kvc_find_cases(out, &dirs), 6);
    kvc_free_case_list(dirs, 6);
    support_remove_tree(root);
}

Test(gen_command, must_reject_history_and_unwritable) {
    char root[128], out[256];
    support_temp_dir(root, sizeof root);
    snprintf(out, sizeof out, "%s/cases", root);
    /* Seed 8: each of its three corruptions hits a token the stage reads
     * (another seed may corrupt an unread one, which is then ignored). */
    char *invalid[] = {"--seed", "8", "--cases", "3", "--stage", "v41.rope_plain", "--invalid-rate", "1000", "--out", out};
    captured_run run = gen(ARGC(invalid), invalid);
    cr_assert_eq(run.status, 0, "%s", run.err);
    expect_contains(run.out, "gen: 3 cases written", "stdout");
    expect_contains(run.out, "(3 must be rejected", "stdout");
    support_free_run(&run);
    char *replay[] = {"--quiet", out};
    run = support_capture(kvc_cmd_replay, ARGC(replay), replay);
    cr_expect_eq(run.status, 0, "the reference rejects every must-reject case:\n%s", run.out);
    support_free_run(&run);
    char *history[] = {"--seconds", "0.2", "--stage", "history", "--out", out};
    run = gen(ARGC(history), history);
    cr_assert_eq(run.status, 0, "%s", run.err);
    expect_contains(run.out, "gen: 0 cases written", "stdout");
    expect_contains(run.out, "multi-step history cases skipped", "stdout");
    support_free_run(&run);
    char *unwritable[] = {"--cases", "1", "--stage", "v4.save", "--out", "/proc/kvcmp-gen"};
    run = gen(ARGC(unwritable), unwritable);
    cr_expect_eq(run.status, 1);
    expect_contains(run.err, "check that --out /proc/kvcmp-gen is writable", "stderr");
    support_free_run(&run);
    support_remove_tree(root);
}

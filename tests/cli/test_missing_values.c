/* Options given without their value, and other refusals. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




/* ---- options given without their value, and other refusals ------------------------ */

Test(cli_replay, option_without_its_value) {
    /* Options come before the paths; an option at the end has no value. */
    char *impl[] = {"--quiet", "--impl"};
    expect_replay_usage_error(ARGC(impl), impl, "usage: kvcmp replay");
    char *policy[] = {"--policy"};
    expect_replay_usage_error(ARGC(policy), policy, "usage: kvcmp replay");
    char *padding[] = {"--quiet", "--page-padding"};
    expect_replay_usage_error(ARGC(padding), padding, "usage: kvcmp replay");
}

Test(cli_bench, option_without_its_value_or_out_of_range) {
    static const char *const bad[][2] = {{"--json", NULL},    {"--threads", NULL}, {"--scenario", NULL},    {"--runs", NULL},
                                         {"--reference-runs", NULL}, {"--threads", "0"}, {"--runs", "100000"}, {"--reference-runs", "-1"},
                                         {"--reference-runs", "100000"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)bad[i][0], (char *)bad[i][1]};
        captured_run run = support_capture(kvc_cmd_bench, bad[i][1] ? 2 : 1, argv);
        cr_expect_eq(run.status, 2, "%s %s accepted", bad[i][0], bad[i][1] ? bad[i][1] : "(no value)");
        expect_contains(run.err, "usage: kvcmp bench", "stderr");
        cr_expect_str_empty(run.out, "%s %s ran a benchmark", bad[i][0], bad[i][1] ? bad[i][1] : "");
        support_free_run(&run);
    }
}

/* Without --json the table is all; an unwritable --json fails after the
 * table, naming the file. */
Test(cli_bench, json_optional_and_unwritable, .timeout = 120) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    unsetenv("OMP_WAIT_POLICY");
    char *plain[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "1", "--threads", "2", "--stream-bytes", "4194304"};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(plain), plain);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.out, "OMP_WAIT_POLICY=(default)", "stdout");
    expect_contains(run.out, "\nv41-r2-decode ", "stdout");
    cr_expect(strstr(run.out, "wrote ") == NULL, "a JSON file written without --json:\n%s", run.out);
    support_free_run(&run);
    char *unwritable[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "0", "--stream-bytes", "4194304",
                          "--json", "/nonexistent/dir/bench.json"};
    run = support_capture(kvc_cmd_bench, ARGC(unwritable), unwritable);
    /* Refused before any run: nothing timed, nothing written. */
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp bench: --json: cannot write /nonexistent/dir/bench.json: its folder does not exist", "stderr");
    cr_expect(strstr(run.out, "\nv41-r2-decode ") == NULL, "timed although --json cannot be written:\n%s", run.out);
    cr_expect(strstr(run.out, "wrote ") == NULL, "claims to have written the JSON:\n%s", run.out);
    support_free_run(&run);
}

Test(cli_report, option_without_its_value_and_short_help) {
    static const char *const options[] = {"--out", "--cases", "--seed"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        char *argv[] = {"parity", "some/cases", (char *)options[i]};
        captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
        cr_expect_eq(run.status, 2, "%s without a value accepted", options[i]);
        expect_contains(run.err, "usage: kvcmp report precision", "stderr");
        support_free_run(&run);
    }
    char *help[] = {"-h"};
    captured_run run = support_capture(kvc_cmd_report, ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.out, "default fixtures/vllm-cases (run from the repository root)", "stdout");
    support_free_run(&run);
}

/* Parity without a path reads fixtures/vllm-cases; where there is none,
 * it says so and fails, writing no report. */
Test(cli_report, parity_default_path_missing, .timeout = 60) {
    char root[64], here[128], out[128];
    support_temp_dir(root, sizeof root);
    snprintf(here, sizeof here, "%s/repo", root);
    cr_assert_eq(mkdir(here, 0777), 0);
    cr_assert_eq(chdir(here), 0);   /* this test's own process */
    snprintf(out, sizeof out, "%s/out", root);
    char *argv[] = {"parity", "--seed", "5", "--out", out};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.err, "kvcmp report parity: no case directory (with case.json) under fixtures/vllm-cases", "stderr");
    char path[192];
    snprintf(path, sizeof path, "%s/parity.json", out);
    cr_expect_not(support_file_exists(path), "%s written although no case was read", path);
    support_free_run(&run);
    support_remove_tree(root);
}

/* An --out where nothing can be written: every file is named, and the
 * command fails after the cases were read. */
Test(cli_report, parity_into_an_unwritable_directory, .timeout = 60) {
    char root[64], dir[256], cases[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "cases/one", "v41.rope_plain_insert/bf16", "vllm-triton-h200", 9, dir, sizeof dir);
    snprintf(cases, sizeof cases, "%s/cases", root);
    char *argv[] = {"parity", "--out", "/nonexistent/reports", cases};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    static const char *const files[] = {"parity.md", "parity.html", "parity.json"};
    for (int i = 0; i < 3; i++) {
        char needle[160];
        snprintf(needle, sizeof needle, "kvcmp report: cannot write /nonexistent/reports/%s: No such file or directory (give --out a writable directory)\n",
                 files[i]);
        expect_contains(run.err, needle, "stderr");
    }
    cr_expect(strstr(run.out, "wrote ") == NULL, "claims to have written the report:\n%s", run.out);
    support_free_run(&run);
    support_remove_tree(root);
}

/* A tree with a case that does not load: parity names it and goes on
 * with the others. */
Test(cli_report, parity_skips_a_case_that_does_not_load, .timeout = 60) {
    char root[64], dir[256], cases[128], path[320], out[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "cases/good", "v41.rope_plain_insert/fp8", "vllm-triton-h200", 10, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/cases/broken", root);
    cr_assert_eq(mkdir(path, 0777), 0);
    snprintf(path, sizeof path, "%s/cases/broken/case.json", root);
    support_write_text(path, "{\"format\": ");
    snprintf(cases, sizeof cases, "%s/cases", root);
    snprintf(out, sizeof out, "%s/out", root);
    char *argv[] = {"parity", "--out", out, cases};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.err, "kvcmp report parity: ", "stderr");
    expect_contains(run.err, "/cases/broken", "stderr");
    expect_contains(run.out, "parity: 1 cases, 1 identical to the reference", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* kvcmp report through its C entry point. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




/* ---- report ------------------------------------------------------------------------ */

Test(cli_report, usage_errors) {
    char *help[] = {"--help"};
    captured_run run = support_capture(kvc_cmd_report, ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.out, "usage: kvcmp report", "stdout");
    support_free_run(&run);
    char *option[] = {"precision", "--fast"};
    run = support_capture(kvc_cmd_report, ARGC(option), option);
    cr_expect_eq(run.status, 2);
    support_free_run(&run);
    char *zero[] = {"--cases", "0"};
    run = support_capture(kvc_cmd_report, ARGC(zero), zero);
    cr_expect_eq(run.status, 2, "--cases 0 accepted");
    support_free_run(&run);
    char *paths[] = {"precision", "some/cases"};
    run = support_capture(kvc_cmd_report, ARGC(paths), paths);
    cr_expect_eq(run.status, 2, "report precision accepted a case path");
    support_free_run(&run);
    char *many[] = {"parity", "a", "b", "c", "d", "e", "f", "g", "h", "i"};
    run = support_capture(kvc_cmd_report, ARGC(many), many);
    cr_expect_eq(run.status, 2, "more than 8 parity paths accepted");
    support_free_run(&run);
}

Test(cli_report, parity_over_a_small_tree, .timeout = 60) {
    char root[64], dir[256], out[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "cases/one", "v41.rope_plain_insert/bf16", "vllm-triton-h200", 7, dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out", root);
    char cases[128];
    snprintf(cases, sizeof cases, "%s/cases", root);
    char *argv[] = {"parity", "--out", out, cases};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "parity: 1 cases, 1 identical to the reference", "stdout");
    char path[256];
    snprintf(path, sizeof path, "%s/parity.json", out);
    cr_expect(support_file_exists(path), "%s not written", path);
    support_free_run(&run);
    support_remove_tree(root);
}

/* Without a path, parity reads fixtures/vllm-cases. */
Test(cli_report, parity_defaults_to_the_project_corpus, .timeout = 60) {
    char root[64], dir[256], out[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "fixtures/vllm-cases/vllm-eager-torch-cpu/one", "v41.rope_plain_insert/fp8", "vllm-eager-torch-cpu", 8, dir, sizeof dir);
    cr_assert_eq(chdir(root), 0);   /* this test's own process */
    snprintf(out, sizeof out, "%s/out", root);
    char *argv[] = {"parity", "--out", out};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "parity: 1 cases, 1 identical to the reference", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* Every entry of a case tree is accounted for: a hidden case directory,
 * one under a hidden folder, a directory whose case.json is gone, a FIFO
 * are each a FAIL line of their own unless --skip names them (a SKIP
 * line); hidden files (.gitkeep) and empty folders are passed over.  The
 * same through kvcmp fuzz --regressions (--regressions-skip). */
#include "tests/cli/cli_support.h"

#include <cjson/cJSON.h>

/* ROOT/tree: a/ (a case), .c2/ (a hidden case), .old/x/ (a case under a
 * hidden folder), b/ (a case whose case.json was renamed), fifo, empty/,
 * .gitkeep. */
static void untidy_tree(const char *root, char *tree, size_t size) {
    char dir[512], path[600];
    snprintf(tree, size, "%s/tree", root);
    save_case(tree, "a", "v41.rope_quant_insert", "tree test", 0, dir, sizeof dir);
    save_case(tree, ".c2", "v41.rope_quant_insert", "tree test", 1, dir, sizeof dir);
    save_case(tree, ".old/x", "v41.rope_quant_insert", "tree test", 2, dir, sizeof dir);
    save_case(tree, "b", "v41.rope_quant_insert", "tree test", 3, dir, sizeof dir);
    char renamed[600];
    snprintf(path, sizeof path, "%s/case.json", dir);
    snprintf(renamed, sizeof renamed, "%s/case.json.old", dir);
    cr_assert_eq(rename(path, renamed), 0);
    snprintf(path, sizeof path, "%s/fifo", tree);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/empty", tree);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/.gitkeep", tree);
    support_write_text(path, "");
}

static void expect_line(const char *out, const char *word, const char *kind, const char *tree, const char *name, const char *why) {
    char line[900];
    snprintf(line, sizeof line, "%s [%s] %s/%s: %s", word, kind, tree, name, why);
    expect_contains(out, line, "stdout");
}

Test(replay_accounting, every_entry_is_a_case_or_a_fail_line, .timeout = 60) {
    char root[64], tree[128], junit[160];
    support_temp_dir(root, sizeof root);
    untidy_tree(root, tree, sizeof tree);
    snprintf(junit, sizeof junit, "%s/replay.xml", root);
    char *argv[] = {"--quiet", "--junit", junit, tree};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_line(run.out, "FAIL", "hidden", tree, ".c2", "a hidden directory: the walk does not replay it");
    expect_line(run.out, "FAIL", "hidden", tree, ".old", "a hidden directory: the walk does not replay it");
    expect_line(run.out, "FAIL", "not a case", tree, "b", "a directory without case.json and no case below it");
    expect_line(run.out, "FAIL", "not a file", tree, "fifo", "neither a regular file nor a directory");
    expect_contains(run.out, "1 passed, 4 failed, 0 skipped\n", "stdout");
    cr_expect_null(strstr(run.out, "empty"), "an empty folder was reported:\n%s", run.out);
    cr_expect_null(strstr(run.out, "gitkeep"), "a hidden file was reported:\n%s", run.out);
    char *xml = support_read_file(junit);
    expect_contains(xml, "failures=\"4\"", "junit");
    free(xml);
    support_free_run(&run);
    /* Named by --skip (a name or a path): SKIP lines, and the one case passes. */
    char fifo_path[200];
    snprintf(fifo_path, sizeof fifo_path, "%s/fifo", tree);
    char skip[400];
    snprintf(skip, sizeof skip, ".c2,.old,b,%s", fifo_path);
    char *skipping[] = {"--skip", skip, tree};
    run = support_capture(kvc_cmd_replay, ARGC(skipping), skipping);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_line(run.out, "SKIP", "hidden", tree, ".c2", "a hidden directory: the walk does not replay it");
    expect_line(run.out, "SKIP", "not a case", tree, "b", "a directory without case.json");
    expect_contains(run.out, "; skipped: --skip names it\n", "stdout");
    expect_contains(run.out, "1 passed, 0 failed, 4 skipped\n", "stdout");
    support_free_run(&run);
    /* A --skip that names some of them only: the others still fail. */
    char *partly[] = {"--quiet", "--skip", ".c2", tree};
    run = support_capture(kvc_cmd_replay, ARGC(partly), partly);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "1 passed, 3 failed, 1 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* Skipped cases are not evidence: a replay that compared none is no verdict. */
Test(replay_accounting, nothing_compared_is_no_verdict, .timeout = 60) {
    char root[64], tree[128], dir[512];
    support_temp_dir(root, sizeof root);
    snprintf(tree, sizeof tree, "%s/tree", root);
    save_case(tree, ".only", "v41.rope_quant_insert", "tree test", 0, dir, sizeof dir);
    char *argv[] = {"--quiet", "--skip", ".only", tree};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 4, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "0 passed, 0 failed, 1 skipped\nreplay: NO VERDICT (exit status 4): no case was compared", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(replay_accounting, fuzz_regressions_account_for_every_entry, .timeout = 120) {
    char root[64], tree[128];
    support_temp_dir(root, sizeof root);
    untidy_tree(root, tree, sizeof tree);
    char *argv[] = {"--cases", "2", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--save", "", "--json", "",
                    "--quiet", "--regressions", tree};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_line(run.out, "FAIL", "hidden", tree, ".c2", "a hidden directory");
    expect_contains(run.out, "1 passed, 4 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    char *skipping[] = {"--cases", "2", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--save", "", "--json",
                        "", "--quiet", "--regressions", tree, "--regressions-skip", ".c2,.old,b,fifo"};
    run = run_fuzz(ARGC(skipping), skipping);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "1 passed, 0 failed, 4 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

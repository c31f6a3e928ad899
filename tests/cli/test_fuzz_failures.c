/* Where fuzz puts its failures: under kvcmp-out/failures/CAMPAIGN of the
 * current directory by default (--out DIR elsewhere), never into build/ or
 * fixtures/regressions unless told; the summary says how to keep one as a
 * regression of the user's own repository. */
#include <limits.h>

#include "tests/cli/cli_support.h"

/* The test library whose every stage crashes (tests/plugins/candidate.c),
 * as an absolute path: the tests below change directory. */
static void crashing_plugin(char *out) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    char relative[PATH_MAX];
    snprintf(relative, sizeof relative, "%s/crash.so", dir && dir[0] ? dir : "build/test-plugins");
    if (!realpath(relative, out)) cr_skip_test("%s not built (make test builds tests/plugins/candidate.c into it)", relative);
}

static captured_run fuzz_crashing_candidate(const char *plugin, const char *save) {
    char *with_save[] = {"--candidate", (char *)plugin, "--cases", "1", "--jobs", "1", "--stage", "v41.rope_plain_insert/bf16",
                         "--shrink-seconds", "0", "--json", "", "--quiet", "--save", (char *)save};
    return run_fuzz(save ? ARGC(with_save) : ARGC(with_save) - 2, with_save);
}

Test(cli_fuzz, failures_go_under_kvcmp_out_by_default, .timeout = 60) {
    char plugin[PATH_MAX], dir[64];
    crashing_plugin(plugin);
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(chdir(dir), 0);   /* this test's own process */
    captured_run run = fuzz_crashing_candidate(plugin, NULL);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.out, "shrunk cases are under kvcmp-out/failures/seed1-", "stdout");
    const char *keep = strstr(run.out, "fuzz: to keep a case as a regression, copy it into your repository's regressions folder (cp -r ");
    cr_assert_not_null(keep, "no line saying how to keep a failure:\n%s", run.out);
    char saved[PATH_MAX] = "";
    cr_assert_eq(sscanf(keep, "fuzz: to keep a case as a regression, copy it into your repository's regressions folder (cp -r %4095s "
                              "REGRESSIONS/)", saved), 1);
    cr_expect_eq(strncmp(saved, "kvcmp-out/failures/seed1-", 25), 0, "saved to %s", saved);
    expect_contains(keep, "and gate on build/kvcmp replay --impl ", "stdout");
    char case_json[PATH_MAX + 16];
    snprintf(case_json, sizeof case_json, "%s/case.json", saved);
    cr_expect(support_file_exists(case_json), "%s not written", case_json);
    cr_expect(!support_file_exists("fixtures"), "the campaign wrote into fixtures/");
    cr_expect(!support_file_exists("build"), "the campaign wrote under build/");
    support_free_run(&run);
    /* --out DIR moves every output there. */
    char *out_argv[] = {"--candidate", plugin, "--cases", "1", "--jobs", "1", "--stage", "v41.rope_plain_insert/bf16",
                        "--shrink-seconds", "0", "--quiet", "--out", "elsewhere/out"};
    run = run_fuzz(ARGC(out_argv), out_argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.out, "shrunk cases are under elsewhere/out/failures/seed1-", "stdout");
    cr_expect(support_file_exists("elsewhere/out/fuzz-summary.json"), "--out did not hold the summary");
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(cli_fuzz, fixtures_regressions_only_when_asked, .timeout = 60) {
    char plugin[PATH_MAX], dir[64];
    crashing_plugin(plugin);
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(chdir(dir), 0);
    captured_run run = fuzz_crashing_candidate(plugin, "fixtures/regressions");
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.out, "shrunk cases are under fixtures/regressions ", "stdout");
    cr_expect(strstr(run.out, "to keep a case as a regression") == NULL, "asked to copy a case where it already is:\n%s", run.out);
    cr_expect(support_file_exists("fixtures/regressions"), "--save fixtures/regressions wrote nothing there");
    cr_expect(!support_file_exists("build"), "the campaign wrote under build/ as well");
    support_free_run(&run);
    /* A case that could not be saved is not offered for copying. */
    run = fuzz_crashing_candidate(plugin, "/proc/kvcmp-cannot-write-here");
    cr_expect_eq(run.status, 3, "a case that could not be saved is exit status 3");
    expect_contains(run.out, "(not saved: ", "stdout");
    cr_expect(strstr(run.out, "to keep a case as a regression") == NULL, "offered a case that was not saved:\n%s", run.out);
    support_free_run(&run);
    support_remove_tree(dir);
}

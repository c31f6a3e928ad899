/* __REPRO lines are shell: every value quoted, so that a path with
 * spaces, quotes or $(...) reproduces the failure and runs nothing else;
 * a single case's run (--only) writes a summary of its own, never over
 * the campaign's. */
#include "tests/cli/cli_support.h"

#include <limits.h>
#include <sys/wait.h>

#include "harness/options/options.h"

/* What bash makes of `printf %s WORD`, WORD as quoted: the word itself
 * when the quoting is right (bash, not kvcmp, decides). */
static char *shell_reads_back(const char *quoted) {
    char dir[64], script[128], out[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/word.sh", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    size_t size = strlen(quoted) + 64;
    char *text = malloc(size);
    snprintf(text, size, "printf %%s %s\n", quoted);
    support_write_text(script, text);
    free(text);
    char command[400];
    snprintf(command, sizeof command, "cd %s && bash ./word.sh > %s 2>&1", dir, out);
    cr_assert_eq(system(command), 0, "bash failed on %s", quoted);
    char *read_back = support_read_file(out);
    char pwned[128];
    snprintf(pwned, sizeof pwned, "%s/PWNED", dir);
    cr_expect_not(support_file_exists(pwned), "the word %s ran a command", quoted);
    support_remove_tree(dir);
    return read_back;
}

Test(repro_quoting, every_word_reads_back_as_itself) {
    static const char *const words[] = {
        "plain/path-1.so", "with space", "it's", "\"double\"", "$(touch PWNED)", "`touch PWNED`", "a;touch PWNED", "back\\slash",
        "tab\there", "new\nline", "\x1b[31mred", "caf\xc3\xa9", "", "*", "~", "#hash", "a=b", "--option", "'", "$'x'", "!event",
    };
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char quoted[256];
        size_t n = kvc_shell_quote(words[i], quoted, sizeof quoted);
        cr_assert_lt(n, sizeof quoted);
        cr_expect_eq(strlen(quoted), n);
        /* Printable ASCII only: a terminal shows the line as it is. */
        for (const char *p = quoted; *p; p++) cr_expect(*p >= 0x20 && *p < 0x7F, "byte 0x%02x in the quoting of word %zu", *p & 0xff, i);
        char *back = shell_reads_back(quoted);
        cr_expect(strcmp(back, words[i]) == 0, "word %zu: quoted as %s, bash read back '%s'", i, quoted, back);
        free(back);
    }
    /* Too long for the buffer: nothing, never a word cut short. */
    char small[8];
    cr_expect_eq(kvc_shell_quote("a b c d e f", small, sizeof small), strlen("'a b c d e f'"));
    cr_expect_str_empty(small);
}

/* The campaign's REPRO lines, run by bash from another directory: each
 * fails again (exit 1, a FAIL line), nothing else runs, and the --only
 * run leaves the campaign's summary as it was. */
Test(repro_quoting, repro_lines_run_as_they_are, .timeout = 120) {
    const char *plugins = getenv("KVCMP_TEST_PLUGINS");
    char crash[PATH_MAX], kvcmp[PATH_MAX], quoted_kvcmp[PATH_MAX + 8];
    snprintf(crash, sizeof crash, "%s/crash.so", plugins && plugins[0] ? plugins : "build/test-plugins");
    if (!support_file_exists(crash) || !realpath("build/kvcmp", kvcmp)) cr_skip_test("%s or build/kvcmp not built (make test builds them)", crash);
    kvc_shell_quote(kvcmp, quoted_kvcmp, sizeof quoted_kvcmp);
    kvc_set_invocation(quoted_kvcmp);
    char dir[64], weird[200], candidate[260], out[200], summary[260], command[PATH_MAX + 600];
    support_temp_dir(dir, sizeof dir);
    snprintf(weird, sizeof weird, "%s/k$(touch PWNED) 'q'", dir);
    cr_assert_eq(mkdir(weird, 0700), 0);
    snprintf(candidate, sizeof candidate, "%s/k.so", weird);
    snprintf(command, sizeof command, "cp %s \"%s/k.so\"", crash, dir);
    cr_assert_eq(system(command), 0);
    char plain[260];
    snprintf(plain, sizeof plain, "%s/k.so", dir);
    cr_assert_eq(rename(plain, candidate), 0);
    snprintf(out, sizeof out, "%s/out dir", dir);
    char *argv[] = {"--cases", "1", "--jobs", "1", "--candidate", candidate, "--stage", "v41.rope_plain_insert", "--out", out,
                    "--shrink-seconds", "0.2", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_assert_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    snprintf(summary, sizeof summary, "%s/fuzz-summary.json", out);
    char *before = support_read_file(summary);
    cr_assert_not_null(before);
    int lines = 0;
    for (const char *p = strstr(run.out, "__REPRO: "); p && lines < 2; p = strstr(p + 1, "__REPRO: ")) {
        char line[2000];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p + 9, "\n"), p + 9);
        char script[128], log[128];
        snprintf(script, sizeof script, "%s/repro.sh", dir);
        snprintf(log, sizeof log, "%s/repro.log", dir);
        size_t size = strlen(line) + 200;
        char *text = malloc(size);
        snprintf(text, size, "cd %s || exit 99\n%s\n", dir, line);
        support_write_text(script, text);
        free(text);
        snprintf(command, sizeof command, "bash %s > %s 2>&1", script, log);
        int status = system(command);
        char *printed = support_read_file(log);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s\nexited %d:\n%s", line, status, printed);
        expect_contains(printed, "FAIL", line);
        free(printed);
        lines++;
    }
    cr_expect_eq(lines, 2, "no REPRO lines:\n%s", run.out);
    char pwned[128];
    snprintf(pwned, sizeof pwned, "%s/PWNED", dir);
    cr_expect_not(support_file_exists(pwned), "a REPRO line ran the command in the candidate's path");
    char *after = support_read_file(summary);
    cr_expect_str_eq(after, before, "the --only run overwrote the campaign's %s", summary);
    char only[260];
    snprintf(only, sizeof only, "%s/fuzz-only-0.json", out);
    cr_expect(support_file_exists(only), "the --only run wrote no summary of its own (%s)", only);
    free(before);
    free(after);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* main's dispatch: usage lines a user sees on a mistyped command. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"

/* main.c's dispatch, compiled here under another name: its usage lines
 * are what a user sees on a mistyped command. */
#define main kvcmp_main
#include "cli/main.c"
#undef main



/* ---- main ------------------------------------------------------------------- */

Test(cli_main, no_command_prints_usage) {
    char *argv[] = {"kvcmp"};
    captured_run run = support_capture(kvcmp_main, ARGC(argv), argv);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "usage: kvcmp COMMAND [options]", "stderr");
    expect_contains(run.err, "  replay ", "stderr");
    expect_contains(run.err, "  bench ", "stderr");
    cr_expect_str_empty(run.out);
    support_free_run(&run);
}

Test(cli_main, unknown_command_is_named) {
    char *argv[] = {"kvcmp", "replya", "x"};
    captured_run run = support_capture(kvcmp_main, ARGC(argv), argv);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp: unknown command 'replya'", "stderr");
    expect_contains(run.err, "usage: kvcmp COMMAND", "stderr");
    support_free_run(&run);
}

Test(cli_main, dispatches_to_the_command) {
    char *argv[] = {"kvcmp", "replay"};
    captured_run run = support_capture(kvcmp_main, ARGC(argv), argv);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "usage: kvcmp replay", "stderr");
    support_free_run(&run);
}

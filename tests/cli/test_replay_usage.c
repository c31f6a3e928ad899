/* kvcmp replay through its C entry point: usage errors. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




/* ---- replay: usage errors ------------------------------------------------------ */


Test(cli_replay, usage_errors) {
    char *none[] = {NULL};
    expect_replay_usage_error(0, none, "usage: kvcmp replay");
    char *policy[] = {"--policy", "loose", "x"};
    expect_replay_usage_error(ARGC(policy), policy, "kvcmp replay: unknown policy 'loose' (exact or vllm)");
    char *padding[] = {"--page-padding", "102", "x"};   /* 100 is allowed: pages need only 4-byte aligned strides */
    expect_replay_usage_error(ARGC(padding), padding, "--page-padding must be a non-negative multiple of 4");
    char *negative[] = {"--page-padding", "-64", "x"};
    expect_replay_usage_error(ARGC(negative), negative, "--page-padding must be a non-negative multiple of 4");
    char *option[] = {"--verbose", "x"};
    expect_replay_usage_error(ARGC(option), option, "usage: kvcmp replay");
    char *no_path[] = {"--quiet"};
    expect_replay_usage_error(ARGC(no_path), no_path, "usage: kvcmp replay");
    char *impl[] = {"--impl", "fast", "x"};
    expect_replay_usage_error(ARGC(impl), impl, "kvcmp replay: unknown implementation 'fast'");
    char *plugin[] = {"--impl", "/nonexistent/candidate.so", "x"};
    expect_replay_usage_error(ARGC(plugin), plugin, "cannot load candidate /nonexistent/candidate.so");
    /* Options after the paths count as options, not as paths: a library
     * given there is loaded (and fails here), not looked for as a case. */
    char *late_plugin[] = {"x", "--impl", "/nonexistent/candidate.so"};
    expect_replay_usage_error(ARGC(late_plugin), late_plugin, "cannot load candidate /nonexistent/candidate.so");
    char *late_option[] = {"x", "--verbose"};
    expect_replay_usage_error(ARGC(late_option), late_option, "kvcmp replay: unknown option '--verbose'");
}

/* After --, an argument that looks like an option is a path. */
Test(cli_replay, double_dash_ends_the_options) {
    char *argv[] = {"--quiet", "--", "--no-such-case"};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.err, "kvcmp replay: no case directory (with case.json) under --no-such-case", "stderr");
    expect_contains(run.out, "0 passed, 1 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
}

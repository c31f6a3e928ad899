/* replay with a library that offers only some stages (they are skipped,
 * as the fuzzer skips them, never failed) and replay --stage LIST. */
#include "tests/cli/cli_support.h"

static void partial_plugin(char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/partial.so", dir && dir[0] ? dir : "build/test-plugins");
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds tests/plugins/candidate.c into it)", out);
}

/* Three cases: v4.compress D=512 R=4, v41.forward R=2 and v4.save_partial_states D=128 R=128. */
static void three_cases(char *root, size_t size) {
    char dir[256];
    support_temp_dir(root, size);
    save_case(root, "compress", "v4.compress/d512/r4", "spec", 1, dir, sizeof dir);
    save_case(root, "forward", "v41.forward/r2", "spec", 2, dir, sizeof dir);
    save_case(root, "save", "v4.save_partial_states/d128/r128", "spec", 3, dir, sizeof dir);
}

/* The partial test library offers v4.save_partial_states (and refuses
 * every call) and v41.save_compress_norm: the compress and forward cases
 * are skipped, the save case runs and fails. */
Test(cli_replay, stages_a_library_lacks_are_skipped, .timeout = 60) {
    char plugin[512], root[64];
    partial_plugin(plugin, sizeof plugin);
    three_cases(root, sizeof root);
    char *argv[] = {"--impl", plugin, root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    char line[1024];
    snprintf(line, sizeof line, "SKIP [spec] %s/compress: %s offers no v4.compress\n", root, plugin);
    expect_contains(run.out, line, "stdout");
    snprintf(line, sizeof line, "SKIP [spec] %s/forward: %s offers no v41.forward\n", root, plugin);
    expect_contains(run.out, line, "stdout");
    snprintf(line, sizeof line, "FAIL [spec] %s/save: stage returned", root);
    expect_contains(run.out, line, "stdout");
    expect_contains(run.out, "\n0 passed, 1 failed, 2 skipped\n", "stdout");
    support_free_run(&run);
    /* --quiet hides skips like passes; only skips is no verdict (exit status 4), never a pass. */
    char *quiet[] = {"--quiet", "--impl", plugin, "--stage", "v4.compress,v41", root};
    run = support_capture(kvc_cmd_replay, ARGC(quiet), quiet);
    cr_expect_eq(run.status, 4, "stdout:\n%s", run.out);
    cr_expect_str_eq(run.out, "0 passed, 0 failed, 2 skipped\nreplay: NO VERDICT (exit status 4): no case was compared (2 skipped); "
                              "replay with an implementation that offers their stages, or name a tree that has cases\n");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, stage_list_selects_cases, .timeout = 60) {
    char root[64];
    three_cases(root, sizeof root);
    char *compress[] = {"--stage", "v4.compress/d512", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(compress), compress);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    char line[512];
    snprintf(line, sizeof line, "PASS [spec] %s/compress: bit-exact\n1 passed, 0 failed, 0 skipped\n", root);
    cr_expect_str_eq(run.out, line);
    support_free_run(&run);
    char *two[] = {"--stage", "v41.forward/r2,v4.save_partial_states/d128/r128", "--quiet", root};
    run = support_capture(kvc_cmd_replay, ARGC(two), two);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    cr_expect_str_eq(run.out, "2 passed, 0 failed, 0 skipped\n");
    support_free_run(&run);
    /* Variants that differ from the case in ratio, head size or stage select nothing: an error, not a pass. */
    char *none[] = {"--stage", "v4.compress/d512/r128,v4.compress/d128/r4,v41.forward/r1,v41.rope_plain_insert", root};
    run = support_capture(kvc_cmd_replay, ARGC(none), none);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.err, "kvcmp replay: no case of the --stage variants under the paths given", "stderr");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, stage_list_plain_insert_formats, .timeout = 60) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "bf16", "v41.rope_plain_insert/bf16", "spec", 1, dir, sizeof dir);
    save_case(root, "fp8", "v41.rope_plain_insert/fp8", "spec", 2, dir, sizeof dir);
    char *argv[] = {"--stage", "v41.rope_plain_insert/fp8", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    char line[512];
    snprintf(line, sizeof line, "PASS [spec] %s/fp8: bit-exact\n1 passed, 0 failed, 0 skipped\n", root);
    cr_expect_str_eq(run.out, line);
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, stage_list_naming_no_variant_is_refused) {
    char *argv[] = {"--stage", "v5.compress", "somewhere"};
    expect_replay_usage_error(ARGC(argv), argv, "kvcmp replay: --stage item 'v5.compress' matches no variant (kvcmp fuzz --list names them)");
}

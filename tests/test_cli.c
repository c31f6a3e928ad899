/* The kvcmp subcommands through their C entry points (cli/commands.h)
 * and main's dispatch: exit codes, the lines a user reads (`N passed, M
 * failed`, FAIL lines with __REPRO, usage errors naming the bad option)
 * and the files written.  Output is captured with dup2; Criterion runs
 * every test in its own process, so the redirection cannot leak. */
#include <sys/stat.h>

#include "tests/test_support.h"

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

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

static void expect_contains(const char *text, const char *needle, const char *what) {
    cr_expect(text && strstr(text, needle) != NULL, "%s lacks '%s':\n%s", what, needle, text ? text : "(null)");
}

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

/* ---- replay: usage errors ------------------------------------------------------ */

static void expect_replay_usage_error(int argc, char **argv, const char *needle) {
    captured_run run = support_capture(kvc_cmd_replay, argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d for '%s'", run.status, argc ? argv[0] : "");
    expect_contains(run.err, needle, "stderr");
    cr_expect_str_empty(run.out, "a usage error printed results");
    support_free_run(&run);
}

Test(cli_replay, usage_errors) {
    char *none[] = {NULL};
    expect_replay_usage_error(0, none, "usage: kvcmp replay");
    char *policy[] = {"--policy", "loose", "x"};
    expect_replay_usage_error(ARGC(policy), policy, "kvcmp replay: unknown policy 'loose' (exact or vllm)");
    char *padding[] = {"--page-padding", "100", "x"};
    expect_replay_usage_error(ARGC(padding), padding, "--page-padding must be a non-negative multiple of 64");
    char *negative[] = {"--page-padding", "-64", "x"};
    expect_replay_usage_error(ARGC(negative), negative, "--page-padding must be a non-negative multiple of 64");
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
    expect_contains(run.out, "0 passed, 1 failed\n", "stdout");
    support_free_run(&run);
}

/* ---- replay: verdicts on real case directories -------------------------------- */

/* A valid case with the reference's outputs, saved to root/name. */
static void save_case(const char *root, const char *name, const char *variant, const char *source, int64_t index, char *dir,
                      size_t size) {
    kvc_case c;
    support_make_case(variant, KVC_FAM_NORMAL, 21, index, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0, "the reference rejected %s case %lld", variant, (long long)index);
    snprintf(c.source, sizeof c.source, "%s", source);
    snprintf(dir, size, "%s/%s", root, name);
    char error[512];
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
}

/* Rewrites one byte of a saved tensor, at the first byte where NAME.out
 * differs from NAME (a byte the stage writes). */
static void corrupt_expected(const char *dir, const char *name) {
    char path[600], error[512];
    kvc_array input, expected;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(kvc_npy_read(path, &input, error, sizeof error), 0, "%s", error);
    snprintf(path, sizeof path, "%s/%s.out.npy", dir, name);
    cr_assert_eq(kvc_npy_read(path, &expected, error, sizeof error), 0, "%s", error);
    size_t bytes = (size_t)expected.count * (size_t)kvc_dtype_size(expected.dtype), i = 0;
    while (i < bytes && ((uint8_t *)input.data)[i] == ((uint8_t *)expected.data)[i]) i++;
    cr_assert_lt(i, bytes, "the stage wrote nothing into %s", name);
    ((uint8_t *)expected.data)[i] ^= 0x40;
    cr_assert_eq(kvc_npy_write(path, &expected, error, sizeof error), 0, "%s", error);
    kvc_array_free(&input);
    kvc_array_free(&expected);
}

Test(cli_replay, passing_cases_per_source, .timeout = 60) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "a", "v41.rope_plain_insert/bf16", "vllm-triton-h200 (unit test)", 0, dir, sizeof dir);
    save_case(root, "b", "v4.save_partial_states/d128/r4", "vllm-eager-torch-cpu", 1, dir, sizeof dir);
    save_case(root, "nested/c", "v41.save_compress_norm/r1", "vllm-eager-torch-cpu", 2, dir, sizeof dir);
    char *argv[] = {"--impl", "ref", "--policy", "vllm", "--page-padding", "128", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "PASS [vllm-triton-h200] ", "stdout");
    expect_contains(run.out, "/nested/c: bit-exact", "stdout");
    expect_contains(run.out, "source vllm-triton-h200         1 passed, 0 failed", "stdout");
    expect_contains(run.out, "source vllm-eager-torch-cpu     2 passed, 0 failed", "stdout");
    expect_contains(run.out, "\n3 passed, 0 failed\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, optimized_backend_passes_the_same_cases, .timeout = 60) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "a", "v4.compress/d512/r4", "spec", 3, dir, sizeof dir);
    save_case(root, "b", "v41.forward/r2", "spec", 4, dir, sizeof dir);
    char *argv[] = {"--impl", "opt", "--quiet", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    cr_expect_str_eq(run.out, "2 passed, 0 failed\n", "--quiet prints only the summary when everything passes");
    support_free_run(&run);
    /* The same with the options after the path. */
    char *late[] = {root, "--impl", "opt"};
    run = support_capture(kvc_cmd_replay, ARGC(late), late);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    expect_contains(run.out, "2 passed, 0 failed\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, a_changed_expected_byte_fails_with_its_location, .timeout = 60) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "bad", "v41.rope_plain_insert/bf16", "spec-cases", 5, dir, sizeof dir);
    corrupt_expected(dir, "kv_cache");
    char *argv[] = {"--quiet", dir};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "FAIL [spec-cases] ", "stdout");
    expect_contains(run.out, "; first: kv_cache row ", "stdout");
    expect_contains(run.out, "  __REPRO: build/kvcmp replay --impl ref --policy exact ", "stdout");
    expect_contains(run.out, "0 passed, 1 failed\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, cases_without_expected_outputs, .timeout = 60) {
    char root[64], path[320], error[512];
    support_temp_dir(root, sizeof root);
    /* An input to reject, correctly rejected: a slot past the cache. */
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/fp8", 22, "slot_mapping", "kv_cache", &c);
    snprintf(path, sizeof path, "%s/rejected", root);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    /* A valid input recorded as one to reject: the stage accepts it. */
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 22, 1, &c);
    snprintf(path, sizeof path, "%s/accepted", root);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    char *argv[] = {root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "/rejected: rejected as expected, nothing written: ", "stdout");
    expect_contains(run.out, "/accepted: the case has no expected outputs (an input to reject), but the stage accepted it", "stdout");
    expect_contains(run.out, "1 passed, 1 failed\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, rejected_case_with_expected_outputs_and_broken_cases, .timeout = 60) {
    char root[64], dir[256], path[320];
    support_temp_dir(root, sizeof root);
    /* Expected outputs (here: the cache unchanged), but an input the stage rejects. */
    kvc_case c;
    char error[512];
    support_make_index_error_case("v41.rope_plain_insert/bf16", 6, "slot_mapping", "kv_cache", &c);
    kvc_array expected, *cache = kvc_case_get(&c, "kv_cache");
    cr_assert_eq(kvc_array_alloc(&expected, cache->dtype, cache->ndim, cache->shape), 0);
    memcpy(expected.data, cache->data, (size_t)cache->count * 2);
    cr_assert_eq(kvc_case_put(&c, "kv_cache.out", &expected), 0);
    snprintf(dir, sizeof dir, "%s/rejects", root);
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    /* A case.json that does not parse. */
    snprintf(path, sizeof path, "%s/broken", root);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/broken/case.json", root);
    support_write_text(path, "{ nope");
    /* A path with no case under it. */
    snprintf(path, sizeof path, "%s/empty", root);
    mkdir(path, 0777);
    char broken_dir[320];
    snprintf(broken_dir, sizeof broken_dir, "%s/broken", root);
    char *argv[] = {"--quiet", dir, broken_dir, path};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "/rejects: stage returned index-out-of-range: slot_mapping[", "stdout");
    expect_contains(run.out, "FAIL [unreadable] ", "stdout");
    expect_contains(run.out, "/broken: cannot load case: ", "stdout");
    expect_contains(run.out, "not valid JSON", "stdout");
    expect_contains(run.err, "kvcmp replay: no case directory (with case.json) under ", "stderr");
    expect_contains(run.out, "0 passed, 3 failed\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* ---- fuzz ------------------------------------------------------------------------ */

/* kvc_cmd_fuzz re-executes itself unless an OpenMP wait policy is set. */
static captured_run run_fuzz(int argc, char **argv) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    return support_capture(kvc_cmd_fuzz, argc, argv);
}

static void expect_fuzz_usage_error(int argc, char **argv, const char *needle) {
    captured_run run = run_fuzz(argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d", run.status);
    expect_contains(run.err, needle, "stderr");
    support_free_run(&run);
}

Test(cli_fuzz, usage_errors) {
    char *shard[] = {"--shard", "4/4"};
    expect_fuzz_usage_error(ARGC(shard), shard, "kvcmp fuzz: --shard takes I/N with 0 <= I < N");
    char *shard_text[] = {"--shard", "one"};
    expect_fuzz_usage_error(ARGC(shard_text), shard_text, "--shard takes I/N");
    char *policy[] = {"--policy", "close"};
    expect_fuzz_usage_error(ARGC(policy), policy, "kvcmp fuzz: unknown policy 'close' (exact or vllm)");
    char *option[] = {"--fast", "1"};
    expect_fuzz_usage_error(ARGC(option), option, "kvcmp fuzz: unknown option --fast");
    char *missing[] = {"--cases"};
    expect_fuzz_usage_error(ARGC(missing), missing, "kvcmp fuzz: --cases needs a value");
    char *stage[] = {"--stage", "v5.compress"};
    expect_fuzz_usage_error(ARGC(stage), stage, "kvcmp fuzz: --stage item 'v5.compress' matches no variant");
    char *family[] = {"--family", "gaussian"};
    expect_fuzz_usage_error(ARGC(family), family, "kvcmp fuzz: --family item 'gaussian' matches no value family");
    char *candidate[] = {"--candidate", "fast", "--cases", "1"};
    expect_fuzz_usage_error(ARGC(candidate), candidate, "kvcmp fuzz: unknown implementation 'fast'");
}

Test(cli_fuzz, help_and_list) {
    char *help[] = {"--help"};
    captured_run run = run_fuzz(ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.err, "usage: kvcmp fuzz [--seed S]", "stderr");
    support_free_run(&run);
    char *list[] = {"--list"};
    run = run_fuzz(ARGC(list), list);
    cr_expect_eq(run.status, 0);
    expect_contains(run.out, "variants (--stage):\n  v4.save_partial_states/d512/r4\n", "stdout");
    expect_contains(run.out, "value families (--family):\n", "stdout");
    expect_contains(run.out, "  nonfinite", "stdout");
    support_free_run(&run);
}

Test(cli_fuzz, tiny_campaign_writes_its_summary, .timeout = 60) {
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/reports/fuzz.json", dir);   /* reports/ does not exist yet */
    char *argv[] = {"--seed", "3", "--cases", "6", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain,v4.save",
                    "--family", "normal,tiny", "--invalid-rate", "500", "--metamorphic-rate", "0", "--save", "", "--json", json};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.err, "kvcmp fuzz: seed 3, candidate ref, policy exact, 1 jobs x 1 threads, shard 0/1", "stderr");
    expect_contains(run.err, "kvcmp fuzz: running 6 cases", "stderr");
    expect_contains(run.out, "fuzz: 6 cases in ", "stdout");
    expect_contains(run.out, "candidate ref, policy exact, seed 3: 0 failures", "stdout");
    expect_contains(run.out, "per variant", "stdout");
    cr_assert(support_file_exists(json), "%s not written", json);
    char *text = support_read_file(json);
    expect_contains(text, "\"format\": \"kvcmp-fuzz-summary/1\"", json);
    expect_contains(text, "\"cases\": 6,", json);
    expect_contains(text, "\"failures\": 0,", json);
    expect_contains(text, "\"failure_list\": [\n  ]", json);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(cli_fuzz, only_one_case_sharded_and_quiet, .timeout = 60) {
    char *argv[] = {"--seed", "9", "--only", "2", "--candidate", "ref", "--policy", "vllm", "--threads", "2",
                    "--shard", "1/3", "--quiet", "--json", ""};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    cr_expect(strstr(run.err, "kvcmp fuzz: seed") == NULL, "--quiet printed the banner:\n%s", run.err);
    expect_contains(run.out, "fuzz: 1 cases in ", "stdout");
    expect_contains(run.out, "policy vllm, seed 9: 0 failures", "stdout");
    support_free_run(&run);
}

Test(cli_fuzz, unwritable_json_is_reported) {
    char *argv[] = {"--cases", "0", "--candidate", "ref", "--json", "/nonexistent/deeper/fuzz.json", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0);
    expect_contains(run.err, "kvcmp fuzz: cannot write /nonexistent/deeper/fuzz.json", "stderr");
    expect_contains(run.out, "fuzz: 0 cases in ", "stdout");
    support_free_run(&run);
}

/* A planted bug, when make mutants has built it: the campaign must fail,
 * print FAIL with a __REPRO line, save the shrunk case and list it. */
Test(cli_fuzz, mutant_candidate_fails_and_is_saved, .timeout = 120) {
    const char *mutant = "build/mutants/fp8_truncation.so";
    if (!support_file_exists(mutant)) cr_skip_test("%s not built (make mutants)", mutant);
    char dir[64], json[128], save[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    char *argv[] = {"--seed", "1", "--cases", "200", "--jobs", "1", "--candidate", (char *)mutant, "--stage", "v41.rope_quant",
                    "--family", "normal,heavy_tail", "--invalid-rate", "10", "--metamorphic-rate", "100", "--max-failures", "1", "--shrink-seconds", "1", "--save", save, "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.out, "FAIL case ", "stdout");
    expect_contains(run.out, "  __REPRO: build/kvcmp fuzz --seed 1 --only ", "stdout");
    expect_contains(run.out, " --invalid-rate 10 --metamorphic-rate 100 --stage v41.rope_quant --family normal,heavy_tail\n", "stdout");
    expect_contains(run.out, "  shrunk case ", "stdout");
    expect_contains(run.out, "__REPRO: build/kvcmp replay --impl build/mutants/fp8_truncation.so --policy exact --page-padding 64 ", "stdout");
    char *text = support_read_file(json);
    expect_contains(text, "\"failure_list\": [\n    {\"case\": ", json);
    expect_contains(text, "\"first_failure_seconds\"", json);
    free(text);
    char **dirs;
    int n = kvc_find_cases(save, &dirs);
    cr_expect_geq(n, 1, "no case saved under %s", save);
    kvc_free_case_list(dirs, n);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* ---- bench ------------------------------------------------------------------------ */

Test(cli_bench, usage_errors) {
    char *scenario[] = {"--scenario", "v9-huge"};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(scenario), scenario);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp bench: unknown scenario 'v9-huge'", "stderr");
    expect_contains(run.err, "  v4-d512-r4-decode", "stderr");
    support_free_run(&run);
    char *runs[] = {"--runs", "0"};
    run = support_capture(kvc_cmd_bench, ARGC(runs), runs);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "usage: kvcmp bench", "stderr");
    support_free_run(&run);
    char *option[] = {"--fast"};
    run = support_capture(kvc_cmd_bench, ARGC(option), option);
    cr_expect_eq(run.status, 2);
    support_free_run(&run);
    char *help[] = {"--help"};
    run = support_capture(kvc_cmd_bench, ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.err, "--reference-runs N", "stderr");
    support_free_run(&run);
}

Test(cli_bench, one_small_scenario_writes_json, .timeout = 120) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    /* Two runs each: the median of an even count is the mean of the middle two. */
    char *argv[] = {"--scenario", "v4-d512-r4-decode", "--runs", "2", "--reference-runs", "2", "--threads", "1", "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "kvcmp bench: 1 threads", "stdout");
    expect_contains(run.out, "memory bandwidth (", "stdout");
    expect_contains(run.out, "v4-d512-r4-decode", "stdout");
    cr_expect(strstr(run.out, "v4-d512-r128-prefill") == NULL, "--scenario ran another scenario");
    expect_contains(run.out, "wrote ", "stdout");
    char *text = support_read_file(json);
    expect_contains(text, "\"format\": \"kvcmp-bench/1\"", json);
    expect_contains(text, "\"name\": \"v4-d512-r4-decode\"", json);
    expect_contains(text, "\"runs\": 2,", json);
    expect_contains(text, "\"speedup_1_thread\": ", json);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* Every scenario once, without the reference: each scenario's setup and
 * its optimized stage run, and the table leaves the speed-up columns empty. */
Test(cli_bench, every_scenario_once_without_the_reference, .timeout = 180) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    char *argv[] = {"--runs", "1", "--reference-runs", "0", "--threads", "2", "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    static const char *const scenarios[] = {"v4-d512-r128-prefill", "v4-d512-r4-prefill", "v4-d128-r4-prefill", "v4-d512-r4-decode",
                                            "v4-save-partial-states", "v41-r2-prefill", "v41-r2-decode", "v41-rope-quant-insert"};
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        char row[96];
        snprintf(row, sizeof row, "\n%-24s ", scenarios[i]);
        expect_contains(run.out, row, "stdout");
    }
    /* No reference runs: no speed-up columns. */
    expect_contains(run.out, "        -        -\n", "stdout");
    cr_expect(strstr(run.out, "kvcmp bench: ") && strstr(run.err, "failed") == NULL, "a scenario failed:\n%s", run.err);
    /* The JSON carries upstream's CPU timings next to ours at 2 threads. */
    char *text = support_read_file(json);
    expect_contains(text, "\"vllm_cpu_1_thread_ms\": ", json);
    expect_contains(text, "\"vs_vllm_2_threads\": ", json);
    cr_expect(strstr(text, "\"speedup_1_thread\"") == NULL, "speed-ups without reference runs");
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* ---- report ------------------------------------------------------------------------ */

Test(cli_report, usage_errors) {
    char *help[] = {"--help"};
    captured_run run = support_capture(kvc_cmd_report, ARGC(help), help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.err, "usage: kvcmp report", "stderr");
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

/* Without a path, parity reads $KVCMP_SHARED/vllm-cases. */
Test(cli_report, parity_defaults_to_the_shared_corpus, .timeout = 60) {
    char root[64], dir[256], out[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "vllm-cases/vllm-eager-torch-cpu/one", "v41.rope_plain_insert/fp8", "vllm-eager-torch-cpu", 8, dir, sizeof dir);
    setenv("KVCMP_SHARED", root, 1);
    snprintf(out, sizeof out, "%s/out", root);
    char *argv[] = {"parity", "--out", out};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "parity: 1 cases, 1 identical to the reference", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

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
    char *plain[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "1", "--threads", "2"};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(plain), plain);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.out, "OMP_WAIT_POLICY=(default)", "stdout");
    expect_contains(run.out, "\nv41-r2-decode ", "stdout");
    cr_expect(strstr(run.out, "wrote ") == NULL, "a JSON file written without --json:\n%s", run.out);
    support_free_run(&run);
    char *unwritable[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "0", "--json", "/nonexistent/dir/bench.json"};
    run = support_capture(kvc_cmd_bench, ARGC(unwritable), unwritable);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err,
                    "kvcmp bench: cannot write /nonexistent/dir/bench.json: No such file or directory (the table above is "
                    "complete; give --json a writable path)\n",
                    "stderr");
    expect_contains(run.out, "\nv41-r2-decode ", "stdout");
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
    expect_contains(run.err, "default $KVCMP_SHARED/vllm-cases, else ../shared/vllm-cases", "stderr");
    support_free_run(&run);
}

/* Parity without a path and without KVCMP_SHARED reads ../shared/vllm-cases;
 * where there is none, it says so and fails, writing no report. */
Test(cli_report, parity_default_path_missing, .timeout = 60) {
    char root[64], here[128], out[128];
    support_temp_dir(root, sizeof root);
    snprintf(here, sizeof here, "%s/repo", root);
    cr_assert_eq(mkdir(here, 0777), 0);
    cr_assert_eq(chdir(here), 0);   /* this test's own process */
    unsetenv("KVCMP_SHARED");
    snprintf(out, sizeof out, "%s/out", root);
    char *argv[] = {"parity", "--seed", "5", "--out", out};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.err, "kvcmp report parity: no case directory (with case.json) under ../shared/vllm-cases", "stderr");
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

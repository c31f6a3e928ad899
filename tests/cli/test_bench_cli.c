/* kvcmp bench through its C entry point. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




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
    expect_contains(run.out, "--reference-runs N", "stdout");
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

/* kvcmp bench through its C entry point. */
#include <cjson/cJSON.h>
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
    char *argv[] = {"--scenario", "v4-d512-r4-decode", "--runs", "2", "--reference-runs", "2", "--threads", "1",
                    "--stream-bytes", "8388608", "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "kvcmp bench: commit ", "stdout");
    expect_contains(run.out, "\nMachine: streaming loops over 8 MiB buffers (", "stdout");
    expect_contains(run.out, "\nv4-d512-r4-decode          1 opt ", "stdout");
    cr_expect(strstr(run.out, "v4-d512-r128-prefill") == NULL, "--scenario ran another scenario");
    expect_contains(run.out, "wrote ", "stdout");
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not JSON", json);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "format")), "kvcmp-bench/3");
    cJSON *scenario = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "scenarios"), 0);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(scenario, "name")), "v4-d512-r4-decode");
    /* The reference, then the optimized backend at the one thread count. */
    cJSON *results = cJSON_GetObjectItem(scenario, "results");
    cr_assert_eq(cJSON_GetArraySize(results), 2);
    cJSON *reference = cJSON_GetArrayItem(results, 0), *optimized = cJSON_GetArrayItem(results, 1);
    cr_expect_eq(cJSON_GetObjectItem(reference, "runs")->valueint, 2);
    /* A ratio, not a speed target (the test build is sanitized): present and positive. */
    cr_expect_gt(cJSON_GetObjectItem(reference, "time_over_optimized")->valuedouble, 0.0);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(optimized, "output")), "matches");
    cr_expect_eq(cJSON_GetObjectItem(optimized, "runs")->valueint, 2);
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* Every scenario once, without the reference's timings: each scenario's
 * setup and its optimized stage run, every output matches the
 * reference's, and each has a fraction of its scenario's floor. */
Test(cli_bench, every_scenario_once_without_the_reference, .timeout = 300) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    char *argv[] = {"--runs", "1", "--reference-runs", "0", "--threads", "2", "--stream-bytes", "8388608", "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    static const char *const scenarios[] = {"v4-d512-r128-prefill", "v4-d512-r4-prefill", "v4-d128-r4-prefill", "v4-d512-r4-decode",
                                            "v4-save-partial-states", "v41-r2-prefill", "v41-r2-decode", "v41-rope-quant-insert"};
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        char row[96];
        snprintf(row, sizeof row, "\n%-24s   2 opt ", scenarios[i]);
        expect_contains(run.out, row, "stdout");
    }
    cr_expect(strstr(run.out, "DIFFERS") == NULL && strstr(run.out, "FAILED") == NULL, "opt differs or fails:\n%s", run.out);
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not JSON", json);
    cJSON *scenario;
    cJSON_ArrayForEach(scenario, cJSON_GetObjectItem(root, "scenarios")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(scenario, "name"));
        cJSON *reference = cJSON_GetArrayItem(cJSON_GetObjectItem(scenario, "results"), 0);
        cr_expect_null(cJSON_GetObjectItem(reference, "min_ms"), "%s: the reference timed with --reference-runs 0", name);
        cJSON *optimized = cJSON_GetArrayItem(cJSON_GetObjectItem(scenario, "results"), 1);
        cJSON *fraction = cJSON_GetObjectItem(optimized, "fraction");
        cr_expect(cJSON_IsNumber(fraction) && fraction->valuedouble > 0, "%s: opt has no fraction of its floor", name);
    }
    cr_expect(strstr(text, "vllm") == NULL, "hard-coded upstream numbers in the JSON");
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

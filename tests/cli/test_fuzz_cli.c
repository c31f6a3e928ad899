/* kvcmp fuzz through its C entry point: exit codes, summaries, files written. */
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <math.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




/* ---- fuzz ------------------------------------------------------------------------ */



Test(cli_fuzz, usage_errors) {
    char *shard[] = {"--shard", "4/4"};
    expect_fuzz_usage_error(ARGC(shard), shard, "kvcmp fuzz: --shard takes I/N with 0 <= I < N");
    char *shard_text[] = {"--shard", "one"};
    expect_fuzz_usage_error(ARGC(shard_text), shard_text, "--shard takes I/N");
    char *policy[] = {"--policy", "close"};
    expect_fuzz_usage_error(ARGC(policy), policy, "kvcmp fuzz: unknown policy 'close' (exact or vllm)");
    char *option[] = {"--fast", "1"};
    expect_fuzz_usage_error(ARGC(option), option, "kvcmp fuzz: unknown option '--fast' (see kvcmp fuzz --help)");
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
    expect_contains(run.out, "usage: kvcmp fuzz [--seed S]", "stdout");
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
    cJSON *summary = cJSON_Parse(text);
    cr_assert_not_null(summary, "%s is not JSON", json);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(summary, "format")), "kvcmp-fuzz-summary/1");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "cases")), 6);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "failures")), 0);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(summary, "failure_list")), 0);
    /* Each variant's cases per second of one worker: its cases over the
     * workers' seconds on them. */
    expect_contains(run.out, "failures  cases/s (one worker)\n", "stdout");
    cJSON *variant;
    int variants = 0;
    cJSON_ArrayForEach(variant, cJSON_GetObjectItem(summary, "per_variant")) {
        double cases = cJSON_GetNumberValue(cJSON_GetObjectItem(variant, "cases"));
        double seconds = cJSON_GetNumberValue(cJSON_GetObjectItem(variant, "worker_seconds"));
        double rate = cJSON_GetNumberValue(cJSON_GetObjectItem(variant, "cases_per_second"));
        cr_expect(seconds > 0 && rate > 0, "%s: %g s, %g cases/s", variant->string, seconds, rate);
        cr_expect(fabs(rate * seconds - cases) <= 1e-9 * cases, "%s: %g cases/s x %g s is not %g cases", variant->string, rate, seconds,
                  cases);
        variants++;
    }
    cr_expect_gt(variants, 0, "no per_variant tallies");
    /* The run metadata: which kvcmp, and the options that chose the cases. */
    cJSON *run_info = cJSON_GetObjectItem(summary, "run"), *options = cJSON_GetObjectItem(run_info, "options");
    cr_expect(cJSON_GetStringValue(cJSON_GetObjectItem(run_info, "commit")) != NULL, "%s", text);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(options, "stage")), "v41.rope_plain,v4.save");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(options, "invalid_per_mille")), 500);
    cJSON_Delete(summary);
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
    cr_expect_eq(run.status, 3, "a summary that could not be written must fail the run");
    expect_contains(run.err, "kvcmp fuzz: cannot write /nonexistent/deeper/fuzz.json", "stderr");
    expect_contains(run.err, "No such file or directory", "stderr");
    expect_contains(run.out, "fuzz: 0 cases in ", "stdout");
    support_free_run(&run);
}

static cJSON *read_summary_json(const char *path) {
    char *text = support_read_file(path);
    cr_assert_not_null(text, "%s not written", path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not JSON:\n%s", path, text);
    free(text);
    return root;
}

static const char *json_text(const cJSON *root, const char *key) {
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, key));
    return text ? text : "(absent)";
}

/* A campaign that compared no case proves nothing: exit status 4 (not 0,
 * and not 1, "the kernel is wrong"), with why in the summary, the JSON
 * and a failed JUnit testcase of its own. */
static void expect_no_verdict(char **argv, int argc, const char *json, const char *junit, const char *why) {
    captured_run run = run_fuzz(argc, argv);
    cr_expect_eq(run.status, 4, "exit status %d\nstdout:\n%s\nstderr:\n%s", run.status, run.out, run.err);
    char line[300];
    snprintf(line, sizeof line, "fuzz: NO VERDICT (exit status 4): %s", why);
    expect_contains(run.out, line, "stdout");
    cJSON *root = read_summary_json(json);
    cr_expect_str_eq(json_text(root, "verdict"), "no-verdict");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "exit_status")), 4);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "compared")), 0);
    cr_expect(strncmp(json_text(root, "no_verdict"), why, strlen(why)) == 0, "no_verdict: %s", json_text(root, "no_verdict"));
    cJSON_Delete(root);
    char *xml = support_read_file(junit);
    cr_assert_not_null(xml, "%s not written", junit);
    expect_contains(xml, "<testcase classname=\"fuzz.campaign\" name=\"cases compared\"", "junit");
    expect_contains(xml, "<failure type=\"no-verdict\" message=\"", "junit");
    expect_contains(xml, "failures=\"1\"", "junit");
    free(xml);
    support_free_run(&run);
}

Test(cli_fuzz, no_case_compared_is_no_verdict, .timeout = 60) {
    char dir[64], json[128], junit[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    char *none[] = {"--cases", "0", "--candidate", "ref", "--save", "", "--json", json, "--junit", junit, "--quiet"};
    expect_no_verdict(none, ARGC(none), json, junit, "--cases 0 asks for no case: give --cases 1 or more");
    /* Cases 0 and 1 of a 4-shard campaign fall to shards 0 and 1: shard 3 has none. */
    char *empty_shard[] = {"--cases", "2", "--shard", "3/4", "--candidate", "ref", "--save", "", "--json", json, "--junit", junit, "--quiet"};
    expect_no_verdict(empty_shard, ARGC(empty_shard), json, junit, "shard 3/4 of a 2-case campaign gets no case");
    support_remove_tree(dir);
}

/* The summary, the JSON and the JUnit properties say why a campaign
 * ended, and how long the candidate took to start (counted against
 * --seconds). */
Test(cli_fuzz, the_summary_says_why_the_campaign_stopped, .timeout = 60) {
    char dir[64], json[128], junit[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    char *cases[] = {"--cases", "3", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--save", "", "--json", json,
                     "--junit", junit, "--quiet"};
    captured_run run = run_fuzz(ARGC(cases), cases);
    cr_expect_eq(run.status, 0, "%s%s", run.out, run.err);
    expect_contains(run.out, "fuzz: stopped: every case asked ran (--cases 3, shard 0/1); 3 cases compared, the first started ", "stdout");
    cJSON *root = read_summary_json(json);
    cr_expect_str_eq(json_text(root, "stopped_by"), "cases");
    cr_expect_str_eq(json_text(root, "verdict"), "pass");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "compared")), 3);
    cJSON_Delete(root);
    char *xml = support_read_file(junit);
    expect_contains(xml, "<property name=\"stopped_by\" value=\"cases\"/>", "junit");
    expect_contains(xml, "<property name=\"verdict\" value=\"pass\"/>", "junit");
    free(xml);
    support_free_run(&run);
    char *timed[] = {"--seconds", "0.3", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--save", "", "--json",
                     json, "--quiet"};
    run = run_fuzz(ARGC(timed), timed);
    cr_expect_eq(run.status, 0, "%s%s", run.out, run.err);
    expect_contains(run.out, "fuzz: stopped: --seconds 0.3 ran out; ", "stdout");
    expect_contains(run.out, "(the candidate's start-up, counted against --seconds)", "stdout");
    root = read_summary_json(json);
    cr_expect_str_eq(json_text(root, "stopped_by"), "time");
    const cJSON *startup = cJSON_GetObjectItem(root, "startup_seconds");
    cr_expect(cJSON_IsNumber(startup) && startup->valuedouble >= 0 &&
              startup->valuedouble <= cJSON_GetNumberValue(cJSON_GetObjectItem(root, "seconds")), "startup_seconds");
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* A link or a folder at --json or --junit is refused before the campaign
 * runs (usage error, nothing run), not after it at the write. */
Test(cli_fuzz, output_links_and_folders_refused_before_running) {
    char dir[] = "/tmp/kvcmp-fuzz-links-XXXXXX";
    cr_assert(mkdtemp(dir));
    char link_path[256], target[256];
    snprintf(target, sizeof target, "%s/victim", dir);
    snprintf(link_path, sizeof link_path, "%s/summary.json", dir);
    cr_assert_eq(symlink(target, link_path), 0);
    char *json_argv[] = {"--cases", "5", "--candidate", "ref", "--json", link_path, "--quiet"};
    captured_run run = run_fuzz(ARGC(json_argv), json_argv);
    cr_expect_eq(run.status, 2, "exit status %d", run.status);
    expect_contains(run.err, "--json: ", "stderr");
    expect_contains(run.err, "summary.json is a symbolic link", "stderr");
    cr_expect_null(strstr(run.out, "fuzz: 5 cases"), "the campaign ran: %s", run.out);
    support_free_run(&run);
    cr_expect(!support_file_exists(target), "the link's target was created");
    char *junit_argv[] = {"--cases", "5", "--candidate", "ref", "--junit", dir, "--json", "", "--quiet"};
    expect_fuzz_usage_error(ARGC(junit_argv), junit_argv, "is a folder, not a file");
    unlink(link_path);
    rmdir(dir);
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
    expect_contains(run.out, "__REPRO: build/kvcmp replay --impl build/mutants/fp8_truncation.so --policy exact --page-padding ", "stdout");
    char *text = support_read_file(json);
    cJSON *summary = cJSON_Parse(text);
    cr_assert_not_null(summary, "%s is not JSON", json);
    cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(summary, "failure_list"), 0);
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(first, "case")), "%s", text);
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(summary, "first_failure_seconds")), "%s", text);
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(summary, "run"), "seed")->valuestring, "1");
    cJSON_Delete(summary);
    free(text);
    char **dirs;
    int n = kvc_find_cases(save, &dirs);
    cr_expect_geq(n, 1, "no case saved under %s", save);
    kvc_free_case_list(dirs, n);
    support_free_run(&run);
    support_remove_tree(dir);
}

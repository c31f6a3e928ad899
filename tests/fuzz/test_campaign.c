/* Fuzz campaigns end to end through `kvcmp fuzz`'s entry point, with
 * candidates that crash, lack stages or carry a planted bug, and the
 * plug-in loader's refusals of libraries that are not candidates.
 *
 * The wrong-on-purpose candidates are built by the Makefile from
 * tests/plugins/candidate.c into $KVCMP_TEST_PLUGINS (make test sets it);
 * the planted bugs are make mutants' libraries under build/mutants.
 * Every expected count below follows from how the candidate was built
 * (a crash on every call, no stage of a forward...), not from the fuzzer. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tests/test_support.h"

#include "kvcmp/backends.h"
#include "cli/commands.h"
#include "kvcmp/plugin.h"
#include "harness/backends/plugin.h"
#include "harness/replay/replay.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

static void expect_contains(const char *text, const char *needle, const char *what) {
    cr_expect(text && strstr(text, needle) != NULL, "%s lacks '%s':\n%s", what, needle, text ? text : "(null)");
}

static int occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* A test candidate library, e.g. "crash" for crash.so. */
static void test_plugin(const char *kind, char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/%s.so", dir && dir[0] ? dir : "build/test-plugins", kind);
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds tests/plugins/candidate.c into it)", out);
}

static void mutant(const char *name, char *out, size_t size) {
    snprintf(out, size, "build/mutants/%s.so", name);
    if (!support_file_exists(out)) cr_skip_test("%s not built (make mutants)", out);
}

/* kvc_cmd_fuzz re-executes itself unless an OpenMP wait policy is set. */
static captured_run run_fuzz(int argc, char **argv) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    return support_capture(kvc_cmd_fuzz, argc, argv);
}

static cJSON *read_json(const char *path) {
    char *text = support_read_file(path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not valid JSON:\n%s", path, text);
    free(text);
    return root;
}

static double json_number(const cJSON *root, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    cr_assert(cJSON_IsNumber(item), "no number \"%s\" in the summary", key);
    return item->valuedouble;
}

/* 0 when a saved case replays bit-exact through backend, 1 when it fails. */
static int replay_one(const char *dir, const kvc_backend *backend) {
    kvc_replay_options options = {.backend = backend, .impl_name = backend->name, .policy = KVC_POLICY_EXACT, .silent = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    return kvc_replay_case(dir, &options, &totals, NULL);
}

/* ---- the plug-in loader ------------------------------------------------------ */

static void expect_refused(const char *kind, const char *needle) {
    char path[512], error[512] = "";
    test_plugin(kind, path, sizeof path);
    cr_expect_null(kvc_plugin_load(path, error, sizeof error), "%s was accepted as a candidate", path);
    expect_contains(error, needle, "the loader's error");
    expect_contains(error, path, "the loader's error");
}

Test(plugin_loader, refuses_libraries_that_are_not_candidates) {
    expect_refused("no_entry", "exports no kvcmp_plugin_entry() (see include/kvcmp/plugin.h)");
    expect_refused("null_table", "speaks plug-in ABI 0 (size 0); this kvcmp speaks 1: rebuild it against include/kvcmp/plugin.h");
    char needle[128];
    snprintf(needle, sizeof needle, "speaks plug-in ABI 2 (size %zu); this kvcmp speaks 1", sizeof(kvcmp_plugin));
    expect_refused("wrong_abi", needle);
    expect_refused("short_table", "speaks plug-in ABI 1 (size 8); this kvcmp speaks 1");
}

Test(plugin_loader, an_unnamed_candidate_is_named_by_its_path) {
    char path[512], error[512] = "";
    test_plugin("crash", path, sizeof path);
    const kvc_backend *b = kvc_backend_by_name(path, error, sizeof error);
    cr_assert_not_null(b, "%s", error);
    cr_expect_str_eq(b->name, path);
    cr_expect_not_null(b->v41_rope_plain_insert);
    cr_expect(b->v4_save_partial_states == NULL && b->v4_compress == NULL && b->v41_save_compress_norm == NULL &&
                  b->v41_rope_quant_insert == NULL,
              "the candidate offers only v41.rope_plain_insert");
}

/* A bare LIB.so names a file in the current directory. */
Test(plugin_loader, a_bare_library_name_is_a_file_here) {
    char *argv[] = {"--impl", "kvcmp-no-such-candidate.so", "x"};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "cannot load candidate kvcmp-no-such-candidate.so: ./kvcmp-no-such-candidate.so", "stderr");
    support_free_run(&run);
}

/* ---- candidates that crash or lack stages ------------------------------------- */

/* Every call of the crash candidate kills its worker: each case is
 * reported as a crash with how the worker died, saved unshrunk with the
 * reference's outputs, and the campaign carries on in a new worker. */
Test(fuzz_campaign, crashing_candidate_every_case_reported_and_saved, .timeout = 120) {
    char plugin[512], dir[64], save[128], json[128];
    test_plugin("crash", plugin, sizeof plugin);
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "1", "--cases", "6", "--jobs", "1", "--candidate", plugin, "--stage", "v41.rope_plain_insert",
                    "--invalid-rate", "0", "--metamorphic-rate", "0", "--save", save, "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    /* bf16 caches: SIGKILL; fp8 caches: exit status 3 (tests/plugins/candidate.c). */
    cr_expect_eq(occurrences(run.out, "[v41.rope_plain_insert/bf16, "), occurrences(run.out, "crash: the worker running this case died (signal 9)"));
    cr_expect_eq(occurrences(run.out, "[v41.rope_plain_insert/fp8, "), occurrences(run.out, "crash: the worker running this case died (exit status 3)"));
    cr_expect_gt(occurrences(run.out, "(signal 9)"), 0, "no bf16 case among the 6:\n%s", run.out);
    cr_expect_gt(occurrences(run.out, "(exit status 3)"), 0, "no fp8 case among the 6:\n%s", run.out);
    cr_expect_eq(occurrences(run.out, "FAIL case "), 6, "a crash ended the campaign early:\n%s", run.out);
    /* One per failure, and one per signature in the summary: a SIGKILL
     * and an exit status 3, each 3 times (--max-failures-per-signature 3). */
    cr_expect_eq(occurrences(run.out, "  __REPRO: build/kvcmp fuzz --seed 1 --only "), 6 + 2);
    cr_expect_eq(occurrences(run.out, " --invalid-rate 0 --metamorphic-rate 0 --stage v41.rope_plain_insert\n"), 6 + 2);
    cr_expect_eq(occurrences(run.out, "  shrunk case "), 6);
    expect_contains(run.out, ": 6 failures (first after ", "stdout");
    expect_contains(run.out, "distinct failures (signatures): 2\n", "stdout");
    expect_contains(run.out, "] v41.rope_plain_insert crash: signal 9  (3 failures; ", "stdout");
    expect_contains(run.out, "] v41.rope_plain_insert crash: exit status 3  (3 failures; ", "stdout");
    expect_contains(run.out, "fuzz: 2 distinct failures, each listed above", "stdout");
    /* Saved with the reference's outputs: each replays clean through the reference. */
    char **dirs;
    int n = kvc_find_cases(save, &dirs);
    cr_expect_eq(n, 6, "%d cases saved under %s", n, save);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(replay_one(dirs[i], &kvc_reference_backend), 0, "the reference fails %s", dirs[i]);
        cr_expect(strstr(dirs[i], "/fuzz-s1-c") && strstr(dirs[i], "-v41.rope_plain_insert_"), "saved as %s", dirs[i]);
    }
    kvc_free_case_list(dirs, n);
    cJSON *root = read_json(json);
    cr_expect_eq(json_number(root, "failures"), 6);
    cr_expect_eq(json_number(root, "cases"), 6);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "failure_list");
    cr_expect_eq(cJSON_GetArraySize(list), 6);
    const cJSON *item;
    cJSON_ArrayForEach(item, list) cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(item, "kind")->valuestring, "crash");
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* --max-failures stops the campaign, crashes included; without --save
 * nothing is saved and the summary says so. */
Test(fuzz_campaign, crashes_stop_at_max_failures, .timeout = 120) {
    char plugin[512];
    test_plugin("crash", plugin, sizeof plugin);
    char dir[64], json[128], junit[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    char *argv[] = {"--seed", "2", "--cases", "40", "--jobs", "1", "--candidate", plugin, "--stage", "v41.rope_plain_insert",
                    "--max-failures", "2", "--save", "", "--json", json, "--junit", junit, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    cJSON *root = read_json(json);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "stopped_by")), "max-failures");
    /* Why it stopped, in words, everywhere: summary, JSON and JUnit. */
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "stopped_because")), "--max-failures 2 root causes reached");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "root_causes")), 2);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "verdict")), "fail");
    cJSON_Delete(root);
    char *xml = support_read_file(junit);
    expect_contains(xml, "<property name=\"stopped_because\" value=\"--max-failures 2 root causes reached\"", "junit");
    free(xml);
    support_remove_tree(dir);
    /* --max-failures counts root causes: the campaign ends once the
     * second one (a SIGKILL and an exit status, two signatures with no
     * explanation and no value difference) is in. */
    cr_expect_geq(occurrences(run.out, "FAIL case "), 2, "stdout:\n%s", run.out);
    cr_expect_lt(occurrences(run.out, "FAIL case "), 40, "stdout:\n%s", run.out);
    cr_expect_eq(occurrences(run.out, "  shrunk case "), 0);
    expect_contains(run.out, " cases in ", "stdout");
    expect_contains(run.out, "distinct failures (signatures): 2\n", "stdout");
    expect_contains(run.out, "shrunk cases are under (not saved: --save was empty)", "stdout");
    expect_contains(run.out, "fuzz: stopped: --max-failures 2 root causes reached; ", "stdout");
    expect_contains(run.out, "fuzz: 2 root causes (signatures explained by a shared deviation are one root cause; ", "stdout");
    support_free_run(&run);
}

/* A candidate with neither forward complete: every forward and history
 * case is skipped, counted, and never a failure; but a campaign that
 * compared no case gives no verdict (exit status 4), never a pass. */
Test(fuzz_campaign, candidate_lacking_forward_stages_skips_them, .timeout = 60) {
    char plugin[512], dir[64], json[128];
    test_plugin("partial", plugin, sizeof plugin);
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "6", "--cases", "12", "--jobs", "2", "--candidate", plugin, "--stage", "v4.forward,v41.forward,history",
                    "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 4, "stdout:\n%s", run.out);
    char label[600];
    snprintf(label, sizeof label, "candidate %s, policy exact, seed 6", plugin);
    expect_contains(run.out, label, "stdout");
    expect_contains(run.out, ": 0 failures, 12 cases skipped (stages the candidate lacks)\n", "stdout");
    expect_contains(run.out, "fuzz: NO VERDICT (exit status 4): all 12 cases were skipped: candidate ", "stdout");
    expect_contains(run.out, "  history.v4 ", "stdout");
    expect_contains(run.out, "  history.v41 ", "stdout");
    cJSON *root = read_json(json);
    cr_expect_eq(json_number(root, "skipped"), 12);
    cr_expect_eq(json_number(root, "failures"), 0);
    cr_expect_eq(json_number(root, "compared"), 0);
    cr_expect_eq(json_number(root, "exit_status"), 4);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "verdict")), "no-verdict");
    cr_expect_eq(json_number(root, "jobs"), 2);
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* The candidate's path goes into the summary as a JSON string: quotes,
 * backslashes and control characters must be escaped. */
Test(fuzz_campaign, summary_json_escapes_the_candidate_path, .timeout = 60) {
    char plugin[512], dir[64], odd_dir[160], odd[256], json[128];
    test_plugin("partial", plugin, sizeof plugin);
    support_temp_dir(dir, sizeof dir);
    snprintf(odd_dir, sizeof odd_dir, "%s/a \"quoted\"\\dir\twith tab", dir);
    cr_assert_eq(mkdir(odd_dir, 0777), 0);
    snprintf(odd, sizeof odd, "%s/candidate.so", odd_dir);
    cr_assert_eq(symlink(realpath(plugin, NULL), odd), 0, "symlink: %s", strerror(errno));
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--cases", "3", "--jobs", "1", "--candidate", odd, "--stage", "v4.forward", "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    /* The partial candidate lacks v4.forward: every case skipped, no verdict. */
    cr_expect_eq(run.status, 4, "stderr:\n%s", run.err);
    char *text = support_read_file(json);
    expect_contains(text, "a \\\"quoted\\\"\\\\dir\\twith tab/candidate.so", json);   /* cJSON escapes the tab as \\t */
    free(text);
    cJSON *root = read_json(json);
    const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(root, "candidate");
    cr_assert(cJSON_IsString(candidate));
    cr_expect_str_eq(candidate->valuestring, odd);
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* ---- planted bugs --------------------------------------------------------------- */

/* Failures not saved: every one listed in the JSON, in order (with
 * --max-failures-per-signature large enough to list them all).  The
 * worker runs ahead of the parent, so --max-failures 1 (one signature)
 * stops the campaign after at least one failure; it does stop early. */
Test(fuzz_campaign, failures_listed_without_saving, .timeout = 120) {
    char candidate[256], dir[64], json[128];
    mutant("fp8_truncation", candidate, sizeof candidate);
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "1", "--cases", "400", "--jobs", "1", "--candidate", candidate, "--stage", "v41.rope_quant",
                    "--max-failures", "1", "--max-failures-per-signature", "1000", "--save", "", "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    int failures = occurrences(run.out, "FAIL case ");
    cr_expect_geq(failures, 1, "stdout:\n%s", run.out);
    cr_expect_eq(occurrences(run.out, "  shrunk case "), 0, "saved although --save was empty");
    cJSON *root = read_json(json);
    cr_expect_lt(json_number(root, "cases"), 400, "--max-failures 1 did not stop the campaign");
    cr_expect_eq(json_number(root, "failures"), failures);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "failure_list");
    cr_assert_eq(cJSON_GetArraySize(list), failures);
    for (int i = 0; i < failures; i++) {
        const cJSON *item = cJSON_GetArrayItem(list, i);
        cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(item, "saved")->valuestring, "");
        cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(item, "variant")->valuestring, "v41.rope_quant_insert");
        if (i) cr_expect_lt(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i - 1), "case")->valuedouble,
                            cJSON_GetObjectItemCaseSensitive(item, "case")->valuedouble);
    }
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* A bug that shows in a multi-step history: the diverging step becomes a
 * single case, reported with the history it came from, shrunk and saved;
 * the saved case fails with the mutant and passes with the reference. */
Test(fuzz_campaign, history_divergence_is_saved_as_a_single_case, .timeout = 180) {
    char candidate[256], dir[64], save[128];
    mutant("sumsq_sequential_order", candidate, sizeof candidate);
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    char *argv[] = {"--seed", "1", "--cases", "60", "--jobs", "1", "--candidate", candidate, "--stage", "history.v41",
                    "--max-failures", "1", "--shrink-seconds", "2", "--save", save, "--json", "", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s", run.out);
    expect_contains(run.out, "[history.v41, family ", "stdout");
    expect_contains(run.out, "bytes: history step ", "stdout");
    expect_contains(run.out, "; as a single case: ", "stdout");
    expect_contains(run.out, "latent value x", "stdout");   /* the single case's differences include the latent */
    expect_contains(run.out, "  shrunk case ", "stdout");
    char **dirs;
    int n = kvc_find_cases(save, &dirs);
    cr_assert_eq(n, 1, "%d cases saved", n);
    cr_expect(strstr(dirs[0], "-history.v41") != NULL, "%s", dirs[0]);
    char error[512];
    const kvc_backend *bad = kvc_backend_by_name(candidate, error, sizeof error);
    cr_assert_not_null(bad, "%s", error);
    cr_expect_eq(replay_one(dirs[0], &kvc_reference_backend), 0, "the reference fails its own saved case %s", dirs[0]);
    cr_expect_eq(replay_one(dirs[0], bad), 1, "the saved case %s no longer shows the bug", dirs[0]);
    kvc_free_case_list(dirs, n);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* ---- options ---------------------------------------------------------------------- */

static void expect_fuzz_usage_error(int argc, char **argv, const char *needle) {
    captured_run run = run_fuzz(argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d", run.status);
    expect_contains(run.err, needle, "stderr");
    support_free_run(&run);
}

Test(fuzz_options, more_usage_errors) {
    char *zero_shards[] = {"--shard", "0/0"};
    expect_fuzz_usage_error(ARGC(zero_shards), zero_shards, "kvcmp fuzz: --shard takes I/N with 0 <= I < N, e.g. --shard 0/4");
    char *negative[] = {"--shard", "-1/4"};
    expect_fuzz_usage_error(ARGC(negative), negative, "kvcmp fuzz: --shard takes I/N");
    char *bad_value_last[] = {"--quiet", "--policy"};
    expect_fuzz_usage_error(ARGC(bad_value_last), bad_value_last, "kvcmp fuzz: --policy needs a value (see kvcmp fuzz --help)");
    char *short_help[] = {"-h"};
    captured_run run = run_fuzz(ARGC(short_help), short_help);
    cr_expect_eq(run.status, 0);
    expect_contains(run.out, "usage: kvcmp fuzz [--seed S]", "stdout");
    cr_expect_str_empty(run.err, "help wrote to stderr");
    support_free_run(&run);
}

/* --jobs above 16 runs 16 jobs; --jobs and --threads below 1 are errors. */
Test(fuzz_options, jobs_are_clamped, .timeout = 60) {
    char *many[] = {"--cases", "2", "--jobs", "99", "--threads", "1", "--candidate", "ref", "--policy", "exact", "--stage",
                    "v41.rope_plain_insert/bf16", "--json", ""};
    captured_run run = run_fuzz(ARGC(many), many);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.err, "kvcmp fuzz: seed 1, candidate ref, policy exact, 16 jobs x 1 threads, shard 0/1", "stderr");
    expect_contains(run.out, "fuzz: 2 cases in ", "stdout");
    support_free_run(&run);
    char *no_jobs[] = {"--cases", "1", "--jobs", "0", "--candidate", "ref"};
    expect_fuzz_usage_error(ARGC(no_jobs), no_jobs, "kvcmp fuzz: --jobs takes a whole number from 1 to 1024, not '0'");
    char *no_threads[] = {"--cases", "1", "--threads", "0", "--candidate", "ref"};
    expect_fuzz_usage_error(ARGC(no_threads), no_threads, "kvcmp fuzz: --threads takes a whole number from 1 to 1024, not '0'");
}

/* A campaign limited by time stops by itself and says how long it ran. */
Test(fuzz_options, time_limited_campaign, .timeout = 60) {
    char *argv[] = {"--seconds", "1", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--json", ""};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0);
    expect_contains(run.err, "kvcmp fuzz: running for 1 s\n", "stderr");
    long long cases = -1;
    const char *summary = strstr(run.out, "fuzz: ");
    cr_assert_not_null(summary, "no summary:\n%s", run.out);
    cr_assert_eq(sscanf(summary, "fuzz: %lld cases in ", &cases), 1);
    cr_expect_gt(cases, 0, "a 1 s campaign ran no case");
    support_free_run(&run);
}

/* One V4.1 ring case in four feeds a chunk longer than CAP (the ring
 * store wraps), most with a padding row among its last CAP rows; the
 * summary counts both.  Of 400 ring cases at least 60 and 30 (expected
 * 100 and about 67: the draw's shares, 1/4 and 2/3 of those). */
Test(fuzz_campaign, chunks_past_cap_are_a_regular_draw, .timeout = 60) {
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    char *argv[] = {"--cases", "400", "--seed", "3", "--jobs", "1", "--candidate", "ref", "--stage", "v41.save_compress_norm/r2",
                    "--invalid-rate", "0", "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s", run.err);
    cJSON *root = read_json(json);
    const cJSON *wrap = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "coverage"), "v41_ring_wrap");
    cr_assert_not_null(wrap, "no coverage.v41_ring_wrap in the summary");
    cr_expect_eq(json_number(wrap, "ring_cases"), 400);
    cr_expect_geq(json_number(wrap, "chunk_past_cap"), 60);
    cr_expect_geq(json_number(wrap, "padding_in_last_cap_rows"), 30);
    cr_expect_leq(json_number(wrap, "padding_in_last_cap_rows"), json_number(wrap, "chunk_past_cap"));
    expect_contains(run.out, "  v4.1 ring wrap         ", "the summary");
    cJSON_Delete(root);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* --json FILE without a directory part writes into the current directory. */
Test(fuzz_options, json_in_the_current_directory, .timeout = 60) {
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(chdir(dir), 0);   /* this test's own process */
    char *argv[] = {"--cases", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert", "--json", "summary.json", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0);
    cr_expect(support_file_exists("summary.json"), "summary.json not written in the current directory");
    support_free_run(&run);
    support_remove_tree(dir);
}

/* No worker can start when the process is out of file descriptors: the
 * command says why and fails instead of running no case. */
Test(fuzz_options, out_of_file_descriptors, .timeout = 60) {
    struct rlimit limit;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &limit), 0);
    int highest = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) != -1) highest = fd;
    limit.rlim_cur = (rlim_t)highest + 16;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &limit), 0);
    /* Fill every free descriptor, then free exactly five: four for the
     * captured stdout/stderr, one for the worker's pipe, which needs two. */
    int fillers[64], n = 0;
    for (int fd; n < 64 && (fd = open("/dev/null", O_RDONLY)) >= 0;) fillers[n++] = fd;
    cr_assert_geq(n, 5);
    for (int i = 0; i < 5; i++) close(fillers[--n]);
    char *argv[] = {"--cases", "1", "--candidate", "ref", "--json", "", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 2, "stdout:\n%s", run.out);
    expect_contains(run.err, "kvcmp fuzz: pipe: Too many open files", "stderr");
    cr_expect(strstr(run.out, "cases in") == NULL, "a summary without any worker:\n%s", run.out);
    support_free_run(&run);
}

/* On a terminal the campaign shows a progress line (cases, cases/s,
 * variants seen, failures) that it rewrites in place, and clears it
 * before printing a failure. */
Test(fuzz_options, progress_line_on_a_terminal, .timeout = 60) {
    char candidate[256];
    mutant("fp8_truncation", candidate, sizeof candidate);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) cr_skip_test("no pseudo-terminal here: %s", strerror(errno));
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert(tty >= 0, "cannot open %s", ptsname(master));
    setenv("OMP_WAIT_POLICY", "passive", 1);
    fflush(stderr);
    int saved_err = dup(STDERR_FILENO);
    dup2(tty, STDERR_FILENO);
    char *argv[] = {"--seed", "3", "--cases", "100", "--jobs", "1", "--candidate", candidate, "--stage", "v41.rope_quant",
                    "--max-failures", "1", "--save", "", "--json", ""};
    fflush(stdout);
    int saved_out = dup(STDOUT_FILENO);
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    int status = kvc_cmd_fuzz(ARGC(argv), argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_err, STDERR_FILENO);
    dup2(saved_out, STDOUT_FILENO);
    close(null_fd);
    close(tty);
    char text[16384];
    ssize_t got = 0, n;
    fcntl(master, F_SETFL, O_NONBLOCK);
    while (got < (ssize_t)sizeof text - 1 && (n = read(master, text + got, sizeof text - 1 - (size_t)got)) > 0) got += n;
    text[got > 0 ? got : 0] = 0;
    close(master);
    cr_expect_eq(status, 1, "the planted bug went unnoticed");
    /* The first line, before any result; cleared (spaces between carriage
     * returns) for the FAIL line; the last one ends the line. */
    char first[128];
    snprintf(first, sizeof first, "\r0 cases, 0 cases/s, 0/%d variants seen, 0 failures   ", kvc_variant_count());
    expect_contains(text, first, "the terminal");
    char cleared[128];
    snprintf(cleared, sizeof cleared, "\r%100s\r", "");
    expect_contains(text, cleared, "the terminal");
    /* The last line, printed when the campaign ends, counts the failure. */
    const char *final = strstr(text, " cases, "), *next;
    cr_assert_not_null(final, "no progress line:\n%s", text);
    while ((next = strstr(final + 1, " cases, ")) != NULL) final = next;
    int failures = 0;
    const char *tail = strstr(final, "variants seen, ");
    cr_expect(tail && sscanf(tail, "variants seen, %d failures\r\n", &failures) == 1 && failures >= 1 && strstr(tail, " failures\r\n"),
              "no final progress line with the failure:\n%s", text);
}

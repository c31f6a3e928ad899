/* Candidate isolation: campaigns and replays against hostile
 * candidates (tests/plugins/candidate.c: hang, crash inside the
 * shrinker, exit(0), abort, heap smash, leak, runaway memory, threads
 * left running) end in bounded time, with each case failed under the
 * right class, saved, given a __REPRO line, and no process left behind.
 * Every expected count follows from how the candidate misbehaves (on
 * every call, or on every call after a process's first). */
#include "tests/robust/robust_support.h"

/* The hostile candidates implement v41.rope_plain_insert only. */
#define STAGE "--stage", "v41.rope_plain_insert"

static void temp_paths(char *dir, size_t size, char *save, char *json) {
    support_temp_dir(dir, size);
    snprintf(save, 512, "%s/saved", dir);
    snprintf(json, 512, "%s/summary.json", dir);
}

/* The summary's failure_list kinds, all equal to `kind`, and how many. */
static int failures_of_kind(const char *json_path, const char *kind) {
    cJSON *root = read_summary(json_path);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "failure_list"), *item;
    int n = 0;
    cJSON_ArrayForEach(item, list) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "kind");
        cr_expect_str_eq(k->valuestring, kind);
        n++;
    }
    cJSON_Delete(root);
    return n;
}

Test(isolation, a_hanging_candidate_times_out_case_by_case, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("hang", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "4", "--jobs", "2", STAGE, "--timeout", "0.5", "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "timeout: the worker running this case took longer than 0.5 s (--timeout) and was killed"), 4,
                 "%s", run.out);
    /* 4 failures of one signature, which the summary lists with its first
     * case's and its smallest saved case's __REPRO lines: 4 + 1 each. */
    cr_expect_eq(count_of(run.out, "--timeout 0.5"), 4 + 1, "the __REPRO lines lack the time limit:\n%s", run.out);
    cr_expect_eq(count_of(run.out, "kvcmp replay --impl"), 4 + 1, "%s", run.out);
    /* Two jobs, two rounds of 0.5 s; the bound leaves room for a loaded machine. */
    cr_expect_lt(run.seconds, 8.0, "4 hanging cases on 2 jobs took %.1f s", run.seconds);
    cr_expect_eq(failures_of_kind(json, "timeout"), 4);
    cr_expect_eq(complete_cases_in(save), 4);
    cr_expect_eq(run.leftovers, 0, "a worker outlived the campaign");
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(isolation, a_crash_inside_the_shrinker_is_reported_and_replaced, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("shrink_crash", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "3", "--jobs", "1", STAGE, "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    /* Every case: the first call fails, the shrinker's second kills the worker. */
    cr_expect_eq(count_of(run.out, "status: reference returned ok"), 3, "%s", run.out);
    cr_expect_eq(count_of(run.out, ": the worker shrinking it died (signal 11): Segmentation fault; saving it unshrunk"), 3, "%s", run.out);
    expect_text(run.out, "fuzz: 3 workers died or were killed outside a case", "stdout");
    cr_expect_eq(summary_number(json, "workers_lost"), 3);
    cr_expect_eq(summary_number(json, "cases"), 3, "the campaign did not go on after a lost worker");
    cr_expect_eq(complete_cases_in(save), 3);
    int hidden;
    entries_in(save, &hidden);
    cr_expect_eq(hidden, 0, "a partial save was left in %s", save);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(isolation, a_hang_inside_the_shrinker_is_killed_at_its_budget, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("shrink_hang", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "2", "--jobs", "2", STAGE, "--timeout", "0.3", "--shrink-seconds", "0.3",
                    "--candidate", plugin, "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "the worker shrinking it took longer than 0.9 s (--shrink-seconds + 2 x --timeout) and was killed"), 2,
                 "%s", run.out);
    cr_expect_lt(run.seconds, 8.0);
    cr_expect_eq(complete_cases_in(save), 2);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* exit(0), abort() and a heap smash glibc catches: each case a crash. */
static void expect_crashes(const char *kind, const char *how) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin(kind, plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "2", "--cases", "4", "--jobs", "2", STAGE, "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "%s: stderr:\n%s", kind, run.err);
    cr_expect_eq(count_of(run.out, how), 4, "%s:\n%s", kind, run.out);
    cr_expect_eq(failures_of_kind(json, "crash"), 4);
    cr_expect_eq(complete_cases_in(save), 4);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(isolation, exit0_abort_and_heap_smash_are_crashes, .timeout = 60) {
    expect_crashes("exit0", "crash: the worker running this case died (exit status 0: the candidate ended the process)");
    expect_crashes("abort", "crash: the worker running this case died (signal 6): Aborted");
    expect_crashes("heap_smash", "crash: the worker running this case died (signal 6): Aborted");
}

/* 16 MiB leaked per call against a 100 MB limit: the worker that crosses
 * it fails that case as memory and is replaced; the campaign runs every
 * case. */
Test(isolation, a_leak_fails_the_case_that_crosses_the_limit, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("leak", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "24", "--jobs", "2", STAGE, "--rss-limit-mb", "100", "--max-failures", "100",
                    "--candidate", plugin, "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    int memory = count_of(run.out, "memory: the worker's resident memory reached ");
    cr_expect_geq(memory, 1, "%s", run.out);
    cr_expect_eq(count_of(run.out, "FAIL case "), memory, "a failure other than memory:\n%s", run.out);
    /* Each failure's detail and __REPRO line, and the summary's line for
     * the first case of the one signature (memory). */
    cr_expect_eq(count_of(run.out, "--rss-limit-mb 100"), 2 * memory + 1, "the __REPRO lines or details lack the limit:\n%s", run.out);
    cr_expect_eq(summary_number(json, "cases"), 24);
    cr_expect_eq(failures_of_kind(json, "memory"), memory);
    cr_expect_eq(complete_cases_in(save), memory);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* Memory that runs away inside one call: killed at twice the limit. */
Test(isolation, runaway_memory_is_killed_inside_the_call, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("balloon", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "2", "--jobs", "1", STAGE, "--rss-limit-mb", "64", "--timeout", "20",
                    "--candidate", plugin, "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "memory: the worker running this case grew past 128 MB of resident memory (2 x --rss-limit-mb)"), 2,
                 "%s", run.out);
    cr_expect_eq(failures_of_kind(json, "memory"), 2);
    cr_expect_eq(complete_cases_in(save), 2);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* A correct candidate that leaves a thread behind on every call: the
 * campaign passes and ends; no thread or worker outlives it. */
Test(isolation, threads_left_running_do_not_keep_the_campaign_alive, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("threads", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "30", "--jobs", "2", STAGE, "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 0, "%s\n%s", run.out, run.err);
    expect_text(run.out, "fuzz: 30 cases in ", "stdout");
    expect_text(run.out, "0 failures", "stdout");
    cr_expect_lt(run.seconds, 20.0);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* A worker killed from outside in the middle of a case: that case fails
 * as a crash, and a new worker runs the job's next case. */
Test(isolation, a_worker_killed_from_outside_is_reported_and_replaced, .timeout = 60) {
    char dir[64], save[512], json[512], plugin[512];
    temp_paths(dir, sizeof dir, save, json);
    hostile_plugin("hang", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "2", "--jobs", "1", STAGE, "--timeout", "30", "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", save, "--json", json, "--quiet", NULL};
    child_options opt = {.kill_workers = 2};
    child_run run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "crash: the worker running this case died (signal 9): Killed"), 2, "%s", run.out);
    expect_text(run.out, "FAIL case 0 ", "stdout");
    expect_text(run.out, "FAIL case 1 ", "stdout");
    cr_expect_lt(run.seconds, 10.0);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(isolation, limit_options_are_checked) {
    static const char *const bad[][2] = {
        {"--timeout", "0"}, {"--timeout", "abc"}, {"--timeout", "-1"}, {"--rss-limit-mb", "1.5"}, {"--rss-limit-mb", "0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int replay = 0; replay < 2; replay++) {
            char *argv[] = {replay ? "replay" : "fuzz", (char *)bad[i][0], (char *)bad[i][1], replay ? "/nonexistent" : "--quiet", NULL};
            child_run run = run_kvcmp(argv, NULL);
            cr_expect_eq(run.status, 2, "%s %s %s", argv[0], bad[i][0], bad[i][1]);
            expect_text(run.err, bad[i][0], "stderr");
            free_child_run(&run);
        }
    }
}

/* ---- replay ------------------------------------------------------------------ */

/* Three valid v41.rope_plain_insert cases under dir/cases. */
static void make_cases(const char *dir, char *cases, size_t size) {
    snprintf(cases, size, "%s/cases", dir);
    const char *variants[] = {"v41.rope_plain_insert/bf16", "v41.rope_plain_insert/fp8", "v41.rope_plain_insert/bf16"};
    for (int i = 0; i < 3; i++) {
        kvc_case c;
        support_make_case(variants[i], KVC_FAM_NORMAL, 4, i, &c);
        cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
        snprintf(c.source, sizeof c.source, "robust-test");
        char path[512], error[512];
        snprintf(path, sizeof path, "%s/case%d", cases, i);
        cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
        kvc_case_free(&c);
    }
}

static void expect_replay(const char *kind, const char *limit_option, const char *limit, const char *needle) {
    char dir[64], cases[256], plugin[512];
    support_temp_dir(dir, sizeof dir);
    make_cases(dir, cases, sizeof cases);
    hostile_plugin(kind, plugin, sizeof plugin);
    char *argv[] = {"replay", "--impl", plugin, cases, (char *)limit_option, (char *)limit, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "%s: stderr:\n%s", kind, run.err);
    cr_expect_eq(count_of(run.out, needle), 3, "%s:\n%s", kind, run.out);
    cr_expect_eq(count_of(run.out, "FAIL [robust-test] "), 3, "%s:\n%s", kind, run.out);
    cr_expect_eq(count_of(run.out, "kvcmp replay --impl "), 3, "%s:\n%s", kind, run.out);
    expect_text(run.out, "0 passed, 3 failed", "stdout");
    cr_expect_lt(run.seconds, 10.0, "%s: %.1f s", kind, run.seconds);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(replay_isolation, each_case_in_its_own_process, .timeout = 90) {
    expect_replay("hang", "--timeout", "0.3", "timeout: the candidate's process took longer than 0.3 s (--timeout)");
    expect_replay("abort", "--quiet", NULL, "crash: the candidate's process killed by signal 6 (Aborted)");
    expect_replay("exit0", "--quiet", NULL, "crash: the candidate's process exited with status 0");
    expect_replay("balloon", "--rss-limit-mb", "64", "memory: the candidate's process grew past 64 MB of resident memory (--rss-limit-mb)");
}

Test(replay_isolation, a_good_plugin_passes_in_its_own_process, .timeout = 60) {
    char dir[64], cases[256], plugin[512];
    support_temp_dir(dir, sizeof dir);
    make_cases(dir, cases, sizeof cases);
    hostile_plugin("threads", plugin, sizeof plugin);
    char *argv[] = {"replay", "--impl", plugin, cases, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 0, "%s\n%s", run.out, run.err);
    expect_text(run.out, "3 passed, 0 failed", "stdout");
    cr_expect_eq(count_of(run.out, "PASS [robust-test] "), 3, "%s", run.out);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* Interruption and saving: SIGHUP/SIGINT/SIGTERM keep the failures
 * found and write the summary marked as interrupted (exit 129/130/143), a
 * second signal stops at once, no worker outlives the campaign; cases
 * are renamed into place whole, never over an existing one, and every
 * write failure is an error naming the path and errno's reason, with a
 * non-zero exit (3) and nothing half-written left behind. */
#include "tests/robust/robust_support.h"

#include <limits.h>

#define STAGE "--stage", "v41.rope_plain_insert"

/* shrink_hang: every case fails at once, then hangs in the shrinker, so
 * that a signal finds each job's failure found but not yet saved. */
static child_run interrupted_campaign(const char *dir, const char *save, const char *json, child_options *opt) {
    char plugin[512], junit[512];
    hostile_plugin("shrink_hang", plugin, sizeof plugin);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "100", "--jobs", "2", STAGE, "--timeout", "30", "--shrink-seconds", "30",
                    "--candidate", plugin, "--max-failures-per-signature", "100", "--save", (char *)save, "--json", (char *)json,
                    "--junit", junit, "--quiet", NULL};
    return run_kvcmp(argv, opt);
}

/* The summary, the JSON and the JUnit of an interrupted campaign say so. */
static void expect_marked_interrupted(const char *dir, const char *json, const child_run *run, int status, const char *name) {
    cJSON *root = read_summary(json);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted")), "the summary is not marked interrupted");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(root, "signal");
    cr_expect(cJSON_IsString(sig) && strcmp(sig->valuestring, name) == 0, "signal %s", cJSON_IsString(sig) ? sig->valuestring : "?");
    const char *stopped = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "stopped_by"));
    cr_expect(stopped && strcmp(stopped, "interrupted") == 0, "stopped_by %s", stopped ? stopped : "(absent)");
    const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "verdict"));
    cr_expect(verdict && strcmp(verdict, "interrupted") == 0, "verdict %s", verdict ? verdict : "(absent)");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "exit_status")), status);
    cJSON_Delete(root);
    char junit[512], line[200];
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    char *xml = support_read_file(junit);
    cr_assert_not_null(xml, "no JUnit file after %s", name);
    expect_text(xml, "<failure type=\"interrupted\" message=\"interrupted by ", "junit");
    snprintf(line, sizeof line, "<property name=\"exit_status\" value=\"%d\"/>", status);
    expect_text(xml, line, "junit");
    free(xml);
    snprintf(line, sizeof line, "fuzz: stopped: interrupted by %s", name);
    expect_text(run->out, line, "stdout");
}

static void expect_interrupted(int signo, int status, const char *name) {
    char dir[64], save[512], json[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    child_options opt = {.signal_after = 1.0, .signals = {signo}};
    child_run run = interrupted_campaign(dir, save, json, &opt);
    cr_expect_eq(run.status, status, "%s: stdout:\n%s\nstderr:\n%s", name, run.out, run.err);
    expect_text(run.err, "stopping the workers and keeping the failures found so far", "stderr");
    expect_text(run.out, "fuzz: INTERRUPTED by ", "stdout");
    cr_expect_lt(run.seconds, 5.0, "%s took %.1f s to stop", name, run.seconds);
    /* Both jobs' first case failed and was being shrunk: both are saved. */
    cr_expect_eq(count_of(run.out, "FAIL case "), 2, "%s", run.out);
    cr_expect_eq(complete_cases_in(save), 2);
    int hidden;
    entries_in(save, &hidden);
    cr_expect_eq(hidden, 0, "a partial save was left behind");
    expect_marked_interrupted(dir, json, &run, status, name);
    cJSON *root = read_summary(json);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "failure_list")), 2);
    cJSON_Delete(root);
    cr_expect_eq(run.leftovers, 0, "a worker outlived the interrupted campaign");
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(interruption, sigint_keeps_the_failures_and_exits_130, .timeout = 60) { expect_interrupted(SIGINT, 130, "SIGINT"); }

Test(interruption, sigterm_keeps_the_failures_and_exits_143, .timeout = 60) { expect_interrupted(SIGTERM, 143, "SIGTERM"); }

Test(interruption, sighup_keeps_the_failures_and_exits_129, .timeout = 60) { expect_interrupted(SIGHUP, 129, "SIGHUP"); }

/* A signal while a Python candidate is still importing (kvcmp loads it
 * to learn its stages before any worker starts): the summary, JSON and
 * JUnit are written all the same, marked interrupted. */
Test(interruption, a_signal_during_the_candidates_start_up_is_reported, .timeout = 60) {
    if (access("/usr/bin/python3", X_OK) != 0 || access("python/kvcmp/_worker.py", R_OK) != 0 || access("build/libkvcmp.so", R_OK) != 0)
        cr_skip_test("needs /usr/bin/python3, python/kvcmp and build/libkvcmp.so (make lib) from the checkout's root");
    char lib[PATH_MAX], package[PATH_MAX];
    cr_assert_not_null(realpath("build/libkvcmp.so", lib));
    cr_assert_not_null(realpath("python", package));
    setenv("KVCMP_PYTHON", "/usr/bin/python3", 1);
    setenv("KVCMP_LIB", lib, 1);
    setenv("PYTHONPATH", package, 1);
    char dir[64], json[512], junit[512], script[512], candidate[600];
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    snprintf(script, sizeof script, "%s/slow_import.py", dir);
    support_write_text(script, "import time\ntime.sleep(20)\nimport kvcmp\n\ndef candidate(case):\n    return kvcmp.reference(case)\n");
    snprintf(candidate, sizeof candidate, "py:%s:candidate", script);
    child_options opt = {.signal_after = 1.0, .signals = {SIGTERM}};
    char *argv[] = {"fuzz", "--seconds", "60", "--jobs", "1", STAGE, "--candidate", candidate, "--json", json, "--junit", junit,
                    "--quiet", NULL};
    child_run run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 143, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    cr_expect_lt(run.seconds, 10.0, "the campaign took %.1f s to stop", run.seconds);
    expect_text(run.out, "fuzz: INTERRUPTED by ", "stdout");
    expect_marked_interrupted(dir, json, &run, 143, "SIGTERM");
    cr_expect_eq(summary_number(json, "cases"), 0);
    cr_expect_eq(run.leftovers, 0, "the candidate's interpreter outlived the campaign");
    free_child_run(&run);
    support_remove_tree(dir);
}

/* Two signals at once: the second stops at once, before any summary
 * (with both pending, the kernel runs one handler inside the other, so
 * either may be the second: 130 or 143). */
Test(interruption, a_second_signal_stops_at_once, .timeout = 60) {
    char dir[64], save[512], json[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    child_options opt = {.signal_after = 1.0, .signals = {SIGINT, SIGTERM}};
    child_run run = interrupted_campaign(dir, save, json, &opt);
    cr_expect(run.status == 130 || run.status == 143, "exit status %d; stdout:\n%s\nstderr:\n%s", run.status, run.out, run.err);
    cr_expect_not(support_file_exists(json), "a summary was written after the second signal");
    cr_expect(strstr(run.out, "INTERRUPTED") == NULL, "%s", run.out);
    cr_expect_lt(run.seconds, 5.0);
    cr_expect_eq(run.leftovers, 0, "the second signal left a worker running");
    free_child_run(&run);
    support_remove_tree(dir);
}

/* ---- saving ------------------------------------------------------------------- */

static child_run crashing_campaign(const char *seed, const char *save, const char *json, const child_options *opt) {
    char plugin[512];
    hostile_plugin("abort", plugin, sizeof plugin);
    char *argv[] = {"fuzz", "--seed", (char *)seed, "--cases", "2", "--jobs", "2", STAGE, "--candidate", plugin,
                    "--max-failures-per-signature", "100", "--save", (char *)save, "--json", (char *)json, "--quiet", NULL};
    return run_kvcmp(argv, opt);
}

/* Two campaigns with one seed and one --save: four cases, none
 * overwritten or mixed, the second run's named NAME-2. */
Test(saving, campaigns_never_overwrite_each_others_cases, .timeout = 60) {
    char dir[64], save[512], json[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    for (int i = 0; i < 2; i++) {
        child_run run = crashing_campaign("5", save, json, NULL);
        cr_expect_eq(run.status, 1, "%s", run.err);
        /* Each saved path is printed after "saved to", then its replay __REPRO. */
        if (i == 1)
            cr_expect_eq(count_of(run.out, "-2\n  __REPRO: /"), 2, "the second campaign's cases are not NAME-2:\n%s", run.out);
        free_child_run(&run);
    }
    int hidden;
    cr_expect_eq(entries_in(save, &hidden), 4);
    cr_expect_eq(hidden, 0);
    cr_expect_eq(complete_cases_in(save), 4);
    support_remove_tree(dir);
}

Test(saving, a_save_directory_under_a_file_is_an_error, .timeout = 60) {
    char dir[64], save[512], json[512], file[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/file", dir);
    support_write_text(file, "not a directory");
    snprintf(save, sizeof save, "%s/file/saved", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    child_run run = crashing_campaign("1", save, json, NULL);
    cr_expect_eq(run.status, 3, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.err, "was not saved: cannot create "), 2, "%s", run.err);
    expect_text(run.err, "file/saved: Not a directory", "stderr");
    expect_text(run.err, "check that --save", "stderr");
    cr_expect_eq(entries_in(dir, NULL), 2, "something besides the file and the summary was written");
    free_child_run(&run);
    support_remove_tree(dir);
}

/* A file-size limit of 4 KiB: the tensors cannot be written (EFBIG, as
 * a full disk would be ENOSPC); neither a half case nor a half summary
 * stays. */
Test(saving, a_full_disk_leaves_nothing_half_written, .timeout = 60) {
#ifdef KVC_COVERAGE
    /* The limit would cut kvcmp's own .gcda files short as well and spoil
     * the coverage data; the sanitized run of make test runs this test. */
    cr_skip_test("the file-size limit would truncate the coverage counters");
#endif
    char dir[64], save[512], json[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    child_options opt = {.file_size_limit = 4096};
    child_run run = crashing_campaign("1", save, json, &opt);
    cr_expect_eq(run.status, 3, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.err, ": File too large (check that --save"), 2, "%s", run.err);
    cr_expect_eq(entries_in(save, NULL), 0, "a half-written case stayed in %s", save);
    free_child_run(&run);
    support_remove_tree(dir);
    /* The summary alone over the limit: 512 bytes cannot hold it. */
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    opt.file_size_limit = 512;
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "20", "--candidate", "ref", "--json", json, "--quiet", NULL};
    run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 3, "stderr:\n%s", run.err);
    char message[600];
    snprintf(message, sizeof message, "kvcmp fuzz: cannot write %s: File too large", json);
    expect_text(run.err, message, "stderr");
    cr_expect_not(support_file_exists(json), "a half summary was left");
    cr_expect_eq(entries_in(dir, NULL), 0, "the summary's temporary file was left behind");
    free_child_run(&run);
    support_remove_tree(dir);
}

Test(saving, json_naming_a_directory_is_an_error, .timeout = 60) {
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "3", "--candidate", "ref", "--json", dir, "--quiet", NULL};
    child_run run = run_kvcmp(argv, NULL);
    /* Refused before the campaign runs, as a bad option. */
    cr_expect_eq(run.status, 2, "stderr:\n%s", run.err);
    expect_text(run.err, "--json: ", "stderr");
    expect_text(run.err, "is a folder, not a file", "stderr");
    cr_expect_eq(entries_in(dir, NULL), 0, "something was written into %s", dir);
    free_child_run(&run);
    support_remove_tree(dir);
}

/* The library call: a taken name gets the next free suffix, and the
 * temporary directory of a killed writer is removed by pid. */
Test(saving, case_save_new_and_partial_cleanup) {
    char dir[64], saved[512], error[512], path[600];
    support_temp_dir(dir, sizeof dir);
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    for (int i = 1; i <= 3; i++) {
        cr_assert_eq(kvc_case_save_new(dir, "x", &c, saved, sizeof saved, error, sizeof error), 0, "%s", error);
        char want[600];
        if (i == 1) snprintf(want, sizeof want, "%s/x", dir);
        else snprintf(want, sizeof want, "%s/x-%d", dir, i);
        cr_expect_str_eq(saved, want);
    }
    snprintf(path, sizeof path, "%s/.y.partial-4242", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/.y.partial-4242/case.json", dir);
    support_write_text(path, "{");
    snprintf(path, sizeof path, "%s/.z.partial-42", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    kvc_case_remove_partial_saves(dir, 4242);
    snprintf(path, sizeof path, "%s/.y.partial-4242", dir);
    cr_expect_not(support_file_exists(path));
    snprintf(path, sizeof path, "%s/.z.partial-42", dir);
    cr_expect(support_file_exists(path), "another process's partial save was removed");
    kvc_case_remove_partial_saves("/nonexistent/kvcmp", 1);
    /* Under a file: the error names the path and the reason. */
    snprintf(path, sizeof path, "%s/x/case.json/deeper", dir);
    cr_expect_eq(kvc_case_save_new(path, "x", &c, saved, sizeof saved, error, sizeof error), -1);
    cr_expect(strstr(error, "Not a directory") != NULL, "%s", error);
    kvc_case_free(&c);
    support_remove_tree(dir);
}

/* kvc_case_save (kvcmp gen, report precision): a new directory appears
 * whole or not at all; an existing case is replaced whole. */
Test(saving, case_save_writes_a_new_directory_whole_or_not_at_all) {
    char dir[64], path[600], error[512];
    support_temp_dir(dir, sizeof dir);
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    /* A tensor whose name is not a plain file name (it holds a '/'): refused, nothing created. */
    kvc_array extra;
    int64_t shape[1] = {2};
    cr_assert_eq(kvc_array_alloc(&extra, KVC_DT_F4, 1, shape), 0);
    cr_assert_eq(kvc_case_put(&c, "no/such", &extra), 0);
    snprintf(path, sizeof path, "%s/broken", dir);
    cr_expect_eq(kvc_case_save(path, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "tensor name 'no/such' is not a plain file name") && strstr(error, "rename the tensor"), "%s", error);
    cr_expect_eq(entries_in(dir, NULL), 0, "a half-written case stayed in %s", dir);
    kvc_case_free(&c);
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    /* A bare name in the current directory, then the same again in place. */
    cr_assert_eq(chdir(dir), 0);
    cr_expect_eq(kvc_case_save("bare/", &c, error, sizeof error), 0, "%s", error);
    cr_expect_eq(kvc_case_save("bare", &c, error, sizeof error), 0, "%s", error);
    kvc_case loaded;
    cr_expect_eq(kvc_case_load("bare", &loaded, error, sizeof error), 0, "%s", error);
    kvc_case_free(&loaded);
    int hidden;
    cr_expect_eq(entries_in(".", &hidden), 1);
    cr_expect_eq(hidden, 0);
    kvc_case_free(&c);
    support_remove_tree(dir);
}

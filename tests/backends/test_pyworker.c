/* Python candidates through the campaign engine (harness/backends/pyworker.c
 * and python/kvcmp/_worker.py), from C: a correct candidate passes; an
 * exception, a dead interpreter, a lost device and a wrong output each
 * fail under a signature of their own; what cannot be loaded is refused
 * with exit status 2; a saved case replays through the same candidate.
 * The workers run Debian's /usr/bin/python3 over this checkout's package
 * (tests/python/test_engine.py covers the rest from Python). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>

#include "tests/cli/cli_support.h"

/* The worker interpreter and the package it imports. */
static void python_worker_environment(void) {
    if (access("/usr/bin/python3", X_OK) != 0 || access("python/kvcmp/_worker.py", R_OK) != 0 ||
        access("build/libkvcmp.so", R_OK) != 0)
        cr_skip_test("needs /usr/bin/python3, python/kvcmp and build/libkvcmp.so (make lib) from the checkout's root");
    char lib[PATH_MAX], package[PATH_MAX];
    cr_assert_not_null(realpath("build/libkvcmp.so", lib));
    cr_assert_not_null(realpath("python", package));
    setenv("KVCMP_PYTHON", "/usr/bin/python3", 1);
    setenv("KVCMP_LIB", lib, 1);
    setenv("PYTHONPATH", package, 1);
}

/* The last word of the line that starts at p (a REPRO line's case directory). */
static void last_word_of_line(const char *p, char *out, size_t size) {
    size_t length = strcspn(p, "\n");
    size_t start = length;
    while (start > 0 && p[start - 1] != ' ') start--;
    snprintf(out, size, "%.*s", (int)(length - start), p + start);
}

static captured_run fuzz_python(const char *candidate, const char *stage, const char *cases, const char *out) {
    char *argv[] = {"--candidate", (char *)candidate, "--stage", (char *)stage, "--cases", (char *)cases, "--jobs", "1", "--seed", "3",
                    "--out", (char *)out, "--shrink-seconds", "0.5", "--timeout", "30", "--quiet"};
    return run_fuzz(ARGC(argv), argv);
}

/* A candidate whose import outlasts --seconds: its start-up counts
 * against the budget, no case runs, and a campaign that compared nothing
 * is no verdict (exit status 4), never a pass. */
Test(pyworker, a_start_up_longer_than_seconds_is_no_verdict, .timeout = 120) {
    python_worker_environment();
    char dir[64], script[128], candidate[160], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/slow.py", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    support_write_text(script, "import time\ntime.sleep(2)\nimport kvcmp\n\ndef candidate(case):\n    return kvcmp.reference(case)\n");
    snprintf(candidate, sizeof candidate, "py:%s:candidate", script);
    char *argv[] = {"--candidate", candidate, "--stage", "v41.rope_plain_insert", "--seconds", "1", "--jobs", "1", "--json", json,
                    "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 4, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "fuzz: 0 cases in ", "stdout");
    expect_contains(run.out, "fuzz: NO VERDICT (exit status 4): no case ran within --seconds 1: the candidate's start-up took all of it",
                    "stdout");
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s", text);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(root, "startup_seconds")), "%s", text);
    cr_expect_geq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "seconds")), 2.0, "the import's 2 s are not counted: %s", text);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "verdict")), "no-verdict");
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(pyworker, a_correct_candidate_passes_every_stage, .timeout = 120) {
    python_worker_environment();
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    captured_run run = fuzz_python("py:tests/python/candidates.py:correct", "v4,v41", "40", dir);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "fuzz: 40 cases in ", "stdout");
    expect_contains(run.out, ": 0 failures", "stdout");
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(pyworker, each_way_to_fail_is_a_signature_and_a_saved_case_that_replays, .timeout = 180) {
    python_worker_environment();
    char dir[64], marks[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(marks, sizeof marks, "%s/marks", dir);
    cr_assert_eq(mkdir(marks, 0777), 0);
    setenv("KVCMP_TEST_MARKS", marks, 1);
    static const struct {
        const char *candidate, *signature, *cases;
    } cases[] = {
        {"py:tests/python/candidates.py:raises", "v41.rope_quant_insert exception: ZeroDivisionError", "12"},
        {"py:tests/python/hostile.py:aborts", "v41.rope_quant_insert crash: signal 6", "12"},
        {"py:tests/python/hostile.py:underscore_exits_0", "v41.rope_quant_insert crash: exit status 0", "12"},
        {"py:tests/python/hostile.py:returns_string", "v41.rope_quant_insert exception: wrong output", "12"},
        /* A batch writing position 5 faults: the first such case of seed 3 is past 12 (case 66 with the generator's current draws). */
        {"py:tests/python/hostile.py:sticky_device_error", "v41.rope_quant_insert device-lost: RuntimeError", "80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[128];
        snprintf(out, sizeof out, "%s/out%zu", dir, i);
        captured_run run = fuzz_python(cases[i].candidate, "v41.rope_quant", cases[i].cases, out);
        cr_expect_eq(run.status, 1, "%s: exit %d\nstdout:\n%s\nstderr:\n%s", cases[i].candidate, run.status, run.out, run.err);
        char line[256];
        snprintf(line, sizeof line, "  signature: %s", cases[i].signature);
        expect_contains(run.out, line, cases[i].candidate);
        char done[64];
        snprintf(done, sizeof done, "fuzz: %s cases in ", cases[i].cases);
        expect_contains(run.out, done, cases[i].candidate);
        /* The smallest saved case replays through the same candidate and fails again. */
        const char *saved = strstr(run.out, "/triton-cache KVCMP_PYTHON=/usr/bin/python3 build/kvcmp replay --impl ");
        cr_expect_not_null(saved, "%s: no replay line:\n%s", cases[i].candidate, run.out);
        if (saved) {
            char dir_of_case[PATH_MAX];
            last_word_of_line(saved, dir_of_case, sizeof dir_of_case);
            char *replay_argv[] = {"--impl", (char *)cases[i].candidate, "--quiet", dir_of_case};
            /* (The one-shot hostile candidates misbehave once in all: their replay passes.) */
            if (strstr(cases[i].candidate, "hostile.py:sticky") || strstr(cases[i].candidate, "raises")) {
                captured_run replay = support_capture(kvc_cmd_replay, ARGC(replay_argv), replay_argv);
                cr_expect_eq(replay.status, 1, "%s: replay of %s exit %d:\n%s%s", cases[i].candidate, dir_of_case, replay.status,
                             replay.out, replay.err);
                support_free_run(&replay);
            }
        }
        support_free_run(&run);
    }
    unsetenv("KVCMP_TEST_MARKS");
    support_remove_tree(dir);
}

/* JIT-compiled kernels are kept for the REPRO lines: unless the user
 * set TRITON_CACHE_DIR, a py: campaign's workers compile into
 * OUT/triton-cache, the start-up line says so, and every REPRO line
 * carries the variable (shell-quoted); a cache the user chose is kept,
 * and the caller's environment is left as it was. */
Test(pyworker, workers_and_repro_lines_share_a_triton_cache, .timeout = 120) {
    python_worker_environment();
    char dir[64], out[128], script[128], candidate[160];
    support_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out dir", dir);
    snprintf(script, sizeof script, "%s/cache.py", dir);
    support_write_text(script, "import os\n\ndef candidate(case):\n"
                               "    raise RuntimeError('cache=' + os.environ.get('TRITON_CACHE_DIR', 'unset'))\n\n"
                               "candidate.stages = ['v41.rope_plain_insert']\n");
    snprintf(candidate, sizeof candidate, "py:%s:candidate", script);
    unsetenv("TRITON_CACHE_DIR");
    char *argv[] = {"--candidate", candidate, "--stage", "v41.rope_plain_insert", "--cases", "4", "--jobs", "1", "--seed", "3", "--out", out,
                    "--max-failures", "1",
                    "--shrink-seconds", "0.5", "--timeout", "30"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    char want[400];
    snprintf(want, sizeof want, "cache=%s/triton-cache", out);
    expect_contains(run.out, want, "stdout (the worker's environment)");
    snprintf(want, sizeof want, "kvcmp fuzz: compiled Triton kernels are kept in %s/triton-cache (TRITON_CACHE_DIR, under --out)", out);
    expect_contains(run.err, want, "stderr");
    snprintf(want, sizeof want, "__REPRO: TRITON_CACHE_DIR='%s/triton-cache' KVCMP_PYTHON=/usr/bin/python3 ", out);
    expect_contains(run.out, want, "stdout (REPRO lines)");
    cr_expect_null(getenv("TRITON_CACHE_DIR"), "the campaign left TRITON_CACHE_DIR set in its caller");
    support_free_run(&run);
    /* The user's own cache: the workers and the REPRO lines use it. */
    setenv("TRITON_CACHE_DIR", "/tmp/kvcmp-users-cache", 1);
    run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "cache=/tmp/kvcmp-users-cache", "stdout (the worker's environment)");
    expect_contains(run.out, "__REPRO: TRITON_CACHE_DIR=/tmp/kvcmp-users-cache KVCMP_PYTHON=/usr/bin/python3 ", "stdout (REPRO lines)");
    cr_expect_str_eq(getenv("TRITON_CACHE_DIR"), "/tmp/kvcmp-users-cache");
    unsetenv("TRITON_CACHE_DIR");
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(pyworker, what_cannot_be_loaded_is_refused, .timeout = 120) {
    python_worker_environment();
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    static const struct {
        const char *candidate, *message;
    } refused[] = {
        {"py:nocolon", "py:FILE.py:FUNCTION or py:MODULE:FUNCTION"},
        {"py:tests/python/hostile.py:nothing", "has no attribute nothing"},
        {"py:tests/python/no_such_file.py:f", "does not exist"},
        {"py:tests/python/hostile.py:offers_nothing", "offers no stage"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        captured_run run = fuzz_python(refused[i].candidate, "v41", "5", dir);
        cr_expect_eq(run.status, 2, "%s: exit %d", refused[i].candidate, run.status);
        expect_contains(run.err, refused[i].message, refused[i].candidate);
        support_free_run(&run);
    }
    setenv("KVCMP_PYTHON", "/nonexistent/python3", 1);
    captured_run run = fuzz_python("py:tests/python/candidates.py:correct", "v41", "5", dir);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "cannot run the Python interpreter '/nonexistent/python3'", "stderr");
    support_free_run(&run);
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));) entries += e->d_name[0] != '.';
    if (d) closedir(d);
    cr_expect_eq(entries, 0, "a refused campaign wrote into its --out folder %s", dir);
    support_remove_tree(dir);
}

/* A case every implementation must reject (no expected outputs): a
 * rejection passes it; an exception, a crash or a lost device is no
 * rejection and fails it, whatever the reference does. */
Test(pyworker, a_fault_is_never_an_expected_rejection, .timeout = 120) {
    python_worker_environment();
    char dir[64], script[128], cases[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/faults.py", dir);
    snprintf(cases, sizeof cases, "%s/cases", dir);
    support_write_text(script,
                       "import os\n"
                       "import kvcmp\n\n"
                       "def rejects(case):\n    raise kvcmp.Rejected('slot out of range')\n\n"
                       "def device_lost(case):\n    raise RuntimeError('CUDA error: an illegal memory access was encountered')\n\n"
                       "def raises(case):\n    raise ZeroDivisionError('division by zero')\n\n"
                       "def aborts(case):\n    os.abort()\n");
    kvc_case c;
    char error[512], case_dir[256];
    support_make_index_error_case("v41.rope_plain_insert/bf16", 6, "slot_mapping", "kv_cache", &c);
    snprintf(case_dir, sizeof case_dir, "%s/must-reject", cases);
    cr_assert_eq(kvc_case_save(case_dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    static const struct {
        const char *function;
        int status;
        const char *needle;
    } kinds[] = {
        {"rejects", 0, "rejected as expected, nothing written"},
        {"device_lost", 1, "device-lost instead of a rejection"},
        {"raises", 1, "candidate-error instead of a rejection"},
        {"aborts", 1, "crashed instead of a rejection"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        char candidate[200];
        snprintf(candidate, sizeof candidate, "py:%s:%s", script, kinds[i].function);
        char *argv[] = {"--impl", candidate, "--timeout", "30", cases};
        captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
        cr_expect_eq(run.status, kinds[i].status, "%s: stdout:\n%s\nstderr:\n%s", kinds[i].function, run.out, run.err);
        expect_contains(run.out, kinds[i].needle, kinds[i].function);
        support_free_run(&run);
    }
    support_remove_tree(dir);
}

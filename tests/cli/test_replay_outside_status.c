/* The outside runner's status (SPEC.md section 10) as kvcmp replay
 * --outputs and kvcmp report parity --outputs judge it, and the cases
 * kvcmp gen writes (non-finite eps included) as every reader reads them.
 *
 * The outside runner here is a stand-in written in C: it copies the
 * reference's NAME.out files as its outputs (a correct kernel), says
 * "rejected" on the cases whose case.json says must_reject, and crashes or
 * dies on the cases a test picks. */
#include "tests/cli/cli_support.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>

#include "harness/report/parity.h"

static void write_status(const char *dir, const char *status, const char *message) {
    char path[1200], text[400];
    snprintf(path, sizeof path, "%s/status.json", dir);
    snprintf(text, sizeof text, "{\"status\": \"%s\", \"message\": \"%s\"}\n", status, message);
    support_write_text(path, text);
}

/* kvcmp gen's cases into root/cases. */
static void gen_cases(const char *root, const char *seed, const char *cases, const char *invalid_rate, char *out, size_t size) {
    snprintf(out, size, "%s/cases", root);
    char *argv[] = {"--seed", (char *)seed, "--cases", (char *)cases, "--invalid-rate", (char *)invalid_rate, "--out", out};
    captured_run run = support_capture(kvc_cmd_gen, ARGC(argv), argv);
    cr_assert_eq(run.status, 0, "gen: %s", run.err);
    support_free_run(&run);
}

static int must_reject(const char *case_dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/case.json", case_dir);
    char *text = support_read_file(path);
    int yes = strstr(text, "\"must_reject\":\ttrue") != NULL || strstr(text, "\"must_reject\": true") != NULL ||
              strstr(text, "\"must_reject\":true") != NULL;
    free(text);
    return yes;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The correct outside runner on case_dir: the reference's outputs (its
 * NAME.out files) as OUTPUTS/CASE/NAME.npy and "ran", or "rejected". */
static void run_correctly(const char *case_dir, const char *outputs) {
    char out[1200];
    snprintf(out, sizeof out, "%s/%s", outputs, base_name(case_dir));
    mkdir(outputs, 0777);
    mkdir(out, 0777);
    if (must_reject(case_dir)) { write_status(out, "rejected", "refused by the stand-in"); return; }
    DIR *d = opendir(case_dir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 8 || strcmp(e->d_name + n - 8, ".out.npy") != 0) continue;
        char from[1400], to[1400], error[512];
        snprintf(from, sizeof from, "%s/%s", case_dir, e->d_name);
        snprintf(to, sizeof to, "%s/%.*s.npy", out, (int)(n - 8), e->d_name);
        kvc_array a;
        cr_assert_eq(kvc_npy_read(from, &a, error, sizeof error), 0, "%s", error);
        cr_assert_eq(kvc_npy_write(to, &a, error, sizeof error), 0, "%s", error);
        kvc_array_free(&a);
    }
    closedir(d);
    write_status(out, "ran", "");
}

static captured_run replay_outputs(const char *outputs, const char *path) {
    char *argv[] = {"--outputs", (char *)outputs, (char *)path};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

static int count_lines(const char *text, const char *prefix) {
    int n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) n++;
    return n;
}

/* The FAIL line of the case directory dir in replay's output, or NULL. */
static const char *fail_line(const char *text, const char *dir) {
    char needle[1300];
    snprintf(needle, sizeof needle, "FAIL [");
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) {
        const char *end = strchr(p, '\n'), *at = strstr(p, dir);
        if (at && (!end || at < end)) return p;
    }
    return NULL;
}

/* The ISSUE's case: an outside runner that crashes on one must-reject
 * case and dies (no status) on another; both fail, nothing else does. */
Test(replay_outside_status, crash_and_missing_status_on_must_reject_cases_fail, .timeout = 120) {
    char root[128], cases[256], outputs[256];
    support_temp_dir(root, sizeof root);
    gen_cases(root, "5", "80", "1000", cases, sizeof cases);
    snprintf(outputs, sizeof outputs, "%s/out", root);
    char **dirs;
    int n = kvc_find_cases(cases, &dirs), crashed = -1, silent = -1, ran = 0;
    cr_assert_gt(n, 10);
    for (int i = 0; i < n; i++) {
        if (must_reject(dirs[i]) && crashed < 0) crashed = i;
        else if (must_reject(dirs[i]) && silent < 0) silent = i;
        else if (!must_reject(dirs[i])) ran++;
        if (i == silent) continue;   /* died: wrote nothing at all */
        run_correctly(dirs[i], outputs);
    }
    cr_assert(crashed >= 0 && silent >= 0 && ran > 0, "seed 5 gave too few must-reject or valid cases");
    char crashed_out[1200];
    snprintf(crashed_out, sizeof crashed_out, "%s/%s", outputs, base_name(dirs[crashed]));
    write_status(crashed_out, "crashed", "RuntimeError: CUDA error: an illegal memory access");
    captured_run run = replay_outputs(outputs, cases);
    cr_expect_eq(run.status, 1, "%s", run.out);
    char counts[96];
    snprintf(counts, sizeof counts, "%d passed, 2 failed, 0 skipped", n - 2);
    expect_contains(run.out, counts, "stdout");
    cr_expect_eq(count_lines(run.out, "FAIL ["), 2, "%s", run.out);
    const char *line = fail_line(run.out, dirs[crashed]);
    cr_expect_not_null(line, "no FAIL line for the crashed case:\n%s", run.out);
    if (line) {
        cr_expect_eq(strncmp(strstr(line, ": ") + 2, "the outside runner crashed: RuntimeError: CUDA error", 52), 0, "%s", line);
        cr_expect(strstr(line, "the reference rejects the case") != NULL, "%s", line);
    }
    line = fail_line(run.out, dirs[silent]);
    cr_expect_not_null(line, "no FAIL line for the case without status:\n%s", run.out);
    if (line) cr_expect(strstr(line, "no outside status: ") != NULL && strstr(line, "/status.json is missing") != NULL, "%s", line);
    support_free_run(&run);
    /* Without the two, the same run passes. */
    write_status(crashed_out, "rejected", "");
    run_correctly(dirs[silent], outputs);
    run = replay_outputs(outputs, cases);
    cr_expect_eq(run.status, 0, "%s", run.out);
    support_free_run(&run);
    kvc_free_case_list(dirs, n);
    support_remove_tree(root);
}

/* Every status against both reference verdicts. */
Test(replay_outside_status, each_status_against_the_reference) {
    char root[128], good[512], bad[600], outputs[512], good_out[700], bad_out[700], error[512];
    support_temp_dir(root, sizeof root);
    save_case(root, "good", "v41.save_compress_norm/r1", "status test", 0, good, sizeof good);
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 3, "slot_mapping", "kv_cache", &c);
    snprintf(bad, sizeof bad, "%s/bad", root);
    cr_assert_eq(kvc_case_save(bad, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    snprintf(outputs, sizeof outputs, "%s/out", root);
    run_correctly(good, outputs);
    snprintf(good_out, sizeof good_out, "%s/good", outputs);
    snprintf(bad_out, sizeof bad_out, "%s/bad", outputs);
    mkdir(bad_out, 0777);
    static const struct {
        const char *good_status, *bad_status;
        int good_fails, bad_fails;
        const char *good_says, *bad_says;
    } rows[] = {
        {"ran", "rejected", 0, 0, "bit-exact", "and by the outside runner: m"},
        {"crashed", "crashed", 1, 1, "the outside runner crashed: m; the reference runs the case",
         "the outside runner crashed: m; the reference rejects the case (index-out-of-range"},
        {"rejected", "ran", 1, 1, "the outside runner rejected a case the reference runs: m",
         "the outside runner ran the case, but the reference rejects it (index-out-of-range"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        write_status(good_out, rows[i].good_status, "m");
        write_status(bad_out, rows[i].bad_status, "m");
        captured_run run = replay_outputs(outputs, good);
        cr_expect_eq(run.status, rows[i].good_fails, "%s: %s", rows[i].good_status, run.out);
        expect_contains(run.out, rows[i].good_says, "stdout");
        support_free_run(&run);
        run = replay_outputs(outputs, bad);
        cr_expect_eq(run.status, rows[i].bad_fails, "%s: %s", rows[i].bad_status, run.out);
        expect_contains(run.out, rows[i].bad_says, "stdout");
        support_free_run(&run);
    }
    /* Malformed status files name the file and the field. */
    static const struct {
        const char *text, *says;
    } broken[] = {
        {"{\"status\": \"ok\"}", "\"status\" must be \"ran\", \"rejected\" or \"crashed\", found \"ok\""},
        {"{\"message\": \"x\"}", "\"status\" must be \"ran\", \"rejected\" or \"crashed\", found nothing"},
        {"{\"status\": 1}", "\"status\" must be \"ran\", \"rejected\" or \"crashed\", found another type"},
        {"{\"status\": \"ran\", \"message\": 3}", "\"message\" must be a string"},
        {"[1, 2", "not a JSON object"},
    };
    char path[800];
    snprintf(path, sizeof path, "%s/status.json", good_out);
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        support_write_text(path, broken[i].text);
        captured_run run = replay_outputs(outputs, good);
        cr_expect_eq(run.status, 1, "%s accepted: %s", broken[i].text, run.out);
        expect_contains(run.out, "cannot read the outside outputs: ", "stdout");
        expect_contains(run.out, "/out/good/status.json: ", "stdout");
        expect_contains(run.out, broken[i].says, "stdout");
        support_free_run(&run);
    }
    support_remove_tree(root);
}

/* A FAIL line of an outside difference names its causes, as report
 * parity does: one bf16 step on a latent value is last-bit. */
Test(replay_outside_status, fail_lines_name_the_causes) {
    char root[128], good[512], outputs[512], path[800], error[512];
    support_temp_dir(root, sizeof root);
    save_case(root, "good", "v41.save_compress_norm/r1", "status test", 0, good, sizeof good);
    snprintf(outputs, sizeof outputs, "%s/out", root);
    run_correctly(good, outputs);
    snprintf(path, sizeof path, "%s/good/latent.npy", outputs);
    kvc_array a;
    cr_assert_eq(kvc_npy_read(path, &a, error, sizeof error), 0, "%s", error);
    uint16_t *latent = a.data;
    int64_t at = -1;
    for (int64_t i = 0; i < a.count && at < 0; i++)
        if ((latent[i] & 0x7F80) != 0x7F80 && (latent[i] & 0x7FFF) != 0 && (latent[i] & 0x7F) != 0x7F) at = i;
    cr_assert_geq(at, 0, "no finite non-zero latent to move by one step");
    latent[at]++;   /* one bf16 step away from zero */
    cr_assert_eq(kvc_npy_write(path, &a, error, sizeof error), 0);
    kvc_array_free(&a);
    captured_run run = replay_outputs(outputs, good);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "latent value x1 (max 1 step)", "stdout");
    expect_contains(run.out, "; causes: last-bit x1", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* ---- non-finite params: every reader reads what gen writes ----------- */

Test(case_io_nonfinite, eps_round_trips_and_bad_strings_are_named) {
    char root[128], dir[512], error[512];
    support_temp_dir(root, sizeof root);
    const float values[] = {NAN, -NAN, INFINITY, -INFINITY, 0.25f};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        kvc_case c;
        support_make_case("v41.save_compress_norm/r1", KVC_FAM_NORMAL, 4, 0, &c);
        c.eps = values[i];
        snprintf(dir, sizeof dir, "%s/c%zu", root, i);
        cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
        kvc_case_free(&c);
        cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), 0, "eps %g: %s", (double)values[i], error);
        cr_expect_eq(isnan(c.eps) != 0, isnan(values[i]) != 0, "eps %g read as %g", (double)values[i], (double)c.eps);
        cr_expect_eq(signbit(c.eps) != 0, signbit(values[i]) != 0, "eps %g read as %g", (double)values[i], (double)c.eps);
        if (!isnan(values[i])) cr_expect_eq(c.eps, values[i]);
        kvc_case_free(&c);
        char path[600];
        snprintf(path, sizeof path, "%s/case.json", dir);
        char *text = support_read_file(path);
        cr_expect(strstr(text, "null") == NULL, "case.json holds null:\n%s", text);
        cJSON *root_json = cJSON_Parse(text);
        cr_assert_not_null(root_json, "case.json is not JSON:\n%s", text);
        const cJSON *eps = cJSON_GetObjectItem(cJSON_GetObjectItem(root_json, "params"), "eps");
        cr_expect(isfinite(values[i]) ? cJSON_IsNumber(eps) : cJSON_IsString(eps), "eps %g written as %s", (double)values[i], text);
        cJSON_Delete(root_json);
        free(text);
    }
    /* Strings other than the four, and null, are refused naming params.eps. */
    static const char *const bad[] = {"\"NaN\"", "\"infinity\"", "\"0.5\"", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[600], text[300];
        snprintf(path, sizeof path, "%s/c0/case.json", root);
        snprintf(text, sizeof text,
                 "{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.save_compress_norm\", \"params\": {\"compress_ratio\": 1, "
                 "\"head_dim\": 512, \"eps\": %s}, \"source\": \"t\"}\n", bad[i]);
        support_write_text(path, text);
        kvc_case c;
        snprintf(dir, sizeof dir, "%s/c0", root);
        cr_expect_neq(kvc_case_load(dir, &c, error, sizeof error), 0, "eps %s accepted", bad[i]);
        cr_expect(strstr(error, "params.eps must be a number") != NULL, "eps %s: %s", bad[i], error);
        cr_expect(strstr(error, "\"nan\"") != NULL, "eps %s: the error does not say how to write a NaN: %s", bad[i], error);
    }
    support_remove_tree(root);
}

/* gen with every case invalid: some eps are NaN; every case loads and
 * replays (as the must-reject case it is), and parity reads them all. */
Test(case_io_nonfinite, every_case_gen_writes_loads_replays_and_parities, .timeout = 180) {
    char root[128], cases[256], out[256];
    support_temp_dir(root, sizeof root);
    gen_cases(root, "3", "400", "1000", cases, sizeof cases);
    char **dirs;
    int n = kvc_find_cases(cases, &dirs), nan_eps = 0;
    cr_assert_gt(n, 300);
    for (int i = 0; i < n; i++) {
        kvc_case c;
        char error[512];
        cr_assert_eq(kvc_case_load(dirs[i], &c, error, sizeof error), 0, "%s", error);
        nan_eps += isnan(c.eps) != 0;
        kvc_case_free(&c);
    }
    kvc_free_case_list(dirs, n);
    cr_assert_gt(nan_eps, 0, "no NaN eps among %d invalid cases: pick another seed", n);
    char *argv[] = {"--quiet", cases};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s", run.out);
    char counts[96];
    snprintf(counts, sizeof counts, "%d passed, 0 failed, 0 skipped", n);
    expect_contains(run.out, counts, "stdout");
    support_free_run(&run);
    snprintf(out, sizeof out, "%s/report", root);
    char *parity[] = {"parity", "--out", out, cases};
    run = support_capture(kvc_cmd_report, ARGC(parity), parity);
    cr_expect_eq(run.status, 0, "%s", run.err);
    cr_expect_str_empty(run.err, "parity complained");
    snprintf(counts, sizeof counts, "parity: %d cases, %d identical to the reference", n, n);
    expect_contains(run.out, counts, "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* ---- report parity --outputs ------------------------------------------ */

/* Stage-error differences of a parity report; *named when an example's
 * text holds `needle`. */
static int64_t stage_errors(const kvc_parity_report *r, const char *needle, int *named) {
    int64_t count = 0;
    *named = 0;
    for (int g = 0; g < r->num_groups; g++) {
        count += r->groups[g].causes[KVC_CAUSE_STAGE_ERROR];
        *named |= strstr(r->groups[g].example[KVC_CAUSE_STAGE_ERROR], needle) != NULL;
    }
    return count;
}

Test(report_parity_outputs, outside_runs_are_the_other_side, .timeout = 120) {
    char root[128], cases[256], outputs[256], report_dir[256];
    support_temp_dir(root, sizeof root);
    gen_cases(root, "5", "40", "300", cases, sizeof cases);
    snprintf(outputs, sizeof outputs, "%s/out", root);
    snprintf(report_dir, sizeof report_dir, "%s/report", root);
    char **dirs;
    int n = kvc_find_cases(cases, &dirs), crashed = -1, valid = -1;
    for (int i = 0; i < n; i++) {
        run_correctly(dirs[i], outputs);
        if (must_reject(dirs[i]) && crashed < 0) crashed = i;
        if (!must_reject(dirs[i]) && valid < 0) valid = i;
    }
    cr_assert(crashed >= 0 && valid >= 0);
    kvc_parity_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(kvc_parity_add_outside_path(&r, cases, outputs), 0);
    cr_expect_eq(r.cases, n);
    cr_expect_eq(r.cases_identical, n, "a correct outside run differs");
    kvc_parity_free(&r);
    /* A crash on a must-reject case. */
    char path[1300];
    int named;
    snprintf(path, sizeof path, "%s/%s", outputs, base_name(dirs[crashed]));
    write_status(path, "crashed", "Segfault-ish");
    memset(&r, 0, sizeof r);
    cr_assert_eq(kvc_parity_add_outside_path(&r, cases, outputs), 0);
    cr_expect_eq(r.cases_identical, n - 1);
    cr_expect_eq(stage_errors(&r, "the outside runner crashed: Segfault-ish", &named), 1);
    cr_expect(named, "no example names the crash");
    kvc_parity_free(&r);
    /* And a missing output of a valid case. */
    const char *names[KVC_MAX_OUTPUTS];
    kvc_case c;
    char error[512];
    cr_assert_eq(kvc_case_load(dirs[valid], &c, error, sizeof error), 0, "%s", error);
    kvc_stage_outputs(&c, names);
    snprintf(path, sizeof path, "%s/%s/%s.npy", outputs, base_name(dirs[valid]), names[0]);
    kvc_case_free(&c);
    cr_assert_eq(unlink(path), 0);
    memset(&r, 0, sizeof r);
    cr_assert_eq(kvc_parity_add_outside_path(&r, cases, outputs), 0);
    cr_expect_eq(r.cases_identical, n - 2);
    cr_expect_eq(stage_errors(&r, "is missing", &named), 2);
    kvc_parity_free(&r);
    /* The command line: --outputs, and its errors. */
    char *argv[] = {"parity", "--outputs", outputs, "--out", report_dir, cases};
    captured_run run = support_capture(kvc_cmd_report, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s", run.err);
    char counts[96];
    snprintf(counts, sizeof counts, "parity: %d cases, %d identical to the reference", n, n - 2);
    expect_contains(run.out, counts, "stdout");
    support_free_run(&run);
    snprintf(path, sizeof path, "%s/parity.json", report_dir);
    char *json_text = support_read_file(path);
    cJSON *json = cJSON_Parse(json_text);
    cr_expect_not_null(json, "parity.json is not JSON");
    cr_expect(strstr(json_text, "Segfault-ish") != NULL, "parity.json lacks the crash's message");
    cJSON_Delete(json);
    free(json_text);
    char missing[300], fresh[300];
    snprintf(missing, sizeof missing, "%s/nowhere", root);
    snprintf(fresh, sizeof fresh, "%s/fresh-report", root);
    char *bad[] = {"parity", "--outputs", missing, "--out", fresh, cases};
    run = support_capture(kvc_cmd_report, ARGC(bad), bad);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "--outputs ", "stderr");
    expect_contains(run.err, "/nowhere is not a directory", "stderr");
    cr_expect_not(support_file_exists(fresh), "a refused run wrote %s", fresh);
    support_free_run(&run);
    char *precision[] = {"precision", "--outputs", outputs, "--out", fresh};
    run = support_capture(kvc_cmd_report, ARGC(precision), precision);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "--outputs is an option of report parity", "stderr");
    cr_expect_not(support_file_exists(fresh), "a refused run wrote %s", fresh);
    support_free_run(&run);
    kvc_free_case_list(dirs, n);
    support_remove_tree(root);
}

/* kvcmp bench with candidates: side-by-side rows, byte
 * comparison with the reference, bounds that hold, the scaling table,
 * the JSON with the run's metadata, and the option errors.  Timings are
 * not asserted: a benchmark, not a timed test. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/backends.h"
#include "kvcmp/formats.h"
#include "cli/commands.h"
#include "optimized/vector_arrays.h"
#include "tests/test_support.h"

#define ARGV_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void expect_contains(const char *text, const char *needle, const char *what) {
    cr_expect(text && strstr(text, needle) != NULL, "%s lacks '%s':\n%s", what, needle, text ? text : "(null)");
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void skip_without_optimized(void) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
}

/* A test candidate built by the Makefile (tests/plugins/candidate.c). */
static void test_plugin(const char *kind, char *path, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(path, size, "%s/%s.so", dir ? dir : "build/test-plugins", kind);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s is missing: run make %s (or set KVCMP_TEST_PLUGINS)", path, path);
    fclose(f);
}

/* The optimized backend's row label: the path it runs here, "opt (avx2)". */
static const char *opt_name(void) {
    const kvc_backend *b = kvc_backend_by_name("opt", NULL, 0);
    cr_assert_not_null(b);
    return b->name;
}

/* The line of the times table for scenario, thread count and implementation. */
static const char *row_of(const char *out, const char *scenario, int threads, const char *impl) {
    char prefix[160];
    snprintf(prefix, sizeof prefix, "\n%-24s %3d %-28.28s", scenario, threads, impl);
    const char *row = strstr(out, prefix);
    cr_assert_not_null(row, "no row '%s' in:\n%s", prefix + 1, out);
    return row + 1;
}

static void expect_row_says(const char *out, const char *scenario, int threads, const char *impl, const char *what) {
    const char *row = row_of(out, scenario, threads, impl);
    size_t length = strcspn(row, "\n");
    char line[600];
    snprintf(line, sizeof line, "%.*s", (int)length, row);
    cr_expect(strstr(line, what) != NULL, "row '%s' does not say '%s'", line, what);
}

static cJSON *results_of(cJSON *root, const char *scenario) {
    cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "scenarios"))
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(item, "name")), scenario) == 0) return cJSON_GetObjectItem(item, "results");
    cr_assert_fail("no scenario %s in the JSON", scenario);
    return NULL;
}

/* The JSON result of one implementation at one thread count. */
static cJSON *result_of(cJSON *root, const char *scenario, const char *impl, int threads) {
    cJSON *item;
    cJSON_ArrayForEach(item, results_of(root, scenario)) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(item, "implementation")), impl) == 0 &&
            cJSON_GetObjectItem(item, "threads")->valueint == threads)
            return item;
    }
    cr_assert_fail("no result of %s at %d threads for %s", impl, threads, scenario);
    return NULL;
}

static double number(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItem(object, key);
    cr_assert(cJSON_IsNumber(item), "no number %s", key);
    return item->valuedouble;
}

/* A scenario's floors in the JSON: one per thread count, both parts
 * positive, the floor the larger; the resident copies it came from. */
static void expect_floors(const cJSON *scenario, int thread_counts) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(scenario, "name"));
    const cJSON *floors = cJSON_GetObjectItem(scenario, "floors"), *f;
    cr_expect_eq(cJSON_GetArraySize(floors), thread_counts, "%s: floors", name);
    cJSON_ArrayForEach(f, floors) {
        double compute = number(f, "compute_floor_ms"), memory = number(f, "memory_floor_ms"), floor = number(f, "floor_ms");
        cr_expect(compute > 0 && memory > 0, "%s: parts %g and %g ms", name, compute, memory);
        cr_expect_eq(floor, compute > memory ? compute : memory, "%s: floor %g ms, parts %g and %g", name, floor, compute, memory);
        cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(f, "binding")), compute >= memory ? "compute" : "memory");
    }
    const cJSON *resident = cJSON_GetObjectItem(scenario, "resident");
    cr_assert_not_null(resident, "%s: no resident copies", name);
    cr_expect_lt(number(resident, "small_units"), number(resident, "large_units"), "%s", name);
    cr_expect_gt(number(resident, "small_bytes"), 0, "%s", name);
    cr_expect_gt(number(resident, "small_ms"), 0, "%s", name);
    cr_expect_gt(number(resident, "large_ms"), 0, "%s", name);
    cr_expect_geq(number(resident, "fixed_ms"), 0, "%s", name);
    cr_expect_geq(number(resident, "ms_per_unit"), 0, "%s", name);
    cr_expect_gt(number(resident, "units"), 0, "%s", name);
}

Test(bench, candidates_side_by_side, .timeout = 600) {
    skip_without_optimized();
    char bench_so[512], partial_so[512], dir[64], json[128];
    test_plugin("bench", bench_so, sizeof bench_so);
    test_plugin("partial", partial_so, sizeof partial_so);
    support_temp_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    char *argv[] = {"--scenario", "v4-save-partial-states", "--scenario", "v41-rope-quant-insert", "--scenario", "v41-r2-decode",
                    "--candidate", bench_so, "--candidate", partial_so, "--runs", "2", "--reference-runs", "1",
                    "--threads", "1,2", "--stream-bytes", "1048576", "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGV_COUNT(argv), argv);
    /* A candidate that differs or fails makes the bench fail. */
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    const char *save = "v4-save-partial-states", *insert = "v41-rope-quant-insert", *decode = "v41-r2-decode";
    for (int threads = 1; threads <= 2; threads++) {
        expect_row_says(run.out, save, threads, "bench test candidate", "matches");
        expect_row_says(run.out, save, threads, "partial test candidate", "FAILED (status 6");
        expect_row_says(run.out, insert, threads, "bench test candidate", "DIFFERS (");
        expect_row_says(run.out, insert, threads, "bench test candidate", "first at kv_cache byte ");
        expect_row_says(run.out, insert, threads, "partial test candidate", "not offered");
        expect_row_says(run.out, decode, threads, "bench test candidate", "not offered");
        expect_row_says(run.out, decode, threads, opt_name(), "matches");
    }
    expect_row_says(run.out, save, 1, "ref", "reference");
    expect_contains(run.out, "\nScaling: min ms at each thread count", "stdout");
    expect_contains(run.out, "\nFloors per scenario:", "stdout");
    expect_contains(run.out, "\nResident copies: ", "stdout");
    cr_expect(strstr(run.out, "v4-d512-r4-decode") == NULL, "a scenario not asked for ran");
    expect_contains(run.out, "\nwrote ", "stdout");

    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not JSON", json);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "format")), "kvcmp-bench/3");
    cJSON *options = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "run"), "options");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(options, "candidates")), 2);
    cr_expect_eq(cJSON_GetObjectItem(options, "runs")->valueint, 2);
    cJSON *metadata = cJSON_GetObjectItem(root, "metadata");
    cr_expect_str_neq(cJSON_GetStringValue(cJSON_GetObjectItem(metadata, "commit")), "");
    cr_expect_str_neq(cJSON_GetStringValue(cJSON_GetObjectItem(metadata, "cpu_model")), "");
    cr_expect(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(metadata, "flags")), "-std=c17") != NULL, "flags: %s",
              cJSON_GetStringValue(cJSON_GetObjectItem(metadata, "flags")));
    cr_expect(cJSON_GetObjectItem(metadata, "processors")->valueint >= 1);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(metadata, "huge_pages")));
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "machine")), 2);
    cJSON *machine;
    cJSON_ArrayForEach(machine, cJSON_GetObjectItem(root, "machine")) {
        cr_expect_gt(cJSON_GetObjectItem(machine, "read_bytes_per_s")->valuedouble, 0);
        cr_expect_gt(cJSON_GetObjectItem(machine, "exp_vectors_per_s")->valuedouble, 0);
    }
    /* Every scenario has a floor per thread count, the larger of two
     * positive parts, and every timed result that matches a fraction of it. */
    cJSON *scenario;
    int fractions = 0;
    cJSON_ArrayForEach(scenario, cJSON_GetObjectItem(root, "scenarios")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(scenario, "name"));
        expect_floors(scenario, 2);
        cJSON *result;
        cJSON_ArrayForEach(result, cJSON_GetObjectItem(scenario, "results")) {
            cJSON *fraction = cJSON_GetObjectItem(result, "fraction");
            if (!fraction) continue;
            fractions++;
            cr_expect(fraction->valuedouble > 0, "%s: %s has fraction %g", name,
                      cJSON_GetStringValue(cJSON_GetObjectItem(result, "implementation")), fraction->valuedouble);
        }
    }
    cr_expect_geq(fractions, 3 * 3 + 1, "too few timed results (%d)", fractions);
    cJSON *matched = result_of(root, save, "bench test candidate", 2);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(matched, "output")), "matches");
    cr_expect_eq(cJSON_GetObjectItem(matched, "runs")->valueint, 2);
    cr_expect_not_null(cJSON_GetObjectItem(matched, "time_over_optimized"));
    cJSON *differs = result_of(root, insert, "bench test candidate", 1);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(differs, "output")), "DIFFERS");
    cr_expect_gt(cJSON_GetObjectItem(differs, "differing_bytes")->valuedouble, 0);
    /* It skipped the work: no floor to hold it to. */
    cr_expect_null(cJSON_GetObjectItem(differs, "fraction"));
    cJSON *reference = result_of(root, save, "ref", 1);
    cr_expect_eq(cJSON_GetObjectItem(reference, "runs")->valueint, 1);
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* --huge-pages asks for them; without reference runs its row has no times. */
Test(bench, huge_pages_and_no_reference_runs, .timeout = 300) {
    skip_without_optimized();
    char *argv[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "0", "--threads", "1",
                    "--stream-bytes", "4194304", "--huge-pages"};
    captured_run run = support_capture(kvc_cmd_bench, ARGV_COUNT(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.out, ", huge pages asked for (", "stdout");
    /* The header says which source gave the cache size and why the buffers are this big. */
    const char *cache = strstr(run.out, ", last-level cache ");
    cr_expect(cache && strstr(cache, " KiB (") != NULL, "no cache size and source in:\n%s", run.out);
    expect_contains(run.out, "streaming loops over 4 MiB buffers (--stream-bytes: ", "stdout");
    expect_row_says(run.out, "v41-r2-decode", 1, "ref", "         -          -     -       -      -  reference");
    expect_row_says(run.out, "v41-r2-decode", 1, opt_name(), "matches");
    cr_expect(strstr(run.out, "wrote ") == NULL, "a JSON file written without --json");
    support_free_run(&run);
}

/* Splits a CSV line (quoted fields allowed) into at most `max` fields in
 * place; returns the count. */
static int csv_split(char *line, char **fields, int max) {
    int count = 0;
    char *p = line;
    for (;;) {
        cr_assert_lt(count, max, "more than %d fields", max);
        char *out = p;
        fields[count++] = out;
        if (*p == '"') {
            for (p++;; p++) {
                cr_assert(*p, "an unterminated quote");
                if (*p == '"' && p[1] == '"') { *out++ = '"'; p++; }
                else if (*p == '"') { p++; break; }
                else *out++ = *p;
            }
        } else {
            while (*p && *p != ',') *out++ = *p++;
        }
        cr_assert(*p == ',' || *p == 0, "text after a quoted field");
        int more = *p == ',';
        if (*p) p++;
        *out = 0;
        if (!more) return count;
    }
}

static double csv_number(const char *text, const char *what) {
    char *end;
    double value = strtod(text, &end);
    cr_expect(text[0] && *end == 0, "%s '%s' is not a number", what, text);
    return value;
}

/* --csv: the times table's rows, a header line, the same fields in every
 * row, numbers in the time columns; the JSON beside it stays. */
Test(bench, csv_rows, .timeout = 300) {
    skip_without_optimized();
    char dir[64], csv[128], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/times.csv", dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    char *argv[] = {"--scenario", "v41-r2-decode", "--runs", "1", "--reference-runs", "1", "--threads", "1",
                    "--stream-bytes", "1048576", "--csv", csv, "--json", json};
    captured_run run = support_capture(kvc_cmd_bench, ARGV_COUNT(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.out, "\nwrote ", "stdout");
    cr_expect(support_file_exists(json), "--csv dropped the JSON");
    char *text = support_read_file(csv);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    cr_assert_not_null(line, "an empty CSV");
    cr_expect_str_eq(line, "scenario,threads,implementation,min_ms,median_ms,runs,time_over_opt,compute_floor_ms,memory_floor_ms,"
                           "floor_ms,fraction,output,detail");
    char *fields[32];
    int header_fields = csv_split(line, fields, 32), rows = 0;
    cr_expect_eq(header_fields, 13);
    while ((line = strtok_r(NULL, "\n", &save))) {
        rows++;
        int count = csv_split(line, fields, 32);
        cr_expect_eq(count, header_fields, "row %d has %d fields, the header %d", rows, count, header_fields);
        if (count != header_fields) continue;
        cr_expect_str_eq(fields[0], "v41-r2-decode");
        cr_expect_eq(csv_number(fields[1], "threads"), 1);
        double min = csv_number(fields[3], "min_ms"), median = csv_number(fields[4], "median_ms");
        cr_expect(min > 0 && median >= min, "min %g, median %g", min, median);
        cr_expect_eq(csv_number(fields[5], "runs"), 1);
        cr_expect_gt(csv_number(fields[6], "time_over_opt"), 0);
        double compute = csv_number(fields[7], "compute_floor_ms"), memory = csv_number(fields[8], "memory_floor_ms");
        double floor = csv_number(fields[9], "floor_ms");
        cr_expect(compute > 0 && memory > 0, "floor parts %g and %g", compute, memory);
        cr_expect_eq(floor, compute > memory ? compute : memory, "floor %g, parts %g and %g", floor, compute, memory);
        double fraction = csv_number(fields[10], "fraction");
        cr_expect_gt(fraction, 0);
        /* The fraction is the floor over the min time (both rounded). */
        cr_expect(fabs(fraction - floor / min) <= 1e-4 + 1e-3 * fraction, "fraction %g, floor %g / min %g", fraction, floor, min);
        cr_expect(strcmp(fields[11], "reference") == 0 || strcmp(fields[11], "matches") == 0, "output '%s'", fields[11]);
    }
    cr_expect_eq(rows, 2, "rows: the reference and opt at 1 thread");
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* --shape: scenarios the user describes run like the built-in ones
 * (only they, without --scenario), every output byte compared. */
Test(bench, shapes_run, .timeout = 300) {
    skip_without_optimized();
    char *argv[] = {"--shape", "v4-compress:d=512,r=4,tokens=256,requests=8,block=16,padding=64",
                    "--shape", "v4-decode:r=128,requests=9,context=300,block=16,padding=64",
                    "--shape", "v41-norm:tokens=96,requests=3,start=7",
                    "--shape", "v41-insert:tokens=333,block=16,padding=64",
                    "--shape", "v4-save:d=128,r=128,tokens=1000,requests=4,block=8",
                    "--runs", "1", "--reference-runs", "1", "--threads", "1", "--stream-bytes", "1048576"};
    captured_run run = support_capture(kvc_cmd_bench, ARGV_COUNT(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    for (int i = 0; i < 5; i++) {
        char row[200];
        snprintf(row, sizeof row, "\n%s   1 opt ", argv[2 * i + 1]);
        const char *at = strstr(run.out, row);
        cr_expect(at != NULL, "no row for %s in:\n%s", argv[2 * i + 1], run.out);
        if (at) cr_expect(strstr(at + 1, "matches\n") == strchr(at + 1, '\n') - 7, "%s: opt does not match:\n%s", argv[2 * i + 1], run.out);
    }
    cr_expect(strstr(run.out, "v4-d512-r4-decode") == NULL, "a built-in scenario ran beside --shape");
    support_free_run(&run);
}

static void expect_usage_error(int argc, char **argv, const char *message) {
    captured_run run = support_capture(kvc_cmd_bench, argc, argv);
    cr_expect_eq(run.status, 2, "%s accepted", argv[argc - 1]);
    expect_contains(run.err, message, "stderr");
    cr_expect_str_empty(run.out, "%s ran a benchmark", argv[argc - 1]);
    support_free_run(&run);
}

Test(bench, option_errors) {
    char *letters[] = {"--threads", "1,x"};
    expect_usage_error(2, letters, "kvcmp bench: --threads takes thread counts from 1 to 1024, not 'x'");
    char *empty[] = {"--threads", ","};
    expect_usage_error(2, empty, "kvcmp bench: --threads takes a list like 1,2,4");
    char *many[] = {"--threads", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"};
    expect_usage_error(2, many, "kvcmp bench: --threads takes at most 16 counts");
    char *fraction[] = {"--runs", "1.5"};
    expect_usage_error(2, fraction, "kvcmp bench: --runs takes a whole number from 1 to 1000, not '1.5'");
    char *small[] = {"--stream-bytes", "4096"};
    expect_usage_error(2, small, "kvcmp bench: --stream-bytes takes a whole number from 1048576 to ");
    char *positional[] = {"--runs", "1", "v41-r2-decode"};
    expect_usage_error(3, positional, "kvcmp bench: unexpected argument 'v41-r2-decode'");
    char *unknown[] = {"--candidates", "x.so"};
    expect_usage_error(2, unknown, "kvcmp bench: unknown option '--candidates'");
    char *candidates[2 * 9];
    for (int i = 0; i < 9; i++) { candidates[2 * i] = "--candidate"; candidates[2 * i + 1] = "ref"; }
    expect_usage_error(18, candidates, "kvcmp bench: at most 8 --candidate libraries");
    char *scenarios[2 * 17];
    for (int i = 0; i < 17; i++) { scenarios[2 * i] = "--scenario"; scenarios[2 * i + 1] = "v41-r2-decode"; }
    expect_usage_error(34, scenarios, "kvcmp bench: at most 16 --scenario options");
    char *scenario[] = {"--scenario", "v41-r2-decode", "--scenario", "v9-huge"};
    expect_usage_error(4, scenario, "kvcmp bench: unknown scenario 'v9-huge'");
    char *stage[] = {"--shape", "v5-compress:d=512"};
    expect_usage_error(2, stage, "kvcmp bench: --shape 'v5-compress:d=512': unknown stage 'v5-compress' (v4-compress, v4-save");
    char *key[] = {"--shape", "v4-compress:d=512,heads=8"};
    expect_usage_error(2, key, "kvcmp bench: --shape v4-compress: unknown key 'heads' (keys: d,r,tokens,requests,block,padding)");
    char *wrong_stage_key[] = {"--shape", "v41-insert:context=5"};
    expect_usage_error(2, wrong_stage_key, "kvcmp bench: --shape v41-insert: unknown key 'context' (keys: tokens,block,padding)");
    char *dim[] = {"--shape", "v4-decode:d=300"};
    expect_usage_error(2, dim, "kvcmp bench: --shape v4-decode: d takes 128 or 512, not '300'");
    char *tokens[] = {"--shape", "v4-save:tokens=12x"};
    expect_usage_error(2, tokens, "kvcmp bench: --shape v4-save: tokens takes a whole number from 1 to 262144, not '12x'");
    char *padding[] = {"--shape", "v41-norm:padding=10"};
    expect_usage_error(2, padding, "kvcmp bench: --shape v41-norm: padding takes a whole number from 0 to 65536 (a multiple of 64), not '10'");
    char *split[] = {"--shape", "v4-compress:tokens=100,requests=8"};
    expect_usage_error(2, split, "kvcmp bench: --shape v4-compress: tokens = 100 is not a multiple of requests = 8");
    char *twice[] = {"--shape", "v4-compress:r=4,r=128"};
    expect_usage_error(2, twice, "kvcmp bench: --shape v4-compress: key 'r' given twice");
    char *no_value[] = {"--shape", "v4-compress:d"};
    expect_usage_error(2, no_value, "kvcmp bench: --shape v4-compress: 'd' is not KEY=VALUE");
    char *huge[] = {"--shape", "v4-decode:requests=4096,block=1024,r=128"};
    expect_usage_error(2, huge, "kvcmp bench: --shape v4-decode: needs about ");
    /* Output files are checked before the run, and nothing is created. */
    char *csv_folder[] = {"--csv", "/nonexistent/folder/times.csv"};
    expect_usage_error(2, csv_folder, "kvcmp bench: --csv: cannot write /nonexistent/folder/times.csv: its folder does not exist");
    cr_expect(!support_file_exists("/nonexistent/folder/times.csv"));
    char *json_folder[] = {"--json", "/tmp"};
    expect_usage_error(2, json_folder, "kvcmp bench: --json: /tmp is a folder, not a file");
    char *same[] = {"--json", "/tmp/kvcmp-bench-same.out", "--csv", "/tmp/kvcmp-bench-same.out"};
    expect_usage_error(4, same, "kvcmp bench: --csv and --json name the same file '/tmp/kvcmp-bench-same.out'");
    cr_expect(!support_file_exists("/tmp/kvcmp-bench-same.out"), "a refused run wrote its output");
}

Test(bench, candidate_that_does_not_load) {
    skip_without_optimized();
    char *missing[] = {"--candidate", "/nonexistent/libkernels.so"};
    expect_usage_error(2, missing, "kvcmp bench: --candidate: cannot load candidate /nonexistent/libkernels.so");
    char wrong_abi[512];
    test_plugin("wrong_abi", wrong_abi, sizeof wrong_abi);
    char *foreign[] = {"--candidate", wrong_abi};
    expect_usage_error(2, foreign, "speaks plug-in ABI 2");
}

/* The bench's own kernels: the exp of its Machine table is the exact exp
 * (kvc_expf_cr) on its domain, and the write loop writes every byte. */
Test(bench, exp_and_write_kernels) {
    skip_without_optimized();
    enum { N = 4096 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -87.0f + 175.0f * (float)i / N;   /* [-87, 88) */
    opt_exp_in_range_array(x, y, N);
    for (int i = 0; i < N; i++) cr_expect_eq(float_bits(y[i]), float_bits(kvc_expf_cr(x[i])), "exp(%a)", (double)x[i]);
    static uint8_t buffer[64 * 5 + 64] __attribute__((aligned(64)));
    for (int non_temporal = 0; non_temporal <= 1; non_temporal++)
        for (size_t offset = 0; offset <= 1; offset++) {   /* aligned (streaming stores) and not */
            memset(buffer, 0, sizeof buffer);
            opt_stream_write(buffer + offset, 64 * 5 + 7, non_temporal);
            for (size_t i = 0; i < sizeof buffer; i++)
                cr_expect_eq(buffer[i], i >= offset && i < offset + 64 * 5 + 7 ? 0x5A : 0, "byte %zu (offset %zu, nt %d)", i, offset,
                             non_temporal);
        }
}

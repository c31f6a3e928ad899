/* Strict input: .npy headers parsed as the dict literal they
 * are, case.json fields type-checked, expected outputs the stage does not
 * write refused, the case walk safe from symlinks (never followed), FIFOs and
 * directories named like tensors, and positions at the int64 extremes
 * (the sanitized build turns any signed overflow into a failure). */
#include <sys/stat.h>

#include "tests/test_support.h"

#include "cli/commands.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"
#include "kvcmp/backends.h"
#include "kvcmp/npy.h"
#include "kvcmp/validate.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

static void expect_header_refused(const char *dict, size_t data_bytes, const char *needle) {
    uint8_t image[512];
    size_t size = support_npy_image(image, sizeof image, dict, data_bytes);
    kvc_array array;
    char error[256] = "";
    cr_expect_eq(kvc_npy_parse(image, size, &array, error, sizeof error), -1, "accepted %s", dict);
    cr_expect(strstr(error, needle) != NULL, "header %s: error '%s' lacks '%s'", dict, error, needle);
    cr_expect_null(array.data);
}

static void expect_header_accepted(const char *dict, size_t data_bytes, kvc_dtype dtype, int ndim) {
    uint8_t image[512];
    size_t size = support_npy_image(image, sizeof image, dict, data_bytes);
    kvc_array array;
    char error[256] = "";
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), 0, "refused %s: %s", dict, error);
    cr_expect_eq(array.dtype, dtype, "%s", dict);
    cr_expect_eq(array.ndim, ndim, "%s", dict);
    kvc_array_free(&array);
}

Test(npy_header, parsed_as_a_dict_literal) {
    /* A key's value that looks like another key decides nothing. */
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'note': \"'descr': '<i8'\", }", 8,
                          "unexpected key 'note'");
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }", 8, "key 'shape' appears twice");
    expect_header_refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, "key 'descr' appears twice");
    expect_header_refused("{'descr': '<f4', 'fortran_order': Falsehood, 'shape': (2,), }", 8, "'fortran_order' is Falsehood, must be True or False");
    expect_header_refused("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8, "'fortran_order' is 0");
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8, "a 1-tuple needs its comma");
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }", 8, "leading zero");
    expect_header_refused("{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", 8, "expected ',' or '}' after 'descr'");
    expect_header_refused("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", 8, "no ':' after 'descr'");
    expect_header_refused("{descr: '<f4', 'fortran_order': False, 'shape': (2,), }", 8, "expected a quoted key");
    expect_header_refused("{'descr': '<f\\4', 'fortran_order': False, 'shape': (2,), }", 8, "not a string");
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8, "after the dictionary");
    expect_header_refused("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", 16, "unsupported dtype '<u8'");
    expect_header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", 8, "bad shape entry");
    /* What numpy writes, in any key order and either quote, parses. */
    expect_header_accepted("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, KVC_DT_F4, 1);
    expect_header_accepted("{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"<i4\"}", 8, KVC_DT_I4, 2);
    expect_header_accepted("{'descr':'|u1','fortran_order':False,'shape':(2, 2, 2,)}", 8, KVC_DT_U1, 3);
}

Test(npy_header, a_nul_byte_is_refused) {
    uint8_t image[512];
    size_t size = support_npy_image(image, sizeof image, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    image[12] = 0;
    kvc_array array;
    char error[256] = "";
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "NUL byte") != NULL, "%s", error);
}

/* ---- files that are not regular files ------------------------------------ */

Test(npy_files, fifo_and_directory_named_npy_are_refused_without_blocking, .timeout = 10) {
    char dir[64], path[128], error[512] = "";
    support_temp_dir(dir, sizeof dir);
    kvc_array array;
    snprintf(path, sizeof path, "%s/x.npy", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "x.npy is a FIFO, not a regular file") != NULL, "%s", error);
    unlink(path);
    cr_assert_eq(mkdir(path, 0700), 0);
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "x.npy is a directory, not a regular file") != NULL, "%s", error);
    cr_expect(strstr(error, "memory") == NULL, "%s", error);
    rmdir(path);
    cr_assert_eq(kvc_npy_read("/dev/null", &array, error, sizeof error), -1);
    cr_expect(strstr(error, "/dev/null is a device") != NULL, "%s", error);
    support_remove_tree(dir);
}

/* ---- case directories ------------------------------------------------------ */

/* A valid case of `variant` with the reference's outputs, saved as dir. */
static void save_case(const char *variant, const char *dir) {
    kvc_case c;
    support_make_case(variant, KVC_FAM_NORMAL, 11, 0, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
    char error[512];
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
}

static captured_run replay(const char *path) {
    char *argv[] = {"--policy", "exact", (char *)path};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

static void expect_contains(const char *text, const char *needle) {
    cr_expect(strstr(text, needle) != NULL, "lacks '%s':\n%s", needle, text);
}

/* Writes dir/NAME.npy as a copy of dir/FROM.npy. */
static void copy_tensor(const char *dir, const char *from, const char *name) {
    char path[512], error[512];
    kvc_array a;
    snprintf(path, sizeof path, "%s/%s.npy", dir, from);
    cr_assert_eq(kvc_npy_read(path, &a, error, sizeof error), 0, "%s", error);
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(kvc_npy_write(path, &a, error, sizeof error), 0, "%s", error);
    kvc_array_free(&a);
}

Test(case_input, expected_output_the_stage_does_not_write_fails_the_case) {
    char dir[64], path[256];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/compress", dir);
    save_case("v4.compress/d512/r4", path);
    captured_run run = replay(path);
    cr_expect_eq(run.status, 0, "the untouched case fails:\n%s", run.out);
    support_free_run(&run);
    /* A compress case writes kv_cache only; state_cache.out is not checked by anything. */
    copy_tensor(path, "state_cache", "state_cache.out");
    run = replay(path);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "FAIL [");
    expect_contains(run.out, "unexpected expected-output tensor state_cache.out: v4.compress (R=4) writes only kv_cache.out");
    expect_contains(run.out, "__REPRO: build/kvcmp replay");
    support_free_run(&run);
    snprintf(path, sizeof path, "%s/compress/state_cache.out.npy", dir);
    unlink(path);
    copy_tensor(dir, "compress/kv_cache.out", "compress/bogus.out");
    snprintf(path, sizeof path, "%s/compress", dir);
    run = replay(path);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "unexpected expected-output tensor bogus.out");
    support_free_run(&run);
    support_remove_tree(dir);
}

static void expect_case_json_refused(const char *params, const char *needle) {
    char dir[64], path[128], error[1024] = "";
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    char json[512];
    snprintf(json, sizeof json, "{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.rope_plain_insert\", %s}", params);
    support_write_text(path, json);
    kvc_case c;
    cr_expect_eq(kvc_case_load(dir, &c, error, sizeof error), -1, "accepted %s", json);
    cr_expect(strstr(error, needle) != NULL, "%s: error '%s' lacks '%s'", json, error, needle);
    cr_expect(strstr(error, "case.json") != NULL, "the error does not name the file: %s", error);
    support_remove_tree(dir);
}

Test(case_input, case_json_fields_are_type_checked) {
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"eps\": \"big\"}", "params.eps must be a number or one of \"nan\", \"-nan\", \"inf\", \"-inf\", found \"big\"");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"cache_dtype\": 7}", "params.cache_dtype must be a string");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"head_dim\": \"512\"}", "params.head_dim must be a number, found a string");
    expect_case_json_refused("\"params\": {\"compress_ratio\": true}", "params.compress_ratio must be a number, found a boolean");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1e10}", "params.compress_ratio = 1e+10");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"eps\": null}", "params.eps must be a number, found null");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"eps\": [1]}", "found an array");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1, \"eps\": {}}", "found an object");
    expect_case_json_refused("\"params\": {\"compress_ratio\": 1}, \"source\": 5", "\"source\" must be a string, found a number");
}

Test(case_input, tensor_files_that_are_not_regular_files, .timeout = 20) {
    char dir[64], path[256], cases[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(cases, sizeof cases, "%s/cases", dir);
    snprintf(path, sizeof path, "%s/a-fifo", cases);
    save_case("v41.rope_quant_insert", path);
    snprintf(path, sizeof path, "%s/a-fifo/x.npy", cases);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/b-dir", cases);
    save_case("v41.rope_quant_insert", path);
    snprintf(path, sizeof path, "%s/b-dir/x.npy", cases);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/c-long", cases);
    save_case("v41.rope_quant_insert", path);
    snprintf(path, sizeof path, "%s/c-long/%060d.npy", cases, 7);
    support_write_text(path, "x");
    snprintf(path, sizeof path, "%s/d-good", cases);
    save_case("v41.rope_quant_insert", path);
    captured_run run = replay(cases);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "a-fifo/x.npy is a FIFO, not a regular file");
    expect_contains(run.out, "b-dir/x.npy is a directory, not a regular file");
    expect_contains(run.out, "tensor name longer than 47 characters");
    expect_contains(run.out, "1 passed, 3 failed");
    support_free_run(&run);
    snprintf(path, sizeof path, "%s/e-json", cases);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/e-json/case.json", cases);
    cr_assert_eq(mkfifo(path, 0600), 0);
    run = replay(cases);
    /* Not a case: the FIFO itself is a FAIL line of its own, never opened. */
    cr_expect(strstr(run.out, "e-json: ") == NULL, "a FIFO named case.json made a case:\n%s", run.out);
    expect_contains(run.out, "FAIL [not a file] ");
    expect_contains(run.out, "/e-json/case.json: neither a regular file nor a directory");
    expect_contains(run.out, "1 passed, 4 failed");
    support_free_run(&run);
    support_remove_tree(dir);
}

/* ---- the case walk ---------------------------------------------------------- */

/* Links are never followed, so cycles and repeated links
 * cannot multiply the walk; each link is refused by name. */
Test(case_walk, symlink_cycles_and_repeated_links_are_not_followed, .timeout = 30) {
    char dir[64], path[256], target[256];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tree/sub/case", dir);
    save_case("v41.rope_quant_insert", path);
    /* A cycle back to the top, and ten links to one directory at every
     * level: without a visited set the walk would be exponential. */
    snprintf(path, sizeof path, "%s/tree/sub/loop", dir);
    snprintf(target, sizeof target, "%s/tree", dir);
    cr_assert_eq(symlink(target, path), 0);
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof path, "%s/tree/link%d", dir, i);
        cr_assert_eq(symlink(".", path), 0);
        snprintf(path, sizeof path, "%s/tree/sub/up%d", dir, i);
        cr_assert_eq(symlink("..", path), 0);
    }
    snprintf(path, sizeof path, "%s/tree/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/tree/dangling", dir);
    cr_assert_eq(symlink("/nonexistent/kvcmp", path), 0);
    kvc_case_walk walk;
    cr_expect_eq(kvc_walk_cases(target, &walk), 1, "the case was found %d times", walk.count);
    if (walk.count >= 1) cr_expect(strstr(walk.dirs[0], "/tree/sub/case") != NULL, "%s", walk.dirs[0]);
    cr_expect_eq(walk.num_refused, 1 + 10 + 10 + 1 + 1, "the loop, 20 links, the FIFO and the dangling one");
    kvc_case_walk_free(&walk);
    char **dirs;
    int n;
    /* A link to a case directory counts once as well. */
    snprintf(path, sizeof path, "%s/tree/again", dir);
    snprintf(target, sizeof target, "%s/tree/sub/case", dir);
    cr_assert_eq(symlink(target, path), 0);
    snprintf(target, sizeof target, "%s/tree", dir);
    n = kvc_find_cases(target, &dirs);
    cr_expect_eq(n, 1, "the case was found %d times", n);
    kvc_free_case_list(dirs, n);
    support_remove_tree(dir);
}

Test(case_walk, a_missing_path_has_no_cases) {
    char **dirs;
    cr_expect_eq(kvc_find_cases("/nonexistent/kvcmp/cases", &dirs), 0);
    kvc_free_case_list(dirs, 0);
}

/* ---- positions at the int64 extremes ------------------------------------- */

/* Runs the case through the reference and, when it is there, the
 * optimized backend; both must give the same status. */
static int run_both(const kvc_case *c, char *message, size_t size) {
    kvc_run_result result;
    int rc = kvc_run_case(&kvc_reference_backend, c, NULL, &result);
    snprintf(message, size, "%s", result.error.message);
    kvc_run_result_free(&result);
    char error[256];
    const kvc_backend *opt = kvc_backend_by_name("opt", error, sizeof error);
    if (opt) {
        int rc_opt = kvc_run_case(opt, c, NULL, &result);
        kvc_run_result_free(&result);
        cr_expect_eq(rc_opt, rc, "opt gives %s, the reference %s (%s)", kvc_status_name(rc_opt), kvc_status_name(rc), message);
    }
    return rc;
}

/* Every stage with one skipped token at each extreme: no overflow, and
 * a written token there is refused as an index error. */
Test(positions, int64_extremes_in_every_stage, .timeout = 120) {
    static const int64_t extremes[] = {INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, -1, (INT64_C(1) << 40) + 1};
    for (int v = 0; v < kvc_variant_count(); v++) {
        const char *name = kvc_variant(v)->name;
        if (strncmp(name, "history", 7) == 0) continue;
        for (size_t e = 0; e < sizeof extremes / sizeof extremes[0]; e++) {
            kvc_case c;
            support_make_case(name, KVC_FAM_NORMAL, 5, 1, &c);
            kvc_array *positions = kvc_case_get(&c, "positions"), *slots = kvc_case_get(&c, "slot_mapping");
            cr_assert(positions && slots && positions->count > 0, "%s lacks positions", name);
            int64_t last = positions->count - 1;
            char message[256];
            kvc_array *kv_slots = kvc_case_get(&c, "kv_slot_mapping");
            ((int64_t *)slots->data)[last] = -1;
            if (kv_slots) ((int64_t *)kv_slots->data)[last] = -1;
            ((int64_t *)positions->data)[last] = extremes[e];
            int rc = run_both(&c, message, sizeof message);
            cr_expect(rc == KVC_OK || rc == KVC_ERR_METADATA, "%s, skipped last token at %lld: %s (%s)", name, (long long)extremes[e],
                      kvc_status_name(rc), message);
            ((int64_t *)slots->data)[last] = 0;
            if (kv_slots) ((int64_t *)kv_slots->data)[last] = 0;
            rc = run_both(&c, message, sizeof message);
            cr_expect(rc != KVC_OK, "%s: a written token at position %lld was accepted", name, (long long)extremes[e]);
            kvc_case_free(&c);
        }
    }
}

/* V4.1 R = 2: a skipped token at INT64_MAX followed by another token of
 * its request has no successor position: a metadata error, not an overflow. */
Test(positions, v41_r2_skipped_token_at_int64_max_then_another) {
    const char *variants[] = {"v41.save_compress_norm/r2", "v41.forward/r2"};
    for (int i = 0; i < 2; i++) {
        kvc_case c;
        int found = 0;
        for (int64_t index = 0; index < 64 && !found; index++) {
            support_make_case(variants[i], KVC_FAM_NORMAL, 3, index, &c);
            const kvc_array *qsl = kvc_case_get(&c, "query_start_loc");
            cr_assert_not_null(qsl);
            const int32_t *q = qsl->data;
            for (int64_t r = 0; r + 1 < qsl->count && !found; r++)
                if (q[r + 1] - q[r] >= 2) {
                    int64_t t = q[r];
                    ((int64_t *)kvc_case_get(&c, "slot_mapping")->data)[t] = -1;
                    kvc_array *kv_slots = kvc_case_get(&c, "kv_slot_mapping");
                    if (kv_slots) ((int64_t *)kv_slots->data)[t] = -1;
                    ((int64_t *)kvc_case_get(&c, "positions")->data)[t] = INT64_MAX;
                    found = 1;
                }
            if (!found) kvc_case_free(&c);
        }
        cr_assert(found, "no %s case with a request of two tokens", variants[i]);
        char message[256];
        int rc = run_both(&c, message, sizeof message);
        cr_expect_eq(rc, KVC_ERR_METADATA, "%s: %s (%s)", variants[i], kvc_status_name(rc), message);
        cr_expect(strstr(message, "= 9223372036854775807 in request") != NULL, "%s", message);
        kvc_case_free(&c);
    }
}

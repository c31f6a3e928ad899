/* Error paths: malformed .npy images and case.json files, cases that do
 * not fit their stage's binder (missing tensors, wrong dtypes, ranks and
 * shapes), backends that write when they reject, the classification of
 * every compared region under both policies, plug-in libraries the
 * loader must refuse, and candidates with a planted bug: the chunked
 * history driver must find the diverging step and the shrinker must keep
 * the bug while it cuts the case.  Every test checks that the message
 * names the thing that is wrong. */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/npy.h"
#include "kvcmp/validate.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/history.h"
#include "harness/backends/plugin.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"

/* ---- .npy images ----------------------------------------------------------- */

/* A .npy 1.0 image with the given header dictionary (padded like numpy
 * does) followed by data_bytes bytes of 0x11. */
static size_t npy_image(uint8_t *out, size_t capacity, const char *dict, size_t data_bytes) {
    size_t dict_len = strlen(dict), total = 10 + dict_len + 1;
    size_t pad = (64 - total % 64) % 64, header_len = dict_len + pad + 1;
    cr_assert(10 + header_len + data_bytes <= capacity);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)header_len;
    out[9] = (uint8_t)(header_len >> 8);
    memcpy(out + 10, dict, dict_len);
    memset(out + 10 + dict_len, ' ', pad);
    out[10 + dict_len + pad] = '\n';
    memset(out + 10 + header_len, 0x11, data_bytes);
    return 10 + header_len + data_bytes;
}

/* Parses and expects a refusal whose message contains `needle`. */
static void expect_npy_error(const uint8_t *bytes, size_t size, const char *needle) {
    kvc_array array;
    char error[256] = "";
    cr_assert_eq(kvc_npy_parse(bytes, size, &array, error, sizeof error), -1, "accepted, expected an error containing '%s'", needle);
    cr_expect(strstr(error, needle) != NULL, "error '%s' does not contain '%s'", error, needle);
    cr_expect_null(array.data, "a refused image left data allocated");
}

#define F4_2 "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"

Test(npy_errors, bad_magic_and_too_short) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, F4_2, 8);
    image[1] = 'X';
    expect_npy_error(image, size, "bad magic");
    expect_npy_error((const uint8_t *)"\x93NUMPY", 6, "bad magic");
}

Test(npy_errors, version_2_0) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, F4_2, 8);
    image[6] = 2;
    expect_npy_error(image, size, "unsupported .npy version 2.0");
}

Test(npy_errors, header_longer_than_file) {
    uint8_t image[256];
    npy_image(image, sizeof image, F4_2, 8);
    expect_npy_error(image, 40, "truncated header");
}

Test(npy_errors, header_not_a_dictionary) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, F4_2, 8);
    image[10] = '[';
    expect_npy_error(image, size, "not a dictionary");
}

Test(npy_errors, header_missing_a_key) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, "{'descr': '<f4', 'shape': (2,), }", 8);
    expect_npy_error(image, size, "lacks descr, fortran_order or shape");
}

Test(npy_errors, fortran_order) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8);
    expect_npy_error(image, size, "fortran_order arrays are not supported");
}

Test(npy_errors, unsupported_dtypes) {
    static const char *const dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",   /* double */
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",   /* big-endian */
        "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",   /* half */
        "{'descr': 7, 'fortran_order': False, 'shape': (2,), }",       /* not a string */
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        uint8_t image[256];
        size_t size = npy_image(image, sizeof image, dicts[i], 16);
        expect_npy_error(image, size, "unsupported dtype");
    }
}

Test(npy_errors, malformed_shapes) {
    static const struct {
        const char *dict, *needle;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 2, }", "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }", "more than 4 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", "bad shape entry"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "bad shape entry"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }", "bad shape tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "shape entry too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 4), }", "array too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t image[256];
        size_t size = npy_image(image, sizeof image, cases[i].dict, 8);
        expect_npy_error(image, size, cases[i].needle);
    }
}

Test(npy_errors, truncated_and_trailing_data) {
    uint8_t image[256];
    size_t size = npy_image(image, sizeof image, F4_2, 4);
    expect_npy_error(image, size, "truncated data: 4 bytes, shape needs 8");
    size = npy_image(image, sizeof image, F4_2, 12);
    expect_npy_error(image, size, "4 trailing bytes after the data");
}

Test(npy_errors, zero_dimensional_and_empty_arrays_parse) {
    uint8_t image[256];
    kvc_array array;
    char error[256];
    size_t size = npy_image(image, sizeof image, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8);
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), 0, "%s", error);
    cr_expect_eq(array.ndim, 0);
    cr_expect_eq(array.count, 1);
    cr_expect_eq(array.dtype, KVC_DT_I8);
    kvc_array_free(&array);
    size = npy_image(image, sizeof image, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 0), }", 0);
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), 0, "%s", error);
    cr_expect_eq(array.count, 0);
    cr_expect_eq(array.shape[0], 3);
    kvc_array_free(&array);
}

Test(npy_errors, read_names_the_file) {
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    kvc_array array;
    char error[512];
    snprintf(path, sizeof path, "%s/absent.npy", dir);
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot open") && strstr(error, "absent.npy"), "%s", error);
    /* A broken file: the message carries the path and the parser's reason. */
    snprintf(path, sizeof path, "%s/broken.npy", dir);
    support_write_text(path, "\x93NUMPY\x02\x01 nothing else");
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "broken.npy: unsupported .npy version 2.1") != NULL, "%s", error);
    /* A write into a missing directory fails with the path. */
    snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
    int64_t shape[1] = {3};
    cr_assert_eq(kvc_array_alloc(&array, KVC_DT_F4, 1, shape), 0);
    cr_expect_eq(kvc_npy_write(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot create") != NULL, "%s", error);
    kvc_array_free(&array);
    support_remove_tree(dir);
}

Test(npy_errors, write_then_read_is_bit_exact_for_every_dtype) {
    char dir[64], path[128], error[256];
    support_temp_dir(dir, sizeof dir);
    for (int dtype = KVC_DT_F4; dtype <= KVC_DT_U1; dtype++) {
        int64_t shape[3] = {2, 3, 5};
        kvc_array written, read;
        cr_assert_eq(kvc_array_alloc(&written, (kvc_dtype)dtype, 3, shape), 0);
        size_t bytes = (size_t)written.count * (size_t)kvc_dtype_size(written.dtype);
        for (size_t i = 0; i < bytes; i++) ((uint8_t *)written.data)[i] = (uint8_t)(i * 37 + 11);
        snprintf(path, sizeof path, "%s/t%d.npy", dir, dtype);
        cr_assert_eq(kvc_npy_write(path, &written, error, sizeof error), 0, "%s", error);
        cr_assert_eq(kvc_npy_read(path, &read, error, sizeof error), 0, "%s", error);
        cr_expect_eq(read.dtype, written.dtype);
        cr_expect_eq(read.ndim, 3);
        cr_expect_eq(read.shape[2], 5);
        cr_expect_eq(memcmp(read.data, written.data, bytes), 0, "dtype %s changed on the round trip", kvc_dtype_descr(written.dtype));
        kvc_array_free(&written);
        kvc_array_free(&read);
    }
    support_remove_tree(dir);
}

/* ---- case.json -------------------------------------------------------------- */

static void expect_case_error(const char *json, const char *needle) {
    char dir[64], path[128], error[1024] = "";
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    if (json) support_write_text(path, json);
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), -1, "case.json accepted: %s", json ? json : "(none)");
    cr_expect(strstr(error, needle) != NULL, "error '%s' does not contain '%s'", error, needle);
    support_remove_tree(dir);
}

Test(case_errors, malformed_case_json) {
    expect_case_error(NULL, "cannot read");
    expect_case_error("{\"format\": \"dsv4c-case/1\",", "not valid JSON");
    expect_case_error("{\"format\": \"dsv4c-case/2\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4}}",
                      "\"format\" must be \"dsv4c-case/1\"");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v5.compress\", \"params\": {\"compress_ratio\": 4}}",
                      "unknown \"stage\" v5.compress");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"params\": {\"compress_ratio\": 4}}", "unknown \"stage\" (missing)");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\"}", "\"params\" object missing");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"head_dim\": 512}}",
                      "params.compress_ratio missing");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4.5}}",
                      "not integers");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4, \"head_dim\": 127.5}}",
                      "not integers");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.rope_plain_insert\", \"params\": {\"compress_ratio\": 1, "
                      "\"cache_dtype\": \"fp16\"}}",
                      "unknown params.cache_dtype \"fp16\"");
}

Test(case_errors, broken_tensor_names_its_file) {
    char dir[64], path[128], error[1024];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    support_write_text(path, "{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4}}");
    snprintf(path, sizeof path, "%s/positions.npy", dir);
    support_write_text(path, "not numpy at all");
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "positions.npy: not a .npy file") != NULL, "%s", error);
    support_remove_tree(dir);
}

Test(case_errors, defaults_source_and_meta) {
    char dir[64], path[128], error[1024];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    support_write_text(path, "{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.save_compress_norm\", \"params\": {\"compress_ratio\": 2}, "
                             "\"source\": \"vllm-triton-h200 (H200, run 3)\", \"meta\": {\"k\": [1, 2]}}");
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), 0, "%s", error);
    cr_expect_eq(c.stage, KVC_STAGE_V41_SAVE_COMPRESS_NORM);
    cr_expect_eq(c.head_dim, 512, "head_dim defaults to 512");
    uint32_t eps_bits;
    float eps = 1e-6f;
    uint32_t want_bits;
    memcpy(&eps_bits, &c.eps, 4);
    memcpy(&want_bits, &eps, 4);
    cr_expect_eq(eps_bits, want_bits, "eps defaults to the fp32 nearest 1e-6");
    cr_expect_eq(c.has_cache_dtype, 0);
    cr_expect_str_eq(c.meta_json, "{\"k\":[1,2]}");
    char label[64];
    kvc_case_source_label(&c, label, sizeof label);
    cr_expect_str_eq(label, "vllm-triton-h200");
    c.source[0] = 0;
    kvc_case_source_label(&c, label, sizeof label);
    cr_expect_str_eq(label, "unknown");
    kvc_case_free(&c);
    support_remove_tree(dir);
}

Test(case_errors, stage_and_dtype_names) {
    for (int s = 0; s < KVC_STAGE_COUNT; s++) cr_expect_eq(kvc_stage_from_name(kvc_stage_name((kvc_stage)s)), s);
    cr_expect_eq(kvc_stage_from_name("v4.compres"), -1);
    cr_expect_str_eq(kvc_stage_name(KVC_STAGE_COUNT), "?");
    for (int d = 0; d < 4; d++) cr_expect_eq(kvc_cache_dtype_from_name(kvc_cache_dtype_name((kvc_cache_dtype)d)), d);
    cr_expect_eq(kvc_cache_dtype_from_name("bf8"), -1);
}

/* ---- stage binders (harness/compare/run_case.c) ------------------------------------ */

typedef struct {
    const char *variant;
    const char *tensors[10];   /* what the binder needs, NULL-terminated */
} binder_spec;

static const binder_spec binders[] = {
    {"v4.save_partial_states/d128/r4", {"positions", "kv", "score", "ape", "slot_mapping", "state_cache", NULL}},
    {"v4.compress/d128/r4",
     {"positions", "block_table", "token_to_req", "slot_mapping", "kv_slot_mapping", "norm_weight", "cos_sin", "state_cache", "kv_cache",
      NULL}},
    {"v4.forward/d128/r4", {"positions", "kv", "score", "ape", "block_table", "kv_slot_mapping", "state_cache", "kv_cache", NULL}},
    {"v41.save_compress_norm/r2", {"positions", "kv_score", "slot_mapping", "norm_weight", "latent", "query_start_loc", "token_to_req",
                                   "state_cache", NULL}},
    {"v41.save_compress_norm/r1", {"positions", "kv_score", "slot_mapping", "norm_weight", "latent", NULL}},
    {"v41.rope_quant_insert", {"positions", "latent", "slot_mapping", "cos_sin", "kv_cache", NULL}},
    {"v41.rope_plain_insert/fp8", {"positions", "latent", "slot_mapping", "cos_sin", "fp8_scale", "kv_cache", NULL}},
    {"v41.forward/r2", {"positions", "kv_score", "kv_slot_mapping", "cos_sin", "latent", "state_cache", "kv_cache", NULL}},
};

/* Runs the case on the reference and expects a "case:" refusal with
 * `needle` in the message and no outputs handed back. */
static void expect_binder_error(const kvc_case *c, const char *needle, const char *what) {
    kvc_run_options options = {.keep_outputs_on_error = 1};
    kvc_run_result result;
    int rc = kvc_run_case(&kvc_reference_backend, c, &options, &result);
    cr_expect_eq(rc, KVC_ERR_PARAM, "%s: %s: status %d, expected KVC_ERR_PARAM", kvc_stage_name(c->stage), what, rc);
    cr_expect(strncmp(result.error.message, "case: ", 6) == 0, "%s: message lacks 'case: ': %s", what, result.error.message);
    cr_expect(strstr(result.error.message, needle) != NULL, "%s: '%s' does not contain '%s'", what, result.error.message, needle);
    cr_expect_eq(result.num_outputs, 0, "%s: a malformed case handed back outputs", what);
    kvc_run_result_free(&result);
}

Test(binder_errors, every_needed_tensor_missing, .timeout = 60) {
    for (size_t b = 0; b < sizeof binders / sizeof binders[0]; b++) {
        kvc_case valid;
        support_make_case(binders[b].variant, KVC_FAM_NORMAL, 5, 0, &valid);
        for (int t = 0; binders[b].tensors[t]; t++) {
            kvc_case c;
            cr_assert_eq(kvc_case_copy(&c, &valid), 0);
            support_hide_tensor(&c, binders[b].tensors[t]);
            char needle[128];
            snprintf(needle, sizeof needle, "tensor %s.npy is missing for stage %s", binders[b].tensors[t], kvc_stage_name(c.stage));
            expect_binder_error(&c, needle, binders[b].variant);
            kvc_case_free(&c);
        }
        kvc_case_free(&valid);
    }
}

/* A dtype of the same or smaller item size, so the binder could not read
 * past the data even if it accepted the tensor. */
static kvc_dtype other_dtype(kvc_dtype dtype) {
    switch (dtype) {
    case KVC_DT_F4: return KVC_DT_I4;
    case KVC_DT_I4: return KVC_DT_F4;
    case KVC_DT_I8: return KVC_DT_F4;
    case KVC_DT_U2: return KVC_DT_U1;
    default: return KVC_DT_U1 == dtype ? KVC_DT_U2 : KVC_DT_U1;
    }
}

Test(binder_errors, every_needed_tensor_with_wrong_dtype_and_rank, .timeout = 60) {
    for (size_t b = 0; b < sizeof binders / sizeof binders[0]; b++) {
        kvc_case valid;
        support_make_case(binders[b].variant, KVC_FAM_NORMAL, 6, 1, &valid);
        for (int t = 0; binders[b].tensors[t]; t++) {
            const char *name = binders[b].tensors[t];
            kvc_case c;
            char needle[128];
            cr_assert_eq(kvc_case_copy(&c, &valid), 0);
            kvc_array *a = kvc_case_get(&c, name);
            cr_assert_not_null(a);
            kvc_dtype right = a->dtype, wrong = other_dtype(right);
            if (wrong == KVC_DT_U2) {   /* u1 -> u2 doubles the bytes: halve the count to stay in bounds */
                a->shape[a->ndim - 1] /= 2;
                a->count /= 2;
            }
            a->dtype = wrong;
            snprintf(needle, sizeof needle, "%s.npy has dtype %s, expected %s", name, kvc_dtype_descr(wrong), kvc_dtype_descr(right));
            expect_binder_error(&c, needle, name);
            kvc_case_free(&c);

            /* One dimension too many: same elements, rank + 1. */
            cr_assert_eq(kvc_case_copy(&c, &valid), 0);
            a = kvc_case_get(&c, name);
            int rank = a->ndim;
            a->shape[a->ndim++] = 1;
            snprintf(needle, sizeof needle, "%s.npy has %d dimensions, expected %d", name, rank + 1, rank);
            expect_binder_error(&c, needle, name);
            kvc_case_free(&c);
        }
        kvc_case_free(&valid);
    }
}

typedef struct {
    const char *variant, *tensor;
    int dim;
} shape_spec;

/* Dimensions the binders pin (token count, row width, R, D, 64). */
static const shape_spec pinned_dims[] = {
    {"v4.save_partial_states/d128/r4", "kv", 1},         {"v4.save_partial_states/d128/r4", "score", 0},
    {"v4.save_partial_states/d128/r4", "ape", 0},        {"v4.save_partial_states/d128/r4", "slot_mapping", 0},
    {"v4.save_partial_states/d128/r4", "state_cache", 2}, {"v4.compress/d128/r4", "token_to_req", 0},
    {"v4.compress/d128/r4", "kv_slot_mapping", 0},       {"v4.compress/d128/r4", "norm_weight", 0},
    {"v4.compress/d128/r4", "cos_sin", 1},               {"v4.compress/d128/r4", "kv_cache", 2},
    {"v41.save_compress_norm/r2", "kv_score", 1},        {"v41.save_compress_norm/r2", "norm_weight", 0},
    {"v41.save_compress_norm/r2", "latent", 1},          {"v41.save_compress_norm/r2", "token_to_req", 0},
    {"v41.save_compress_norm/r2", "state_cache", 2},     {"v41.rope_quant_insert", "latent", 0},
    {"v41.rope_plain_insert/fp8", "fp8_scale", 0},       {"v41.rope_plain_insert/bf16", "kv_cache", 2},
};

Test(binder_errors, pinned_dimensions_one_too_small, .timeout = 60) {
    for (size_t i = 0; i < sizeof pinned_dims / sizeof pinned_dims[0]; i++) {
        const shape_spec *s = &pinned_dims[i];
        kvc_case c;
        support_make_case(s->variant, KVC_FAM_NORMAL, 7, 2, &c);
        kvc_array *a = kvc_case_get(&c, s->tensor);
        cr_assert_not_null(a, "%s has no %s", s->variant, s->tensor);
        int64_t right = a->shape[s->dim];
        /* Smaller, so an accepted tensor would still be in bounds; a
         * pinned size of 1 becomes 2 (the binder refuses before reading). */
        int64_t wrong = right > 1 ? right - 1 : 2;
        a->shape[s->dim] = wrong;
        char needle[128];
        snprintf(needle, sizeof needle, "%s.npy dimension %d is %lld, expected %lld", s->tensor, s->dim, (long long)wrong, (long long)right);
        expect_binder_error(&c, needle, s->variant);
        kvc_case_free(&c);
    }
}

Test(binder_errors, empty_query_start_loc) {
    kvc_case c;
    support_make_case("v41.save_compress_norm/r2", KVC_FAM_NORMAL, 8, 0, &c);
    kvc_array *qsl = kvc_case_get(&c, "query_start_loc");
    qsl->shape[0] = 0;
    qsl->count = 0;
    expect_binder_error(&c, "query_start_loc.npy is empty", "query_start_loc");
    kvc_case_free(&c);
}

Test(binder_errors, unsupported_params) {
    kvc_case c;
    support_make_case("v4.compress/d128/r4", KVC_FAM_NORMAL, 9, 0, &c);
    c.compress_ratio = 3;
    expect_binder_error(&c, "params.compress_ratio = 3 is not supported by v4.compress", "R");
    c.compress_ratio = 4;
    c.head_dim = 256;
    expect_binder_error(&c, "params.head_dim = 256 is not supported by v4.compress", "D");
    kvc_case_free(&c);

    support_make_case("v41.forward/r2", KVC_FAM_NORMAL, 9, 0, &c);
    c.compress_ratio = 4;
    expect_binder_error(&c, "params.compress_ratio = 4 is not supported by v41.forward", "R");
    c.compress_ratio = 2;
    c.head_dim = 128;
    expect_binder_error(&c, "params.head_dim = 128 is not supported by v41.forward", "D");
    kvc_case_free(&c);

    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 9, 0, &c);
    c.has_cache_dtype = 0;
    expect_binder_error(&c, "params.cache_dtype is required", "cache_dtype");
    c.has_cache_dtype = 1;
    c.stage = KVC_STAGE_COUNT;
    c.compress_ratio = 1;
    expect_binder_error(&c, "unknown stage", "stage");
    kvc_case_free(&c);
}

Test(binder_errors, backend_without_the_stage) {
    static const kvc_backend empty = {.name = "empty"};
    static const struct {
        const char *variant, *needle;
    } cases[] = {
        {"v4.save_partial_states/d128/r4", "backend empty has no v4.save_partial_states"},
        {"v4.compress/d128/r4", "backend empty has no v4.compress"},
        {"v41.save_compress_norm/r1", "backend empty has no v41.save_compress_norm"},
        {"v41.rope_quant_insert", "backend empty has no v41.rope_quant_insert"},
        {"v41.rope_plain_insert/bf16", "backend empty has no v41.rope_plain_insert"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvc_case c;
        support_make_case(cases[i].variant, KVC_FAM_NORMAL, 10, 0, &c);
        kvc_run_result result;
        int rc = kvc_run_case(&empty, &c, NULL, &result);
        cr_expect_eq(rc, KVC_ERR_PARAM, "%s", cases[i].variant);
        cr_expect(strstr(result.error.message, cases[i].needle) != NULL, "'%s' lacks '%s'", result.error.message, cases[i].needle);
        kvc_run_result_free(&result);
        kvc_case_free(&c);
    }
}

/* A stage error (not a "case:" error) keeps the outputs when asked, so
 * that replay can check nothing was written. */
Test(binder_errors, stage_rejection_keeps_unwritten_outputs) {
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 11, "slot_mapping", "kv_cache", &c);
    kvc_array *cache = kvc_case_get(&c, "kv_cache");
    kvc_run_options keep = {.keep_outputs_on_error = 1};
    kvc_run_result result;
    int rc = kvc_run_case(&kvc_reference_backend, &c, &keep, &result);
    cr_assert_eq(rc, KVC_ERR_INDEX, "status %d: %s", rc, result.error.message);
    cr_expect(strstr(result.error.message, "slot_mapping") != NULL, "%s", result.error.message);
    cr_assert_eq(result.num_outputs, 1);
    cr_expect_str_eq(result.outputs[0].name, "kv_cache");
    cr_expect_eq(memcmp(result.outputs[0].array.data, cache->data, (size_t)cache->count * 2), 0, "a rejected stage wrote kv_cache");
    kvc_run_result_free(&result);
    kvc_run_options drop = {0};
    rc = kvc_run_case(&kvc_reference_backend, &c, &drop, &result);
    cr_expect_eq(rc, KVC_ERR_INDEX);
    cr_expect_eq(result.num_outputs, 0, "outputs handed back without keep_outputs_on_error");
    kvc_run_result_free(&result);
    kvc_case_free(&c);
}

/* A backend that writes one byte into the padding after page 0. */
static int insert_into_padding(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)err;
    ((uint8_t *)a->kv_cache.data)[a->kv_cache.page_bytes + 3] ^= 0xFF;
    return KVC_OK;
}

Test(binder_errors, padding_writes_are_caught_by_run_and_replay) {
    static const kvc_backend scribbler = {.name = "scribbler", .v41_rope_plain_insert = insert_into_padding};
    kvc_case c;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 12, 0, &c);
    kvc_run_options options = {.page_padding = 64, .canary = 0xA5};
    kvc_run_result result;
    cr_assert_eq(kvc_run_case(&scribbler, &c, &options, &result), KVC_OK);
    cr_expect_eq(result.padding_touched, 1);
    cr_expect_str_eq(result.padding_message, "kv_cache: padding byte 3 after page 0 was written");
    kvc_run_result_free(&result);

    /* The same through replay: a FAIL line naming the padding byte. */
    char dir[64], case_dir[128], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(case_dir, sizeof case_dir, "%s/case", dir);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
    cr_assert_eq(kvc_case_save(case_dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    kvc_replay_options replay = {.backend = &scribbler, .impl_name = "scribbler.so", .policy = KVC_POLICY_EXACT, .page_padding = 64,
                                 .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    char out_path[128];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    fflush(stdout);
    cr_assert_not_null(freopen(out_path, "w", stdout));
    int failed = kvc_replay_case(case_dir, &replay, &totals, NULL);
    fflush(stdout);
    char *text = support_read_file(out_path);
    cr_expect_eq(failed, 1);
    cr_expect_eq(totals.failed, 1);
    cr_expect(strstr(text, "FAIL [") && strstr(text, "kv_cache: padding byte 3 after page 0 was written"), "%s", text);
    cr_expect(strstr(text, "__REPRO: build/kvcmp replay --impl scribbler.so --policy exact ") != NULL, "%s", text);
    free(text);
    support_remove_tree(dir);
}

/* Backends that reject their input after writing anyway: into the cache,
 * or into the padding after page 0. */
static int reject_after_writing_the_cache(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[1] ^= 0x01;
    return kvc_fail(err, KVC_ERR_INDEX, "slot_mapping[0] rejected (test backend)");
}
static int reject_after_writing_the_padding(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[a->kv_cache.page_bytes] ^= 0x01;
    return kvc_fail(err, KVC_ERR_INDEX, "slot_mapping[0] rejected (test backend)");
}

static int reject_after_writing_nothing(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)a;
    return kvc_fail(err, KVC_ERR_INDEX, "slot_mapping[0] rejected (test backend)");
}

/* Replays a case without expected outputs (an input every implementation
 * must reject untouched) through `backend`; returns stdout. */
static char *replay_rejection_case(const kvc_backend *backend, int *failed) {
    char dir[64], case_dir[128], out_path[128], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(case_dir, sizeof case_dir, "%s/case", dir);
    kvc_case c;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 13, 0, &c);
    cr_assert_eq(kvc_case_save(case_dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    kvc_replay_options replay = {.backend = backend, .impl_name = "test.so", .policy = KVC_POLICY_VLLM, .page_padding = 64};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    fflush(stdout);
    cr_assert_not_null(freopen(out_path, "w", stdout));
    *failed = kvc_replay_case(case_dir, &replay, &totals, NULL);
    fflush(stdout);
    char *text = support_read_file(out_path);
    cr_expect_eq(totals.failed, *failed);
    cr_expect_eq(totals.passed, !*failed);
    support_remove_tree(dir);
    return text;
}

Test(binder_errors, rejection_that_wrote_the_cache_fails_replay) {
    static const kvc_backend writer = {.name = "writer", .v41_rope_plain_insert = reject_after_writing_the_cache};
    int failed;
    char *text = replay_rejection_case(&writer, &failed);
    cr_expect_eq(failed, 1);
    cr_expect(strstr(text, ": rejected (index-out-of-range) but wrote kv_cache\n") != NULL, "%s", text);
    cr_expect(strstr(text, "__REPRO: build/kvcmp replay --impl test.so --policy vllm ") != NULL, "%s", text);
    free(text);
}

Test(binder_errors, rejection_that_wrote_the_padding_fails_replay) {
    static const kvc_backend writer = {.name = "writer", .v41_rope_plain_insert = reject_after_writing_the_padding};
    int failed;
    char *text = replay_rejection_case(&writer, &failed);
    cr_expect_eq(failed, 1);
    cr_expect(strstr(text, ": rejected, but kv_cache: padding byte 0 after page 0 was written\n") != NULL, "%s", text);
    free(text);
}

Test(binder_errors, clean_rejection_passes_replay) {
    static const kvc_backend refuser = {.name = "refuser", .v41_rope_plain_insert = reject_after_writing_nothing};
    int failed;
    char *text = replay_rejection_case(&refuser, &failed);
    cr_expect_eq(failed, 0);
    cr_expect(strstr(text, "PASS [") && strstr(text, ": rejected as expected, nothing written: index-out-of-range: slot_mapping[0] rejected"),
              "%s", text);
    free(text);
}

/* ---- compare: every region under both policies -------------------------- */

/* A hand-built case with one cache tensor `name` (input all zero),
 * NAME.out = `expected`, and a result whose output is `got`. */
typedef struct {
    kvc_case c;
    kvc_run_result result;
    uint8_t *expected, *got, *input;
    size_t bytes;
} compare_fixture;

static void fixture_init(compare_fixture *f, kvc_stage stage, int cache_dtype, const char *name, kvc_dtype dtype, int ndim,
                         const int64_t *shape) {
    memset(f, 0, sizeof *f);
    f->c.stage = stage;
    f->c.head_dim = cache_dtype == KVC_CACHE_FP8_INDEXER ? 128 : 512;
    f->c.compress_ratio = stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM ? 1 : 4;
    if (cache_dtype >= 0) {
        f->c.has_cache_dtype = 1;
        f->c.cache_dtype = (kvc_cache_dtype)cache_dtype;
    }
    kvc_array input, expected, got;
    cr_assert_eq(kvc_array_alloc(&input, dtype, ndim, shape), 0);
    cr_assert_eq(kvc_array_alloc(&expected, dtype, ndim, shape), 0);
    cr_assert_eq(kvc_array_alloc(&got, dtype, ndim, shape), 0);
    f->bytes = (size_t)input.count * (size_t)kvc_dtype_size(dtype);
    /* Every row written (non-zero) except where a test clears it again. */
    for (size_t i = 0; i < f->bytes; i++) ((uint8_t *)expected.data)[i] = (uint8_t)(0x20 + i % 7);
    memcpy(got.data, expected.data, f->bytes);
    f->input = input.data;
    f->expected = expected.data;
    f->got = got.data;
    char out_name[64];
    snprintf(out_name, sizeof out_name, "%s.out", name);
    cr_assert_eq(kvc_case_put(&f->c, name, &input), 0);
    cr_assert_eq(kvc_case_put(&f->c, out_name, &expected), 0);
    f->result.num_outputs = 1;
    snprintf(f->result.outputs[0].name, sizeof f->result.outputs[0].name, "%s", name);
    f->result.outputs[0].array = got;
}

static void fixture_free(compare_fixture *f) {
    kvc_run_result_free(&f->result);
    kvc_case_free(&f->c);
}

/* Sets expected and got at byte offset `offset` (width bytes, little endian). */
static void fixture_set(compare_fixture *f, size_t offset, int width, uint32_t expected, uint32_t got) {
    memcpy(f->expected + offset, &expected, (size_t)width);
    memcpy(f->got + offset, &got, (size_t)width);
}

typedef struct {
    kvc_region region;
    int64_t steps;            /* the distance reported as max_steps */
    int fails_exact, fails_vllm;
    const char *first;        /* the first-failure text under exact */
} compare_expectation;

static void expect_classification(compare_fixture *f, const compare_expectation *want) {
    for (int policy = KVC_POLICY_EXACT; policy <= KVC_POLICY_VLLM; policy++) {
        kvc_compare_report report;
        kvc_compare_outputs(&f->c, &f->result, (kvc_policy)policy, &report);
        const char *pname = policy == KVC_POLICY_EXACT ? "exact" : "vllm";
        int should_fail = policy == KVC_POLICY_EXACT ? want->fails_exact : want->fails_vllm;
        cr_expect_eq(report.differing[want->region], 1, "%s: %s differing = %lld", pname, kvc_region_name(want->region),
                     (long long)report.differing[want->region]);
        cr_expect_eq(report.max_steps[want->region], want->steps, "%s: %s max steps %lld, expected %lld", pname,
                     kvc_region_name(want->region), (long long)report.max_steps[want->region], (long long)want->steps);
        cr_expect_eq(kvc_report_failed(&report), should_fail, "%s: %s should %s", pname, kvc_region_name(want->region),
                     should_fail ? "fail" : "pass");
        cr_expect_eq(kvc_report_differs(&report), 1);
        for (int r = 0; r < KVC_REGION_COUNT; r++)
            if (r != (int)want->region) cr_expect_eq(report.differing[r], 0, "%s also counted as %s", kvc_region_name(want->region),
                                                     kvc_region_name(r));
        if (policy == KVC_POLICY_EXACT && want->first) {
            cr_expect_eq(report.has_first, 1);
            cr_expect_str_eq(report.first, want->first);
        }
        char summary[700];
        kvc_report_summary(&report, summary, sizeof summary);
        cr_expect(strstr(summary, kvc_region_name(want->region)) != NULL, "summary '%s'", summary);
        if (!should_fail) cr_expect(strstr(summary, "within tolerance") != NULL, "summary '%s'", summary);
        if (want->steps == INT64_MAX) cr_expect(strstr(summary, "NaN/untouched") != NULL, "summary '%s'", summary);
    }
}

/* fp8_ds_mla page of 2 rows: 2 x 576 token bytes, then 2 x 8 scale bytes. */
static void ds_mla_fixture(compare_fixture *f) {
    int64_t shape[3] = {2, 2, 584};
    fixture_init(f, KVC_STAGE_V4_COMPRESS, KVC_CACHE_FP8_DS_MLA, "kv_cache", KVC_DT_U1, 3, shape);
}

Test(compare_regions, ds_mla_nope_code) {
    compare_fixture f;
    ds_mla_fixture(&f);
    fixture_set(&f, 1168 + 576 + 5, 1, 0x30, 0x31);   /* page 1 row 1 nope[5], one step */
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_CODE, 1, 1, 0,
                                                     "kv_cache page 1 row 1 nope[5] (NoPE code) expected=0x30 got=0x31"});
    fixture_free(&f);
    ds_mla_fixture(&f);
    fixture_set(&f, 5, 1, 0x01, 0x81);   /* +1 vs -1 code: two steps across zero */
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_CODE, 2, 1, 1, NULL});
    fixture_free(&f);
    ds_mla_fixture(&f);
    fixture_set(&f, 7, 1, 0x7F, 0x30);   /* NaN vs a number */
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_CODE, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
}

Test(compare_regions, ds_mla_rope_value) {
    compare_fixture f;
    ds_mla_fixture(&f);
    fixture_set(&f, 448 + 2 * 3, 2, 0x3F80, 0x3F81);   /* row 0 rope[3], one bf16 ulp */
    expect_classification(&f, &(compare_expectation){KVC_REGION_ROPE_VALUE, 1, 1, 0,
                                                     "kv_cache page 0 row 0 rope[3] (RoPE value) expected=0x3f80 got=0x3f81"});
    fixture_free(&f);
    ds_mla_fixture(&f);
    fixture_set(&f, 448, 2, 0x7FC0, 0x3F80);
    expect_classification(&f, &(compare_expectation){KVC_REGION_ROPE_VALUE, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
}

Test(compare_regions, ds_mla_scale_bytes) {
    compare_fixture f;
    ds_mla_fixture(&f);
    fixture_set(&f, 1152 + 8 + 2, 1, 120, 121);   /* page 0 row 1 scale[2] */
    expect_classification(&f, &(compare_expectation){KVC_REGION_SCALE_BYTE, 1, 1, 0,
                                                     "kv_cache page 0 row 1 scale[2] (scale byte) expected=0x78 got=0x79"});
    fixture_free(&f);
    ds_mla_fixture(&f);
    fixture_set(&f, 1152 + 7, 1, 0, 1);   /* the zero pad byte: any change fails */
    expect_classification(&f, &(compare_expectation){KVC_REGION_SCALE_BYTE, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
    ds_mla_fixture(&f);
    fixture_set(&f, 1152, 1, 255, 254);   /* UE8M0 255 (inf/NaN scale) vs a finite one */
    expect_classification(&f, &(compare_expectation){KVC_REGION_SCALE_BYTE, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
}

Test(compare_regions, ds_mla_untouched_row) {
    compare_fixture f;
    ds_mla_fixture(&f);
    /* Row 0 of page 1 is left as the input (all zero) by the expected output. */
    memset(f.expected + 1168, 0, 576);
    memset(f.expected + 1168 + 1152, 0, 8);
    memset(f.got + 1168, 0, 576);
    memset(f.got + 1168 + 1152, 0, 8);
    fixture_set(&f, 1168 + 1152 + 1, 1, 0, 1);   /* its scale byte written anyway */
    expect_classification(&f, &(compare_expectation){KVC_REGION_UNTOUCHED, INT64_MAX, 1, 1,
                                                     "kv_cache page 1 row 0 scale[1] (untouched byte) expected=0x00 got=0x01"});
    fixture_free(&f);
}

/* fp8_indexer page of 2 rows: 2 x 128 codes, then 2 fp32 scales. */
Test(compare_regions, indexer_codes_and_scales) {
    int64_t shape[3] = {1, 2, 132};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V4_COMPRESS, KVC_CACHE_FP8_INDEXER, "kv_cache", KVC_DT_U1, 3, shape);
    fixture_set(&f, 128 + 9, 1, 0x40, 0x3F);
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_CODE, 1, 1, 0,
                                                     "kv_cache page 0 row 1 code[9] (NoPE code) expected=0x40 got=0x3f"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V4_COMPRESS, KVC_CACHE_FP8_INDEXER, "kv_cache", KVC_DT_U1, 3, shape);
    fixture_set(&f, 256 + 4, 4, 0x3E000000u, 0x3E800000u);   /* 2^-3 vs 2^-2: one binade */
    expect_classification(&f, &(compare_expectation){KVC_REGION_SCALE_BYTE, 1, 1, 0,
                                                     "kv_cache page 0 row 1 scale (fp32) (scale byte) expected=0x3e000000 got=0x3e800000"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V4_COMPRESS, KVC_CACHE_FP8_INDEXER, "kv_cache", KVC_DT_U1, 3, shape);
    fixture_set(&f, 256, 4, 0x3E000000u, 0x3E400000u);   /* not a power of two */
    expect_classification(&f, &(compare_expectation){KVC_REGION_SCALE_BYTE, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
}

Test(compare_regions, plain_bf16_and_fp8_rows) {
    int64_t bf16_shape[3] = {1, 2, 512}, fp8_shape[3] = {1, 2, 512};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_BF16, "kv_cache", KVC_DT_U2, 3, bf16_shape);
    fixture_set(&f, 2 * (512 + 10), 2, 0x4000, 0x4001);   /* row 1 dim 10: a NoPE value, exact under both */
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_VALUE, 1, 1, 1,
                                                     "kv_cache row 1 dim 10 (NoPE value) expected=0x4000 got=0x4001"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_BF16, "kv_cache", KVC_DT_U2, 3, bf16_shape);
    fixture_set(&f, 2 * 500, 2, 0x4000, 0x3FFF);   /* dim 500: RoPE */
    expect_classification(&f, &(compare_expectation){KVC_REGION_ROPE_VALUE, 1, 1, 0, "kv_cache row 0 dim 500 (RoPE value) expected=0x4000 got=0x3fff"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_FP8_E4M3, "kv_cache", KVC_DT_U1, 3, fp8_shape);
    fixture_set(&f, 512 + 3, 1, 0x22, 0x23);
    expect_classification(&f, &(compare_expectation){KVC_REGION_NOPE_CODE, 1, 1, 0, "kv_cache row 1 dim 3 (NoPE code) expected=0x22 got=0x23"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_FP8_E4M3, "kv_cache", KVC_DT_U1, 3, fp8_shape);
    fixture_set(&f, 460, 1, 0x22, 0x21);
    expect_classification(&f, &(compare_expectation){KVC_REGION_ROPE_VALUE, 1, 1, 0, "kv_cache row 0 dim 460 (RoPE value) expected=0x22 got=0x21"});
    fixture_free(&f);
}

Test(compare_regions, state_rows_and_latent) {
    int64_t state_shape[3] = {1, 2, 256}, latent_shape[2] = {2, 512};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V4_SAVE_PARTIAL_STATES, -1, "state_cache", KVC_DT_F4, 3, state_shape);
    fixture_set(&f, 4 * (256 + 17), 4, 0x3F800000u, 0x3F800001u);
    expect_classification(&f, &(compare_expectation){KVC_REGION_STATE_ROW, 1, 1, 1,
                                                     "state_cache slot 1 column 17 (state row) expected=0x3f800000 got=0x3f800001"});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V4_SAVE_PARTIAL_STATES, -1, "state_cache", KVC_DT_F4, 3, state_shape);
    fixture_set(&f, 0, 4, 0x7FC00000u, 0x00000000u);
    expect_classification(&f, &(compare_expectation){KVC_REGION_STATE_ROW, INT64_MAX, 1, 1, NULL});
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V41_SAVE_COMPRESS_NORM, -1, "latent", KVC_DT_U2, 2, latent_shape);
    fixture_set(&f, 1024 + 2 * 33, 2, 0xBF80, 0xBF81);
    expect_classification(&f, &(compare_expectation){KVC_REGION_LATENT, 1, 1, 1,
                                                     "latent token 1 dim 33 (latent value) expected=0xbf80 got=0xbf81"});
    fixture_free(&f);
}

/* SPEC.md section 1: every NaN a stage writes is canonical, and README:
 * `--policy exact` compares every byte.  A non-canonical NaN payload
 * must therefore fail the exact policy. */
Test(compare_regions, exact_policy_fails_a_non_canonical_nan) {
    int64_t state_shape[3] = {1, 1, 256}, latent_shape[2] = {1, 512};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V4_SAVE_PARTIAL_STATES, -1, "state_cache", KVC_DT_F4, 3, state_shape);
    fixture_set(&f, 4 * 44, 4, 0x7FC00000u, 0x7FC00001u);
    kvc_compare_report report;
    kvc_compare_outputs(&f.c, &f.result, KVC_POLICY_EXACT, &report);
    cr_expect_eq(report.differing[KVC_REGION_STATE_ROW], 1);
    cr_expect_eq(kvc_report_failed(&report), 1, "exact passed fp32 NaN 0x7fc00001 where 0x7fc00000 was expected");
    fixture_free(&f);
    fixture_init(&f, KVC_STAGE_V41_SAVE_COMPRESS_NORM, -1, "latent", KVC_DT_U2, 2, latent_shape);
    fixture_set(&f, 10, 2, 0x7FC0, 0xFFC0);
    kvc_compare_outputs(&f.c, &f.result, KVC_POLICY_EXACT, &report);
    cr_expect_eq(kvc_report_failed(&report), 1, "exact passed bf16 NaN 0xffc0 where 0x7fc0 was expected");
    fixture_free(&f);
}

Test(compare_regions, missing_or_misshapen_expected_tensor) {
    int64_t shape[3] = {1, 2, 512};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_BF16, "kv_cache", KVC_DT_U2, 3, shape);
    kvc_case_get(&f.c, "kv_cache.out")->dtype = KVC_DT_I4;   /* misshapen: other dtype */
    kvc_compare_report report;
    kvc_compare_outputs(&f.c, &f.result, KVC_POLICY_VLLM, &report);
    cr_expect_eq(report.missing_expected, 1);
    cr_expect_str_eq(report.missing_name, "kv_cache.out");
    cr_expect_eq(kvc_report_failed(&report), 1);
    cr_expect_eq(kvc_report_differs(&report), 1);
    char summary[700];
    kvc_report_summary(&report, summary, sizeof summary);
    cr_expect(strstr(summary, "expected tensor kv_cache.out missing or misshapen") != NULL, "%s", summary);
    fixture_free(&f);
}

Test(compare_regions, results_compared_with_each_other) {
    int64_t shape[3] = {1, 2, 512};
    compare_fixture f;
    fixture_init(&f, KVC_STAGE_V41_ROPE_PLAIN_INSERT, KVC_CACHE_BF16, "kv_cache", KVC_DT_U2, 3, shape);
    kvc_run_result expected = {.num_outputs = 1};
    snprintf(expected.outputs[0].name, sizeof expected.outputs[0].name, "kv_cache");
    expected.outputs[0].array = *kvc_case_get(&f.c, "kv_cache.out");   /* borrowed, not freed here */
    kvc_compare_report report;
    kvc_compare_results(&f.c, &expected, &f.result, KVC_POLICY_EXACT, &report);
    cr_expect_eq(kvc_report_differs(&report), 0, "identical results differ");
    cr_expect_eq(report.bytes_compared, 2048);
    fixture_set(&f, 2 * 449, 2, 0x1234, 0x1235);
    kvc_compare_results(&f.c, &expected, &f.result, KVC_POLICY_VLLM, &report);
    cr_expect_eq(report.differing[KVC_REGION_ROPE_VALUE], 1);
    cr_expect_eq(kvc_report_failed(&report), 0);
    kvc_run_result none = {0};
    kvc_compare_results(&f.c, &expected, &none, KVC_POLICY_EXACT, &report);
    cr_expect_eq(report.missing_expected, 1, "a result with fewer outputs compares as missing");
    fixture_free(&f);
}

/* ---- plug-in loading -------------------------------------------------------- */

Test(plugin_errors, not_a_file) {
    char error[512] = "";
    cr_expect_null(kvc_plugin_load("/nonexistent/candidate.so", error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate /nonexistent/candidate.so") != NULL, "%s", error);
    /* A bare name is a file in the current directory, never a library-path search. */
    cr_expect_null(kvc_plugin_load("libm.so.6", error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate libm.so.6") && strstr(error, "./libm.so.6"), "%s", error);
    /* A text file is not a shared object. */
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/fake.so", dir);
    support_write_text(path, "not ELF\n");
    cr_expect_null(kvc_backend_by_name(path, error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate") != NULL, "%s", error);
    support_remove_tree(dir);
}

Test(plugin_errors, library_without_the_entry_symbol) {
    /* libcjson is loaded already, wherever it lives on this machine. */
    Dl_info info;
    cr_assert(dladdr((void *)cJSON_Version, &info) && info.dli_fname, "cannot locate libcjson");
    char error[512] = "";
    cr_expect_null(kvc_plugin_load(info.dli_fname, error, sizeof error));
    cr_expect(strstr(error, "exports no kvcmp_plugin_entry()") != NULL, "%s", error);
}

Test(plugin_errors, unknown_implementation_name) {
    char error[512] = "";
    cr_expect_null(kvc_backend_by_name("fast", error, sizeof error));
    cr_expect(strstr(error, "unknown implementation 'fast'") != NULL, "%s", error);
    cr_expect_eq(kvc_backend_by_name("reference", error, sizeof error), &kvc_reference_backend);
    const kvc_backend *opt = kvc_backend_by_name("optimized", error, sizeof error);
    cr_expect(opt == NULL ? strstr(error, "which this CPU lacks") != NULL : strcmp(opt->name, "opt") == 0, "%s", error);
}

/* A built candidate, when make test has built one: loads with its name. */
Test(plugin_errors, built_candidate_loads) {
    const char *path = "build/examples/wrap_reference.so";
    if (!support_file_exists(path)) cr_skip_test("%s not built (make examples)", path);
    char error[512] = "";
    const kvc_backend *b = kvc_plugin_load(path, error, sizeof error);
    cr_assert_not_null(b, "%s", error);
    cr_expect_not_null(b->v4_compress);
    cr_expect_not_null(b->name);
}

/* ---- chunked histories that diverge (harness/fuzz/history.c) ------------------ */

/* Candidates with a planted bug: the reference, then one flipped byte in
 * what the stage writes (the first kv_cache byte, the first latent value). */
static int compress_then_flip_a_kv_byte(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v4_compress(a, err);
    if (rc == KVC_OK) ((uint8_t *)a->kv_cache.data)[0] ^= 0x80;
    return rc;
}
static int norm_then_flip_a_latent_bit(const kvc_v41_norm_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_save_compress_norm(a, err);
    if (rc == KVC_OK && a->num_tokens > 0) a->latent[0] ^= 0x0001;
    return rc;
}

/* Lockstep must stop at the first step that differs, describe where, and
 * hand back that step as a single case that still tells the two apart. */
static void expect_divergence(const kvc_backend *candidate, int version, int32_t ratio, int32_t head_dim, const char *where,
                              kvc_stage stage) {
    kvc_rng rng;
    kvc_rng_seed(&rng, 77, (uint64_t)version);
    kvc_history h;
    cr_assert_eq(kvc_history_generate(&rng, version, ratio, head_dim, KVC_FAM_NORMAL, &h), 0);
    char detail[600] = "";
    cr_expect_eq(kvc_history_lockstep(&kvc_reference_backend, &kvc_reference_backend, &h, KVC_FEED_CHUNKS, 5, NULL, detail, sizeof detail),
                 0, "the reference diverges from itself: %s", detail);
    kvc_case step;
    int diverged = kvc_history_lockstep(&kvc_reference_backend, candidate, &h, KVC_FEED_SPECULATIVE, 5, &step, detail, sizeof detail);
    cr_assert_eq(diverged, 1, "the planted bug went unnoticed");
    cr_expect(strstr(detail, where) != NULL, "'%s' does not name %s", detail, where);
    cr_expect(strstr(detail, "(token by token with speculative drafts, step ") != NULL, "%s", detail);
    cr_expect_eq(step.stage, stage);
    kvc_run_options options = {0};
    kvc_run_result expected, got;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &step, &options, &expected), KVC_OK, "%s", expected.error.message);
    cr_assert_eq(kvc_run_case(candidate, &step, &options, &got), KVC_OK, "%s", got.error.message);
    kvc_compare_report report;
    kvc_compare_results(&step, &expected, &got, KVC_POLICY_EXACT, &report);
    cr_expect_eq(kvc_report_failed(&report), 1, "the saved step does not reproduce the divergence");
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    kvc_case_free(&step);
    kvc_history_free(&h);
}

Test(history_divergence, v4_kv_cache_byte) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "flip-kv";
    candidate.v4_compress = compress_then_flip_a_kv_byte;
    expect_divergence(&candidate, 4, 4, 128, "kv_cache page 0 byte 0 differs", KVC_STAGE_V4_FORWARD);
}

Test(history_divergence, v41_latent_value) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "flip-latent";
    candidate.v41_save_compress_norm = norm_then_flip_a_latent_bit;
    expect_divergence(&candidate, 41, 2, 512, "latent of position ", KVC_STAGE_V41_FORWARD);
}

Test(history_divergence, candidate_lacking_a_stage_is_skipped) {
    kvc_rng rng;
    kvc_rng_seed(&rng, 78, 0);
    kvc_history h;
    cr_assert_eq(kvc_history_generate(&rng, 4, 4, 128, KVC_FAM_NORMAL, &h), 0);
    kvc_backend partial = kvc_reference_backend;
    partial.v4_compress = NULL;
    char detail[600] = "";
    cr_expect_eq(kvc_history_lockstep(&kvc_reference_backend, &partial, &h, KVC_FEED_CHUNKS, 1, NULL, detail, sizeof detail), -1);
    kvc_history_result result;
    kvc_error err = {0};
    cr_expect_eq(kvc_history_feed(&partial, &h, KVC_FEED_PREFILL, 1, &result, &err), KVC_ERR_UNAVAILABLE, "fed a backend without v4.compress");
    cr_expect(strstr(err.message, "lacks the stages of a V4 forward") != NULL, "%s", err.message);
    kvc_history_free(&h);
}

/* ---- shrinking a case that shows a planted bug (harness/fuzz/shrink.c) ---- */

typedef struct {
    const kvc_backend *candidate;
} planted_bug;

/* The reference accepts the case, and the candidate's bytes differ. */
static int shows_the_planted_bug(const kvc_case *c, void *context) {
    const planted_bug *bug = context;
    kvc_run_result expected, got;
    int rc_ref = kvc_run_case(&kvc_reference_backend, c, NULL, &expected);
    int rc_cand = kvc_run_case(bug->candidate, c, NULL, &got);
    int shows = 0;
    if (rc_ref == KVC_OK && rc_cand == KVC_OK) {
        kvc_compare_report report;
        kvc_compare_results(c, &expected, &got, KVC_POLICY_EXACT, &report);
        shows = kvc_report_failed(&report);
    }
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    return shows;
}

Test(shrink_planted_bug, every_forward_and_compress_variant_shrinks, .timeout = 120) {
    kvc_backend flip_kv = kvc_reference_backend, flip_latent = kvc_reference_backend;
    flip_kv.v4_compress = compress_then_flip_a_kv_byte;
    flip_latent.v41_save_compress_norm = norm_then_flip_a_latent_bit;
    static const char *const variants[] = {"v4.compress/d512/r4", "v4.compress/d128/r128", "v4.forward/d128/r4", "v4.forward/d512/r128",
                                           "v41.save_compress_norm/r2", "v41.save_compress_norm/r1", "v41.forward/r2", "v41.forward/r1"};
    int shrunk = 0, tried = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        for (int64_t k = 0; k < 2; k++) {
            planted_bug bug = {.candidate = variants[v][2] == '1' ? &flip_latent : &flip_kv};
            kvc_case c;
            support_make_case(variants[v], KVC_FAM_HEAVY_TAIL, 41, k, &c);
            if (!shows_the_planted_bug(&c, &bug)) {   /* e.g. a case with no token at all */
                kvc_case_free(&c);
                continue;
            }
            kvc_shrink_stats stats;
            kvc_shrink_case(&c, shows_the_planted_bug, &bug, 2.0, &stats);
            tried++;
            cr_expect(shows_the_planted_bug(&c, &bug), "%s case %lld: the shrunk case lost the bug", variants[v], (long long)k);
            cr_expect_leq(stats.tokens_after, stats.tokens_before, "%s: the shrinker grew the case", variants[v]);
            cr_expect_eq(stats.tokens_after, kvc_case_tokens(&c));
            cr_expect_geq(stats.attempts, stats.accepted);
            shrunk += stats.tokens_after < stats.tokens_before;
            kvc_case_free(&c);
        }
    cr_expect_geq(tried, 8, "only %d cases showed the planted bug", tried);
    cr_expect_geq(shrunk, tried / 2, "only %d of %d cases got smaller", shrunk, tried);
}

/* ---- the fuzzer's verdict on one case (harness/fuzz/run.c) --------------- */

/* Candidates with one planted flaw each. */
static int plain_insert_then_scribble_padding(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    ((uint8_t *)a->kv_cache.data)[a->kv_cache.page_bytes] ^= 0x01;
    return rc;
}
static int plain_insert_refusing_everything(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)a;
    return kvc_fail(err, KVC_ERR_PARAM, "test backend refuses every call");
}
static int plain_insert_writing_before_its_check(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}
/* Right at one thread, one flipped byte at more (a race, in effect). */
static int plain_insert_wrong_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    if (rc == KVC_OK && omp_get_max_threads() > 1) ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return rc;
}

static kvc_fuzz_verdict check_with(kvc_v41_insert_fn insert, const kvc_case *c, int threads, int metamorphic_per_mille) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "planted";
    candidate.v41_rope_plain_insert = insert;
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &candidate, .policy = KVC_POLICY_VLLM,
                              .threads = threads, .metamorphic_per_mille = metamorphic_per_mille};
    kvc_fuzz_verdict verdict;
    kvc_fuzz_outcome outcome = kvc_fuzz_check_case(&target, c, 3, &verdict);
    cr_expect_eq(outcome, verdict.outcome);
    return verdict;
}

static void expect_verdict(const kvc_fuzz_verdict *v, const char *kind, const char *needle) {
    cr_expect_eq(v->outcome, KVC_FUZZ_FAIL, "expected a '%s' failure, got outcome %d (%s)", kind, v->outcome, v->detail);
    cr_expect_str_eq(v->kind, kind, "detail: %s", v->detail);
    cr_expect(strstr(v->detail, needle) != NULL, "'%s' does not contain '%s'", v->detail, needle);
}

Test(fuzz_verdicts, each_planted_flaw_has_its_kind) {
    kvc_case valid, invalid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 14, 0, &valid);
    support_make_index_error_case("v41.rope_plain_insert/bf16", 14, "slot_mapping", "kv_cache", &invalid);
    kvc_fuzz_verdict v = check_with(plain_insert_then_scribble_padding, &valid, 1, 0);
    expect_verdict(&v, "padding", "kv_cache: padding byte 0 after page 0 was written");
    v = check_with(plain_insert_refusing_everything, &valid, 1, 0);
    expect_verdict(&v, "status", "reference returned ok (ok), candidate returned ");
    expect_verdict(&v, "status", "test backend refuses every call");
    v = check_with(plain_insert_writing_before_its_check, &invalid, 1, 0);
    expect_verdict(&v, "written-on-error", "candidate: kv_cache byte 0 changed although the stage returned an error");
    v = check_with(plain_insert_wrong_with_threads, &valid, 1, 1000);
    expect_verdict(&v, "threads", "1 thread(s) vs 2 thread(s): ");
    /* The same flaws are invisible where they cannot show. */
    v = check_with(plain_insert_wrong_with_threads, &valid, 1, 0);
    cr_expect_eq(v.outcome, KVC_FUZZ_PASS, "no metamorphic check, yet: %s: %s", v.kind, v.detail);
    v = check_with(plain_insert_wrong_with_threads, &valid, 2, 0);
    expect_verdict(&v, "bytes", "; first: kv_cache row 0 dim 0 ");
    kvc_case_free(&valid);
    kvc_case_free(&invalid);
}

Test(fuzz_verdicts, candidate_without_the_stage_is_skipped) {
    kvc_case c;
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 15, 0, &c);
    kvc_fuzz_verdict v = check_with(NULL, &c, 1, 0);
    cr_expect_eq(v.outcome, KVC_FUZZ_SKIP);
    cr_expect(strstr(v.detail, "candidate planted has no v41.rope_plain_insert") != NULL, "%s", v.detail);
    kvc_case_free(&c);
}

/* libFuzzer drives the generator from its input bytes (fuzz/libfuzzer_entry.c):
 * the same bytes must give the same case, and the bytes run out into
 * the seeded stream without harm. */
Test(fuzz_verdicts, generator_from_input_bytes_is_deterministic) {
    uint8_t input[64];
    for (size_t i = 0; i < sizeof input; i++) input[i] = (uint8_t)(i * 29 + 3);
    for (size_t size = 1; size <= sizeof input; size += 21) {
        kvc_gen_config config = {.seed = 0, .invalid_per_mille = 50};
        kvc_gen_case a, b;
        kvc_rng ra, rb;
        kvc_rng_seed(&ra, 0x6B76636D70ull, size);
        kvc_rng_seed(&rb, 0x6B76636D70ull, size);
        ra.bytes = rb.bytes = input;
        ra.bytes_left = rb.bytes_left = size;
        kvc_gen_make_from(&config, &ra, &a);
        kvc_gen_make_from(&config, &rb, &b);
        cr_expect_eq(a.variant, b.variant, "%zu input bytes: variant %d vs %d", size, a.variant, b.variant);
        cr_expect_eq(a.family, b.family);
        cr_expect_eq(ra.bytes_left, 0, "the generator left %zu of %zu input bytes unread", ra.bytes_left, size);
        if (!a.history) {
            cr_expect_eq(a.c.num_tensors, b.c.num_tensors);
            for (int i = 0; i < a.c.num_tensors && i < b.c.num_tensors; i++) {
                const kvc_array *x = &a.c.tensors[i].array, *y = &b.c.tensors[i].array;
                cr_expect(x->count == y->count && memcmp(x->data, y->data, (size_t)x->count * (size_t)kvc_dtype_size(x->dtype)) == 0,
                          "%zu input bytes: tensor %s differs between two generations", size, a.c.tensors[i].name);
            }
        }
        kvc_gen_free(&a);
        kvc_gen_free(&b);
    }
}

static int plain_insert_writing_then_refusing(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return kvc_fail(err, KVC_ERR_INDEX, "test backend wrote, then refused");
}
static int plain_insert_refusing_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    if (omp_get_max_threads() > 1) return kvc_fail(err, KVC_ERR_CONFLICT, "test backend refuses at more than one thread");
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}

/* The side the fuzzer blames is the one that wrote: a "reference" that
 * writes before refusing is named as such. */
Test(fuzz_verdicts, a_reference_that_writes_on_error_is_named) {
    kvc_case invalid;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 16, "slot_mapping", "kv_cache", &invalid);
    kvc_backend writer = kvc_reference_backend;
    writer.v41_rope_plain_insert = plain_insert_writing_then_refusing;
    kvc_fuzz_target target = {.reference = &writer, .candidate = &kvc_reference_backend, .threads = 1};
    kvc_fuzz_verdict v;
    kvc_fuzz_check_case(&target, &invalid, 4, &v);
    expect_verdict(&v, "written-on-error", "reference: kv_cache byte 0 changed although the stage returned an error");
    kvc_case_free(&invalid);
}

Test(fuzz_verdicts, status_that_depends_on_the_thread_count) {
    kvc_case valid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 17, 0, &valid);
    kvc_fuzz_verdict v = check_with(plain_insert_refusing_with_threads, &valid, 1, 1000);
    expect_verdict(&v, "threads", "2 thread(s) returned ");
    kvc_case_free(&valid);
}

/* As `kvcmp replay --page-padding 64` runs it: canary 0xA5, fixed
 * padding, no metamorphic checks even when asked for. */
Test(fuzz_verdicts, replay_conditions_skip_the_metamorphic_checks) {
    kvc_case valid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 18, 0, &valid);
    kvc_backend candidate = kvc_reference_backend;
    candidate.v41_rope_plain_insert = plain_insert_wrong_with_threads;
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &candidate, .threads = 1,
                              .metamorphic_per_mille = 1000, .replay_padding = 64};
    kvc_fuzz_verdict v;
    cr_expect_eq(kvc_fuzz_check_case(&target, &valid, 5, &v), KVC_FUZZ_PASS, "%s: %s", v.kind, v.detail);
    target.replay_padding = 0;
    cr_expect_eq(kvc_fuzz_check_case(&target, &valid, 5, &v), KVC_FUZZ_FAIL, "the thread check did not run without replay_padding");
    kvc_case_free(&valid);
}

/* ---- run_case details -------------------------------------------------- */

/* A V4 compress case without params.cache_dtype takes its cache from
 * head_dim: fp8_indexer for D = 128, fp8_ds_mla for D = 512. */
Test(binder_errors, v4_cache_dtype_defaults_from_head_dim) {
    static const struct {
        const char *variant;
        kvc_cache_dtype dtype;
    } cases[] = {{"v4.compress/d128/r4", KVC_CACHE_FP8_INDEXER}, {"v4.compress/d512/r4", KVC_CACHE_FP8_DS_MLA}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvc_case explicit_dtype, implicit_dtype;
        support_make_case(cases[i].variant, KVC_FAM_NORMAL, 19, 0, &explicit_dtype);
        cr_assert_eq(kvc_case_copy(&implicit_dtype, &explicit_dtype), 0);
        explicit_dtype.has_cache_dtype = 1;
        explicit_dtype.cache_dtype = cases[i].dtype;
        implicit_dtype.has_cache_dtype = 0;
        implicit_dtype.cache_dtype = (kvc_cache_dtype)(3 - (int)cases[i].dtype);   /* a wrong leftover value */
        kvc_run_result a, b;
        cr_assert_eq(kvc_run_case(&kvc_reference_backend, &explicit_dtype, NULL, &a), KVC_OK, "%s", a.error.message);
        cr_assert_eq(kvc_run_case(&kvc_reference_backend, &implicit_dtype, NULL, &b), KVC_OK, "%s", b.error.message);
        cr_expect_eq(implicit_dtype.cache_dtype, cases[i].dtype, "%s: default cache dtype", cases[i].variant);
        cr_assert_eq(a.num_outputs, b.num_outputs);
        for (int o = 0; o < a.num_outputs; o++)
            cr_expect_eq(memcmp(a.outputs[o].array.data, b.outputs[o].array.data, (size_t)a.outputs[o].array.count), 0,
                         "%s: %s differs with the default cache dtype", cases[i].variant, a.outputs[o].name);
        kvc_run_result_free(&a);
        kvc_run_result_free(&b);
        kvc_case_free(&explicit_dtype);
        kvc_case_free(&implicit_dtype);
    }
    kvc_case unknown = {.stage = KVC_STAGE_COUNT};
    const char *names[KVC_MAX_OUTPUTS];
    cr_expect_eq(kvc_stage_outputs(&unknown, names), 0, "an unknown stage has outputs");
}

/* More sources than the tally holds: the last slot takes the rest, and
 * every case is still counted. */
Test(binder_errors, replay_tally_overflows_into_the_last_source, .timeout = 60) {
    char dir[64], case_dir[128], out_path[128], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(case_dir, sizeof case_dir, "%s/case", dir);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    kvc_case c;
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 20, 0, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
    kvc_replay_options replay = {.backend = &kvc_reference_backend, .impl_name = "ref", .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    fflush(stdout);
    cr_assert_not_null(freopen(out_path, "w", stdout));
    int sources = KVC_REPLAY_MAX_SOURCES + 3;
    for (int i = 0; i < sources; i++) {
        snprintf(c.source, sizeof c.source, "source-%02d (test)", i);
        cr_assert_eq(kvc_case_save(case_dir, &c, error, sizeof error), 0, "%s", error);
        cr_expect_eq(kvc_replay_case(case_dir, &replay, &totals, NULL), 0);
    }
    cr_expect_eq(totals.passed, sources);
    cr_expect_eq(totals.num_sources, KVC_REPLAY_MAX_SOURCES);
    cr_expect_str_eq(totals.sources[0].source, "source-00");
    cr_expect_eq(totals.sources[KVC_REPLAY_MAX_SOURCES - 1].passed, 4, "the last slot holds its own case and the 3 beyond");
    kvc_case_free(&c);
    support_remove_tree(dir);
}

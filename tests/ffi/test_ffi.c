/* The flat C API (include/kvcmp/ffi.h) as a foreign caller uses it:
 * cases built from raw bytes, generated cases equal to the fuzzer's,
 * the reference's outputs, a planted one-bit difference reported with
 * both bytes, and the shrinker driven through a callback. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/ffi.h"
#include "kvcmp/generate.h"
#include "tests/test_support.h"

static char error[512];

Test(ffi, abi_and_report_layout) {
    cr_assert_eq(kvc_ffi_abi_version(), KVC_FFI_ABI_VERSION);
    cr_assert_eq(kvc_ffi_report_size(), sizeof(kvc_ffi_report));
    cr_assert_eq(kvc_ffi_region_count(), 7);
    cr_assert_str_eq(kvc_ffi_region_name(0), "NoPE code");
    cr_assert_str_eq(kvc_ffi_region_name(6), "untouched byte");
    cr_assert_str_eq(kvc_ffi_region_name(7), "?");
    cr_assert_str_eq(kvc_ffi_region_name(-1), "?");
}

Test(ffi, create_refuses_unknown_names) {
    cr_assert_null(kvc_ffi_case_create("v4.squash", 4, 512, 1e-6f, NULL, error, sizeof error));
    cr_assert(strstr(error, "unknown stage 'v4.squash'"), "%s", error);
    cr_assert_null(kvc_ffi_case_create("v4.compress", 4, 512, 1e-6f, "fp9", error, sizeof error));
    cr_assert(strstr(error, "unknown cache_dtype 'fp9'"), "%s", error);
    cr_assert_null(kvc_ffi_case_load("/nonexistent/kvcmp-case", error, sizeof error));
    cr_assert(error[0]);
}

Test(ffi, tensors_from_raw_bytes) {
    kvc_ffi_case *c = kvc_ffi_case_create("v41.rope_plain_insert", 2, 512, 1e-6f, "bf16", error, sizeof error);
    cr_assert_not_null(c, "%s", error);
    int32_t ratio, dim;
    float eps;
    const char *dtype;
    kvc_ffi_case_params(c, &ratio, &dim, &eps, &dtype);
    cr_assert(ratio == 2 && dim == 512 && eps == 1e-6f);
    cr_assert_str_eq(dtype, "bf16");
    cr_assert_str_eq(kvc_ffi_case_stage(c), "v41.rope_plain_insert");
    int64_t shape[4] = {2, 3};
    int32_t values[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(kvc_ffi_tensor_put(c, "x", 2, 2, shape, values, sizeof values, error, sizeof error), 0, "%s", error);
    cr_assert_eq(kvc_ffi_tensor_put(c, "x", 9, 2, shape, values, sizeof values, error, sizeof error), -1);
    cr_assert(strstr(error, "tensor x: unknown dtype code 9"), "%s", error);
    cr_assert_eq(kvc_ffi_tensor_put(c, "x", 2, 0, shape, values, sizeof values, error, sizeof error), -1);
    cr_assert(strstr(error, "0 dimensions"), "%s", error);
    cr_assert_eq(kvc_ffi_tensor_put(c, "x", 2, 2, shape, values, 20, error, sizeof error), -1);
    cr_assert(strstr(error, "20 bytes given, its shape and dtype need 24"), "%s", error);
    int64_t negative[1] = {-1};
    cr_assert_eq(kvc_ffi_tensor_put(c, "x", 2, 1, negative, values, 0, error, sizeof error), -1);
    cr_assert(strstr(error, "tensor x: dimension 0 is -1"), "%s", error);
    char long_name[80];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    cr_assert_eq(kvc_ffi_tensor_put(c, long_name, 2, 2, shape, values, sizeof values, error, sizeof error), -1);
    cr_assert(strstr(error, "name too long"), "%s", error);
    cr_assert_eq(kvc_ffi_tensor_count(c), 1);
    cr_assert_str_eq(kvc_ffi_tensor_name(c, 0), "x");
    cr_assert_null(kvc_ffi_tensor_name(c, 1));
    cr_assert_null(kvc_ffi_tensor_name(c, -1));
    int dt, ndim;
    int64_t got_shape[4];
    cr_assert_eq(kvc_ffi_tensor_info(c, "x", &dt, &ndim, got_shape), 0);
    cr_assert(dt == 2 && ndim == 2 && got_shape[0] == 2 && got_shape[1] == 3 && got_shape[2] == 0);
    cr_assert_eq(kvc_ffi_tensor_info(c, "y", &dt, &ndim, got_shape), -1);
    int64_t bytes;
    const int32_t *data = kvc_ffi_tensor_data(c, "x", &bytes);
    cr_assert(bytes == 24 && data[5] == 6);
    cr_assert_null(kvc_ffi_tensor_data(c, "y", &bytes));
    cr_assert_str_eq(kvc_ffi_output_names(c), "kv_cache");
    cr_assert_eq(kvc_ffi_case_set_source(c, "python test", "{\"k\":1}", error, sizeof error), 0);
    cr_assert_str_eq(kvc_ffi_case_source(c), "python test");
    cr_assert_str_eq(kvc_ffi_case_meta(c), "{\"k\":1}");
    cr_assert_eq(kvc_ffi_case_set_source(c, NULL, "", error, sizeof error), 0);
    cr_assert_str_eq(kvc_ffi_case_meta(c), "");
    cr_assert_str_eq(kvc_ffi_case_source(c), "python test");
    kvc_ffi_case_free(c);
    kvc_ffi_case_free(NULL);
}

Test(ffi, generate_is_the_fuzzers_case) {
    kvc_ffi_gen_info info;
    kvc_ffi_case *c = kvc_ffi_generate(7, 3, "v4.compress", NULL, -1, &info, error, sizeof error);
    cr_assert_not_null(c, "%s", error);
    kvc_gen_config config = {.seed = 7, .invalid_per_mille = KVC_GEN_DEFAULT_INVALID_PER_MILLE};
    config.variant_mask = kvc_variant_mask("v4.compress", error, sizeof error);
    kvc_gen_case g;
    kvc_gen_make(&config, 3, &g);
    cr_assert_str_eq(info.variant, kvc_variant(g.variant)->name);
    cr_assert_str_eq(info.family, kvc_family_name(g.family));
    char name[128];
    kvc_gen_case_name(7, 3, g.variant, name, sizeof name);
    cr_assert_str_eq(info.name, name);
    cr_assert(strncmp(info.name, "fuzz-s7-c3-v4.compress_d", 24) == 0, "%s", info.name);
    cr_assert_eq(kvc_ffi_tensor_count(c), g.c.num_tensors);
    for (int i = 0; i < g.c.num_tensors; i++) {
        int64_t bytes;
        const void *data = kvc_ffi_tensor_data(c, g.c.tensors[i].name, &bytes);
        cr_assert_not_null(data);
        cr_assert_eq(bytes, g.c.tensors[i].array.count * kvc_dtype_size(g.c.tensors[i].array.dtype));
        cr_assert_eq(memcmp(data, g.c.tensors[i].array.data, (size_t)bytes), 0, "tensor %s", g.c.tensors[i].name);
    }
    kvc_gen_free(&g);
    kvc_ffi_case_free(c);
}

Test(ffi, generate_refusals_and_history) {
    kvc_ffi_gen_info info;
    cr_assert_null(kvc_ffi_generate(1, 0, "v9", NULL, 0, &info, error, sizeof error));
    cr_assert(strstr(error, "variant 'v9'"), "%s", error);
    cr_assert_null(kvc_ffi_generate(1, 0, NULL, "boring", 0, &info, error, sizeof error));
    cr_assert(strstr(error, "family 'boring'"), "%s", error);
    error[0] = 0;
    cr_assert_null(kvc_ffi_generate(1, 0, "history", "normal", 0, &info, error, sizeof error));
    cr_assert_eq(info.history, 1);
    cr_assert_str_eq(error, "");
    cr_assert(strncmp(info.variant, "history", 7) == 0);
}

/* A generated case the reference accepts, first of seed 11 for the list. */
static kvc_ffi_case *valid_case(const char *variants) {
    kvc_ffi_gen_info info;
    for (int64_t i = 0;; i++) {
        kvc_ffi_case *c = kvc_ffi_generate(11, i, variants, "normal", 0, &info, error, sizeof error);
        cr_assert_not_null(c, "%s", error);
        kvc_ffi_case *out;
        if (kvc_ffi_reference(c, &out, error, sizeof error) == 0) { kvc_ffi_case_free(out); return c; }
        kvc_ffi_case_free(c);
    }
}

Test(ffi, reference_outputs_compare_equal) {
    kvc_ffi_case *c = valid_case("v4.forward/d128");
    kvc_ffi_case *out;
    cr_assert_eq(kvc_ffi_reference(c, &out, error, sizeof error), 0);
    cr_assert_str_eq(kvc_ffi_output_names(c), "state_cache,kv_cache");
    cr_assert_eq(kvc_ffi_tensor_count(out), 2);
    kvc_ffi_report report;
    cr_assert_eq(kvc_ffi_compare(c, out, "exact", &report, error, sizeof error), 0);
    cr_assert(!report.failed && !report.differs && !report.has_first && report.bytes_compared > 0);
    cr_assert_eq(kvc_ffi_compare(c, out, NULL, &report, error, sizeof error), 0);
    cr_assert(!report.failed);
    cr_assert_eq(kvc_ffi_compare(c, out, "close", &report, error, sizeof error), -1);
    cr_assert(strstr(error, "unknown policy 'close'"), "%s", error);
    kvc_ffi_case_free(out);
    kvc_ffi_case_free(c);
}

Test(ffi, one_bit_difference_reported_with_both_bytes) {
    kvc_ffi_case *c = valid_case("v41.save_compress_norm/r1");
    kvc_ffi_case *out;
    cr_assert_eq(kvc_ffi_reference(c, &out, error, sizeof error), 0);
    int64_t bytes;
    uint16_t *latent = (uint16_t *)kvc_ffi_tensor_data(out, "latent", &bytes);
    uint16_t was = latent[3];
    latent[3] ^= 1;
    kvc_ffi_report report;
    cr_assert_eq(kvc_ffi_compare(c, out, "exact", &report, error, sizeof error), 0);
    cr_assert(report.failed && report.differs && report.has_first);
    cr_assert_eq(report.differing[5], 1);   /* latent value */
    cr_assert_eq(report.failing[5], 1);
    cr_assert_str_eq(report.first_tensor, "latent");
    cr_assert_eq(report.first_offset, 6);
    cr_assert_eq(report.first_width, 2);
    cr_assert_eq(report.first_region, 5);
    cr_assert_eq(report.first_expected[0] | report.first_expected[1] << 8, was);
    cr_assert_eq(report.first_got[0] | report.first_got[1] << 8, was ^ 1);
    cr_assert(strstr(report.first, "latent token 0 dim 3 (latent value)"), "%s", report.first);
    cr_assert(strstr(report.summary, "latent value x1"), "%s", report.summary);
    /* Missing output. */
    kvc_ffi_case *empty = kvc_ffi_case_create("v41.save_compress_norm", 1, 512, 1e-6f, NULL, error, sizeof error);
    cr_assert_eq(kvc_ffi_compare(c, empty, "vllm", &report, error, sizeof error), 0);
    cr_assert(report.failed && report.missing);
    cr_assert_str_eq(report.missing_name, "latent");
    cr_assert(strstr(report.summary, "output latent is missing"), "%s", report.summary);
    kvc_ffi_case_free(empty);
    kvc_ffi_case_free(out);
    kvc_ffi_case_free(c);
}

Test(ffi, rejected_case_has_no_outputs) {
    kvc_ffi_gen_info info;
    kvc_ffi_case *c = kvc_ffi_generate(6, 0, "v41.rope_quant_insert", NULL, 1000, &info, error, sizeof error);   /* a corruption the stage reads */
    cr_assert_not_null(c, "%s", error);
    cr_assert(info.invalid[0], "the case was corrupted on purpose");
    kvc_ffi_case *out = (kvc_ffi_case *)1;
    int status = kvc_ffi_reference(c, &out, error, sizeof error);
    cr_assert(status > 0, "the reference rejects a corrupted case");
    cr_assert_null(out);
    kvc_ffi_report report;
    kvc_ffi_case *empty = kvc_ffi_case_create("v41.rope_quant_insert", 0, 512, 1e-6f, "fp8_ds_mla", error, sizeof error);
    cr_assert_eq(kvc_ffi_compare(c, empty, "exact", &report, error, sizeof error), 0);
    cr_assert(report.failed && report.reference_status == status);
    cr_assert(strstr(report.summary, "the reference rejects this case"), "%s", report.summary);
    kvc_ffi_case_free(empty);
    kvc_ffi_case_free(c);
}

Test(ffi, save_and_load_round_trip) {
    char dir[128];
    support_temp_dir(dir, sizeof dir);
    kvc_ffi_case *c = valid_case("v4.save_partial_states");
    char path[256];
    snprintf(path, sizeof path, "%s/case", dir);
    cr_assert_eq(kvc_ffi_case_save(c, path, error, sizeof error), 0, "%s", error);
    kvc_ffi_case *back = kvc_ffi_case_load(path, error, sizeof error);
    cr_assert_not_null(back, "%s", error);
    cr_assert_eq(kvc_ffi_tensor_count(back), kvc_ffi_tensor_count(c));
    for (int i = 0; i < kvc_ffi_tensor_count(c); i++) {
        int64_t a_bytes, b_bytes;
        const char *name = kvc_ffi_tensor_name(c, i);
        const void *a = kvc_ffi_tensor_data(c, name, &a_bytes), *b = kvc_ffi_tensor_data(back, name, &b_bytes);
        cr_assert(b && a_bytes == b_bytes && memcmp(a, b, (size_t)a_bytes) == 0, "tensor %s", name);
    }
    cr_assert_eq(kvc_ffi_case_save(c, "/proc/kvcmp-not-writable", error, sizeof error), -1);
    kvc_ffi_case_free(back);
    kvc_ffi_case_free(c);
    support_remove_tree(dir);
}

/* The shrinker through the callback: "fails" while the case still has
 * more than one token, so it must reduce to exactly one. */
static int calls;
static int more_than_one_token(const kvc_ffi_case *c, void *context) {
    calls++;
    cr_assert_eq(context, &calls);
    int dtype, ndim;
    int64_t shape[4];
    cr_assert_eq(kvc_ffi_tensor_info(c, "positions", &dtype, &ndim, shape), 0);
    return shape[0] > 1;
}

Test(ffi, shrink_through_a_callback) {
    kvc_ffi_gen_info info;
    kvc_ffi_case *c = NULL;
    int64_t tokens = 0;
    for (int64_t i = 0; tokens < 3; i++) {
        kvc_ffi_case_free(c);
        c = kvc_ffi_generate(3, i, "v4.save_partial_states/d128", "normal", 0, &info, error, sizeof error);
        int dtype, ndim;
        int64_t shape[4];
        kvc_ffi_tensor_info(c, "positions", &dtype, &ndim, shape);
        tokens = shape[0];
    }
    int64_t before, after;
    int accepted = kvc_ffi_shrink(c, more_than_one_token, &calls, 10.0, &before, &after);
    cr_assert(accepted > 0 && calls > 0);
    cr_assert_eq(before, tokens);
    cr_assert_eq(after, 2, "the smallest case that still has more than one token");
    cr_assert_geq(kvc_ffi_shrink(c, more_than_one_token, &calls, 1.0, NULL, NULL), 0);
    kvc_ffi_case_free(c);
}

/* The classification of every compared region under both policies. */
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

/* SPEC.md section 1: every NaN a stage writes is canonical, and docs/command-line.md:
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

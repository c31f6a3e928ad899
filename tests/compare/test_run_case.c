/* Stage binders (harness/compare/run_case.c): cases that do not fit their stage
 * (missing tensors, wrong dtypes, ranks and shapes) and backends that write when they reject. */
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

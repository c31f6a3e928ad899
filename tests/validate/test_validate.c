/* Every rejected input: an error naming the tensor and the index, and not
 * one byte written.  Each test takes a valid shared spec case, breaks one
 * piece of metadata, and runs it through the reference. */
#include "tests/test_support.h"
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/case.h"
#include "kvcmp/validate.h"
#include "kvcmp/run.h"

static void load_spec_case(const char *relative, kvc_case *c) {
    char dir[4096], error[512], path[2048];
    snprintf(path, sizeof path, "spec-cases/%s", relative);
    support_corpus_path(path, dir, sizeof dir);
    cr_assert_eq(kvc_case_load(dir, c, error, sizeof error), 0, "%s (fixtures/README.md says what belongs there)", error);
}

static void *tensor(kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    cr_assert_not_null(a, "case lacks %s", name);
    return a->data;
}

/* Run, expect `code` with every fragment in the message, and every output
 * byte equal to its input. */
static void expect_rejected(kvc_case *c, int code, const char *fragment1, const char *fragment2) {
    kvc_run_options options = {.page_padding = 64, .canary = 0xC3, .keep_outputs_on_error = 1};
    kvc_run_result result;
    int rc = kvc_run_case(&kvc_reference_backend, c, &options, &result);
    cr_assert_eq(rc, code, "expected %s, got %s: %s", kvc_status_name(code), kvc_status_name(rc), result.error.message);
    cr_assert(strstr(result.error.message, fragment1), "message '%s' lacks '%s'", result.error.message, fragment1);
    if (fragment2) cr_assert(strstr(result.error.message, fragment2), "message '%s' lacks '%s'", result.error.message, fragment2);
    cr_assert(result.num_outputs > 0, "no outputs kept for the no-write check");
    for (int i = 0; i < result.num_outputs; i++) {
        kvc_array *input = kvc_case_get(c, result.outputs[i].name);
        size_t bytes = (size_t)input->count * (size_t)kvc_dtype_size(input->dtype);
        cr_assert_eq(memcmp(input->data, result.outputs[i].array.data, bytes), 0, "%s was written", result.outputs[i].name);
    }
    cr_assert(!result.padding_touched, "%s", result.padding_message);
    kvc_run_result_free(&result);
    kvc_case_free(c);
}

/* The first token of a case that produces a row. */
static int64_t first_closing(kvc_case *c, const char *slot_name) {
    const int64_t *positions = tensor(c, "positions"), *slots = tensor(c, slot_name);
    int64_t count = kvc_case_get(c, "positions")->count;
    for (int64_t t = 0; t < count; t++)
        if (slots[t] >= 0 && (positions[t] + 1) % c->compress_ratio == 0) return t;
    cr_assert_fail("no closing token");
    return -1;
}

Test(validation, v4_kv_slot_outside_the_cache) {
    kvc_case c;
    load_spec_case("v4.compress/d512_r4_a_s0", &c);
    int64_t t = first_closing(&c, "kv_slot_mapping");
    ((int64_t *)tensor(&c, "kv_slot_mapping"))[t] = 1 << 20;
    char index[64];
    snprintf(index, sizeof index, "kv_slot_mapping[%lld]", (long long)t);
    expect_rejected(&c, KVC_ERR_INDEX, index, "kv_cache");
}

Test(validation, v4_state_slot_outside_the_cache) {
    kvc_case c;
    load_spec_case("v4.save_partial_states/d128_r4_a_s0", &c);
    ((int64_t *)tensor(&c, "slot_mapping"))[0] = 1 << 20;
    expect_rejected(&c, KVC_ERR_INDEX, "slot_mapping[0]", "state_cache");
}

Test(validation, v4_block_table_entry_outside_the_state_cache) {
    kvc_case c;
    load_spec_case("v4.compress/d128_r4_a_s0", &c);
    int64_t t = first_closing(&c, "kv_slot_mapping");
    int32_t req = ((int32_t *)tensor(&c, "token_to_req"))[t];
    int64_t position = ((int64_t *)tensor(&c, "positions"))[t];
    kvc_array *table = kvc_case_get(&c, "block_table");
    int64_t state_block = kvc_case_get(&c, "state_cache")->shape[1];
    ((int32_t *)table->data)[req * table->shape[1] + position / state_block] = 9999;
    expect_rejected(&c, KVC_ERR_INDEX, "block_table[", "9999");
}

Test(validation, v4_window_past_the_block_table) {
    kvc_case c;
    load_spec_case("v4.compress/d512_r128_a_s0", &c);
    /* Keep only the first column of the block table. */
    kvc_array *table = kvc_case_get(&c, "block_table");
    table->shape[1] = 1;
    table->count = table->shape[0];
    expect_rejected(&c, KVC_ERR_INDEX, "block_table[", "past its 1 columns");
}

Test(validation, v4_token_to_req_outside_the_block_table) {
    kvc_case c;
    load_spec_case("v4.compress/d512_r4_b_s0", &c);
    int64_t t = first_closing(&c, "kv_slot_mapping");
    ((int32_t *)tensor(&c, "token_to_req"))[t] = -3;
    char index[64];
    snprintf(index, sizeof index, "token_to_req[%lld]", (long long)t);
    expect_rejected(&c, KVC_ERR_INDEX, index, NULL);
}

Test(validation, v4_cos_sin_row_past_the_table) {
    kvc_case c;
    load_spec_case("v4.forward/d512_r4_a_s0", &c);
    kvc_array *cos_sin = kvc_case_get(&c, "cos_sin");
    cos_sin->shape[0] = 0;
    cos_sin->count = 0;
    expect_rejected(&c, KVC_ERR_INDEX, "cos_sin row", "positions[");
}

Test(validation, v4_negative_position) {
    kvc_case c;
    load_spec_case("v4.save_partial_states/d512_r4_a_s0", &c);
    ((int64_t *)tensor(&c, "positions"))[1] = -5;
    expect_rejected(&c, KVC_ERR_INDEX, "positions[1]", NULL);
}

Test(validation, v4_two_tokens_one_kv_slot) {
    kvc_case c;
    load_spec_case("v4.compress/d128_r4_b_s0", &c);
    int64_t *kv_slots = tensor(&c, "kv_slot_mapping"), *positions = tensor(&c, "positions"), *slots = tensor(&c, "slot_mapping");
    int64_t count = kvc_case_get(&c, "positions")->count, first = -1, second = -1;
    for (int64_t t = 0; t < count; t++)
        if (slots[t] >= 0 && kv_slots[t] >= 0 && (positions[t] + 1) % 4 == 0) {
            if (first < 0) first = t; else if (second < 0) second = t;
        }
    cr_assert(second >= 0, "case needs two closing tokens");
    kv_slots[second] = kv_slots[first];
    expect_rejected(&c, KVC_ERR_CONFLICT, "kv_slot_mapping[", "also written by token");
}

Test(validation, v4_unsupported_ratio_and_head_dim) {
    kvc_v4_compress_args a = {.compress_ratio = 8, .head_dim = 512};
    kvc_error err;
    cr_assert_eq(kvc_validate_v4_compress(&a, &err), KVC_ERR_PARAM);
    cr_assert(strstr(err.message, "compress_ratio = 8"), "%s", err.message);
    a.compress_ratio = 4;
    a.head_dim = 256;
    cr_assert_eq(kvc_validate_v4_compress(&a, &err), KVC_ERR_PARAM);
    cr_assert(strstr(err.message, "head_dim = 256"), "%s", err.message);
}

Test(validation, v41_query_start_loc_not_monotone) {
    kvc_case c;
    load_spec_case("v41.save_compress_norm/r2_cap8_a_s0", &c);
    int32_t *qsl = tensor(&c, "query_start_loc");
    qsl[1] = qsl[2] + 1;
    expect_rejected(&c, KVC_ERR_METADATA, "query_start_loc[", NULL);
}

Test(validation, v41_token_to_req_disagrees) {
    kvc_case c;
    load_spec_case("v41.save_compress_norm/r2_cap8_a_s0", &c);
    ((int32_t *)tensor(&c, "token_to_req"))[0] = 1;
    expect_rejected(&c, KVC_ERR_METADATA, "token_to_req[0]", "request 0");
}

Test(validation, v41_ring_slot_not_at_p_mod_cap) {
    kvc_case c;
    load_spec_case("v41.save_compress_norm/r2_cap8_e_s0", &c);
    int64_t *slots = tensor(&c, "slot_mapping");
    int64_t t = 3;
    cr_assert(slots[t] >= 0);
    slots[t] = slots[t] / 8 * 8 + (slots[t] + 1) % 8;
    char index[64];
    snprintf(index, sizeof index, "slot_mapping[%lld]", (long long)t);
    expect_rejected(&c, KVC_ERR_METADATA, index, "ring row");
}

Test(validation, v41_positions_do_not_follow) {
    kvc_case c;
    load_spec_case("v41.save_compress_norm/r2_cap8_e_s0", &c);
    ((int64_t *)tensor(&c, "positions"))[4] += 2;
    expect_rejected(&c, KVC_ERR_METADATA, "does not follow", NULL);
}

Test(validation, v41_two_requests_one_ring_block) {
    kvc_case c;
    /* Two one-token requests: give request 0 a slot in request 1's block. */
    load_spec_case("v41.save_compress_norm/r2_cap8_a_s0", &c);
    const int32_t *qsl = tensor(&c, "query_start_loc");
    int64_t *slots = tensor(&c, "slot_mapping"), *positions = tensor(&c, "positions");
    cr_assert(qsl[1] == 1 && qsl[2] == 2 && slots[1] >= 0, "case layout changed");
    slots[0] = slots[1] / 8 * 8 + positions[0] % 8;
    expect_rejected(&c, KVC_ERR_CONFLICT, "both name ring block", NULL);
}

Test(validation, v41_bad_fp8_scale) {
    const float bad[] = {0.0f, -1.0f, __builtin_inff(), __builtin_nanf("")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvc_case c;
        load_spec_case("v41.rope_plain_insert/fp8_r2_a_s0", &c);
        ((float *)tensor(&c, "fp8_scale"))[0] = bad[i];
        expect_rejected(&c, KVC_ERR_PARAM, "fp8_scale[0]", NULL);
    }
}

Test(validation, v41_insert_slot_outside_the_cache) {
    kvc_case c;
    load_spec_case("v41.rope_quant_insert/r2_a_s0", &c);
    int64_t t = first_closing(&c, "slot_mapping");
    ((int64_t *)tensor(&c, "slot_mapping"))[t] = 1 << 30;
    char index[64];
    snprintf(index, sizeof index, "slot_mapping[%lld]", (long long)t);
    expect_rejected(&c, KVC_ERR_INDEX, index, "kv_cache");
}

Test(validation, case_with_a_missing_tensor_is_a_case_error) {
    kvc_case c;
    load_spec_case("v4.compress/d512_r4_a_s0", &c);
    kvc_array *weight = kvc_case_get(&c, "norm_weight");
    weight->dtype = KVC_DT_I4;
    kvc_run_result result;
    int rc = kvc_run_case(&kvc_reference_backend, &c, NULL, &result);
    cr_assert_eq(rc, KVC_ERR_PARAM);
    cr_assert(strstr(result.error.message, "case: norm_weight.npy has dtype <i4"), "%s", result.error.message);
    kvc_run_result_free(&result);
    kvc_case_free(&c);
}

Test(validation, overlapping_output_and_input) {
    float buffer[4 * 2048];
    int64_t positions[1] = {0}, slots[1] = {0};
    kvc_v4_save_args a = {1, 4, 512, buffer, buffer + 1024, buffer, positions, slots, {buffer, 1, 1, 2048 * 4, 2048 * 4}};
    kvc_error err;
    cr_assert_eq(kvc_validate_v4_save(&a, &err), KVC_ERR_CONFLICT);
    cr_assert(strstr(err.message, "state_cache overlaps kv"), "%s", err.message);
}

Test(validation, page_stride_smaller_than_a_page) {
    float kv[1024], score[1024], ape[4 * 1024], state[2048];
    int64_t positions[1] = {0}, slots[1] = {0};
    kvc_v4_save_args a = {1, 4, 512, kv, score, ape, positions, slots, {state, 1, 1, 2048 * 4, 100}};
    kvc_error err;
    cr_assert_eq(kvc_validate_v4_save(&a, &err), KVC_ERR_PARAM);
    cr_assert(strstr(err.message, "state_cache: page_stride"), "%s", err.message);
}

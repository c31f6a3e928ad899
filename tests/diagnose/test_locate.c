/* Where a difference arises (harness/diagnose/locate.c) and the keys
 * that say it (harness/fuzz/signature.c).  Every expected place, count
 * and class follows from the bytes the test plants in a copy of the
 * reference's outputs. */
#include <cjson/cJSON.h>

#include "tests/test_support.h"

#include "harness/diagnose/locate.h"
#include "harness/fuzz/signature.h"
#include "kvcmp/backends.h"
#include "kvcmp/formats.h"
#include "kvcmp/validate.h"

/* The first case of `variant` (seed, family normal) with a token that
 * writes a row, the reference's outputs, a copy to plant bytes in, and
 * the slot of that row. */
static int64_t writing_case(const char *variant, uint64_t seed, kvc_case *c, kvc_run_result *contract, kvc_run_result *other) {
    for (int64_t i = 0; i < 64; i++) {
        support_make_case(variant, KVC_FAM_NORMAL, seed, i, c);
        kvc_array *slots = kvc_case_get(c, strcmp(variant, "v4.compress/d128/r4") == 0 ? "kv_slot_mapping" : "slot_mapping");
        kvc_array *states = kvc_case_get(c, "slot_mapping"), *positions = kvc_case_get(c, "positions");
        for (int64_t t = 0; t < slots->count; t++) {
            int64_t slot = ((int64_t *)slots->data)[t];
            if (slot < 0 || ((int64_t *)states->data)[t] < 0 || !kvc_is_closing(((int64_t *)positions->data)[t], c->compress_ratio)) continue;
            kvc_run_options o = {.canary = 0xA5};
            cr_assert_eq(kvc_run_case(&kvc_reference_backend, c, &o, contract), KVC_OK);
            cr_assert_eq(kvc_run_case(&kvc_reference_backend, c, &o, other), KVC_OK);
            return slot;
        }
        kvc_case_free(c);
    }
    cr_assert_fail("no case of %s among 64 writes a row", variant);
    return -1;
}

static kvc_locus locate(const kvc_case *c, const kvc_run_result *contract, const kvc_run_result *other) {
    kvc_locus l;
    kvc_locate_output(c, "kv_cache", contract, other, &l);
    return l;
}

Test(locate, places_steps_and_origin_of_planted_bytes) {
    kvc_case c;
    kvc_run_result contract, other;
    int64_t slot = writing_case("v41.rope_quant_insert", 32, &c, &contract, &other);
    kvc_array *cache = &other.outputs[0].array;
    int64_t page_rows = cache->shape[1], page_bytes = page_rows * 584, page = slot / page_rows, row = slot % page_rows;
    uint8_t *token = (uint8_t *)cache->data + page * page_bytes + row * 576;
    uint8_t *want = (uint8_t *)contract.outputs[0].array.data + page * page_bytes + row * 576;
    uint8_t *scales = (uint8_t *)cache->data + page * page_bytes + page_rows * 576 + row * 8;
    uint8_t *want_scales = (uint8_t *)contract.outputs[0].array.data + page * page_bytes + page_rows * 576 + row * 8;

    /* One RoPE value one bf16 step up. */
    kvc_store_u16(want + 448 + 6, 0x3F80);
    kvc_store_u16(token + 448 + 6, 0x3F81);
    kvc_locus l = locate(&c, &contract, &other);
    cr_expect_eq(l.cases, 1);
    cr_expect_eq(l.elements[KVC_PLACE_ROPE], 1);
    cr_expect_eq(l.max_steps[KVC_PLACE_ROPE], 1);
    cr_expect_eq(l.elements[KVC_PLACE_NOPE], 0);
    cr_expect_eq(l.last_bit, 1);
    cr_expect_str_eq(kvc_locus_dims(&l), "RoPE dims only");
    cr_expect(strstr(kvc_locus_origin(&l, "v41.rope_quant_insert"), "step 7") != NULL);
    char text[600];
    kvc_locus_text(&l, "v41.rope_quant_insert", text, sizeof text);
    cr_expect(strstr(text, "RoPE dims x1 (max 1 step); last bit of a rounding x1; arises in the RoPE dims only") == text, "%s", text);

    /* And a NoPE code three fp8 steps off (0x30 -> 0x33, same block scale). */
    want[100] = 0x30;
    token[100] = 0x33;
    l = locate(&c, &contract, &other);
    cr_expect_eq(l.elements[KVC_PLACE_NOPE], 1);
    cr_expect_eq(l.max_steps[KVC_PLACE_NOPE], 3);
    cr_expect_str_eq(kvc_locus_dims(&l), "NoPE and RoPE dims");
    cr_expect(strstr(kvc_locus_origin(&l, "v4.compress"), "before step 7") != NULL);
    cJSON *json = kvc_locus_json(&l, "v4.compress");
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(json, "places"), "nope"), "max_steps")->valuedouble, 3);
    cr_expect_str_eq(cJSON_GetObjectItem(json, "dims")->valuestring, "NoPE and RoPE dims");
    cJSON_Delete(json);
    memcpy(token, want, 576);

    /* Block 1's scale byte one step up, two of its codes following it. */
    scales[1] = (uint8_t)(want_scales[1] + 1);
    token[64 + 5] ^= 0x08;
    token[64 + 9] ^= 0x08;
    l = locate(&c, &contract, &other);
    cr_expect_eq(l.elements[KVC_PLACE_SCALE], 1);
    cr_expect_eq(l.follows, 2);
    cr_expect_eq(l.elements[KVC_PLACE_NOPE], 0);
    cr_expect_str_eq(kvc_locus_dims(&l), "NoPE dims or scales only");
    cr_expect(strstr(kvc_locus_origin(&l, "v4.compress"), "block scales") != NULL);
    kvc_locus_text(&l, "v4.compress", text, sizeof text);
    cr_expect(strstr(text, "block scales x1 (max 1 step; 2 codes follow)") == text, "%s", text);
    scales[1] = want_scales[1];
    memcpy(token, want, 576);

    /* +0 against -0. */
    want[200] = 0x00;
    token[200] = 0x80;
    l = locate(&c, &contract, &other);
    cr_expect_eq(l.signed_zero, 1);
    cr_expect_eq(l.last_bit, 0);

    /* Two loci add up: counts summed, the largest distance kept. */
    kvc_locus sum = l, more = {.elements = {[KVC_PLACE_NOPE] = 2}, .max_steps = {[KVC_PLACE_NOPE] = 5}, .last_bit = 1, .cases = 1};
    kvc_locus_add(&sum, &more);
    cr_expect_eq(sum.elements[KVC_PLACE_NOPE], 3);
    cr_expect_eq(sum.max_steps[KVC_PLACE_NOPE], 5);
    cr_expect_eq(sum.cases, 2);
    kvc_run_result_free(&contract);
    kvc_run_result_free(&other);
    kvc_case_free(&c);
}

Test(locate, an_indexer_row_splits_its_codes_and_its_scale_covers_both) {
    kvc_case c;
    kvc_run_result contract, other;
    int64_t slot = writing_case("v4.compress/d128/r4", 33, &c, &contract, &other);
    kvc_array *cache = &other.outputs[0].array;
    int64_t page_rows = cache->shape[1], page_bytes = page_rows * 132, page = slot / page_rows, row = slot % page_rows;
    uint8_t *codes = (uint8_t *)cache->data + page * page_bytes + row * 128;
    uint8_t *want = (uint8_t *)contract.outputs[0].array.data + page * page_bytes + row * 128;
    uint8_t *scale = (uint8_t *)cache->data + page * page_bytes + page_rows * 128 + row * 4;
    want[70] = 0x30;
    codes[70] = 0x31;
    kvc_locus l = locate(&c, &contract, &other);
    cr_expect_eq(l.scale_covers_rope, 1);
    cr_expect_eq(l.elements[KVC_PLACE_ROPE], 1);
    cr_expect_str_eq(kvc_locus_dims(&l), "RoPE dims only");
    want[10] = 0x30;
    codes[10] = 0x31;
    l = locate(&c, &contract, &other);
    cr_expect_str_eq(kvc_locus_dims(&l), "NoPE and RoPE dims");
    memcpy(codes, want, 128);
    /* The row's scale doubled: every code follows it; no NoPE dim is seen to differ. */
    float doubled;
    memcpy(&doubled, scale, 4);
    doubled *= 2.0f;
    memcpy(scale, &doubled, 4);
    codes[70] ^= 0x08;
    l = locate(&c, &contract, &other);
    cr_expect_eq(l.elements[KVC_PLACE_SCALE], 1);
    cr_expect_eq(l.elements[KVC_PLACE_ROPE], 0);
    cr_expect_eq(l.follows, 1);
    cr_expect_str_eq(kvc_locus_dims(&l), "NoPE dims or scales only");
    kvc_run_result_free(&contract);
    kvc_run_result_free(&other);
    kvc_case_free(&c);
}

Test(locate, a_last_bit_is_as_far_as_the_probe_moves_the_contract) {
    kvc_locus l = {.elements = {[KVC_PLACE_LATENT] = 2}, .max_steps = {[KVC_PLACE_LATENT] = 1}, .cases = 1};
    cr_expect(kvc_locus_within_last_bit(&l));
    l.max_steps[KVC_PLACE_LATENT] = 3;
    cr_expect(!kvc_locus_within_last_bit(&l), "3 steps where one ulp moves nothing");
    l.probe_steps[KVC_PLACE_LATENT] = 1;
    cr_expect(!kvc_locus_within_last_bit(&l), "3 steps where one ulp moves one");
    l.probe_steps[KVC_PLACE_LATENT] = 2;
    cr_expect(kvc_locus_within_last_bit(&l), "3 steps where one ulp moves two (values that cancel)");
    l.max_steps[KVC_PLACE_LATENT] = 9;
    cr_expect(!kvc_locus_within_last_bit(&l), "more than four times the probe's");
    l.max_steps[KVC_PLACE_LATENT] = 1;
    l.nan_number = 1;
    cr_expect(!kvc_locus_within_last_bit(&l));
    l.nan_number = 0;
    l.elements[KVC_PLACE_ROWS] = 1;
    cr_expect(!kvc_locus_within_last_bit(&l));
}

/* ---- the keys ---------------------------------------------------------------- */

static kvc_fuzz_verdict byte_failure(const kvc_locus *l) {
    kvc_fuzz_verdict v;
    memset(&v, 0, sizeof v);
    v.outcome = KVC_FUZZ_FAIL;
    snprintf(v.kind, sizeof v.kind, "bytes");
    v.has_report = 1;
    v.report.failing[KVC_REGION_ROPE_VALUE] = 1;
    snprintf(v.report.first_tensor, sizeof v.report.first_tensor, "kv_cache");
    v.causes[KVC_CAUSE_MULTI_STEP] = 1;
    v.locus = *l;
    return v;
}

Test(locate, keys_say_where_values_differ_and_whether_the_input_was_valid) {
    kvc_case c;
    support_make_case("v4.compress/d512/r4", KVC_FAM_NORMAL, 1, 0, &c);
    kvc_locus rope = {.elements = {[KVC_PLACE_ROPE] = 3}, .max_steps = {[KVC_PLACE_ROPE] = 5}, .cases = 1};
    kvc_fuzz_verdict v = byte_failure(&rope);
    kvc_fuzz_signature s;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v4.compress bytes: wrong values in RoPE dims only");
    cr_expect_eq(s.locus.elements[KVC_PLACE_ROPE], 3);
    /* Five steps where a last bit before step 7 moves the contract's own bytes two: the last-bit class. */
    v.locus.probe_steps[KVC_PLACE_ROPE] = 2;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v4.compress bytes: last bit");
    /* The same exception on an input the contract rejects and on a valid one. */
    memset(&v, 0, sizeof v);
    v.outcome = KVC_FUZZ_FAIL;
    snprintf(v.kind, sizeof v.kind, "exception");
    snprintf(v.failure_stage, sizeof v.failure_stage, "v4.compress");
    snprintf(v.failure_class, sizeof v.failure_class, "IndexError");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v4.compress exception: IndexError");
    cr_expect_eq(s.rejected_input, 0);
    v.reference_status = KVC_ERR_INDEX;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v4.compress exception: IndexError [on inputs the contract rejects]");
    cr_expect_eq(s.rejected_input, 1);
    /* A status difference says which side rejected already. */
    snprintf(v.kind, sizeof v.kind, "status");
    v.failure_class[0] = 0;
    v.candidate_status = KVC_OK;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_eq(s.rejected_input, 0);
    /* A lost worker: the reference says whether the case's input is valid. */
    kvc_fuzz_signature_of_lost(&c, "crash", "signal 11", &s);
    cr_expect_str_eq(s.key, "v4.compress crash: signal 11");
    c.eps = 2.0f;   /* eps outside [0, 1]: bad-parameter (SPEC.md 8) */
    kvc_fuzz_signature_of_lost(&c, "crash", "signal 11", &s);
    cr_expect_str_eq(s.key, "v4.compress crash: signal 11 [on inputs the contract rejects]");
    kvc_case_free(&c);
}

/* Which step each stage's places point to (SPEC.md 4-5). */
Test(locate, each_stage_names_the_step_its_places_point_to) {
    static const kvc_locus nope = {.elements = {[KVC_PLACE_NOPE] = 1}}, rope = {.elements = {[KVC_PLACE_ROPE] = 1}},
                    both = {.elements = {[KVC_PLACE_NOPE] = 1, [KVC_PLACE_ROPE] = 1}}, scale = {.elements = {[KVC_PLACE_SCALE] = 1}},
                    latent = {.elements = {[KVC_PLACE_LATENT] = 1}}, state = {.elements = {[KVC_PLACE_STATE] = 1}},
                    rows = {.elements = {[KVC_PLACE_ROWS] = 1}}, none = {.cases = 0};
    static const struct {
        const kvc_locus *l;
        const char *stage, *says, *dims;
    } cases[] = {
        {&both, "v4.forward", "before step 7", "NoPE and RoPE dims"},
        {&rope, "v4.compress", "step 7 (RoPE)", "RoPE dims only"},
        {&scale, "v4.compress", "step 9's magnitude or exponent", "NoPE dims or scales only"},
        {&nope, "v4.compress", "steps 8-9", "NoPE dims or scales only"},
        {&latent, "v41.save_compress_norm", "in the latent", "latent"},
        {&state, "v41.forward", "the ring store", "state rows"},
        {&both, "v41.rope_quant_insert", "the latent row read", "NoPE and RoPE dims"},
        {&rope, "v41.rope_quant_insert", "step 7 (RoPE) or its bf16 store", "RoPE dims only"},
        {&scale, "v41.rope_quant_insert", "the block quantisation", "NoPE dims or scales only"},
        {&nope, "v41.rope_plain_insert", "the store's rounding", "NoPE dims or scales only"},
        {&rope, "v41.rope_plain_insert", "step 7 (RoPE) or the rounding after it", "RoPE dims only"},
        {&state, "v4.save_partial_states", "the score + ape sum", "state rows"},
        {&rows, "v4.compress", "which rows the stage writes", ""},
        {&none, "v4.compress", "", ""},
        {&latent, "v4.save_partial_states", "", "latent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *origin = kvc_locus_origin(cases[i].l, cases[i].stage);
        if (cases[i].says[0]) cr_expect(strstr(origin, cases[i].says) != NULL, "%s, case %zu: '%s'", cases[i].stage, i, origin);
        else cr_expect_str_eq(origin, "", "%s, case %zu", cases[i].stage, i);
        cr_expect_str_eq(kvc_locus_dims(cases[i].l), cases[i].dims, "case %zu", i);
    }
    char text[300];
    kvc_locus_text(&none, "v4.compress", text, sizeof text);
    cr_expect_str_eq(text, "");
    kvc_locus_text(&rows, "v4.compress", text, sizeof text);
    cr_expect_str_eq(text, "whole rows x1; arises which rows the stage writes (the closing test, the slots)");
}

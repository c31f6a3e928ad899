/* Failure signatures (harness/fuzz/signature.c, signature_list.c), the
 * cause classes they take from harness/compare/causes.c, the replay
 * conditions a saved fuzz failure carries (harness/replay/conditions.c),
 * and campaigns that list each signature once.
 *
 * Every expected class below follows from the bytes the test plants
 * (a NaN's bits, a scale byte, a written row), not from the classifier. */
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdarg.h>

#include "tests/test_support.h"

#include "cli/commands.h"
#include "harness/fuzz/permute.h"
#include "harness/fuzz/run.h"
#include "harness/fuzz/signature.h"
#include "harness/fuzz/signature_list.h"
#include "harness/replay/conditions.h"
#include "harness/replay/replay.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "kvcmp/validate.h"
#include "kvcmp/formats.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

/* ---- cause classes from the causes of the differences ------------------ */

/* Counts with one element of each cause given (a KVC_CAUSE_COUNT-ended list). */
static const char *class_of(int first, ...) {
    static int64_t counts[KVC_CAUSE_COUNT];
    memset(counts, 0, sizeof counts);
    va_list ap;
    va_start(ap, first);
    for (int k = first; k != KVC_CAUSE_COUNT; k = va_arg(ap, int)) counts[k]++;
    va_end(ap);
    return kvc_cause_class(counts);
}

Test(signatures, cause_classes) {
    cr_expect_str_eq(class_of(KVC_CAUSE_ROW_WRITTEN, KVC_CAUSE_NEG_STATE_SLOT, KVC_CAUSE_COUNT), "untouched row written");
    cr_expect_str_eq(class_of(KVC_CAUSE_SCALE_FLOOR, KVC_CAUSE_SCALE_FOLLOWS, KVC_CAUSE_COUNT), "scale floor");
    cr_expect_str_eq(class_of(KVC_CAUSE_NAN_TO_448, KVC_CAUSE_NAN_PAYLOAD, KVC_CAUSE_NAN, KVC_CAUSE_COUNT), "NaN to fp8");
    cr_expect_str_eq(class_of(KVC_CAUSE_NAN_ALL_ONES, KVC_CAUSE_NAN_PAYLOAD, KVC_CAUSE_COUNT), "NaN bit pattern");
    cr_expect_str_eq(class_of(KVC_CAUSE_NAN, KVC_CAUSE_COUNT), "wrong values", "a NaN lost outside fp8 is a value difference");
    cr_expect_str_eq(class_of(KVC_CAUSE_SIGNED_ZERO, KVC_CAUSE_COUNT), "signed zero");
    cr_expect_str_eq(class_of(KVC_CAUSE_LAST_BIT, KVC_CAUSE_SIGNED_ZERO, KVC_CAUSE_NAN_ALL_ONES, KVC_CAUSE_COUNT), "last bit");
    cr_expect_str_eq(class_of(KVC_CAUSE_LAST_BIT, KVC_CAUSE_MULTI_STEP, KVC_CAUSE_COUNT), "wrong values");
    /* A written row next to other differences: a wrong value equal to the old row. */
    cr_expect_str_eq(class_of(KVC_CAUSE_ROW_WRITTEN, KVC_CAUSE_LAST_BIT, KVC_CAUSE_COUNT), "wrong values");
    /* A floor next to a difference the scale does not explain is not the floor. */
    cr_expect_str_eq(class_of(KVC_CAUSE_SCALE_FLOOR, KVC_CAUSE_MULTI_STEP, KVC_CAUSE_COUNT), "wrong values");
    cr_expect_str_eq(class_of(KVC_CAUSE_COUNT), "");
}

/* ---- classes of planted bytes -------------------------------------------- */

/* The reference's outputs of c, and a copy to plant differences in. */
static void reference_pair(const kvc_case *c, kvc_run_result *expected, kvc_run_result *got) {
    kvc_run_options o = {.canary = 0xA5};
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, c, &o, expected), KVC_OK);
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, c, &o, got), KVC_OK);
}

/* The first row a closing valid token writes, as a byte offset. */
static int64_t written_row(const kvc_case *c, int64_t row_bytes) {
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *positions = kvc_case_get(c, "positions");
    for (int64_t t = 0; t < slots->count; t++)
        if (((int64_t *)slots->data)[t] >= 0 && kvc_is_closing(((int64_t *)positions->data)[t], c->compress_ratio))
            return ((int64_t *)slots->data)[t] * row_bytes;
    cr_assert_fail("no token writes a row");
    return -1;
}

/* The first case of `variant` (seed, family normal) with a token that writes a row. */
static void make_writing_case(const char *variant, uint64_t seed, kvc_case *c) {
    for (int64_t i = 0; i < 64; i++) {
        support_make_case(variant, KVC_FAM_NORMAL, seed, i, c);
        kvc_array *slots = kvc_case_get(c, "slot_mapping"), *positions = kvc_case_get(c, "positions");
        for (int64_t t = 0; t < slots->count; t++)
            if (((int64_t *)slots->data)[t] >= 0 && kvc_is_closing(((int64_t *)positions->data)[t], c->compress_ratio)) return;
        kvc_case_free(c);
    }
    cr_assert_fail("no case of %s among 64 writes a row", variant);
}

/* The signature's cause of the planted bytes, as a fuzz check finds it;
 * the causes of the first failing tensor go to causes. */
static int64_t causes[KVC_CAUSE_COUNT];
static const char *cause_after(const kvc_case *c, const kvc_run_result *expected, const kvc_run_result *got, kvc_compare_report *r) {
    kvc_compare_results(c, expected, got, KVC_POLICY_EXACT, r);
    cr_assert(kvc_report_failed(r));
    kvc_output_cause_counts(c, r->first_tensor, expected, got, causes);
    return kvc_cause_class(causes);
}

Test(signatures, classes_of_planted_bytes) {
    kvc_case c;
    make_writing_case("v41.rope_plain_insert/bf16", 31, &c);
    kvc_run_result expected, got;
    reference_pair(&c, &expected, &got);
    uint8_t *row = (uint8_t *)got.outputs[0].array.data + written_row(&c, 1024), *want = (uint8_t *)expected.outputs[0].array.data + written_row(&c, 1024);
    kvc_compare_report r;
    /* a NaN with other bits on both sides */
    kvc_store_u16(want, 0x7FC0); kvc_store_u16(row, 0x7FFF);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "NaN bit pattern");
    cr_expect_str_eq(r.first_tensor, "kv_cache");
    /* +0 against -0 */
    kvc_store_u16(want, 0x0000); kvc_store_u16(row, 0x8000);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "signed zero");
    /* one bf16 step */
    kvc_store_u16(want, 0x3F80); kvc_store_u16(row, 0x3F81);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "last bit");
    kvc_store_u16(row, 0x4000);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "wrong values");
    kvc_store_u16(want, 0x7FC0); kvc_store_u16(row, 0x3F80);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "wrong values");
    cr_expect_eq(causes[KVC_CAUSE_NAN], 1);
    kvc_store_u16(want, 0x3F80); kvc_store_u16(row, 0x7FC0);
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "wrong values");
    cr_expect_eq(causes[KVC_CAUSE_NAN], 1);
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    kvc_case_free(&c);
}

Test(signatures, fp8_nan_and_scale_floor_classes) {
    kvc_case c;
    make_writing_case("v41.rope_quant_insert", 32, &c);
    kvc_run_result expected, got;
    reference_pair(&c, &expected, &got);
    kvc_array *cache = &got.outputs[0].array;
    int64_t page_rows = cache->shape[1], page_bytes = page_rows * 584;
    int64_t slot = written_row(&c, 1) , page = slot / page_rows, row = slot % page_rows;
    uint8_t *token = (uint8_t *)cache->data + page * page_bytes + row * 576;
    uint8_t *want = (uint8_t *)expected.outputs[0].array.data + page * page_bytes + row * 576;
    uint8_t *scales = (uint8_t *)cache->data + page * page_bytes + page_rows * 576 + row * 8;
    uint8_t *want_scales = (uint8_t *)expected.outputs[0].array.data + page * page_bytes + page_rows * 576 + row * 8;
    kvc_compare_report r;
    uint8_t saved = token[0];
    want[0] = 0x7F; token[0] = 0x7E;
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "NaN to fp8");
    want[0] = 0x7F; token[0] = 0xFF;   /* the NaN's sign kept */
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "NaN bit pattern");
    want[0] = 0x00; token[0] = 0x80;
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "signed zero");
    token[0] = want[0];
    (void)saved;
    uint8_t old_scale = want_scales[0];
    want_scales[0] = 105; scales[0] = 114;
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "scale floor");
    want_scales[0] = scales[0] = old_scale;
    want_scales[1] = 0xFF; scales[1] = 110;
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "NaN to fp8");
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    kvc_case_free(&c);
}

Test(signatures, indexer_scale_floor_class) {
    kvc_case c;
    support_make_case("v4.compress/d128/r4", KVC_FAM_NORMAL, 33, 0, &c);
    kvc_run_result expected, got;
    kvc_run_options o = {.canary = 0xA5};
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, &o, &expected), KVC_OK);
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, &o, &got), KVC_OK);
    kvc_array *cache = &got.outputs[0].array;
    int64_t page_bytes = cache->shape[1] * 132;
    /* page 0, row 0's fp32 scale after the page's codes */
    uint8_t *scale = (uint8_t *)cache->data + cache->shape[1] * 128, *want = (uint8_t *)expected.outputs[0].array.data + cache->shape[1] * 128;
    (void)page_bytes;
    kvc_store_f32(want, 0x1p-22f);
    kvc_store_f32(scale, 0x1p-13f);
    kvc_compare_report r;
    cr_expect_str_eq(cause_after(&c, &expected, &got, &r), "scale floor");
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    kvc_case_free(&c);
}

/* ---- signatures of verdicts ----------------------------------------------- */

Test(signatures, of_verdicts) {
    kvc_case c = {.stage = KVC_STAGE_V4_FORWARD};
    kvc_fuzz_verdict v;
    memset(&v, 0, sizeof v);
    kvc_fuzz_signature s;
    snprintf(v.kind, sizeof v.kind, "bytes");
    v.has_report = 1;
    v.report.failing[KVC_REGION_STATE_ROW] = 1;
    v.causes[KVC_CAUSE_NAN_PAYLOAD] = 1;
    snprintf(v.report.first_tensor, sizeof v.report.first_tensor, "state_cache");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v4.save_partial_states bytes: NaN bit pattern");
    cr_expect_str_eq(s.regions, "state row");
    snprintf(v.report.first_tensor, sizeof v.report.first_tensor, "kv_cache");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.stage, "v4.compress");
    c.stage = KVC_STAGE_V41_FORWARD;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.stage, "v41.rope_quant_insert");
    snprintf(v.report.first_tensor, sizeof v.report.first_tensor, "latent");
    v.report.missing_expected = 1;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.stage, "v41.save_compress_norm");
    cr_expect_str_eq(s.regions, "state row+output missing");
    memset(v.causes, 0, sizeof v.causes);
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.cause, "output missing");
    v.report.missing_expected = 0;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.save_compress_norm bytes: state row", "no class: the regions");
    c.stage = KVC_STAGE_V41_ROPE_PLAIN_INSERT;
    v.has_report = 0;
    snprintf(v.kind, sizeof v.kind, "status");
    v.reference_status = KVC_OK;
    v.candidate_status = KVC_ERR_INDEX;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert status: status ok vs index-out-of-range");
    snprintf(v.kind, sizeof v.kind, "threads");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert threads: status depends on the threads");
    snprintf(v.kind, sizeof v.kind, "padding");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert padding: page padding written");
    snprintf(v.kind, sizeof v.kind, "written-on-error");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert written-on-error: written although rejected");
    snprintf(v.kind, sizeof v.kind, "chunking");
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert chunking: -");
    v.kind[0] = 0;
    kvc_fuzz_signature_of(&c, &v, &s);
    cr_expect_str_eq(s.check, "?");
    kvc_fuzz_signature_of_lost(&c, "crash", "signal 11", &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert crash: signal 11");
    kvc_fuzz_signature_of_lost(&c, "timeout", "", &s);
    cr_expect_str_eq(s.key, "v41.rope_plain_insert timeout: -");
    cr_expect_neq(kvc_fuzz_signature_hash("a"), kvc_fuzz_signature_hash("b"));
    cr_expect_neq(kvc_fuzz_signature_hash(""), 0);
}

/* ---- the claim table and the list --------------------------------------- */

Test(signatures, claims_count_per_key_until_the_table_is_full) {
    kvc_signature_claims *claims = calloc(1, sizeof *claims);
    cr_expect_eq(kvc_signature_claim(claims, "x"), 1);
    cr_expect_eq(kvc_signature_claim(claims, "y"), 1);
    cr_expect_eq(kvc_signature_claim(claims, "x"), 2);
    char key[32];
    for (int i = 0; i < KVC_SIGNATURE_SLOTS; i++) {
        snprintf(key, sizeof key, "key %d", i);
        kvc_signature_claim(claims, key);
    }
    cr_expect_eq(kvc_signature_claim(claims, "one key too many"), INT32_MAX);
    cr_expect_eq(kvc_signature_claim(claims, "x"), 3, "a key already in keeps counting");
    free(claims);
}

Test(signatures, list_keeps_the_smallest_saved_case) {
    kvc_signature_list list = {0};
    kvc_fuzz_signature a = {.stage = "v4.compress", .check = "bytes", .regions = "NoPE code", .cause = "last bit",
                            .key = "v4.compress bytes: last bit"};
    kvc_fuzz_signature b = {.stage = "v4.compress", .check = "crash", .cause = "signal 11", .key = "v4.compress crash: signal 11"};
    for (int i = 0; i < 20; i++) kvc_signature_list_get(&list, i % 2 ? &b : &a, i)->count++;   /* grows past 16 entries? no: 2 */
    cr_expect_eq(list.count, 2);
    kvc_signature_entry *e = kvc_signature_list_find(&list, a.key);
    cr_assert_not_null(e);
    cr_expect_eq(e->count, 10);
    cr_expect_eq(e->first_case, 0);
    kvc_signature_list_saved(e, 4, 7, "dir4", "replay dir4");
    kvc_signature_list_saved(e, 6, 9, "dir6", "replay dir6");
    kvc_signature_list_saved(e, 8, 2, "dir8", "replay dir8");
    cr_expect_eq(e->minimal_case, 8);
    cr_expect_str_eq(e->minimal_saved, "dir8");
    cr_expect_null(kvc_signature_list_find(&list, "nothing"));
    for (int i = 0; i < 40; i++) {   /* past the first capacity */
        kvc_fuzz_signature x = a;
        snprintf(x.key, sizeof x.key, "key %d", i);
        kvc_signature_list_get(&list, &x, 100 + i);
    }
    cr_expect_eq(list.count, 42);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    kvc_signature_list_print(f, &list);
    fclose(f);
    cr_expect(strstr(text, "distinct failures (signatures): 42\n") != NULL, "%s", text);
    cr_expect(strstr(text, "[1] v4.compress bytes: last bit  (10 failures; regions: NoPE code)") != NULL, "%s", text);
    cr_expect(strstr(text, "minimal: case 8, 2 tokens, dir8\n      __REPRO: replay dir8") != NULL, "%s", text);
    cr_expect(strstr(text, "[2] v4.compress crash: signal 11  (10 failures; regions: -)\n") != NULL, "%s", text);
    cr_expect(strstr(text, "minimal: none saved") != NULL, "%s", text);
    free(text);
    cJSON *array = kvc_signature_list_json(&list);
    const cJSON *first = cJSON_GetArrayItem(array, 0);
    cr_expect_str_eq(cJSON_GetObjectItem(first, "cause")->valuestring, "last bit");
    cr_expect_eq(cJSON_GetObjectItem(first, "minimal_case")->valueint, 8);
    cr_expect_str_eq(cJSON_GetObjectItem(first, "minimal_saved")->valuestring, "dir8");
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(array, 1), "minimal_case")));
    cJSON_Delete(array);
    kvc_signature_list_free(&list);
    kvc_signature_list empty = {0};
    f = open_memstream(&text, &size);
    kvc_signature_list_print(f, &empty);
    fclose(f);
    cr_expect_str_eq(text, "");
    free(text);
    array = kvc_signature_list_json(&empty);
    cr_expect_eq(cJSON_GetArraySize(array), 0);
    cJSON_Delete(array);
}

/* --max-failures counts root causes: signatures whose explanations share
 * a deviation are one, and so are unexplained value differences of one
 * stage whose first wrong value arises in the same place ("last bit" and
 * "wrong values" of a window that cancels); another stage, another place,
 * a crash, or an input the contract rejects is another. */
Test(signatures, root_causes_group_signatures_by_explanation_and_place) {
    kvc_signature_list list = {0};
    kvc_locus both = {.cases = 1}, nope = {.cases = 1};
    both.elements[KVC_PLACE_NOPE] = 3;
    both.elements[KVC_PLACE_ROPE] = 5;
    nope.elements[KVC_PLACE_NOPE] = 2;
    kvc_fuzz_signature s[] = {
        {.stage = "v4.compress", .check = "bytes", .cause = "last bit", .key = "v4.compress bytes: last bit", .locus = both},
        {.stage = "v4.compress", .check = "bytes", .cause = "wrong values in NoPE and RoPE dims",
         .key = "v4.compress bytes: wrong values in NoPE and RoPE dims", .locus = both},
        {.stage = "v41.rope_quant_insert", .check = "bytes", .cause = "wrong values in NoPE dims or scales only",
         .key = "v41.rope_quant_insert bytes: wrong values in NoPE dims or scales only", .locus = nope},
        {.stage = "v4.compress", .check = "bytes", .cause = "scale floor", .key = "v4.compress bytes: scale floor", .locus = nope},
        {.stage = "v41.rope_plain_insert", .check = "bytes", .cause = "NaN to fp8", .key = "v41.rope_plain_insert bytes: NaN to fp8", .locus = nope},
        {.stage = "v4.compress", .check = "crash", .cause = "signal 11", .key = "v4.compress crash: signal 11"},
        {.stage = "v4.compress", .check = "bytes", .cause = "last bit", .key = "v4.compress bytes: last bit [on inputs the contract rejects]",
         .locus = both, .rejected_input = 1},
    };
    int n = (int)(sizeof s / sizeof *s);
    for (int i = 0; i < n; i++) kvc_signature_list_get(&list, &s[i], i)->count++;
    cr_expect_eq(kvc_signature_list_root_causes(&list, NULL), 6, "before any diagnosis");
    /* Two named cause classes, each explained; their explanations share a deviation. */
    kvc_fuzz_signature floor = {.diagnosed = 1, .proof_cases = 2, .explained_by = "scale-exponent-floor,scale-exponent-round"};
    kvc_fuzz_signature round = {.diagnosed = 1, .proof_cases = 2, .explained_by = "scale-exponent-round"};
    kvc_signature_list_explain(&list, s[3].key, &floor);
    kvc_signature_list_explain(&list, s[4].key, &round);
    int root[16];
    cr_expect_eq(kvc_signature_list_root_causes(&list, root), 5);
    cr_expect_eq(kvc_signature_list_distinct(&list), 7, "the signatures stay distinct");
    cr_expect_eq(root[0], root[1], "last bit and wrong values arising before step 7 of one stage");
    cr_expect_neq(root[0], root[2]);
    cr_expect_eq(root[3], root[4], "explanations sharing scale-exponent-round");
    cr_expect_neq(root[3], root[0]);
    cr_expect_neq(root[5], root[0], "a crash is a cause of its own");
    cr_expect_neq(root[6], root[0], "an input the contract rejects is never grouped with a valid one");
    char key[300];
    kvc_signature_root_key(&list.entries[0], key, sizeof key);
    cr_expect(strstr(key, "v4.compress | before step 7") == key, "%s", key);
    cJSON *array = kvc_signature_list_json(&list);
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(array, 1), "root_cause")->valueint, root[1]);
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(array, 1), "byte_class")->valuestring, s[1].key);
    cJSON_Delete(array);
    kvc_signature_list_free(&list);
}

/* ---- replay conditions --------------------------------------------------- */

static int read_conditions(const char *meta, kvc_replay_conditions *k, char *error, size_t size) {
    kvc_case c = {.meta_json = (char *)meta};
    return kvc_replay_conditions_read(&c, k, error, size);
}

Test(replay_conditions, read_and_refused) {
    kvc_replay_conditions k;
    char error[256];
    cr_expect_eq(read_conditions(NULL, &k, error, sizeof error), 0);
    cr_expect_eq(k.present, 0);
    cr_expect_eq(k.page_padding, -1);
    cr_expect_eq(read_conditions("{\"replay\":{\"page_padding\":128,\"canary\":7,\"threads\":[1,3],\"permutation_seed\":\"0x2a\"}}",
                                 &k, error, sizeof error), 0, "%s", error);
    cr_expect(k.present && k.page_padding == 128 && k.canary == 7 && k.num_threads == 2 && k.threads[1] == 3 && k.permuted &&
              k.permutation_seed == 42);
    char note[96];
    kvc_replay_conditions_describe(&k, note, sizeof note);
    cr_expect_str_eq(note, " (case.json replay: threads 1,3; permuted pages)");
    k.num_threads = 1;
    k.permuted = 0;
    kvc_replay_conditions_describe(&k, note, sizeof note);
    cr_expect_str_eq(note, "");
    static const char *const bad[][2] = {
        {"{\"replay\":3}", "must be an object"},
        {"{\"replay\":{\"page_padding\":65}}", "\"page_padding\" must be a non-negative multiple of 4"},
        {"{\"replay\":{\"canary\":256}}", "\"canary\" must be a byte value"},
        {"{\"replay\":{\"permutation_seed\":5}}", "\"permutation_seed\" must be a string"},
        {"{\"replay\":{\"permutation_seed\":\"x\"}}", "\"permutation_seed\" must be a string"},
        {"{\"replay\":{\"threads\":2}}", "\"threads\" must be an array"},
        {"{\"replay\":{\"threads\":[1,2,3,4,5]}}", "\"threads\" holds 1 to 4 counts"},
        {"{\"replay\":{\"threads\":[0]}}", "\"threads\" holds 1 to 4 counts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(read_conditions(bad[i][0], &k, error, sizeof error), -1, "%s accepted", bad[i][0]);
        cr_expect(strstr(error, bad[i][1]) != NULL, "%s: '%s' lacks '%s'", bad[i][0], error, bad[i][1]);
    }
}

/* Planted: right at one thread, one flipped byte at more. */
static int insert_wrong_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    if (rc == KVC_OK && omp_get_max_threads() > 1) ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return rc;
}
/* Planted: refuses at more than one thread. */
static int insert_refusing_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    if (omp_get_max_threads() > 1) return kvc_fail(err, KVC_ERR_CONFLICT, "refuses at more than one thread");
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}
/* Planted: writes a byte of whatever is physical page 0. */
static int insert_scribbling_page_zero(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    if (rc == KVC_OK) ((uint8_t *)a->kv_cache.data)[1] ^= 0x40;
    return rc;
}
static int insert_scribbling_padding(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    if (rc == KVC_OK && omp_get_max_threads() > 1) ((uint8_t *)a->kv_cache.data)[a->kv_cache.page_bytes] ^= 0x01;
    return rc;
}

static int check_conditions_with(kvc_v41_insert_fn insert, const kvc_case *c, const char *meta, char *detail, size_t size) {
    kvc_backend b = kvc_reference_backend;
    b.v41_rope_plain_insert = insert;
    kvc_replay_conditions k;
    char error[256];
    cr_assert_eq(read_conditions(meta, &k, error, sizeof error), 0, "%s", error);
    kvc_run_options run = {.page_padding = 64, .canary = 0xA5, .keep_outputs_on_error = 1};
    kvc_run_result first;
    omp_set_num_threads(1);
    kvc_run_case(&kvc_reference_backend, c, &run, &first);
    int failed = kvc_replay_check_conditions(&b, c, &run, &k, &first, KVC_POLICY_EXACT, detail, size);
    kvc_run_result_free(&first);
    return failed;
}

Test(replay_conditions, each_condition_is_run) {
    kvc_case c;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 34, 0, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
    char detail[1400];
    cr_expect_eq(check_conditions_with(kvc_reference_backend.v41_rope_plain_insert, &c,
                                       "{\"replay\":{\"threads\":[1,3],\"permutation_seed\":\"7\"}}", detail, sizeof detail), 0, "%s", detail);
    cr_expect_eq(check_conditions_with(insert_wrong_with_threads, &c, "{\"replay\":{\"threads\":[1,3]}}", detail, sizeof detail), 1);
    cr_expect(strstr(detail, "at 3 threads (against 1): ") != NULL, "%s", detail);
    cr_expect_eq(check_conditions_with(insert_refusing_with_threads, &c, "{\"replay\":{\"threads\":[1,2]}}", detail, sizeof detail), 1);
    cr_expect(strstr(detail, "at 2 threads (against 1): the stage returned conflict") != NULL, "%s", detail);
    cr_expect_eq(check_conditions_with(insert_scribbling_padding, &c, "{\"replay\":{\"threads\":[1,2]}}", detail, sizeof detail), 1);
    cr_expect(strstr(detail, "padding byte 0 after page 0 was written") != NULL, "%s", detail);
    cr_expect_eq(check_conditions_with(insert_scribbling_page_zero, &c, "{\"replay\":{\"permutation_seed\":\"0x5\"}}", detail,
                                       sizeof detail), 1, "a scribble on physical page 0 went unnoticed");
    cr_expect(strstr(detail, "with permuted physical pages: ") != NULL, "%s", detail);
    kvc_case_free(&c);
}

/* Pages go back where they were: permuting twice with one seed and
 * unpermuting the outputs gives the original bytes. */
Test(replay_conditions, permutation_round_trip) {
    kvc_case c, p;
    support_make_case("v4.forward/d128/r4", KVC_FAM_NORMAL, 35, 1, &c);
    cr_assert_eq(kvc_case_copy(&p, &c), 0);
    kvc_page_permutation perm;
    kvc_permute_case_pages(&p, 99, &perm);
    cr_expect_eq(perm.count, 2);
    kvc_run_result a, b;
    kvc_run_options o = {.canary = 0xA5};
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, &o, &a), KVC_OK);
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &p, &o, &b), KVC_OK);
    kvc_unpermute_outputs(&b, &perm);
    for (int i = 0; i < a.num_outputs; i++)
        cr_expect_eq(memcmp(a.outputs[i].array.data, b.outputs[i].array.data,
                            (size_t)a.outputs[i].array.count * (size_t)kvc_dtype_size(a.outputs[i].array.dtype)), 0, "%s", a.outputs[i].name);
    kvc_run_result_free(&a);
    kvc_run_result_free(&b);
    kvc_page_permutation_free(&perm);
    kvc_case_free(&p);
    kvc_case_free(&c);
}

/* A case.json whose "replay" object is broken fails its replay, naming it. */
Test(replay_conditions, broken_replay_object_is_named) {
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case", dir);
    kvc_case c;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 36, 0, &c);
    kvc_fuzz_add_expected(&kvc_reference_backend, &c);
    c.meta_json = strdup("{\"replay\":{\"canary\":-1}}");
    char error[256];
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    kvc_replay_options options = {.backend = &kvc_reference_backend, .impl_name = "ref", .page_padding = 64};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    captured_run run;
    (void)run;
    cr_expect_eq(kvc_replay_case(path, &options, &totals, NULL), 1);
    kvc_case_free(&c);
    support_remove_tree(dir);
}

/* ---- campaigns -------------------------------------------------------- */

static captured_run run_fuzz(int argc, char **argv) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    return support_capture(kvc_cmd_fuzz, argc, argv);
}

static int occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* 1 when the saved case fails its replay through the backend at path. */
static int replay_fails(const char *dir, const char *impl) {
    char error[512];
    kvc_replay_options options = {.impl_name = impl, .policy = KVC_POLICY_EXACT, .silent = 1};
    options.backend = kvc_backend_by_name(impl, error, sizeof error);
    cr_assert_not_null(options.backend, "%s", error);
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    return kvc_replay_case(dir, &options, &totals, NULL);
}

/* A thread-check failure is saved with both thread counts in case.json:
 * its replay fails through the candidate and passes through the
 * reference; duplicates beyond --max-failures-per-signature are counted,
 * not saved. */
Test(signature_campaigns, thread_failure_replays_from_its_case, .timeout = 180) {
    const char *mutant = "build/mutants/plain_insert_threads_dependent.so";
    if (!support_file_exists(mutant)) cr_skip_test("%s not built (make mutants)", mutant);
    char dir[64], save[128], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "3", "--cases", "40", "--jobs", "1", "--threads", "1", "--candidate", (char *)mutant, "--stage",
                    "v41.rope_plain_insert", "--invalid-rate", "0", "--metamorphic-rate", "1000", "--max-failures-per-signature", "2",
                    "--shrink-seconds", "1", "--save", save, "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    /* The flipped byte shows as a written untouched row, a last bit or
     * another value: one signature each; of each, the first 2 failures are
     * printed and saved, however many cases fail. */
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    int distinct = cJSON_GetObjectItem(root, "distinct_failures")->valueint, kept = 0;
    cr_expect_geq(distinct, 1);
    cr_expect_eq(occurrences(run.out, "] v41.rope_plain_insert threads: "), distinct, "%s", run.out);
    const cJSON *sig;
    cJSON_ArrayForEach(sig, cJSON_GetObjectItem(root, "signatures")) {
        int count = cJSON_GetObjectItem(sig, "count")->valueint;
        kept += count < 2 ? count : 2;
        cr_expect_str_eq(cJSON_GetObjectItem(sig, "check")->valuestring, "threads");
        cr_expect(strstr(cJSON_GetObjectItem(sig, "minimal_repro")->valuestring, "build/kvcmp replay --impl ") != NULL);
    }
    cr_expect_gt(cJSON_GetObjectItem(root, "failures")->valueint, kept, "every case fails: %s", text);
    cr_expect_eq(occurrences(run.out, "FAIL case "), kept, "only the first 2 of a signature are printed:\n%s", run.out);
    char **dirs;
    int n = kvc_find_cases(save, &dirs);
    cr_expect_eq(n, kept, "%d cases saved", n);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/case.json", dirs[i]);
        char *meta = support_read_file(path);
        cr_expect(strstr(meta, "\"threads\":\t[1, ") != NULL, "no thread pair in %s:\n%s", dirs[i], meta);
        free(meta);
        cr_expect_eq(replay_fails(dirs[i], mutant), 1, "%s replays clean through the candidate", dirs[i]);
        cr_expect_eq(replay_fails(dirs[i], "ref"), 0, "%s fails through the reference", dirs[i]);
    }
    kvc_free_case_list(dirs, n);
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

/* The candidate with four independent bugs, one per stage (mk/fuzz.mk
 * MULTI_BUG_MUTANTS): each bug's signature is listed once, named by the
 * deviation that is that bug, and its smallest saved case replays with
 * that same failure. */
Test(signature_campaigns, each_bug_of_a_multi_bug_candidate_once, .timeout = 300) {
    const char *mutant = "build/mutants/multi/multi_bug.so";
    if (!support_file_exists(mutant)) cr_skip_test("%s not built (make mutants-check builds it)", mutant);
    char dir[64], save[128], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "1", "--cases", "3000", "--jobs", "2", "--candidate", (char *)mutant, "--max-failures", "50",
                    "--shrink-seconds", "1", "--save", save, "--json", json, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    static const char *const expected[] = {
        "] explained by state-slot-ignored  (",          /* state_slot_ignored */
        "] explained by ring-row-p  (",                  /* ring_row_p */
        "] explained by save-nan-payload-kept  (",       /* save_nan_payload_kept */
        "] explained by clamp-nan-to-minus-448  (",      /* plain_fp8_nan_clamped */
    };
    for (int i = 0; i < 4; i++) cr_expect_eq(occurrences(run.out, expected[i]), 1, "'%s' not listed once:\n%s", expected[i], run.out);
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    const cJSON *sig;
    cJSON_ArrayForEach(sig, cJSON_GetObjectItem(root, "signatures")) {
        const cJSON *saved = cJSON_GetObjectItem(sig, "minimal_saved");
        if (!cJSON_IsString(saved) || strcmp(cJSON_GetObjectItem(sig, "check")->valuestring, "bytes") != 0) continue;
        cr_expect_eq(replay_fails(saved->valuestring, mutant), 1, "%s replays clean", saved->valuestring);
        char path[512];
        snprintf(path, sizeof path, "%s/case.json", saved->valuestring);
        char *meta = support_read_file(path);
        /* An explained signature is keyed by its deviation: the case names it. */
        const cJSON *names = cJSON_GetObjectItem(sig, "explained_by");
        const char *key = cJSON_GetArraySize(names) ? cJSON_GetArrayItem(names, 0)->valuestring : cJSON_GetObjectItem(sig, "signature")->valuestring;
        cr_expect(strstr(meta, key) != NULL, "%s lacks its signature %s", saved->valuestring, key);
        free(meta);
    }
    cJSON_Delete(root);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

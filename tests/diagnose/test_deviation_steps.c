/* The wrong versions of steps that the catalogue added for what kernels really do
 * (harness/diagnose/deviations.c), on inputs chosen for each: the branches that
 * a short campaign of the planted deviation may not reach.  Each is reached
 * as the reference reaches it, through the step table that activating the
 * deviation installs (reference/steps.h). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>

#include "tests/test_support.h"

#include "kvcmp/deviations.h"
#include "kvcmp/formats.h"
#include "harness/diagnose/deviations.h"
#include "reference/steps.h"

/* Turns the named deviation on alone for the calls that follow. */
static void activate(const char *name) {
    int index = kvc_deviation_find(name);
    cr_assert_geq(index, 0, "%s is not in the catalogue", name);
    kvc_deviation_activate(index, -1, NULL);
}

static void deactivate(void) { kvc_deviation_activate(-1, -1, NULL); }

/* The steps of the table in use, one value at a time. */
static uint16_t bf16(float x) {
    uint16_t b;
    ref_steps_in_use()->bf16_row(&x, &b, 1);
    return b;
}

static uint8_t fp8_code(float x) {
    uint8_t code;
    ref_steps_in_use()->fp8_codes(&x, 1.0f, &code, 1);
    return code;
}

static float canonical_f32(float x) { return ref_steps_in_use()->canonical_f32(x); }

static int closes(int64_t p, int32_t ratio) {
    kvc_v41_norm_args a = {.compress_ratio = ratio, .positions = &p};
    return ref_steps_in_use()->v41_norm_closes(&a, 0);
}

static float reciprocal(float scale) { return ref_steps_in_use()->reciprocal(scale); }

/* ---- plain-fp8-approximate-reciprocal ------------------------------------ */

/* The exact quotient 1 / scale lies strictly between r and r2 (double
 * holds it to 2^-53 relative; a faithful r is at least 2^-48 away). */
static int across_the_quotient(float scale, float r, float r2) {
    double q = 1.0 / (double)scale;
    return ((double)r - q) * ((double)r2 - q) < 0;
}

Test(deviation_steps, the_approximate_reciprocal_is_the_other_faithful_neighbour) {
    activate("plain-fp8-approximate-reciprocal");
    static const float scales[] = {3.0f, 0.1f, 7.0f, 0x1.947p-8f, 1e-30f, 3e38f};
    for (size_t i = 0; i < sizeof scales / sizeof *scales; i++) {
        float r = 1.0f / scales[i], r2 = reciprocal(scales[i]);
        cr_expect_neq(kvc_f32_bits(r2), kvc_f32_bits(r), "scale %a", (double)scales[i]);
        cr_expect(fabsf(nextafterf(r, r2) - r2) == 0.0f, "scale %a: %a is not a neighbour of %a", (double)scales[i], (double)r2, (double)r);
        cr_expect(across_the_quotient(scales[i], r, r2), "scale %a: %a and %a on one side of 1/scale", (double)scales[i], (double)r,
                  (double)r2);
    }
    /* 1 / 0.125 is exact: the only faithful result. */
    cr_expect_eq(reciprocal(0.125f), 8.0f);
    /* A quotient past the fp32 range: inf and FLT_MAX are its neighbours. */
    float tiny = 0x1p-149f;
    cr_expect_eq(reciprocal(tiny), FLT_MAX);
    deactivate();
    cr_expect_eq(kvc_f32_bits(reciprocal(3.0f)), kvc_f32_bits(1.0f / 3.0f));
}

/* ---- nan-all-ones, closing-test-off-by-one, rope-on-nope -------------------- */

Test(deviation_steps, nan_all_ones_writes_every_payload_bit) {
    float nan = kvc_f32_from_bits(0xFFC00123u);
    activate("nan-all-ones");
    cr_expect_eq(kvc_f32_bits(canonical_f32(nan)), 0x7FFFFFFFu);
    cr_expect_eq(bf16(nan), 0x7FFFu);
    cr_expect_eq(kvc_f32_bits(canonical_f32(-0.0f)), 0x80000000u);
    cr_expect_eq(bf16(1.0f), 0x3F80u);
    activate("bf16-truncation");   /* another deviation leaves NaNs canonical */
    cr_expect_eq(kvc_f32_bits(canonical_f32(nan)), 0x7FC00000u);
    cr_expect_eq(bf16(nan), 0x7FC0u);
    deactivate();
}

Test(deviation_steps, the_closing_test_is_off_by_one_and_rope_takes_the_first_dims) {
    float row[512];
    activate("closing-test-off-by-one");
    cr_expect(closes(0, 2) && closes(128, 128) && !closes(3, 4) && !closes(1, 2));
    cr_expect_eq(ref_steps_in_use()->rope_dims(row, 512), row + 448);
    activate("rope-on-nope");
    cr_expect(closes(3, 4) && !closes(0, 2));
    cr_expect_eq(ref_steps_in_use()->rope_dims(row, 512), row);
    cr_expect_eq(ref_steps_in_use()->rope_dims(row, 128), row);
    deactivate();
}

/* ---- closing-test-off-by-one: tokens no validation looked at ----------------- */

Test(deviation_steps, an_insert_token_is_in_bounds_when_its_row_and_cos_row_exist) {
    kvc_v41_insert_args a = {.compress_ratio = 2, .cos_sin_rows = 10, .kv_cache = {.num_pages = 2, .page_rows = 4}};
    int64_t positions[] = {8, 10, 2}, slots[] = {7, 0, 8};
    a.positions = positions;
    a.slot_mapping = slots;
    /* Each position closes under the deviation (p mod 2 = 0). */
    activate("closing-test-off-by-one");
    const ref_steps *s = ref_steps_in_use();
    cr_expect(s->v41_insert_closes(&a, 0));     /* row 7 of 8, cos row 8 of 10 */
    cr_expect(!s->v41_insert_closes(&a, 1));    /* cos row 10 */
    cr_expect(!s->v41_insert_closes(&a, 2));    /* row 8 */
    deactivate();
}

Test(deviation_steps, a_compress_token_is_in_bounds_when_its_whole_window_resolves) {
    /* R = 4, coff 2: the window of p is p - 7 .. p; BS = 4, 3 columns. */
    int32_t table[] = {0, 1, 2, 0, 5, 1};
    int32_t requests[] = {0, 0, 1, 2, 0, 0, 0};
    int64_t positions[] = {8, 12, 8, 0, 4, 8, 0}, kv_slots[] = {3, 3, 3, 3, 3, 4, 3};
    kvc_v4_compress_args a = {.compress_ratio = 4, .head_dim = 128, .state_cache = {.num_pages = 3, .page_rows = 4}, .block_table = table,
                              .num_requests = 2, .max_blocks = 3, .token_to_req = requests, .positions = positions,
                              .kv_slot_mapping = kv_slots, .cos_sin_rows = 12, .kv_cache = {.num_pages = 1, .page_rows = 4}};
    /* Each position closes under the deviation (p mod 4 = 0). */
    activate("closing-test-off-by-one");
    const ref_steps *s = ref_steps_in_use();
    cr_expect(s->v4_closes(&a, 0));    /* positions 1 .. 8: columns 0 .. 2 of request 0 */
    cr_expect(!s->v4_closes(&a, 1));   /* cos row 12 */
    cr_expect(!s->v4_closes(&a, 2));   /* request 1, column 1: block 5 of 3 pages */
    cr_expect(!s->v4_closes(&a, 3));   /* request 2 of 2 */
    a.max_blocks = 1;
    a.num_requests = 1;
    cr_expect(s->v4_closes(&a, 6));    /* position 0 alone: column 0 */
    cr_expect(!s->v4_closes(&a, 4));   /* position 4: column 1 of 1 */
    cr_expect(!s->v4_closes(&a, 5));   /* kv row 4 of 4 */
    deactivate();
}

/* ---- positions-int32 ---------------------------------------------------------- */

/* v4.save_partial_states of one token (R = 4, D = 128) at `position`
 * through `backend`; the state row it wrote in *row. */
static int save_one(const kvc_backend *backend, int64_t position, float *state, kvc_error *err) {
    enum { W = 2 * 128 };
    static float kv[W], score[W], ape[4 * W];
    for (int i = 0; i < W; i++) kv[i] = (float)i, score[i] = 0.5f * (float)i;
    for (int i = 0; i < 4 * W; i++) ape[i] = (float)(i / W);   /* row k holds k */
    int64_t positions[] = {position}, slots[] = {1};
    memset(state, 0, 4 * 2 * W * sizeof *state);
    kvc_v4_save_args a = {.num_tokens = 1, .compress_ratio = 4, .head_dim = 128, .kv = kv, .score = score, .ape = ape,
                          .positions = positions, .slot_mapping = slots,
                          .state_cache = {.data = state, .num_pages = 1, .page_rows = 4, .page_bytes = 4 * 2 * W * 4,
                                          .page_stride = 4 * 2 * W * 4}};
    return backend->v4_save_partial_states(&a, err);
}

Test(deviation_steps, int32_positions_wrap_and_a_negative_one_is_out_of_range) {
    const kvc_backend *wrapped = kvc_deviation_backend(kvc_deviation_find("positions-int32"));
    cr_assert_not_null(wrapped);
    static float contract[4 * 512], deviant[4 * 512];
    kvc_error err = {0};
    /* 2^32 + 6 reads as 6: the same ape row (6 mod 4 = 2). */
    int64_t high = ((int64_t)1 << 32) + 6;
    cr_assert_eq(save_one(&kvc_reference_backend, high, contract, &err), KVC_OK, "%s", err.message);
    cr_assert_eq(save_one(wrapped, high, deviant, &err), KVC_OK, "%s", err.message);
    cr_expect_eq(memcmp(contract, deviant, sizeof contract), 0);
    cr_expect_eq(contract[512 + 256 + 10], 5.0f + 2.0f);
    /* 2^31 + 6 reads as -2^31 + 6. */
    cr_expect_eq(save_one(&kvc_reference_backend, ((int64_t)1 << 31) + 6, contract, &err), KVC_OK, "%s", err.message);
    cr_expect_eq(save_one(wrapped, ((int64_t)1 << 31) + 6, deviant, &err), KVC_ERR_INDEX);
    cr_expect(strstr(err.message, "positions[0] = -2147483642") != NULL, "%s", err.message);
}

/* ---- window-starts-early: the window's entries one position earlier ------------ */

Test(deviation_steps, an_early_window_has_no_entry_before_position_0) {
    /* R = 4, coff 2: the contract's window of p = 3 is q = -4 .. 3 (entries
     * 0 .. 3 valid); shifted one row early it is q = -5 .. 2: position 0
     * once, and no entry for the contract's q = 0. */
    int32_t table[] = {0}, requests[] = {0};
    int64_t positions[] = {3};
    kvc_v4_compress_args a = {.compress_ratio = 4, .head_dim = 128, .state_cache = {.num_pages = 1, .page_rows = 8}, .block_table = table,
                              .num_requests = 1, .max_blocks = 1, .token_to_req = requests, .positions = positions};
    /* Entry w of the contract's window is q = w - 4. */
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 4), 0);
    activate("window-starts-early");
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 4), -1);
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 5), 0);
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 7), 2);
    cr_expect_lt(ref_steps_in_use()->window_position(&a, 0, 2), 0);
    activate("window-starts-late");
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 4), 1);
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 7), -1);
    deactivate();
    cr_expect_eq(ref_steps_in_use()->window_position(&a, 0, 4), 0);
}

/* ---- fp8 ties away from zero, in every binade or in the subnormals only ------------ */

Test(deviation_steps, fp8_ties_go_away_from_zero_where_the_entry_says) {
    /* 2.5 x 2^-9 lies halfway between the subnormal codes 2 and 3; 2^-10
     * halfway between 0 and 1; 1 + 2^-4 halfway between 1 (0x38) and
     * 1.125 (0x39).  To even: the lower of each; away: the upper. */
    const float subnormal_tie = 2.5f * 0x1p-9f, smallest_tie = 0x1p-10f, normal_tie = 1.0625f, not_a_tie = 1.07f;
    cr_expect_eq(fp8_code(subnormal_tie), 0x02);
    cr_expect_eq(fp8_code(-subnormal_tie), 0x82);
    cr_expect_eq(fp8_code(smallest_tie), 0x00);
    cr_expect_eq(fp8_code(normal_tie), 0x38);
    activate("fp8-ties-away");
    cr_expect_eq(fp8_code(subnormal_tie), 0x03);
    cr_expect_eq(fp8_code(-subnormal_tie), 0x83);
    cr_expect_eq(fp8_code(smallest_tie), 0x01);
    cr_expect_eq(fp8_code(normal_tie), 0x39);
    cr_expect_eq(fp8_code(-normal_tie), 0xB9);
    cr_expect_eq(fp8_code(1.5f * 0x1p-9f), 0x02);   /* a tie whose even code is the upper one */
    cr_expect_eq(fp8_code(not_a_tie), 0x39);
    cr_expect_eq(fp8_code(1.06f), 0x38);
    activate("fp8-subnormal-ties-away");
    cr_expect_eq(fp8_code(subnormal_tie), 0x03);
    cr_expect_eq(fp8_code(smallest_tie), 0x01);
    cr_expect_eq(fp8_code(normal_tie), 0x38);
    cr_expect_eq(fp8_code(7.5f * 0x1p-9f), 0x08);   /* the tie below 2^-6 rounds up to even anyway */
    deactivate();
}

/* ---- exp-other-faithful: the faithful neighbour across e^x ---------------------- */

Test(deviation_steps, exp_other_faithful_is_the_neighbour_across_e_to_the_x) {
    /* The binary32 nearest e is 0x402DF854 (2.71828174...), below e; the
     * nearest e^-1 is 0x3EBC5AB2, above it. */
    cr_expect_eq(kvc_f32_bits(kvc_deviation_exp(1.0f)), 0x402DF854u);
    activate("exp-other-faithful");
    cr_expect_eq(kvc_f32_bits(kvc_deviation_exp(1.0f)), 0x402DF855u);
    cr_expect_eq(kvc_f32_bits(kvc_deviation_exp(-1.0f)), 0x3EBC5AB1u);
    /* e^0 = 1 and e^-inf = 0 are values: the only faithful results. */
    cr_expect_eq(kvc_deviation_exp(0.0f), 1.0f);
    cr_expect_eq(kvc_f32_bits(kvc_deviation_exp(-INFINITY)), 0u);
    cr_expect(isnan(kvc_deviation_exp(NAN)));
    deactivate();
}

/* ---- softmax-sum-from-negative-zero ------------------------------------------ */

Test(deviation_steps, a_pooled_sum_from_negative_zero_keeps_a_window_of_negative_zeros_negative) {
    const float scores[2] = {0.0f, 0.0f}, zeros[2] = {-0.0f, -0.0f}, mixed[2] = {-0.0f, 0.0f}, values[2] = {-0.0f, 3.0f};
    cr_expect_eq(kvc_f32_bits(ref_steps_in_use()->softmax_pool(zeros, scores, 2)), 0x00000000u);
    activate("softmax-sum-from-negative-zero");
    cr_expect_eq(kvc_f32_bits(ref_steps_in_use()->softmax_pool(zeros, scores, 2)), 0x80000000u);
    cr_expect_eq(kvc_f32_bits(ref_steps_in_use()->softmax_pool(mixed, scores, 2)), 0x00000000u);
    cr_expect_eq(ref_steps_in_use()->softmax_pool(values, scores, 2), 1.5f);
    deactivate();
}

/* ---- the variant's step table ---------------------------------------------------- */

/* The table's steps as raw pointers, field by field. */
#define STEP_COUNT (sizeof(ref_steps) / sizeof(void (*)(void)))
static void step_pointers(const ref_steps *t, void (*out[STEP_COUNT])(void)) { memcpy(out, t, sizeof *t); }

Test(deviation_steps, a_variant_replaces_only_the_steps_its_deviation_varies) {
    cr_assert_eq(ref_steps_in_use(), &ref_contract_steps);
    void (*contract[STEP_COUNT])(void), (*variant[STEP_COUNT])(void);
    step_pointers(&ref_contract_steps, contract);
    for (size_t i = 0; i < STEP_COUNT; i++)
        cr_expect((contract[i] != NULL) == (i < offsetof(ref_steps, v4_save_partial_states) / sizeof contract[0]),
                  "step %zu: only the whole stages are empty in the contract's table", i);
    activate("bf16-truncation");
    cr_assert_neq(ref_steps_in_use(), &ref_contract_steps);
    step_pointers(ref_steps_in_use(), variant);
    for (size_t i = 0; i < STEP_COUNT; i++)
        cr_expect_eq(variant[i] != contract[i], i == offsetof(ref_steps, bf16_row) / sizeof contract[0], "step %zu", i);
    activate("positions-int32");   /* a deviation that changes the batch: every whole stage, no step */
    step_pointers(ref_steps_in_use(), variant);
    for (size_t i = 0; i < STEP_COUNT; i++)
        cr_expect_eq(variant[i] != contract[i], i >= offsetof(ref_steps, v4_save_partial_states) / sizeof contract[0], "step %zu", i);
    deactivate();
    cr_expect_eq(ref_steps_in_use(), &ref_contract_steps);
}

static void *table_on_a_new_thread(void *unused) {
    (void)unused;
    return (void *)ref_steps_in_use();
}

Test(deviation_steps, a_variant_is_installed_for_its_thread_alone) {
    activate("rope-inverse");
    const ref_steps *here = ref_steps_in_use();
    pthread_t other;
    void *there = NULL;
    cr_assert_eq(pthread_create(&other, NULL, table_on_a_new_thread, NULL), 0);
    cr_assert_eq(pthread_join(other, &there), 0);
    deactivate();
    cr_expect_neq(here, &ref_contract_steps);
    cr_expect_eq(there, &ref_contract_steps);
}

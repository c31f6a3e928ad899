/* Hand-checkable properties of the reference stages (SPEC.md section 3).
 * Expected values come from the contract's arithmetic, never from the
 * code under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "reference/steps.h"

static uint32_t bits(float x) { return kvc_f32_bits(x); }

Test(reference_steps, one_valid_entry_pools_to_itself) {
    const float values[] = {1.0f, -3.5f, 1e-30f, -7e20f, 0.1f, 448.0f, 1e-42f};
    const float scores[] = {0.0f, -1e30f, 50.0f, -88.0f, 3.0f};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        for (size_t j = 0; j < sizeof scores / sizeof scores[0]; j++) {
            float pooled = ref_softmax_pool(&values[i], &scores[j], 1);
            cr_assert_eq(bits(pooled), bits(values[i]), "kv=%a score=%a pooled=%a", (double)values[i], (double)scores[j], (double)pooled);
        }
}

Test(reference_steps, equal_scores_give_the_mean) {
    /* Small integers: every partial sum is exact, so the mean is exact. */
    float kv[8] = {1, 2, 3, 4, 5, 6, 7, 9}, score[8];
    for (int n = 1; n <= 8; n *= 2) {
        float sum = 0.0f;
        for (int w = 0; w < n; w++) { score[w] = 0.75f; sum += kv[w]; }
        float pooled = ref_softmax_pool(kv, score, n);
        cr_assert_eq(bits(pooled), bits(sum / (float)n), "n=%d pooled=%a", n, (double)pooled);
    }
}

Test(reference_steps, softmax_underflow_and_nan) {
    /* A score 200 below the maximum underflows exp to +0: its kv is ignored. */
    float kv[2] = {1000.0f, 5.0f}, score[2] = {-200.0f, 0.0f};
    cr_assert_eq(bits(ref_softmax_pool(kv, score, 2)), bits(5.0f));
    /* All valid scores -inf: exp(NaN) makes the channel NaN. */
    float minus_inf[2] = {-INFINITY, -INFINITY};
    cr_assert(isnan(ref_softmax_pool(kv, minus_inf, 2)));
    float with_nan[2] = {0.0f, NAN};
    cr_assert(isnan(ref_softmax_pool(kv, with_nan, 2)));
}

Test(reference_steps, rope_with_cos_one_sin_zero_is_identity) {
    float row[64], x[64], original[64];
    for (int i = 0; i < 32; i++) { row[i] = 1.0f; row[32 + i] = 0.0f; }
    for (int d = 0; d < 64; d++) original[d] = x[d] = (d % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)d / 64.0f, d - 32);
    ref_rope(x, row);
    for (int d = 0; d < 64; d++) cr_assert_eq(bits(x[d]), bits(original[d]), "dim %d", d);
}

Test(reference_steps, rope_quarter_turn_swaps_pairs) {
    /* cos = 0, sin = 1: (x_e, x_o) -> (-x_o, x_e) exactly. */
    float row[64], x[64];
    for (int i = 0; i < 32; i++) { row[i] = 0.0f; row[32 + i] = 1.0f; }
    for (int d = 0; d < 64; d++) x[d] = (float)(d + 1);
    ref_rope(x, row);
    for (int i = 0; i < 32; i++) {
        cr_assert_eq(bits(x[2 * i]), bits(-(float)(2 * i + 2)));
        cr_assert_eq(bits(x[2 * i + 1]), bits((float)(2 * i + 1)));
    }
}

Test(reference_steps, scale_byte_at_448_times_power_of_two) {
    float y[64];
    uint8_t codes[64];
    for (int k = -10; k <= 10; k++) {
        for (int j = 0; j < 64; j++) y[j] = 0.0f;
        y[17] = ldexpf(448.0f, k);
        /* a / 448 = 2^k exactly: e = k, the element becomes 448 = 0x7E. */
        cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 127 + k, "k=%d", k);
        cr_assert_eq(codes[17], 0x7E);
        /* One bf16 step above: e = k + 1 and the element is 224.something. */
        y[17] = kvc_f32_from_bf16((uint16_t)(kvc_bf16_from_f32(ldexpf(448.0f, k)) + 1));
        cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 128 + k, "k=%d one step above", k);
        cr_assert_eq(codes[17], kvc_fp8_from_f32(y[17] * ldexpf(1.0f, -(k + 1))));
    }
}

Test(reference_steps, magnitude_floor_1e4) {
    float y[64] = {0};
    uint8_t codes[64];
    /* a = 1e-4: q = 1e-4 / 448 ~ 2.23e-7 lies in (2^-23, 2^-22]: byte 105. */
    cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 127 - 22);
    y[3] = 5e-5f;
    cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 127 - 22);
    /* The element is scaled by 2^22 before fp8 rounding. */
    cr_assert_eq(codes[3], kvc_fp8_from_f32(5e-5f * ldexpf(1.0f, 22)));
}

Test(reference_steps, non_finite_blocks) {
    float y[64] = {0};
    uint8_t codes[64];
    y[0] = INFINITY; y[1] = 2.0f; y[2] = -3.0f;
    cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 255);
    cr_assert_eq(codes[0], 0x7F, "inf * 0 is NaN");
    cr_assert_eq(codes[1], 0x00, "finite * +0 is +0");
    cr_assert_eq(codes[2], 0x80, "negative finite * +0 is -0");
    y[0] = NAN;
    cr_assert_eq(ref_quantize_block_ue8m0(y, codes), 255);
    for (int j = 0; j < 64; j++) cr_assert_eq(codes[j], 0x7F);
}

Test(reference_steps, rms_norm_of_a_constant_vector) {
    /* v = 2 everywhere, D = 128: sumsq = 512 exactly, 512/128 = 4, +0 eps,
     * sqrt 2, inv 0.5: normed = (2 * 0.5) * w = w. */
    float pooled[128], weight[128], normed[128];
    for (int d = 0; d < 128; d++) { pooled[d] = 2.0f; weight[d] = (float)(d - 64) * 0.25f; }
    ref_rms_norm(pooled, weight, 128, 0.0f, normed);
    for (int d = 0; d < 128; d++) cr_assert_eq(bits(normed[d]), bits(weight[d]), "dim %d", d);
}

Test(reference_steps, sum_of_squares_uses_the_canonical_tree) {
    /* Lane 0 gets a huge square; 2^-30 squares elsewhere vanish when added
     * to it one by one, but survive when summed among themselves first.
     * In the canonical tree lanes 1..15 meet lane 0 only after the folds. */
    float pooled[512] = {0}, weight[512], normed[512];
    for (int d = 0; d < 512; d++) weight[d] = 1.0f;
    pooled[0] = 4096.0f;                     /* lane 0: 2^24 */
    for (int lane = 1; lane < 16; lane++) pooled[lane] = 1.0f;  /* 15 ones */
    ref_rms_norm(pooled, weight, 512, 0.0f, normed);
    /* Canonical: the fold j + 8 loses l8's 1 (2^24 + 1 ties to 2^24), then
     * the partial sums 2, 4, 8 of the other lanes survive: 2^24 + 14.  A
     * single running sum would lose every 1 and give 2^24. */
    float lanes[16] = {0};
    lanes[0] = 16777216.0f;
    for (int lane = 1; lane < 16; lane++) lanes[lane] = 1.0f;
    for (int width = 8; width >= 1; width /= 2)
        for (int j = 0; j < width; j++) lanes[j] += lanes[j + width];
    float inv = 1.0f / sqrtf(lanes[0] / 512.0f);
    cr_assert_eq(bits(normed[1]), bits(inv), "normed[1]=%a inv=%a", (double)normed[1], (double)inv);
}

/* ---- A small V4 compress problem built by hand ---- */

typedef struct {
    kvc_v4_compress_args args;
    float *state;
    uint8_t *kv_cache;
    int32_t block_table[8];
    int32_t token_to_req[1];
    int64_t positions[1], slots[1], kv_slots[1];
    float norm_weight[512];
    float cos_sin[64 * 8];
} v4_problem;

/* One closing token at position p of request 0, identity block table,
 * state block size 4, 2 kv pages of 4 rows. */
static void v4_problem_init(v4_problem *problem, int32_t ratio, int32_t head_dim, int64_t position) {
    memset(problem, 0, sizeof *problem);
    int64_t width = (int64_t)kvc_v4_coff(ratio) * head_dim, bs = 4, pages = 8;
    problem->state = calloc((size_t)(pages * bs * 2 * width), sizeof(float));
    int64_t kv_row = head_dim == 512 ? 584 : 132;
    problem->kv_cache = calloc(2 * 4 * (size_t)kv_row, 1);
    for (int i = 0; i < 8; i++) problem->block_table[i] = i;
    problem->positions[0] = position;
    problem->slots[0] = position;   /* identity table: slot = position */
    problem->kv_slots[0] = 1;
    for (int d = 0; d < head_dim; d++) problem->norm_weight[d] = 1.0f;
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < 32; i++) { problem->cos_sin[r * 64 + i] = 1.0f; problem->cos_sin[r * 64 + 32 + i] = 0.0f; }
    kvc_v4_compress_args *a = &problem->args;
    a->num_tokens = 1; a->compress_ratio = ratio; a->head_dim = head_dim; a->eps = 1e-6f;
    a->state_cache = (kvc_paged_cache){problem->state, pages, bs, bs * 2 * width * 4, bs * 2 * width * 4};
    a->block_table = problem->block_table; a->num_requests = 1; a->max_blocks = 8;
    a->token_to_req = problem->token_to_req; a->positions = problem->positions;
    a->slot_mapping = problem->slots; a->kv_slot_mapping = problem->kv_slots;
    a->norm_weight = problem->norm_weight; a->cos_sin = problem->cos_sin; a->cos_sin_rows = 8;
    a->kv_cache = (kvc_paged_cache){problem->kv_cache, 2, 4, 4 * kv_row, 4 * kv_row};
}

static void v4_problem_free(v4_problem *problem) { free(problem->state); free(problem->kv_cache); }

static float *state_value(v4_problem *problem, int64_t position, int half_is_score, int64_t column) {
    int64_t width = (int64_t)kvc_v4_coff(problem->args.compress_ratio) * problem->args.head_dim;
    return problem->state + position * 2 * width + half_is_score * width + column;
}

Test(reference_v4, r4_reads_first_half_of_previous_group_second_half_of_current) {
    /* Position 7 closes group 1: entries w = 0..3 are positions 0..3 read at
     * columns [0, D), entries w = 4..7 are positions 4..7 read at [D, 2D).
     * Fill the read halves with +1 and the unread halves with -1000: with
     * equal scores the pooled vector is exactly +1. */
    v4_problem problem;
    v4_problem_init(&problem, 4, 128, 7);
    for (int64_t q = 0; q < 8; q++)
        for (int64_t column = 0; column < 256; column++) {
            int read = (q < 4) == (column < 128);
            *state_value(&problem, q, 0, column) = read ? 1.0f : -1000.0f;
            *state_value(&problem, q, 1, column) = read ? 0.0f : 80.0f;
        }
    kvc_error err;
    cr_assert_eq(ref_v4_compress(&problem.args, &err), KVC_OK, "%s", err.message);
    /* pooled = 1 -> inv = 1/sqrt(1 + 1e-6) -> bf16 -> one block of 128. */
    float inv = 1.0f / sqrtf(128.0f / 128.0f + 1e-6f);
    float z = kvc_f32_from_bf16(kvc_bf16_from_f32(inv));
    kvc_block_scale scale = kvc_block_scale_from_quotient(z / 448.0f);
    uint8_t want = kvc_fp8_from_f32(z * ldexpf(1.0f, -scale.scale_exp));
    uint8_t *codes = problem.kv_cache + 1 * 128;
    for (int d = 0; d < 128; d++) cr_assert_eq(codes[d], want, "dim %d: code 0x%02x, want 0x%02x", d, codes[d], want);
    v4_problem_free(&problem);
}

Test(reference_v4, r128_window_of_the_first_group_skips_negative_positions) {
    /* Position 127, R = 128: entries q = 0..127, all valid; position 255 of
     * group 1 never reads group 0.  Put kv = 3 in group 1, -3 in group 0. */
    v4_problem problem;
    v4_problem_init(&problem, 128, 128, 255);
    free(problem.state);
    int64_t bs = 4, pages = 64;
    problem.state = calloc((size_t)(pages * bs * 2 * 128), sizeof(float));
    int32_t table[64];
    for (int i = 0; i < 64; i++) table[i] = 63 - i;   /* reversed physical blocks */
    problem.args.block_table = table;
    problem.args.max_blocks = 64;
    problem.args.state_cache = (kvc_paged_cache){problem.state, pages, bs, bs * 256 * 4, bs * 256 * 4};
    problem.slots[0] = 0;
    static float cos_sin[256 * 64];
    for (int r = 0; r < 256; r++)
        for (int i = 0; i < 32; i++) { cos_sin[r * 64 + i] = 1.0f; cos_sin[r * 64 + 32 + i] = 0.0f; }
    problem.args.cos_sin = cos_sin;
    problem.args.cos_sin_rows = 256;
    for (int64_t q = 0; q < 256; q++) {
        int64_t slot = (int64_t)table[q / bs] * bs + q % bs;
        for (int d = 0; d < 128; d++) problem.state[slot * 256 + d] = q >= 128 ? 3.0f : -3.0f;
    }
    kvc_error err;
    cr_assert_eq(ref_v4_compress(&problem.args, &err), KVC_OK, "%s", err.message);
    uint8_t *codes = problem.kv_cache + 128;
    for (int d = 0; d < 128; d++) cr_assert(codes[d] < 0x80, "dim %d negative: group 0 was read", d);
    v4_problem_free(&problem);
}

Test(reference_v4, non_closing_and_skipped_tokens_write_nothing) {
    v4_problem problem;
    v4_problem_init(&problem, 4, 512, 6);   /* (6 + 1) % 4 != 0 */
    uint8_t before[2 * 4 * 584];
    memcpy(before, problem.kv_cache, sizeof before);
    kvc_error err;
    cr_assert_eq(ref_v4_compress(&problem.args, &err), KVC_OK);
    cr_assert_eq(memcmp(before, problem.kv_cache, sizeof before), 0);
    problem.positions[0] = 7;
    problem.slots[0] = -1;                  /* closing but no state slot */
    cr_assert_eq(ref_v4_compress(&problem.args, &err), KVC_OK);
    cr_assert_eq(memcmp(before, problem.kv_cache, sizeof before), 0);
    v4_problem_free(&problem);
}

Test(reference_v4, save_partial_states_adds_ape_once) {
    float kv[2 * 1024], score[2 * 1024], ape[4 * 1024], state[2 * 2048];
    for (int i = 0; i < 2048; i++) { kv[i] = (float)i - 0.5f; score[i] = 0.1f * (float)i; }
    for (int i = 0; i < 4096; i++) ape[i] = (float)i;
    memset(state, 0x5A, sizeof state);
    int64_t positions[2] = {5, 6}, slots[2] = {1, -1};
    kvc_v4_save_args a = {2, 4, 512, kv, score, ape, positions, slots, {state, 2, 1, 2048 * 4, 2048 * 4}};
    kvc_error err;
    cr_assert_eq(ref_v4_save_partial_states(&a, &err), KVC_OK, "%s", err.message);
    for (int i = 0; i < 1024; i++) {
        cr_assert_eq(bits(state[2048 + i]), bits(kv[i]));
        cr_assert_eq(bits(state[2048 + 1024 + i]), bits(score[i] + ape[1 * 1024 + i]));   /* 5 % 4 = 1 */
        cr_assert_eq(bits(state[i]), 0x5A5A5A5Au, "slot 0 is untouched");
    }
}

/* ---- V4.1 ---- */

typedef struct {
    kvc_v41_norm_args args;
    float kv_score[8 * 1024];
    uint16_t latent[8 * 512], weight[512];
    float ring[2 * 8 * 1024];
    int64_t positions[8], slots[8];
    int32_t query_start_loc[3], token_to_req[8];
} v41_problem;

static void v41_problem_init(v41_problem *problem, int32_t ratio, int64_t tokens, int64_t first_position) {
    memset(problem, 0, sizeof *problem);
    for (int d = 0; d < 512; d++) problem->weight[d] = kvc_bf16_from_f32(1.0f);
    for (int64_t t = 0; t < tokens; t++) {
        problem->positions[t] = first_position + t;
        problem->slots[t] = ratio == 2 ? 8 + (first_position + t) % 8 : t;
    }
    problem->query_start_loc[1] = (int32_t)tokens;
    memset(problem->latent, 0xEE, sizeof problem->latent);
    kvc_v41_norm_args *a = &problem->args;
    a->num_tokens = tokens; a->compress_ratio = ratio; a->eps = 1e-6f;
    a->kv_score = problem->kv_score; a->positions = problem->positions; a->slot_mapping = problem->slots;
    a->norm_weight = problem->weight; a->latent = problem->latent;
    a->state_cache = (kvc_paged_cache){problem->ring, 2, 8, 8 * 1024 * 4, 8 * 1024 * 4};
    a->query_start_loc = problem->query_start_loc; a->num_requests = 1; a->token_to_req = problem->token_to_req;
}

/* The latent the contract gives for a pooled row (steps 4-6 + bf16). */
static void expected_latent(const float *pooled, uint16_t *latent) {
    float weight[512], normed[512];
    for (int d = 0; d < 512; d++) weight[d] = 1.0f;
    ref_rms_norm(pooled, weight, 512, 1e-6f, normed);
    for (int d = 0; d < 512; d++) latent[d] = kvc_bf16_from_f32(normed[d]);
}

Test(reference_v41, r1_pools_the_input_row_itself) {
    v41_problem problem;
    v41_problem_init(&problem, 1, 3, 10);
    for (int i = 0; i < 3 * 512; i++) problem.kv_score[i] = sinf((float)i);
    problem.slots[1] = -1;
    kvc_error err;
    cr_assert_eq(ref_v41_save_compress_norm(&problem.args, &err), KVC_OK, "%s", err.message);
    uint16_t want[512];
    expected_latent(problem.kv_score, want);
    cr_assert_eq(memcmp(problem.latent, want, sizeof want), 0);
    for (int d = 0; d < 512; d++) cr_assert_eq(problem.latent[512 + d], 0xEEEE, "padding token wrote its latent");
}

Test(reference_v41, r2_equal_scores_give_the_mean_of_the_pair) {
    v41_problem problem;
    v41_problem_init(&problem, 2, 2, 0);   /* positions 0, 1: token 1 closes */
    for (int d = 0; d < 512; d++) {
        problem.kv_score[d] = (float)(d % 7);            /* row 0 kv */
        problem.kv_score[1024 + d] = (float)(d % 5);     /* row 1 kv */
    }
    kvc_error err;
    cr_assert_eq(ref_v41_save_compress_norm(&problem.args, &err), KVC_OK, "%s", err.message);
    float pooled[512];
    for (int d = 0; d < 512; d++) pooled[d] = ((float)(d % 7) + (float)(d % 5)) / 2.0f;
    uint16_t want[512];
    expected_latent(pooled, want);
    cr_assert_eq(memcmp(problem.latent + 512, want, sizeof want), 0);
    for (int d = 0; d < 512; d++) cr_assert_eq(problem.latent[d], 0xEEEE, "position 0 does not close");
}

Test(reference_v41, r2_chunk_starting_on_odd_position_reads_the_ring) {
    /* Chunk = positions 5, 6: position 5 closes and its predecessor 4 lives
     * in ring row 4 of block 1 (slot 8 + 4). */
    v41_problem problem;
    v41_problem_init(&problem, 2, 2, 5);
    for (int d = 0; d < 512; d++) {
        problem.ring[(8 + 4) * 1024 + d] = 6.0f;     /* ring row p-1: kv */
        problem.ring[(8 + 5) * 1024 + d] = -100.0f;  /* row p: must not be read */
        problem.kv_score[d] = 2.0f;
    }
    kvc_error err;
    cr_assert_eq(ref_v41_save_compress_norm(&problem.args, &err), KVC_OK, "%s", err.message);
    float pooled[512];
    for (int d = 0; d < 512; d++) pooled[d] = 4.0f;  /* (6 + 2) / 2 */
    uint16_t want[512];
    expected_latent(pooled, want);
    cr_assert_eq(memcmp(problem.latent, want, sizeof want), 0);
    /* Afterwards the chunk's rows are in the ring at p % 8. */
    cr_assert_eq(bits(problem.ring[(8 + 5) * 1024]), bits(2.0f));
    cr_assert_eq(bits(problem.ring[(8 + 6) * 1024]), bits(problem.kv_score[1024]));
}

Test(reference_v41, r2_chunk_starting_on_even_position_ignores_the_ring) {
    v41_problem problem;
    v41_problem_init(&problem, 2, 2, 4);
    for (int i = 0; i < 2 * 8 * 1024; i++) problem.ring[i] = NAN;
    for (int d = 0; d < 1024; d++) { problem.kv_score[d] = 1.0f; problem.kv_score[1024 + d] = 1.0f; }
    kvc_error err;
    cr_assert_eq(ref_v41_save_compress_norm(&problem.args, &err), KVC_OK, "%s", err.message);
    for (int d = 0; d < 512; d++) cr_assert(!isnan(kvc_f32_from_bf16(problem.latent[512 + d])), "ring was read");
}

Test(reference_v41, plain_insert_passes_nope_dims_and_canonicalises_nan) {
    uint16_t latent[512];
    for (int d = 0; d < 512; d++) latent[d] = (uint16_t)(0x3F00 + d);
    latent[3] = 0xFFC1;   /* a negative NaN with payload */
    float cos_sin[64];
    for (int i = 0; i < 32; i++) { cos_sin[i] = 0.5f; cos_sin[32 + i] = 0.25f; }
    uint16_t cache[2 * 512];
    memset(cache, 0, sizeof cache);
    int64_t positions[1] = {0}, slots[1] = {1};
    kvc_v41_insert_args a = {1, 1, KVC_CACHE_BF16, latent, positions, slots, cos_sin, 1, {cache, 1, 2, 2048, 2048}, 0};
    kvc_error err;
    cr_assert_eq(ref_v41_rope_plain_insert(&a, &err), KVC_OK, "%s", err.message);
    for (int d = 0; d < 448; d++) cr_assert_eq(cache[512 + d], d == 3 ? 0x7FC0 : latent[d], "dim %d", d);
    for (int d = 0; d < 512; d++) cr_assert_eq(cache[d], 0, "row 0 untouched");
}

/* ---- the step table (reference/steps.h) ------------------------------------ */

static void bf16_all_ones(const float *x, uint16_t *bf16, int n) {
    (void)x;
    for (int i = 0; i < n; i++) bf16[i] = 0xFFFF;
}

Test(reference_steps, a_stage_calls_the_steps_of_the_table_installed_for_its_thread) {
    uint16_t latent[512];
    for (int d = 0; d < 512; d++) latent[d] = (uint16_t)(0x3F00 + d);
    float cos_sin[64];
    for (int i = 0; i < 32; i++) { cos_sin[i] = 1.0f; cos_sin[32 + i] = 0.0f; }
    uint16_t cache[2 * 512];
    memset(cache, 0, sizeof cache);
    int64_t positions[1] = {0}, slots[1] = {1};
    kvc_v41_insert_args a = {1, 1, KVC_CACHE_BF16, latent, positions, slots, cos_sin, 1, {cache, 1, 2, 2048, 2048}, 0};
    kvc_error err;
    cr_assert_eq(ref_steps_in_use(), &ref_contract_steps);
    ref_steps variant = ref_contract_steps;
    variant.bf16_row = bf16_all_ones;
    cr_assert_eq(ref_use_steps(&variant), &ref_contract_steps);
    int rc = ref_v41_rope_plain_insert(&a, &err);
    cr_expect_eq(ref_use_steps(&ref_contract_steps), &variant);
    cr_assert_eq(rc, KVC_OK, "%s", err.message);
    for (int d = 0; d < 512; d++) cr_assert_eq(cache[512 + d], 0xFFFF, "dim %d: the installed table rounds", d);
    /* Back on the contract's: RoPE at cos 1, sin 0 keeps every value. */
    cr_expect_eq(ref_steps_in_use(), &ref_contract_steps);
    cr_assert_eq(ref_v41_rope_plain_insert(&a, &err), KVC_OK, "%s", err.message);
    for (int d = 0; d < 512; d++) cr_assert_eq(cache[512 + d], latent[d], "dim %d", d);
}

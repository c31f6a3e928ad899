/* The catalogue of deviations (harness/diagnose/deviations.h): the wrong
 * versions of the reference's steps, the step table of a set of
 * deviations, the catalogue's public queries and one variant backend per
 * deviation (include/kvcmp/deviations.h).
 *
 * A set of deviations (up to KVC_DIAGNOSIS_DEPTH) is active per thread.
 * Its table is the contract's (ref_contract_steps) with each step that a
 * member varies replaced by that step's wrong version here, installed
 * for the thread's reference calls (ref_use_steps).  A wrong version
 * serves every deviation of its step and is in a table only while one of
 * them is active: it asks which, so that members of one step compose as
 * they do in a kernel. */
#include "harness/diagnose/deviations.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/deviations.h"
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/reference.h"
#include "kvcmp/validate.h"
#include "reference/steps.h"

/* The active set, packed from slot 0 (KVC_DEV_NONE after the last). */
static _Thread_local kvc_deviation_id active[KVC_DIAGNOSIS_DEPTH];

static int deviates(kvc_deviation_id d) {
    for (int k = 0; k < KVC_DIAGNOSIS_DEPTH && active[k] != KVC_DEV_NONE; k++)
        if (active[k] == d) return 1;
    return 0;
}

/* ---- the wrong versions of SPEC.md 1's numbers ------------------------------ */

static uint16_t deviant_bf16(float x) {
    uint32_t u = kvc_f32_bits(x);
    uint16_t b = kvc_bf16_from_f32(x);
    if (kvc_f32_is_nan(x)) b = deviates(KVC_DEV_BF16_NAN_PAYLOAD_KEPT) ? (uint16_t)((u >> 16) | 0x0040u)
                                : deviates(KVC_DEV_NAN_ALL_ONES)       ? 0x7FFFu
                                                                       : b;
    else if (deviates(KVC_DEV_BF16_SUBNORMALS_FLUSHED) && (u & 0x7F800000u) == 0) b = (uint16_t)((u >> 16) & 0x8000u);
    else if (deviates(KVC_DEV_BF16_TRUNCATION)) b = (uint16_t)(u >> 16);
    else if (deviates(KVC_DEV_BF16_HALF_AWAY)) b = (uint16_t)((u + 0x8000u) >> 16);
    if (deviates(KVC_DEV_BF16_NEGATIVE_ZERO_FLUSHED) && b == 0x8000u) b = 0;
    return b;
}

static void deviant_bf16_row(const float *x, uint16_t *bf16, int n) {
    for (int i = 0; i < n; i++) bf16[i] = deviant_bf16(x[i]);
}

/* fp8 e4m3fn by truncation towards zero; magnitudes of 480 and above
 * (and infinity) have no code: NaN. */
static uint8_t fp8_truncated(float x) {
    uint32_t u = kvc_f32_bits(x), abs_bits = u & 0x7FFFFFFFu;
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (abs_bits >= 0x7F800000u) return KVC_FP8_NAN;
    int e32 = (int)(abs_bits >> 23) - 127;
    if (e32 < -6) return (uint8_t)(sign | (uint8_t)truncf(ldexpf(kvc_f32_from_bits(abs_bits), 9)));
    uint32_t kept = ((abs_bits & 0x7FFFFFu) | 0x800000u) >> 20;
    int e8 = e32 + 7;
    if (e8 > 15 || (e8 == 15 && kept - 8 == 7)) return KVC_FP8_NAN;
    return (uint8_t)(sign | (uint8_t)(e8 << 3) | (uint8_t)(kept - 8));
}

/* |x| lies exactly halfway between two fp8 magnitudes (up to 464, the
 * tie between 448 and the missing 480) and rounding to even went
 * towards zero: the even one is the smaller. */
static int fp8_tie_rounded_down(float x) {
    float m = fabsf(x);
    if (!(m > 0.0f && m <= 464.0f)) return 0;
    /* m in steps of the fp8 spacing at its binade (2^-9 below 2^-6): exact. */
    float q = m < 0x1p-6f ? ldexpf(m, 9) : ldexpf(m, 3 - ilogbf(m)), whole = floorf(q);
    return q - whole == 0.5f && fmodf(whole, 2.0f) == 0.0f;
}

/* fp8(clamp(x, -448, 448)) as the active deviations store it. */
static uint8_t deviant_fp8_code(float x) {
    if (deviates(KVC_DEV_CLAMP_NAN_TO_MINUS_448)) x = fminf(fmaxf(x, -KVC_FP8_MAX), KVC_FP8_MAX);
    else if (deviates(KVC_DEV_CLAMP_NAN_TO_PLUS_448)) x = fmaxf(fminf(x, KVC_FP8_MAX), -KVC_FP8_MAX);
    else if (!deviates(KVC_DEV_FP8_NO_SATURATION)) x = kvc_clamp_fp8_range(x);
    uint8_t code = deviates(KVC_DEV_FP8_TRUNCATION) ? fp8_truncated(x) : kvc_fp8_from_f32(x);
    int away = deviates(KVC_DEV_FP8_TIES_AWAY) || (deviates(KVC_DEV_FP8_SUBNORMAL_TIES_AWAY) && fabsf(x) < 0x1p-6f);
    /* The next magnitude up: codes are ordered by magnitude (0x7E + 1 is NaN: 480 does not exist). */
    if (away && !deviates(KVC_DEV_FP8_TRUNCATION) && fp8_tie_rounded_down(x)) code = (uint8_t)((code & 0x80u) | ((code & 0x7Fu) + 1u));
    if (deviates(KVC_DEV_FP8_SUBNORMALS_FLUSHED) && fabsf(x) < 0x1p-6f) code &= 0x80u;
    if (deviates(KVC_DEV_FP8_NEGATIVE_ZERO_FLUSHED) && code == 0x80u) code = 0;
    if (deviates(KVC_DEV_FP8_NAN_SIGN_KEPT) && code == KVC_FP8_NAN && (kvc_f32_bits(x) >> 31)) code = 0xFFu;
    return code;
}

static void deviant_fp8_codes(const float *y, float multiplier, uint8_t *codes, int n) {
    for (int j = 0; j < n; j++) codes[j] = deviant_fp8_code(y[j] * multiplier);
}

static float deviant_canonical_f32(float x) {
    return kvc_f32_is_nan(x) && deviates(KVC_DEV_NAN_ALL_ONES) ? kvc_f32_from_bits(0x7FFFFFFFu) : kvc_canonical_f32(x);
}

float kvc_deviation_exp(float x) {
    /* log2(e) as fp32; the product is rounded before exp2 (GPU ex2 style). */
    if (deviates(KVC_DEV_EXP_VIA_EXP2)) return exp2f(x * 1.44269504f);
    float nearest = kvc_expf_cr(x);
    if (!deviates(KVC_DEV_EXP_OTHER_FAITHFUL) || isnan(x)) return nearest;
    /* Which side of e^x the nearest value lies on: binary64's exp is
     * far closer to e^x than half an fp32 step, and equal to the nearest
     * value only where e^x is one (x = 0, or an underflow to 0). */
    double exact = exp((double)x);
    if ((double)nearest == exact) return nearest;
    return nextafterf(nearest, (double)nearest < exact ? INFINITY : 0.0f);
}

/* max(a, b) as x86's maxps computes it: the second operand unless a > b. */
static float max_x86(float a, float b) { return a > b ? a : b; }

/* ---- the wrong versions of the closing test (SPEC.md 2) --------------------- */

/* slot >= 0: the stages skip negative slots before they ask. */
static int row_inside(int64_t slot, const kvc_paged_cache *cache) { return slot < cache->num_pages * cache->page_rows; }

/* A token that closes only under closing-test-off-by-one carries metadata
 * no validation looked at: it is computed only when every row it reads or
 * writes lies inside its buffer (what else such a kernel does is not
 * defined). */
static int insert_token_in_bounds(const kvc_v41_insert_args *a, int64_t t) {
    return row_inside(a->slot_mapping[t], &a->kv_cache) && kvc_rope_row(a->positions[t], a->compress_ratio) < a->cos_sin_rows;
}

static int compress_token_in_bounds(const kvc_v4_compress_args *a, int64_t t) {
    int64_t p = a->positions[t], req = a->token_to_req[t], window = (int64_t)kvc_v4_coff(a->compress_ratio) * a->compress_ratio;
    if (!row_inside(a->kv_slot_mapping[t], &a->kv_cache) || req < 0 || req >= a->num_requests ||
        kvc_rope_row(p, a->compress_ratio) >= a->cos_sin_rows)
        return 0;
    for (int64_t q = p - window + 1 > 0 ? p - window + 1 : 0; q <= p; q++) {
        int64_t column = q / a->state_cache.page_rows;
        if (column >= a->max_blocks) return 0;
        int32_t block = a->block_table[req * a->max_blocks + column];
        if (block < 0 || block >= a->state_cache.num_pages) return 0;
    }
    return 1;
}

/* closing-test-off-by-one: p mod R = 0. */
static int deviant_v4_closes(const kvc_v4_compress_args *a, int64_t t) {
    return a->positions[t] % a->compress_ratio == 0 && compress_token_in_bounds(a, t);
}
static int deviant_v41_norm_closes(const kvc_v41_norm_args *a, int64_t t) { return a->positions[t] % a->compress_ratio == 0; }
static int deviant_v41_insert_closes(const kvc_v41_insert_args *a, int64_t t) {
    return a->positions[t] % a->compress_ratio == 0 && insert_token_in_bounds(a, t);
}

/* ---- the wrong versions of SPEC.md 4's steps ----------------------------- */

/* S1: save-kv-nan-canonical. */
static void deviant_save_kv(float *state_kv, const float *kv, int64_t width) {
    for (int64_t i = 0; i < width; i++) state_kv[i] = kvc_canonical_f32(kv[i]);
}

/* S2: save-nan-payload-kept, nan-all-ones. */
static void deviant_save_score(float *state_score, const float *score, const float *ape, int64_t width) {
    for (int64_t i = 0; i < width; i++)
        state_score[i] = deviates(KVC_DEV_SAVE_NAN_PAYLOAD_KEPT) ? score[i] + ape[i] : deviant_canonical_f32(score[i] + ape[i]);
}

static int64_t deviant_window_position(const kvc_v4_compress_args *a, int64_t t, int64_t w) {
    int64_t q = ref_contract_steps.window_position(a, t, w), p = a->positions[t], req = a->token_to_req[t];
    if (deviates(KVC_DEV_WINDOW_LATE)) return q + 1 > p ? -1 : q + 1;
    /* window-starts-early.  The entry before position 0 does not exist: the shifted window has
     * one entry fewer there (it never reads position 0 twice). */
    if (q - 1 < 0) return -1;
    /* Position p - coff*R lies outside the validated window: read it only
     * when its block-table entry names a page of the state cache. */
    int64_t bs = a->state_cache.page_rows, column = (q - 1) / bs;
    if (column >= a->max_blocks) return -1;
    int32_t block = a->block_table[req * a->max_blocks + column];
    return block >= 0 && block < a->state_cache.num_pages ? q - 1 : -1;
}

/* r4-halves-swapped. */
static int64_t deviant_window_half(const kvc_v4_compress_args *a, int64_t w) {
    int64_t half = ref_contract_steps.window_half(a, w);
    return a->compress_ratio == 4 ? a->head_dim - half : half;
}

/* Steps 1-3 with the active deviations' maximum, exp and sums. */
static float deviant_softmax_pool(const float *window_kv, const float *window_score, int entries) {
    float m = window_score[0];
    for (int w = 1; w < entries; w++) m = deviates(KVC_DEV_MAX_X86_ORDER) ? max_x86(m, window_score[w]) : kvc_max_nan(m, window_score[w]);
    /* softmax-reversed: the maximum as before, the sums in decreasing w. */
    float kv[256], score[256];
    if (deviates(KVC_DEV_SOFTMAX_REVERSED)) {
        for (int w = 0; w < entries; w++) kv[w] = window_kv[entries - 1 - w], score[w] = window_score[entries - 1 - w];
        window_kv = kv;
        window_score = score;
    }
    float denom = 0.0f, acc = deviates(KVC_DEV_SOFTMAX_SUM_FROM_NEGATIVE_ZERO) ? -0.0f : 0.0f;
    for (int w = 0; w < entries; w++) {
        float e = kvc_deviation_exp(window_score[w] - m);
        denom = denom + e;
        acc = deviates(KVC_DEV_SOFTMAX_UNFUSED) ? acc + e * window_kv[w] : fmaf(e, window_kv[w], acc);
    }
    return acc / denom;
}

static float deviant_sum_of_squares(const float *v, int n) {
    float s = 0.0f;
    if (deviates(KVC_DEV_SUMSQ_SEQUENTIAL))
        for (int d = 0; d < n; d++) s = fmaf(v[d], v[d], s);
    else if (deviates(KVC_DEV_SUMSQ_REVERSED))
        for (int d = n - 1; d >= 0; d--) s = fmaf(v[d], v[d], s);
    else {   /* sumsq-pairwise */
        float squares[512];
        for (int d = 0; d < n; d++) squares[d] = v[d] * v[d];
        for (int width = n / 2; width >= 1; width /= 2)
            for (int d = 0; d < width; d++) squares[d] = squares[d] + squares[d + width];
        s = squares[0];
    }
    return s;
}

static float deviant_inverse_rms(float sum_of_squares, int head_dim, float eps) {
    float mean = sum_of_squares / (float)head_dim;
    if (deviates(KVC_DEV_EPS_AFTER_SQRT)) return 1.0f / (sqrtf(mean) + eps);
    return (float)(1.0 / sqrt((double)(mean + eps)));   /* rsqrt-rounded-once */
}

/* norm-weight-first. */
static void deviant_norm_product(const float *pooled, float inv, const float *weight, int head_dim, float *normed) {
    for (int d = 0; d < head_dim; d++) normed[d] = pooled[d] * (inv * weight[d]);
}

/* rope-row-p: row p, where cos_sin has it. */
static int64_t deviant_cos_sin_row(int64_t p, int32_t ratio, int64_t cos_sin_rows) {
    return p < cos_sin_rows ? p : ref_contract_steps.cos_sin_row(p, ratio, cos_sin_rows);
}

/* rope-on-nope. */
static float *deviant_rope_dims(float *x, int head_dim) {
    (void)head_dim;
    return x;
}

static void deviant_rope(float *rope_dims, const float *cos_sin_row) {
    int half = KVC_ROPE_DIMS / 2;
    if (deviates(KVC_DEV_ROPE_HALVES)) {
        for (int i = 0; i < half; i++) {
            float c = cos_sin_row[i], s = cos_sin_row[half + i], x0 = rope_dims[i], x1 = rope_dims[half + i];
            rope_dims[i] = fmaf(x0, c, -(x1 * s));
            rope_dims[half + i] = fmaf(x1, c, x0 * s);
        }
        return;
    }
    for (int i = 0; i < half; i++) {
        float c = cos_sin_row[i], s = cos_sin_row[half + i];
        float x_even = rope_dims[2 * i], x_odd = rope_dims[2 * i + 1];
        if (deviates(KVC_DEV_ROPE_INVERSE)) {
            rope_dims[2 * i] = fmaf(x_even, c, x_odd * s);
            rope_dims[2 * i + 1] = fmaf(x_odd, c, -(x_even * s));
        } else {   /* rope-unfused */
            rope_dims[2 * i] = x_even * c - x_odd * s;
            rope_dims[2 * i + 1] = x_odd * c + x_even * s;
        }
    }
}

/* rope-on-nope rotates dims 0 .. 64 before they are rounded; rope-on-rounded
 * rotates the bf16-rounded RoPE dims. */
static void deviant_rotate_and_round(const ref_steps *s, float *normed, const float *cos_sin_row, float *nope_bf16) {
    int nope_dims = 512 - KVC_ROPE_DIMS;
    uint16_t rounded[512];
    if (deviates(KVC_DEV_ROPE_ON_NOPE)) s->rope(normed, cos_sin_row);
    s->bf16_row(normed, rounded, nope_dims);
    for (int d = 0; d < nope_dims; d++) nope_bf16[d] = kvc_f32_from_bf16(rounded[d]);
    if (deviates(KVC_DEV_ROPE_ON_ROUNDED)) {
        s->bf16_row(normed + nope_dims, rounded + nope_dims, KVC_ROPE_DIMS);
        for (int d = nope_dims; d < 512; d++) normed[d] = kvc_f32_from_bf16(rounded[d]);
    }
    if (!deviates(KVC_DEV_ROPE_ON_NOPE)) s->rope(normed + nope_dims, cos_sin_row);
}

/* floor(log2(q)) and log2(q) rounded to nearest, for finite q > 0. */
static int exponent_floor(float q) {
    uint32_t u = kvc_f32_bits(q), exp_field = u >> 23;
    return exp_field ? (int)exp_field - 127 : -149 + 31 - __builtin_clz(u & 0x7FFFFFu);
}

static kvc_block_scale deviant_block_scale(const float *y, int n) {
    int drops_nan = deviates(KVC_DEV_BLOCK_MAX_DROPS_NAN), floor_after = deviates(KVC_DEV_SCALE_FLOOR_AFTER_DIVISION);
    int exponent_floored = deviates(KVC_DEV_SCALE_EXPONENT_FLOOR), exponent_rounded = deviates(KVC_DEV_SCALE_EXPONENT_ROUND);
    int x86 = deviates(KVC_DEV_MAX_X86_ORDER);
    float a = floor_after ? 0.0f : 1e-4f;
    for (int j = 0; j < n; j++)
        a = drops_nan ? (fabsf(y[j]) > a ? fabsf(y[j]) : a) : x86 ? max_x86(a, fabsf(y[j])) : kvc_max_nan(a, fabsf(y[j]));
    /* x86's order can drop the floor with a NaN (max(NaN, 0) = 0): a zero
     * magnitude has no exponent, so the variant keeps the floor there. */
    if (x86 && a == 0.0f && !floor_after) a = 1e-4f;
    float q = a / KVC_FP8_MAX;
    if (floor_after) q = kvc_max_nan(q, 1e-4f);
    kvc_block_scale scale = kvc_block_scale_from_quotient(q);
    if (scale.kind == KVC_SCALE_FINITE && exponent_floored) scale.scale_exp = exponent_floor(q);
    if (scale.kind == KVC_SCALE_FINITE && exponent_rounded) scale.scale_exp = (int)floor(log2((double)q) + 0.5);
    return scale;
}

/* ---- the wrong versions of SPEC.md 5's steps ----------------------------- */

/* ring-row-p; closing-test-off-by-one closes p = 0, whose (p - 1) mod CAP
 * is CAP - 1. */
static int64_t deviant_ring_row(int64_t p, int64_t cap) { return deviates(KVC_DEV_RING_ROW_P) ? p % cap : (p - 1 + cap) % cap; }

/* ring-tail-skipped-after-padding. */
static void deviant_store_ring(const kvc_v41_norm_args *a, int64_t req) {
    int64_t begin = a->query_start_loc[req];
    if (begin < a->query_start_loc[req + 1] && a->slot_mapping[begin] < 0) return;
    ref_contract_steps.store_ring(a, req);
}

/* plain-fp8-approximate-reciprocal. */
static float deviant_reciprocal(float scale) {
    float contract = ref_contract_steps.reciprocal(scale);
    /* 1 - r * scale, exact for a faithful r: its sign says on which side
     * of the exact quotient r lies; the other neighbour is across it (for
     * a quotient past the fp32 range, r = inf and the other is FLT_MAX). */
    float residual = fmaf(-contract, scale, 1.0f);
    if (residual == 0.0f) return contract;   /* 1 / scale is exact: the only faithful result */
    return nextafterf(contract, residual > 0.0f ? INFINITY : 0.0f);
}

static uint8_t deviant_plain_fp8(float x, uint16_t rounded, float scale, float inverse_scale) {
    float v = deviates(KVC_DEV_PLAIN_FP8_SKIPS_BF16) ? x : kvc_f32_from_bf16(rounded);
    return deviant_fp8_code(deviates(KVC_DEV_PLAIN_FP8_DIVIDES) ? v / scale : v * inverse_scale);
}

/* nope-pair-rotated: step 7's rotation of every NoPE pair with cos 1 and
 * sin 0, the same fmas (and the same other deviations) as the RoPE dims;
 * the fp8 deviations and those of the plain fp8 row. */
static void deviant_plain_row(const ref_steps *s, float *x, kvc_cache_dtype dtype, float fp8_scale, float inverse_scale, uint8_t *row) {
    if (deviates(KVC_DEV_NOPE_PAIR_ROTATED)) {
        float identity[KVC_ROPE_DIMS];
        for (int i = 0; i < KVC_ROPE_DIMS / 2; i++) identity[i] = 1.0f, identity[KVC_ROPE_DIMS / 2 + i] = 0.0f;
        for (int d = 0; d < KVC_V41_HEAD_DIM - KVC_ROPE_DIMS; d += KVC_ROPE_DIMS) s->rope(x + d, identity);
    }
    uint16_t rounded[KVC_V41_HEAD_DIM];
    s->bf16_row(x, rounded, KVC_V41_HEAD_DIM);
    for (int d = 0; d < KVC_V41_HEAD_DIM; d++) {
        if (dtype == KVC_CACHE_BF16) kvc_store_u16(row + 2 * d, rounded[d]);
        else row[d] = deviant_plain_fp8(x[d], rounded[d], fp8_scale, inverse_scale);
    }
}

/* ---- the tables ------------------------------------------------------------ */

/* The steps deviation d varies, replaced in t. */
static void vary(kvc_deviation_id d, ref_steps *t) {
    switch (d) {
    case KVC_DEV_WINDOW_EARLY:
    case KVC_DEV_WINDOW_LATE: t->window_position = deviant_window_position; break;
    case KVC_DEV_R4_HALVES_SWAPPED: t->window_half = deviant_window_half; break;
    case KVC_DEV_SOFTMAX_UNFUSED:
    case KVC_DEV_SOFTMAX_REVERSED:
    case KVC_DEV_SOFTMAX_SUM_FROM_NEGATIVE_ZERO:
    case KVC_DEV_EXP_VIA_EXP2:
    case KVC_DEV_EXP_OTHER_FAITHFUL: t->softmax_pool = deviant_softmax_pool; break;
    case KVC_DEV_MAX_X86_ORDER: t->softmax_pool = deviant_softmax_pool, t->block_scale = deviant_block_scale; break;
    case KVC_DEV_SUMSQ_SEQUENTIAL:
    case KVC_DEV_SUMSQ_REVERSED:
    case KVC_DEV_SUMSQ_PAIRWISE: t->sum_of_squares = deviant_sum_of_squares; break;
    case KVC_DEV_EPS_AFTER_SQRT:
    case KVC_DEV_RSQRT_ROUNDED_ONCE: t->inverse_rms = deviant_inverse_rms; break;
    case KVC_DEV_NORM_WEIGHT_FIRST: t->norm_product = deviant_norm_product; break;
    case KVC_DEV_ROPE_UNFUSED:
    case KVC_DEV_ROPE_HALVES:
    case KVC_DEV_ROPE_INVERSE: t->rope = deviant_rope; break;
    case KVC_DEV_ROPE_ROW_P: t->cos_sin_row = deviant_cos_sin_row; break;
    case KVC_DEV_ROPE_ON_ROUNDED: t->rotate_and_round = deviant_rotate_and_round; break;
    case KVC_DEV_ROPE_ON_NOPE: t->rope_dims = deviant_rope_dims, t->rotate_and_round = deviant_rotate_and_round; break;
    case KVC_DEV_BF16_TRUNCATION:
    case KVC_DEV_BF16_HALF_AWAY:
    case KVC_DEV_BF16_SUBNORMALS_FLUSHED:
    case KVC_DEV_BF16_NAN_PAYLOAD_KEPT:
    case KVC_DEV_BF16_NEGATIVE_ZERO_FLUSHED: t->bf16_row = deviant_bf16_row; break;
    case KVC_DEV_FP8_TRUNCATION:
    case KVC_DEV_FP8_TIES_AWAY:
    case KVC_DEV_FP8_SUBNORMAL_TIES_AWAY:
    case KVC_DEV_FP8_SUBNORMALS_FLUSHED:
    case KVC_DEV_FP8_NEGATIVE_ZERO_FLUSHED:
    case KVC_DEV_FP8_NAN_SIGN_KEPT:
    case KVC_DEV_FP8_NO_SATURATION:
    case KVC_DEV_CLAMP_NAN_TO_MINUS_448:
    case KVC_DEV_CLAMP_NAN_TO_PLUS_448: t->fp8_codes = deviant_fp8_codes, t->plain_row = deviant_plain_row; break;
    case KVC_DEV_BLOCK_MAX_DROPS_NAN:
    case KVC_DEV_SCALE_FLOOR_AFTER_DIVISION:
    case KVC_DEV_SCALE_EXPONENT_FLOOR:
    case KVC_DEV_SCALE_EXPONENT_ROUND: t->block_scale = deviant_block_scale; break;
    case KVC_DEV_SAVE_NAN_PAYLOAD_KEPT: t->save_score = deviant_save_score; break;
    case KVC_DEV_SAVE_KV_NAN_CANONICAL: t->save_kv = deviant_save_kv; break;
    case KVC_DEV_RING_ROW_P: t->ring_row = deviant_ring_row; break;
    case KVC_DEV_RING_TAIL_SKIPPED_AFTER_PADDING: t->store_ring = deviant_store_ring; break;
    case KVC_DEV_PLAIN_FP8_DIVIDES:
    case KVC_DEV_PLAIN_FP8_SKIPS_BF16:
    case KVC_DEV_NOPE_PAIR_ROTATED: t->plain_row = deviant_plain_row; break;
    case KVC_DEV_PLAIN_FP8_APPROXIMATE_RECIPROCAL: t->reciprocal = deviant_reciprocal; break;
    case KVC_DEV_CLOSING_OFF_BY_ONE:
        t->v4_closes = deviant_v4_closes, t->v41_norm_closes = deviant_v41_norm_closes, t->v41_insert_closes = deviant_v41_insert_closes;
        t->ring_row = deviant_ring_row;
        break;
    case KVC_DEV_NAN_ALL_ONES:
        t->bf16_row = deviant_bf16_row, t->canonical_f32 = deviant_canonical_f32, t->save_score = deviant_save_score;
        break;
    /* Deviations that change the batch a stage sees: whole stages, below. */
    case KVC_DEV_STATE_SLOT_IGNORED:
    case KVC_DEV_POSITIONS_INT32:
    case KVC_DEV_RING_STORED_BEFORE_READS:
    case KVC_DEV_NONE:
    case KVC_DEV_END: break;
    }
}

static void vary_stages(ref_steps *t);

/* The table of the active set; NULL for the empty set (the contract). */
static const ref_steps *table_of_active(ref_steps *t) {
    if (active[0] == KVC_DEV_NONE) return NULL;
    *t = ref_contract_steps;
    for (int k = 0; k < KVC_DIAGNOSIS_DEPTH && active[k] != KVC_DEV_NONE; k++) vary(active[k], t);
    vary_stages(t);
    return t;
}

/* The table installed by the last kvc_deviation_activate_set. */
static _Thread_local ref_steps activated;

/* ---- deviations that change the batch a stage sees ------------------------ */

/* The active set and table, saved while `d` is switched off for a run of
 * the reference on the batch as the deviating kernel sees it; the others
 * stay on, in `table`. */
typedef struct {
    kvc_deviation_id active[KVC_DIAGNOSIS_DEPTH];
    const ref_steps *table;
} active_set;

static active_set switch_off(kvc_deviation_id d, ref_steps *table) {
    active_set saved;
    memcpy(saved.active, active, sizeof saved.active);
    int kept = 0;
    for (int i = 0; i < KVC_DIAGNOSIS_DEPTH; i++)
        if (saved.active[i] != d) active[kept++] = saved.active[i];
    while (kept < KVC_DIAGNOSIS_DEPTH) active[kept++] = KVC_DEV_NONE;
    saved.table = ref_use_steps(table_of_active(table));
    return saved;
}

static void restore(const active_set *saved) {
    memcpy(active, saved->active, sizeof saved->active);
    ref_use_steps(saved->table);
}

/* positions-int32: positions as a kernel reading their low 32 bits sees
 * them.  The stage runs on them; a batch they make invalid (a position of
 * 2^31 or more turns negative) is rejected as the contract rejects it. */
static int64_t *int32_positions(const int64_t *positions, int64_t count) {
    int64_t *seen = malloc((size_t)(count > 0 ? count : 1) * sizeof *seen);
    if (!seen) return NULL;
    for (int64_t t = 0; t < count; t++) seen[t] = (int32_t)(uint32_t)(uint64_t)positions[t];
    return seen;
}

#define RUN_WITH_INT32_POSITIONS(type, args, call)                                                                                 \
    do {                                                                                                                           \
        int64_t *positions = int32_positions((args)->positions, (args)->num_tokens);                                               \
        if (!positions) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory truncating positions");                                 \
        type seen = *(args);                                                                                                       \
        seen.positions = positions;                                                                                                \
        ref_steps table;                                                                                                           \
        active_set saved = switch_off(KVC_DEV_POSITIONS_INT32, &table);                                                            \
        int rc = call;                                                                                                             \
        restore(&saved);                                                                                                           \
        free(positions);                                                                                                           \
        return rc;                                                                                                                 \
    } while (0)

static int positions_v4_save(const kvc_v4_save_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v4_save_args, a, ref_v4_save_partial_states(&seen, err));
}
static int positions_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v4_compress_args, a, ref_v4_compress(&seen, err));
}
static int positions_v41_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v41_norm_args, a, ref_v41_save_compress_norm(&seen, err));
}
static int positions_v41_quant(const kvc_v41_insert_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v41_insert_args, a, ref_v41_rope_quant_insert(&seen, err));
}
static int positions_v41_plain(const kvc_v41_insert_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v41_insert_args, a, ref_v41_rope_plain_insert(&seen, err));
}

/* state-slot-ignored (positions-int32 follows, when it is on too). */
static int deviant_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    /* The batch as the deviating kernel sees it: a closing token with a
     * kv slot but a negative state slot looks valid (slot 0).  When that
     * batch is not one the contract accepts, the variant cannot say
     * what such a kernel would read: it runs the batch unchanged. */
    int64_t *slots = malloc((size_t)(a->num_tokens > 0 ? a->num_tokens : 1) * sizeof *slots);
    if (!slots) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory seeing the slots as state-slot-ignored does");
    for (int64_t t = 0; t < a->num_tokens; t++) slots[t] = a->slot_mapping[t] < 0 && a->kv_slot_mapping[t] >= 0 ? 0 : a->slot_mapping[t];
    kvc_v4_compress_args seen = *a;
    seen.slot_mapping = slots;
    kvc_error ignored = {0};
    ref_steps table;
    active_set saved = switch_off(KVC_DEV_STATE_SLOT_IGNORED, &table);   /* the other deviations stay on */
    int rc = ref_v4_compress(kvc_validate_v4_compress(&seen, &ignored) ? a : &seen, err);
    restore(&saved);
    free(slots);
    return rc;
}

/* positions-int32, then ring-stored-before-reads: the ring rows stored
 * before the pooling reads of the call (and again after them). */
static int deviant_v41_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    if (deviates(KVC_DEV_POSITIONS_INT32)) return positions_v41_norm(a, err);
    ref_steps table;
    active_set saved = switch_off(KVC_DEV_RING_STORED_BEFORE_READS, &table);
    if (a->compress_ratio == 2)
        for (int64_t req = 0; req < a->num_requests; req++) ref_steps_in_use()->store_ring(a, req);
    int rc = ref_v41_save_compress_norm(a, err);
    restore(&saved);
    return rc;
}

/* The whole stages of the active set's table. */
static void vary_stages(ref_steps *t) {
    if (deviates(KVC_DEV_POSITIONS_INT32)) {
        t->v4_save_partial_states = positions_v4_save;
        t->v4_compress = positions_v4_compress;
        t->v41_save_compress_norm = positions_v41_norm;
        t->v41_rope_quant_insert = positions_v41_quant;
        t->v41_rope_plain_insert = positions_v41_plain;
    }
    if (deviates(KVC_DEV_STATE_SLOT_IGNORED)) t->v4_compress = deviant_v4_compress;
    if (deviates(KVC_DEV_RING_STORED_BEFORE_READS)) t->v41_save_compress_norm = deviant_v41_norm;
}

/* ---- the catalogue ---------------------------------------------------------- */

typedef struct {
    const char *name, *spec, *text;
} deviation_entry;

static const deviation_entry catalogue[] = {
#define KVC_DEVIATION_ENTRY(id, name, spec, text) {name, spec, text},
    KVC_DEVIATION_LIST(KVC_DEVIATION_ENTRY)
#undef KVC_DEVIATION_ENTRY
};
#define CATALOGUE_SIZE ((int)(sizeof catalogue / sizeof *catalogue))

int kvc_deviation_count(void) { return CATALOGUE_SIZE; }

static int in_catalogue(int index) { return index >= 0 && index < CATALOGUE_SIZE; }
const char *kvc_deviation_name(int index) { return in_catalogue(index) ? catalogue[index].name : NULL; }
const char *kvc_deviation_spec(int index) { return in_catalogue(index) ? catalogue[index].spec : NULL; }
const char *kvc_deviation_description(int index) { return in_catalogue(index) ? catalogue[index].text : NULL; }

int kvc_deviation_find(const char *name) {
    for (int i = 0; i < CATALOGUE_SIZE; i++)
        if (strcmp(catalogue[i].name, name) == 0) return i;
    return -1;
}

void kvc_deviation_activate_set(const int *ids, int count, int previous[KVC_DIAGNOSIS_DEPTH]) {
    if (previous)
        for (int k = 0; k < KVC_DIAGNOSIS_DEPTH; k++) previous[k] = (int)active[k] - 1;
    int on = 0;
    for (int k = 0; k < count && on < KVC_DIAGNOSIS_DEPTH; k++)
        if (in_catalogue(ids[k])) active[on++] = (kvc_deviation_id)(ids[k] + 1);
    while (on < KVC_DIAGNOSIS_DEPTH) active[on++] = KVC_DEV_NONE;
    ref_use_steps(table_of_active(&activated));
}

void kvc_deviation_activate(int first, int second, int previous[2]) {
    int pair[2] = {first, second}, before[KVC_DIAGNOSIS_DEPTH];
    kvc_deviation_activate_set(pair, 2, before);
    if (previous) previous[0] = before[0], previous[1] = before[1];
}

/* ---- one variant backend per deviation ------------------------------------ */

/* A variant's stage: the reference's, with its deviation on for the call. */
#define DEVIATED_CALL(index, call)                                                                                                 \
    do {                                                                                                                           \
        int previous[KVC_DIAGNOSIS_DEPTH], one = index;                                                                            \
        kvc_deviation_activate_set(&one, 1, previous);                                                                             \
        int rc = call;                                                                                                             \
        kvc_deviation_activate_set(previous, KVC_DIAGNOSIS_DEPTH, NULL);                                                           \
        return rc;                                                                                                                 \
    } while (0)

static int deviated_v4_save(int i, const kvc_v4_save_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v4_save_partial_states(a, e)); }
static int deviated_v4_compress(int i, const kvc_v4_compress_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v4_compress(a, e)); }
static int deviated_v41_norm(int i, const kvc_v41_norm_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_save_compress_norm(a, e)); }
static int deviated_v41_quant(int i, const kvc_v41_insert_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_rope_quant_insert(a, e)); }
static int deviated_v41_plain(int i, const kvc_v41_insert_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_rope_plain_insert(a, e)); }

/* The backend table has no context pointer: each deviation gets its own
 * five one-line stage functions. */
#define KVC_DEVIATION_STAGES(id, name, spec, text)                                                                                 \
    static int id##_save(const kvc_v4_save_args *a, kvc_error *e) { return deviated_v4_save(KVC_DEV_##id - 1, a, e); }            \
    static int id##_compress(const kvc_v4_compress_args *a, kvc_error *e) { return deviated_v4_compress(KVC_DEV_##id - 1, a, e); } \
    static int id##_norm(const kvc_v41_norm_args *a, kvc_error *e) { return deviated_v41_norm(KVC_DEV_##id - 1, a, e); }          \
    static int id##_quant(const kvc_v41_insert_args *a, kvc_error *e) { return deviated_v41_quant(KVC_DEV_##id - 1, a, e); }      \
    static int id##_plain(const kvc_v41_insert_args *a, kvc_error *e) { return deviated_v41_plain(KVC_DEV_##id - 1, a, e); }
KVC_DEVIATION_LIST(KVC_DEVIATION_STAGES)
#undef KVC_DEVIATION_STAGES

static const kvc_backend variants[] = {
#define KVC_DEVIATION_BACKEND(id, name, spec, text)                                                                                \
    {"deviation:" name, id##_save, id##_compress, id##_norm, id##_quant, id##_plain},
    KVC_DEVIATION_LIST(KVC_DEVIATION_BACKEND)
#undef KVC_DEVIATION_BACKEND
};

const kvc_backend *kvc_deviation_backend(int index) { return in_catalogue(index) ? &variants[index] : NULL; }

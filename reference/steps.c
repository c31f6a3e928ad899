/* Reference versions of the contract's steps (reference/steps.h), each as
 * SPEC.md writes it, and the table of them the stages call.  Built with
 * -ffp-contract=off: every a*b+c below is two roundings unless written
 * as fmaf, exactly as SPEC.md says. */
#include "reference/steps.h"

#include <math.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"
#include "kvcmp/layout.h"
#include "kvcmp/reference_steps.h"
#include "kvcmp/validate.h"

/* ---- SPEC.md 1: numbers ------------------------------------------------- */

static void bf16_row(const float *x, uint16_t *bf16, int n) {
    for (int i = 0; i < n; i++) bf16[i] = kvc_bf16_from_f32(x[i]);
}

/* Every stage clamps to [-448, 448] first (NaN stays NaN). */
static void fp8_codes(const float *y, float multiplier, uint8_t *codes, int n) {
    for (int j = 0; j < n; j++) codes[j] = kvc_fp8_from_f32(kvc_clamp_fp8_range(y[j] * multiplier));
}

/* Canonical NaN: 0x7FC00000. */
static float canonical_f32(float x) { return kvc_canonical_f32(x); }

/* ---- SPEC.md 2: a token at position p closes its group when (p + 1) mod R = 0 */

static int v4_closes(const kvc_v4_compress_args *a, int64_t t) { return kvc_is_closing(a->positions[t], a->compress_ratio); }
static int v41_norm_closes(const kvc_v41_norm_args *a, int64_t t) { return kvc_is_closing(a->positions[t], a->compress_ratio); }
static int v41_insert_closes(const kvc_v41_insert_args *a, int64_t t) { return kvc_is_closing(a->positions[t], a->compress_ratio); }

/* ---- SPEC.md 4.1 -------------------------------------------------------- */

/* S1: the kv half is copied bit for bit. */
static void save_kv(float *state_kv, const float *kv, int64_t width) { memcpy(state_kv, kv, (size_t)width * 4); }

/* S2: one fp32 add per element, NaN results canonical. */
static void save_score(float *state_score, const float *score, const float *ape, int64_t width) {
    for (int64_t i = 0; i < width; i++) state_score[i] = kvc_canonical_f32(score[i] + ape[i]);
}

/* ---- SPEC.md 4.2 -------------------------------------------------------- */

/* Window: entry w is position q = p - coff*R + 1 + w, valid iff q >= 0. */
static int64_t window_position(const kvc_v4_compress_args *a, int64_t t, int64_t w) {
    int64_t window = (int64_t)kvc_v4_coff(a->compress_ratio) * a->compress_ratio, p = a->positions[t];
    int64_t q = p - window + 1 + w;
    return q;
}

/* h = D when R = 4 and w >= R (the current group reads the second half),
 * else 0. */
static int64_t window_half(const kvc_v4_compress_args *a, int64_t w) {
    int32_t ratio = a->compress_ratio, head_dim = a->head_dim;
    return (ratio == 4 && w >= ratio) ? head_dim : 0;
}

float ref_softmax_pool(const float *window_kv, const float *window_score, int entries) {
    /* Step 1: NaN-propagating maximum of the valid scores. */
    float m = window_score[0];
    for (int w = 1; w < entries; w++) m = kvc_max_nan(m, window_score[w]);
    /* Step 2: one rounding per step; both sums start from +0. */
    float denom = 0.0f, acc = 0.0f;
    for (int w = 0; w < entries; w++) {
        float e = kvc_expf_cr(window_score[w] - m);
        denom = denom + e;
        acc = fmaf(e, window_kv[w], acc);
    }
    /* Step 3. */
    return acc / denom;
}

/* Step 4: 16 lane accumulators, lane j takes v[j], v[j+16], ... */
static float sum_of_squares(const float *pooled, int head_dim) {
    float lanes[16] = {0};
    for (int d = 0; d < head_dim; d++) lanes[d % 16] = fmaf(pooled[d], pooled[d], lanes[d % 16]);
    /* ... folded by halving: j with j+8, j+4, j+2, then 0 with 1. */
    for (int width = 8; width >= 1; width /= 2)
        for (int j = 0; j < width; j++) lanes[j] = lanes[j] + lanes[j + width];
    return lanes[0];
}

/* Step 5: IEEE division and sqrt, each rounded. */
static float inverse_rms(float sum_of_squares, int head_dim, float eps) { return 1.0f / sqrtf(sum_of_squares / (float)head_dim + eps); }

/* Step 6: two roundings. */
static void norm_product(const float *pooled, float inv, const float *weight, int head_dim, float *normed) {
    for (int d = 0; d < head_dim; d++) normed[d] = (pooled[d] * inv) * weight[d];
}

void ref_rms_norm(const float *pooled, const float *weight, int head_dim, float eps, float *normed) {
    norm_product(pooled, inverse_rms(sum_of_squares(pooled, head_dim), head_dim, eps), weight, head_dim, normed);
}

/* Step 7: the cos_sin row cp = (p / R) * R. */
static int64_t cos_sin_row(int64_t p, int32_t ratio, int64_t cos_sin_rows) {
    (void)cos_sin_rows;
    return kvc_rope_row(p, ratio);
}

/* Step 7 rotates the last 64 dims. */
static float *rope_dims(float *x, int head_dim) { return x + head_dim - KVC_ROPE_DIMS; }

void ref_rope(float *rope_dims, const float *cos_sin_row) {
    /* Step 7: GPT-J interleaved pairs (x[2i], x[2i+1]). */
    for (int i = 0; i < KVC_ROPE_DIMS / 2; i++) {
        float c = cos_sin_row[i], s = cos_sin_row[KVC_ROPE_DIMS / 2 + i];
        float x_even = rope_dims[2 * i], x_odd = rope_dims[2 * i + 1];
        rope_dims[2 * i] = fmaf(x_even, c, -(x_odd * s));
        rope_dims[2 * i + 1] = fmaf(x_odd, c, x_even * s);
    }
}

/* Step 8: y[d] = bf16(normed[d]) for d < 448, widened; step 7 takes the
 * un-rounded fp32 normed[448 .. 512). */
static void rotate_and_round(const ref_steps *s, float *normed, const float *cos_sin_row, float *nope_bf16) {
    int nope_dims = 512 - KVC_ROPE_DIMS;
    uint16_t rounded[512];
    s->bf16_row(normed, rounded, nope_dims);
    for (int d = 0; d < nope_dims; d++) nope_bf16[d] = kvc_f32_from_bf16(rounded[d]);
    s->rope(normed + nope_dims, cos_sin_row);
}

/* Step 9: a = max(max |y|, 1e-4) with NaN propagating; the floor is
 * applied to the magnitude, before the division by 448. */
static kvc_block_scale block_scale(const float *y, int n) {
    float a = 1e-4f;
    for (int j = 0; j < n; j++) a = kvc_max_nan(a, fabsf(y[j]));
    return kvc_block_scale_from_quotient(a / KVC_FP8_MAX);
}

uint8_t ref_quantize_block_steps(const ref_steps *s, const float *y, uint8_t *codes) {
    kvc_block_scale scale = s->block_scale(y, KVC_QUANT_BLOCK);
    s->fp8_codes(y, kvc_scale_multiplier(scale), codes, KVC_QUANT_BLOCK);
    return kvc_ue8m0_from_scale(scale);
}

void ref_store_ds_mla_steps(const ref_steps *s, const float *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales) {
    int nope_dims = KVC_V41_HEAD_DIM - KVC_ROPE_DIMS;
    for (int block = 0; block < nope_dims / KVC_QUANT_BLOCK; block++)
        scales[block] = ref_quantize_block_steps(s, nope_bf16 + block * KVC_QUANT_BLOCK, token + block * KVC_QUANT_BLOCK);
    scales[KVC_FP8_DS_MLA_SCALE_BYTES - 1] = 0;
    uint16_t rounded[KVC_ROPE_DIMS];
    s->bf16_row(rope_rotated, rounded, KVC_ROPE_DIMS);
    for (int i = 0; i < KVC_ROPE_DIMS; i++) kvc_store_u16(token + nope_dims + 2 * i, rounded[i]);
}

uint8_t ref_quantize_block_ue8m0(const float *y, uint8_t *codes) { return ref_quantize_block_steps(&ref_contract_steps, y, codes); }

void ref_store_ds_mla(const float *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales) {
    ref_store_ds_mla_steps(&ref_contract_steps, nope_bf16, rope_rotated, token, scales);
}

/* ---- SPEC.md 5 ---------------------------------------------------------- */

/* 5.1: a chunk's first token pools with ring row (p - 1) mod CAP (p is
 * odd: p - 1 >= 0). */
static int64_t ring_row(int64_t p, int64_t cap) { return (p - 1) % cap; }

/* 5.1 ring store: the last min(n, CAP) rows of request req's chunk. */
static void store_ring(const kvc_v41_norm_args *a, int64_t req) { kvc_v41_store_ring(a, req); }

/* 5.3: r = 1 / scale, rounded once to fp32. */
static float reciprocal(float scale) { return 1.0f / scale; }

/* 5.3: the whole row is rounded to bf16 (NoPE values are bf16 already, so
 * only a NaN changes: it becomes 0x7FC0); a bf16 cache stores v, an fp8
 * one fp8(clamp(widen(v) * r, -448, 448)). */
static void plain_row(const ref_steps *s, float *x, kvc_cache_dtype dtype, float fp8_scale, float inverse_scale, uint8_t *row) {
    (void)fp8_scale;
    uint16_t rounded[KVC_V41_HEAD_DIM];
    s->bf16_row(x, rounded, KVC_V41_HEAD_DIM);
    for (int d = 0; d < KVC_V41_HEAD_DIM; d++) {
        if (dtype == KVC_CACHE_BF16) kvc_store_u16(row + 2 * d, rounded[d]);
        else row[d] = kvc_fp8_from_f32(kvc_clamp_fp8_range(kvc_f32_from_bf16(rounded[d]) * inverse_scale));
    }
}

/* ---- the table ------------------------------------------------------------ */

const ref_steps ref_contract_steps = {
    .bf16_row = bf16_row,
    .fp8_codes = fp8_codes,
    .canonical_f32 = canonical_f32,
    .v4_closes = v4_closes,
    .v41_norm_closes = v41_norm_closes,
    .v41_insert_closes = v41_insert_closes,
    .save_kv = save_kv,
    .save_score = save_score,
    .window_position = window_position,
    .window_half = window_half,
    .softmax_pool = ref_softmax_pool,
    .sum_of_squares = sum_of_squares,
    .inverse_rms = inverse_rms,
    .norm_product = norm_product,
    .cos_sin_row = cos_sin_row,
    .rope_dims = rope_dims,
    .rope = ref_rope,
    .rotate_and_round = rotate_and_round,
    .block_scale = block_scale,
    .ring_row = ring_row,
    .store_ring = store_ring,
    .reciprocal = reciprocal,
    .plain_row = plain_row,
};

/* Per thread: a variant installed for one thread's calls leaves every
 * other thread (OpenMP teams, campaign workers) on the contract. */
static _Thread_local const ref_steps *installed;

const ref_steps *ref_steps_in_use(void) { return installed ? installed : &ref_contract_steps; }

const ref_steps *ref_use_steps(const ref_steps *steps) {
    const ref_steps *previous = ref_steps_in_use();
    installed = steps == &ref_contract_steps ? NULL : steps;
    return previous;
}

/* Reference versions of the contract's steps.  Built with
 * -ffp-contract=off: every a*b+c below is two roundings unless written
 * as fmaf, exactly as SPEC.md says. */
#include "kvcmp/reference_steps.h"

#include <math.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"
#include "reference/deviations.h"

float ref_softmax_pool(const float *window_kv, const float *window_score, int entries) {
    /* Step 1: NaN-propagating maximum of the valid scores. */
    float m = window_score[0];
    for (int w = 1; w < entries; w++) m = kvc_max_nan(m, window_score[w]);
    if (ref_deviating()) m = ref_deviant_window_max(window_score, entries, m);
    if (ref_deviates(KVC_DEV_SOFTMAX_REVERSED)) ref_deviant_window(&window_kv, &window_score, entries);
    /* Step 2: one rounding per step; both sums start from +0. */
    float denom = 0.0f, acc = 0.0f;
    if (ref_deviates(KVC_DEV_SOFTMAX_SUM_FROM_NEGATIVE_ZERO)) acc = -0.0f;
    for (int w = 0; w < entries; w++) {
        float e = kvc_expf_cr(window_score[w] - m);
        if (ref_deviating()) e = ref_deviant_exp(window_score[w] - m);
        denom = denom + e;
        if (ref_deviates(KVC_DEV_SOFTMAX_UNFUSED)) acc = acc + e * window_kv[w];
        else acc = fmaf(e, window_kv[w], acc);
    }
    /* Step 3. */
    return acc / denom;
}

void ref_rms_norm(const float *pooled, const float *weight, int head_dim, float eps, float *normed) {
    /* Step 4: 16 lane accumulators, lane j takes v[j], v[j+16], ... */
    float lanes[16] = {0};
    for (int d = 0; d < head_dim; d++) lanes[d % 16] = fmaf(pooled[d], pooled[d], lanes[d % 16]);
    /* ... folded by halving: j with j+8, j+4, j+2, then 0 with 1. */
    for (int width = 8; width >= 1; width /= 2)
        for (int j = 0; j < width; j++) lanes[j] = lanes[j] + lanes[j + width];
    float sum_of_squares = lanes[0];
    if (ref_deviating()) sum_of_squares = ref_deviant_sum_of_squares(pooled, head_dim, sum_of_squares);
    /* Step 5: IEEE division and sqrt, each rounded. */
    float inv = 1.0f / sqrtf(sum_of_squares / (float)head_dim + eps);
    if (ref_deviating()) inv = ref_deviant_inverse_rms(sum_of_squares, head_dim, eps, inv);
    /* Step 6: two roundings. */
    for (int d = 0; d < head_dim; d++) normed[d] = (pooled[d] * inv) * weight[d];
    if (ref_deviates(KVC_DEV_NORM_WEIGHT_FIRST))
        for (int d = 0; d < head_dim; d++) normed[d] = pooled[d] * (inv * weight[d]);
}

void ref_rope(float *rope_dims, const float *cos_sin_row) {
    /* Step 7: GPT-J interleaved pairs (x[2i], x[2i+1]). */
    if (ref_deviates(KVC_DEV_ROPE_HALVES)) { ref_deviant_rope_halves(rope_dims, cos_sin_row); return; }
    for (int i = 0; i < KVC_ROPE_DIMS / 2; i++) {
        float c = cos_sin_row[i], s = cos_sin_row[KVC_ROPE_DIMS / 2 + i];
        float x_even = rope_dims[2 * i], x_odd = rope_dims[2 * i + 1];
        if (ref_deviates(KVC_DEV_ROPE_INVERSE)) {
            rope_dims[2 * i] = fmaf(x_even, c, x_odd * s);
            rope_dims[2 * i + 1] = fmaf(x_odd, c, -(x_even * s));
            continue;
        }
        if (ref_deviates(KVC_DEV_ROPE_UNFUSED)) {
            rope_dims[2 * i] = x_even * c - x_odd * s;
            rope_dims[2 * i + 1] = x_odd * c + x_even * s;
            continue;
        }
        rope_dims[2 * i] = fmaf(x_even, c, -(x_odd * s));
        rope_dims[2 * i + 1] = fmaf(x_odd, c, x_even * s);
    }
}

uint8_t ref_quantize_block_ue8m0(const float *y, uint8_t *codes) {
    /* Step 9: a = max(max |y|, 1e-4) with NaN propagating; the floor is
     * applied to the magnitude, before the division by 448. */
    float a = 1e-4f;
    for (int j = 0; j < KVC_QUANT_BLOCK; j++) a = kvc_max_nan(a, fabsf(y[j]));
    kvc_block_scale scale = kvc_block_scale_from_quotient(a / KVC_FP8_MAX);
    if (ref_deviating()) scale = ref_deviant_block_scale(y, KVC_QUANT_BLOCK, scale);
    float multiplier = kvc_scale_multiplier(scale);
    for (int j = 0; j < KVC_QUANT_BLOCK; j++) codes[j] = ref_fp8_code(y[j] * multiplier);
    return kvc_ue8m0_from_scale(scale);
}

void ref_store_ds_mla(const float *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales) {
    int nope_dims = KVC_V41_HEAD_DIM - KVC_ROPE_DIMS;
    for (int block = 0; block < nope_dims / KVC_QUANT_BLOCK; block++)
        scales[block] = ref_quantize_block_ue8m0(nope_bf16 + block * KVC_QUANT_BLOCK, token + block * KVC_QUANT_BLOCK);
    scales[KVC_FP8_DS_MLA_SCALE_BYTES - 1] = 0;
    for (int i = 0; i < KVC_ROPE_DIMS; i++)
        kvc_store_u16(token + nope_dims + 2 * i, ref_bf16(rope_rotated[i]));
}

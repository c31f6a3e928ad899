/* The contract's numbered steps (SPEC.md section 3), scalar and in the
 * contract's order.  Shared by every reference stage. */
#ifndef KVCMP_REFERENCE_STEPS_H
#define KVCMP_REFERENCE_STEPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Steps 1-3 for one channel: the window's valid entries, in increasing w. */
float ref_softmax_pool(const float *window_kv, const float *window_score, int entries);

/* Steps 4-6: normed[d] = (pooled[d] * inv) * weight[d]. */
void ref_rms_norm(const float *pooled, const float *weight, int head_dim, float eps, float *normed);

/* Step 7 on the 64 RoPE dims x[0..64) with one cos_sin row (32 cos, 32 sin). */
void ref_rope(float *rope_dims, const float *cos_sin_row);

/* Step 9 for one 64-wide block of bf16 values y (widened): writes 64 fp8
 * codes and returns the UE8M0 scale byte. */
uint8_t ref_quantize_block_ue8m0(const float *y, uint8_t *codes);

/* D = 512 store (steps 8-9): 448 NoPE values already bf16-rounded and
 * widened, the 64 rotated fp32 RoPE values; writes token data and scales. */
void ref_store_ds_mla(const float *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales);

#ifdef __cplusplus
}
#endif

#endif

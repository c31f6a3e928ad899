/* The precision oracle: the contract's stages recomputed in MPFR from the
 * same fp32/bf16 inputs, with no rounding except where the contract stores
 * a value in a format (bf16 latent/NoPE/RoPE, fp8 codes, fp32 state).
 * The reference's errors are measured against these values. */
#ifndef KVCMP_REPORT_ORACLE_H
#define KVCMP_REPORT_ORACLE_H

#include <mpfr.h>
#include <stdint.h>

#include "kvcmp/formats.h"

/* 160 bits: every intermediate of a stage is a few roundings of at most
 * 2^-160 relative, far below the 2^-24 of fp32, so each value below is
 * the exact one as far as any rounding to fp32, bf16 or fp8 can tell
 * (a tie would need the exact value within 2^-150 of a midpoint). */
#define KVC_ORACLE_BITS 160

/* Steps 1-3 for one channel, exactly: sum exp(s_w - m) kv_w / sum exp(s_w - m),
 * with IEEE special values as the contract has them (inf - inf = NaN). */
void kvc_oracle_pool(mpfr_t out, const float *window_kv, const float *window_score, int entries);

/* The scale of a pool's rounding errors: sum exp(s_w - m) |kv_w| / sum exp(s_w - m),
 * the weighted mean magnitude of the entries (equal to |pool| without cancellation). */
void kvc_oracle_pool_magnitude(mpfr_t out, const float *window_kv, const float *window_score, int entries);

/* Steps 4-6 exactly: normed[d] = pooled[d] / sqrt(mean(pooled^2) + eps) * weight[d].
 * normed and pooled are arrays of head_dim initialised mpfr_t. */
void kvc_oracle_rms_norm(mpfr_t *normed, mpfr_t *pooled, const float *weight, int head_dim, float eps);

/* Step 7 exactly on 64 values (out may alias in). */
void kvc_oracle_rope(mpfr_t *out, mpfr_t *in, const float *cos_sin_row);

/* The scale of step 7's rounding errors for output i of a pair:
 * |x_e cos| + |x_o sin| (the sum of the magnitudes of the two products). */
void kvc_oracle_rope_magnitude(mpfr_t out, mpfr_t *in, const float *cos_sin_row, int i);

/* The ideal block scale of step 9: e = ceil(log2(max(a, 1e-4f) / 448)) of
 * the exact magnitude a (NaN -> KVC_SCALE_NAN, +inf -> KVC_SCALE_INF). */
kvc_block_scale kvc_oracle_block_scale(mpfr_t magnitude);

/* The exactly rounded value of x in each format (RNE; NaN canonical). */
float kvc_oracle_to_f32(mpfr_t x);
uint16_t kvc_oracle_to_bf16(mpfr_t x);
/* fp8 e4m3fn of clamp(x, -448, 448), NaN -> 0x7F. */
uint8_t kvc_oracle_to_fp8(mpfr_t x);
/* The ideal code of value y in a block with scale s: fp8(clamp(y * 2^-e)),
 * where an infinite scale multiplies by +0 and a NaN scale gives NaN. */
uint8_t kvc_oracle_block_code(mpfr_t y, kvc_block_scale s);

/* |got - exact| in units of the fp32 ulp of exact (2^-149 at zero).
 * 0 when both are NaN or the same infinity; INFINITY when only one of
 * them is NaN or infinite. */
double kvc_oracle_ulps(float got, mpfr_t exact);
/* |got - exact| in units of the fp32 ulp of `scale` (a magnitude the error
 * is naturally proportional to), with the same NaN/inf rules. */
double kvc_oracle_ulps_of(float got, mpfr_t exact, mpfr_t scale);


#endif

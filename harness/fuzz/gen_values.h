/* The generator's value draws (gen_values.c): exact scalings, signs, the normal draw, edge blocks, exp boundary scores. */
#ifndef KVCMP_HARNESS_FUZZ_GEN_VALUES_H
#define KVCMP_HARNESS_FUZZ_GEN_VALUES_H

#include "kvcmp/generate.h"

#include <stdint.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"

/* ldexpf(x, k) for finite x and |k| < 900: the double product is exact,
 * and its conversion rounds it once to fp32, as ldexpf does (subnormal
 * results included), without a libm call per value. */
static inline float ldexpf_exact(float x, int k) {
    uint64_t bits = (uint64_t)(1023 + k) << 52;
    double two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return (float)((double)x * two_k);
}

/* x * 2^k with k drawn from [lo, hi] after x. */
static inline float scaled(kvc_rng *r, float x, int lo, int hi) { return ldexpf_exact(x, (int)kvc_rng_range(r, lo, hi)); }
static inline float random_sign(kvc_rng *r, float x) { return kvc_rng_chance(r, 1, 2) ? x : -x; }

/* Roughly N(0, 1): a sum of three 21-bit uniforms from one draw.  The
 * sum (< 2^23) and its offset are exact integers and the scaling by
 * 2^-20 is exact in fp32: the value of ((a + b + c) * 2^-21 - 1.5) * 2. */
static inline float normal(kvc_rng *r) {
    uint64_t x = kvc_rng_next(r);
    int32_t sum = (int32_t)(x & 0x1FFFFF) + (int32_t)((x >> 21) & 0x1FFFFF) + (int32_t)(x >> 43);
    return (float)(sum - 3 * (1 << 20)) * 0x1p-20f;
}

/* One 64-wide NoPE block of fp8 edge values (the insert stages' latent). */
void edge_block(kvc_rng *r, float *block, int family);

/* One of the fp32 inputs whose exp lies next to a rounding boundary. */
float exp_boundary(kvc_rng *r);

#endif

/* The generator's values: the value families, fp8 edge blocks and exp boundary scores, drawn from a stream alone (no case). */

#include "harness/fuzz/gen_values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ---------------------------------------------------------- */

/* C leaves the order of a call's arguments unspecified, so no
 * expression below makes two draws whose order would matter: that would
 * tie the cases to one compiler. */

static float nonfinite(kvc_rng *r) {
    switch (kvc_rng_below(r, 4)) {
    case 0: return kvc_f32_from_bits(0x7FC00000u);
    case 1: return kvc_f32_from_bits(0xFFC00001u);   /* a negative NaN with payload */
    case 2: return kvc_f32_from_bits(0x7F800000u);
    default: return kvc_f32_from_bits(0xFF800000u);
    }
}

/* Raw fp32 bit patterns: NaNs of both signs with payloads (quiet and
 * signalling), signed zeros, subnormals, the extremes. */
static float raw_pattern(kvc_rng *r) {
    static const uint32_t patterns[] = {
        0x00000000u, 0x80000000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0xFFFFFFFFu,
        0x7FC00001u, 0x7F800000u, 0xFF800000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u,
    };
    uint32_t u = patterns[kvc_rng_below(r, (int64_t)(sizeof patterns / sizeof *patterns))];
    if (kvc_rng_chance(r, 1, 4) && (u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu))
        u = (u & 0xFFC00000u) | (uint32_t)kvc_rng_range(r, 1, 0x3FFFFF);   /* another payload */
    return kvc_f32_from_bits(u);
}

/* The inputs whose exp lies next to an fp32 rounding boundary
 * (fixtures/exp-boundaries/README.md says how they were found). */
static const double exp_boundaries[] = {
#include "harness/fuzz/exp_boundaries.inc"
};

float exp_boundary(kvc_rng *r) { return (float)exp_boundaries[kvc_rng_below(r, (int64_t)(sizeof exp_boundaries / sizeof *exp_boundaries))]; }

/* Roles drawn from families that meet badly: kv far above 1, weights
 * that underflow, scores spread past exp's range. */
static float mixed_value(kvc_rng *r, int role) {
    switch (role) {
    case KVC_ROLE_WEIGHT: return scaled(r, 0.5f + kvc_rng_unit(r), -26, -12);
    case KVC_ROLE_SCORE: return kvc_rng_chance(r, 1, 2) ? normal(r) * 60.0f : normal(r);
    default: return kvc_rng_chance(r, 1, 2) ? scaled(r, normal(r), 20, 60) : scaled(r, normal(r), -40, -16);
    }
}

/* fp32 subnormals and values straddling the fp8/bf16 grids. */
static float grid_value(kvc_rng *r) {
    switch (kvc_rng_below(r, 4)) {
    case 0: return random_sign(r, kvc_f32_from_bits((uint32_t)kvc_rng_range(r, 1, 0x7FFFFF)));   /* fp32 subnormal */
    case 1: return scaled(r, (float)kvc_rng_range(r, -31, 31), -14, 4);    /* 5-bit grid: fp8 ties */
    case 2: return scaled(r, (float)kvc_rng_range(r, -511, 511), -12, 2);  /* 10-bit grid: bf16 ties */
    default: return normal(r);
    }
}

/* The two families whose edges a case-wide pass places row by row
 * (gen_passes.c's shape_edge_rows): per element only finite values, no NaN, no inf.
 * isolated_edges: -0 kv and scores whose exp underflows; cross_magnitude:
 * plain values, rewritten later. */
static float finite_value(kvc_rng *r, int family, int role) {
    if (role == KVC_ROLE_WEIGHT) return 1.0f + 0.1f * normal(r);
    if (family == KVC_FAM_CROSS_MAGNITUDE) return role == KVC_ROLE_SCORE ? normal(r) * 2.0f : normal(r);
    if (role == KVC_ROLE_SCORE) return kvc_rng_chance(r, 1, 16) ? -(88.0f + kvc_rng_unit(r) * 16.0f) : normal(r) * 2.0f;
    return kvc_rng_chance(r, 1, 8) ? kvc_f32_from_bits(0x80000000u) : normal(r);
}

static float draw_value(kvc_rng *r, int family, int role) {
    if (role == KVC_ROLE_COS_SIN) return kvc_rng_unit(r) * 2.0f - 1.0f;
    if (family == KVC_FAM_MIXED) return mixed_value(r, role);
    if (family == KVC_FAM_BIT_PATTERNS && role != KVC_ROLE_WEIGHT && kvc_rng_chance(r, 1, role == KVC_ROLE_SCORE ? 16 : 6))
        return raw_pattern(r);
    /* A score of 0 (the window's maximum, often) or a boundary input;
     * a quarter of them, as the reference's exp takes its slow MPFR path on each. */
    if (family == KVC_FAM_EXP_BOUNDARY && role == KVC_ROLE_SCORE) {
        if (kvc_rng_chance(r, 1, 2)) return 0.0f;
        if (kvc_rng_chance(r, 1, 2)) return exp_boundary(r);
        return -kvc_rng_unit(r) * 8.0f;
    }
    if (family == KVC_FAM_ISOLATED_EDGES || family == KVC_FAM_CROSS_MAGNITUDE) return finite_value(r, family, role);
    if (role == KVC_ROLE_WEIGHT) {
        switch (family) {
        case KVC_FAM_SMALL_WEIGHT: return scaled(r, 0.5f + kvc_rng_unit(r), -12, -5);
        case KVC_FAM_TINY: return scaled(r, 0.5f + kvc_rng_unit(r), -24, -14);
        case KVC_FAM_HEAVY_TAIL: return scaled(r, normal(r), -10, 10);
        case KVC_FAM_NONFINITE: return kvc_rng_chance(r, 1, 400) ? nonfinite(r) : 1.0f + 0.1f * normal(r);
        case KVC_FAM_POW2_EDGE: return scaled(r, 1.0f, -6, 3);
        default: return 1.0f + 0.1f * normal(r);
        }
    }
    if (role == KVC_ROLE_SCORE) {
        switch (family) {
        case KVC_FAM_EXP_UNDERFLOW: return normal(r) * 60.0f;
        case KVC_FAM_HUGE_SCORES:
            if (kvc_rng_chance(r, 1, 50)) return kvc_rng_chance(r, 1, 2) ? kvc_f32_from_bits(0x7F800000u) : kvc_f32_from_bits(0xFF800000u);
            return scaled(r, normal(r), 60, 127);
        case KVC_FAM_NONFINITE: return kvc_rng_chance(r, 1, 200) ? nonfinite(r) : normal(r) * 2.0f;
        case KVC_FAM_FP8_TIES: return kvc_rng_chance(r, 1, 2) ? 0.0f : normal(r);   /* equal scores: means */
        default: return normal(r) * 2.0f;
        }
    }
    switch (family) {
    case KVC_FAM_HEAVY_TAIL: return scaled(r, normal(r), -40, 40);
    case KVC_FAM_TINY: return scaled(r, normal(r), -30, -16);
    case KVC_FAM_POW2_EDGE: return scaled(r, kvc_rng_chance(r, 1, 2) ? 1.75f : -1.7578125f, -30, 8);
    case KVC_FAM_FP8_TIES: return grid_value(r);
    case KVC_FAM_NONFINITE: return kvc_rng_chance(r, 1, 200) ? nonfinite(r) : normal(r);
    case KVC_FAM_CANCELLATION: {
        float near_one = 1.0f + scaled(r, normal(r), -20, -8);
        return random_sign(r, scaled(r, near_one, -12, 12));
    }
    default: return normal(r);
    }
}

float kvc_gen_value(kvc_rng *r, int family, int role) { return draw_value(r, family, role); }

/* Drawing values is most of a case's generation (some 70,000 values a
 * case), so kvc_gen_values is one loop per family and role: flattened,
 * each loop has draw_value inlined with its family and role folded in,
 * and the stream's state in a local copy (kvc_gen_value, exported, may
 * not be inlined).  The values are those of a
 * call per value.  (Unoptimised builds, coverage's, inline nothing.) */
static void fill_family(kvc_rng *r, float *dst, int64_t n, int family, int role) {
#define FAMILY_LOOP(f) \
    case f: \
        for (int64_t i = 0; i < n; i++) dst[i] = draw_value(r, f, role); \
        return;
    switch (family) {
        FAMILY_LOOP(KVC_FAM_NORMAL) FAMILY_LOOP(KVC_FAM_HEAVY_TAIL) FAMILY_LOOP(KVC_FAM_TINY) FAMILY_LOOP(KVC_FAM_POW2_EDGE)
        FAMILY_LOOP(KVC_FAM_FP8_TIES) FAMILY_LOOP(KVC_FAM_EXP_UNDERFLOW) FAMILY_LOOP(KVC_FAM_HUGE_SCORES)
        FAMILY_LOOP(KVC_FAM_NONFINITE) FAMILY_LOOP(KVC_FAM_SMALL_WEIGHT) FAMILY_LOOP(KVC_FAM_CANCELLATION)
        FAMILY_LOOP(KVC_FAM_ROUNDING_PROBE) FAMILY_LOOP(KVC_FAM_BIT_PATTERNS) FAMILY_LOOP(KVC_FAM_MIXED)
        FAMILY_LOOP(KVC_FAM_EXP_BOUNDARY) FAMILY_LOOP(KVC_FAM_ISOLATED_EDGES)
    default:   /* KVC_FAM_CROSS_MAGNITUDE */
        for (int64_t i = 0; i < n; i++) dst[i] = draw_value(r, family, role);
    }
#undef FAMILY_LOOP
}

__attribute__((flatten)) void kvc_gen_values(kvc_rng *rng, int family, int role, float *dst, int64_t n) {
    kvc_rng r = *rng;
    switch (role) {
    case KVC_ROLE_KV: fill_family(&r, dst, n, family, KVC_ROLE_KV); break;
    case KVC_ROLE_SCORE: fill_family(&r, dst, n, family, KVC_ROLE_SCORE); break;
    case KVC_ROLE_WEIGHT: fill_family(&r, dst, n, family, KVC_ROLE_WEIGHT); break;
    case KVC_ROLE_LATENT: fill_family(&r, dst, n, family, KVC_ROLE_LATENT); break;
    default: fill_family(&r, dst, n, family, KVC_ROLE_COS_SIN);
    }
    *rng = r;
}

/* One 64-wide NoPE block of latent values for the insert stages: the
 * block maximum sits exactly at 448*2^k (or one bf16 step above), the
 * rest on fp8 ties and fp8 subnormals of that scale. */
void edge_block(kvc_rng *r, float *block, int family) {
    int k = (int)kvc_rng_range(r, -24, 10);
    for (int j = 0; j < KVC_QUANT_BLOCK; j++) {
        float v;
        if (family == KVC_FAM_FP8_TIES) {
            /* midpoints between fp8 codes: odd multiples of 2^-4 (normal)
             * or of 2^-10 (subnormal), scaled by 2^k */
            v = kvc_rng_chance(r, 1, 3) ? ldexpf((float)(2 * kvc_rng_range(r, 0, 7) + 1), -10)
                                         : ldexpf((float)(2 * kvc_rng_range(r, 16, 250) + 1), -5);
        } else {
            v = ldexpf_exact(normal(r), 6);
        }
        block[j] = ldexpf_exact(random_sign(r, v), k);
    }
    int top = (int)kvc_rng_below(r, KVC_QUANT_BLOCK);
    float magnitude = kvc_rng_chance(r, 1, 2) ? 448.0f : 451.5f;   /* 451.5 = one bf16 step above 448 */
    block[top] = ldexpf(random_sign(r, magnitude), k);
}

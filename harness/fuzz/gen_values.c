/* The generator's values (harness/fuzz/gen.c): the value families, raw
 * bit patterns, edges placed row by row and padding slots.  Only integer
 * draws and exact float operations make values. */

#include "harness/fuzz/gen_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ---------------------------------------------------------- */

/* C leaves the order of a call's arguments unspecified, so no
 * expression below makes two draws whose order would matter: that would
 * tie the cases to one compiler. */

/* Roughly N(0, 1): a sum of three 21-bit uniforms from one draw.  The
 * sum (< 2^23) and its offset are exact integers and the scaling by
 * 2^-20 is exact in fp32: the value of ((a + b + c) * 2^-21 - 1.5) * 2. */
static float normal(kvc_rng *r) {
    uint64_t x = kvc_rng_next(r);
    int32_t sum = (int32_t)(x & 0x1FFFFF) + (int32_t)((x >> 21) & 0x1FFFFF) + (int32_t)(x >> 43);
    return (float)(sum - 3 * (1 << 20)) * 0x1p-20f;
}

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

/* The two families whose edges the case assembly places row by row
 * (shape_edge_rows): per element only finite values, no NaN, no inf.
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
        if (kvc_rng_chance(r, 1, 2))
            return (float)exp_boundaries[kvc_rng_below(r, (int64_t)(sizeof exp_boundaries / sizeof *exp_boundaries))];
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

/* ---- raw bit patterns ------------------------------------------------- */

/* Every kv entry -0 (V4 kv and state kv halves, V4.1 kv_score kv
 * halves and ring kv halves): a window whose pooled value must be -0. */
static void negative_zero_kv(gen *g) {
    const float minus_zero = kvc_f32_from_bits(0x80000000u);
    int64_t width = g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM ? (int64_t)kvc_v4_coff(g->ratio) * g->head_dim : 512;
    kvc_array *kv = kvc_case_get(g->c, "kv"), *state = kvc_case_get(g->c, "state_cache"), *rows = kvc_case_get(g->c, "kv_score");
    for (int64_t i = 0; kv && i < kv->count; i++) ((float *)kv->data)[i] = minus_zero;
    for (int64_t i = 0; state && i < state->count; i++)
        if (i % (2 * width) < width) ((float *)state->data)[i] = minus_zero;
    int64_t row = rows && rows->ndim == 2 ? rows->shape[1] : 1;
    for (int64_t i = 0; rows && i < rows->count; i++)
        if (i % row < 512) ((float *)rows->data)[i] = minus_zero;
    g->dimensions |= KVC_DIM_NEG_ZERO_KV;
}

/* Raw bf16 patterns over a share of a bf16 input: NaN payloads of both
 * signs (quiet and signalling), signed zeros, subnormals, extremes. */
static void raw_bf16(gen *g, const char *name, int one_in) {
    static const uint16_t patterns[] = {0x8000, 0x0000, 0x7FC1, 0xFFC0, 0x7F81, 0xFFFF, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7F7F, 0x0080};
    kvc_array *a = kvc_case_get(g->c, name);
    if (!a || a->dtype != KVC_DT_U2) return;
    for (int64_t i = 0; i < a->count; i++)
        if (kvc_rng_chance(g->r, 1, one_in)) ((uint16_t *)a->data)[i] = patterns[kvc_rng_below(g->r, 12)];
    g->dimensions |= KVC_DIM_RAW_BF16;
}

void apply_bit_patterns(gen *g) {
    if (kvc_rng_chance(g->r, 1, 3)) negative_zero_kv(g);
    if (g->stage == KVC_STAGE_V41_ROPE_QUANT_INSERT || g->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT) raw_bf16(g, "latent", 8);
    if (kvc_rng_chance(g->r, 1, 4)) raw_bf16(g, "norm_weight", 64);
}

/* ---- edges placed row by row ----------------------------------------- */

/* Whether a row of kv/score holds an even position: a closing position is
 * odd for every even R, so even rows never hold the window's last entry
 * and a window always keeps a finite score there.  V4 state rows sit at
 * slot = page * BS + q mod BS, whose parity is q's only for even BS
 * (odd BS: every row counts as odd). */
static int even_state_row(int64_t row, int64_t page_rows) { return page_rows % 2 == 0 && row % 2 == 0; }

/* One row's kv and score halves (score NULL: a kv-only row).
 * isolated_edges: every kv of channel zero_phase mod 8 is -0 (a pooled
 *   window of -0), and even rows' scores are -inf or underflow exp.
 * cross_magnitude: even rows pair a score whose exp underflows (e as small
 *   as 2^-150) with a kv about 1/e, so e * kv is as large as the odd rows'
 *   terms; odd rows take an exp boundary score (or 0) with a kv near +-1
 *   that cancels against the others. */
static int64_t shape_row(gen *g, float *kv, float *score, int64_t width, int even, int zero_phase) {
    int64_t paired = 0;
    for (int64_t i = 0; i < width; i++) {
        if (g->family == KVC_FAM_ISOLATED_EDGES) {
            if ((i % g->head_dim) % 8 == zero_phase) kv[i] = kvc_f32_from_bits(0x80000000u);
            if (score && even && kvc_rng_chance(g->r, 1, 4))
                score[i] = kvc_rng_chance(g->r, 1, 2) ? kvc_f32_from_bits(0xFF800000u) : -(88.0f + kvc_rng_unit(g->r) * 16.0f);
        } else if (even && kvc_rng_chance(g->r, 1, 2)) {
            float s = -(80.0f + kvc_rng_unit(g->r) * 24.0f);
            int k = (int)(-s * 1.44269504f) - (int)kvc_rng_range(g->r, 0, 6);
            score[i] = s;
            kv[i] = random_sign(g->r, ldexpf_exact(0.5f + 0.5f * kvc_rng_unit(g->r), k > 127 ? 127 : k));
            paired++;
        } else if (!even && kvc_rng_chance(g->r, 1, 2)) {
            int64_t n = (int64_t)(sizeof exp_boundaries / sizeof *exp_boundaries);
            score[i] = kvc_rng_chance(g->r, 1, 2) ? 0.0f : (float)exp_boundaries[kvc_rng_below(g->r, n)];
            kv[i] = random_sign(g->r, scaled(g->r, 1.0f + scaled(g->r, normal(g->r), -20, -8), -4, 4));
        }
    }
    return paired;
}

/* The isolated_edges and cross_magnitude families' rows: V4 kv/score
 * and state rows, V4.1 kv_score and ring rows. */
void shape_edge_rows(gen *g) {
    kvc_case *c = g->c;
    int zero_phase = (int)kvc_rng_below(g->r, 8);
    int64_t paired = 0;   /* cross_magnitude's underflow and huge-kv pairs */
    kvc_array *positions = kvc_case_get(c, "positions"), *kv = kvc_case_get(c, "kv"), *score = kvc_case_get(c, "score");
    kvc_array *rows = kvc_case_get(c, "kv_score"), *state = kvc_case_get(c, "state_cache");
    const int64_t *p = positions->data;
    if (g->family == KVC_FAM_CROSS_MAGNITUDE && !state && (!rows || rows->shape[1] == 512)) return;   /* nothing pooled */
    for (int64_t t = 0; kv && score && t < kv->shape[0]; t++)
        paired += shape_row(g, (float *)kv->data + t * kv->shape[1], (float *)score->data + t * kv->shape[1], kv->shape[1], p[t] % 2 == 0,
                  zero_phase);
    for (int64_t t = 0; rows && t < rows->shape[0]; t++) {
        float *row = (float *)rows->data + t * rows->shape[1];
        paired += shape_row(g, row, rows->shape[1] == 1024 ? row + 512 : NULL, 512, p[t] % 2 == 0, zero_phase);
    }
    if (c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) state = NULL;   /* never read (gen_v4) */
    int64_t half = state ? state->shape[2] / 2 : 0;
    for (int64_t r = 0; state && r < state->shape[0] * state->shape[1]; r++)
        paired += shape_row(g, (float *)state->data + r * 2 * half, (float *)state->data + r * 2 * half + half, half,
                  even_state_row(r, state->shape[1]), zero_phase);
    g->dimensions |= g->family == KVC_FAM_ISOLATED_EDGES ? KVC_DIM_ISOLATED_EDGES : paired ? KVC_DIM_CROSS_MAGNITUDE : 0;
}

/* ---- padding slots ---------------------------------------------------- */

/* SPEC.md 4.1 and 5.1: any negative slot is padding, not only -1. */
void other_padding_slots(gen *g) {
    static const int64_t negatives[] = {-2, INT64_MIN, INT64_MIN + 1, INT32_MIN, -((int64_t)1 << 40) - 1};
    static const char *const names[] = {"slot_mapping", "kv_slot_mapping"};
    for (int n = 0; n < 2; n++) {
        kvc_array *a = kvc_case_get(g->c, names[n]);
        for (int64_t t = 0; a && t < a->count; t++)
            if (((int64_t *)a->data)[t] == -1 && kvc_rng_chance(g->r, 1, 2)) {
                ((int64_t *)a->data)[t] = negatives[kvc_rng_below(g->r, (int64_t)(sizeof negatives / sizeof *negatives))];
                g->dimensions |= KVC_DIM_PADDING_SLOTS;
            }
    }
}

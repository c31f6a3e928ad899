/* Scenario generator: see fuzz_gen.h.  Only integer draws and exact
 * float operations (ldexpf, scaling by powers of two, fp32 adds of
 * 24-bit fractions) make values, so a seed means the same bytes on every
 * machine.  Sizes are kept small on average (a few tokens per case): the
 * reference's correctly rounded exp makes big windows expensive. */
#include "kvcmp/generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/edges.h"
#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"

static const char *const family_names[KVC_FAM_COUNT] = {
    "normal", "heavy_tail", "tiny", "pow2_edge", "fp8_ties", "exp_underflow",
    "huge_scores", "nonfinite", "small_weight", "cancellation", "rounding_probe",
    "bit_patterns", "mixed", "exp_boundary", "isolated_edges", "cross_magnitude",
};
static const char *const dimension_names[KVC_DIM_COUNT] = {
    "wide_batch", "high_positions", "negative_zero_kv", "raw_bf16", "adversarial_fp8_scale",
    "isolated_edges", "cross_magnitude", "padding_slots", "large_ring", "large_batch",
};
const char *kvc_dimension_name(int bit_index) { return bit_index >= 0 && bit_index < KVC_DIM_COUNT ? dimension_names[bit_index] : "?"; }

const char *kvc_family_name(int family) { return family >= 0 && family < KVC_FAM_COUNT ? family_names[family] : "?"; }

uint32_t kvc_family_mask(const char *list, char *bad, size_t bad_size) {
    uint32_t mask = 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        uint32_t matched = 0;
        for (int f = 0; f < KVC_FAM_COUNT; f++)
            if (strncmp(family_names[f], item, strlen(item)) == 0) matched |= 1u << f;
        if (!matched) { snprintf(bad, bad_size, "%s", item); return 0; }
        mask |= matched;
    }
    return mask;
}

/* Weights favour the cheap variants; D=512 R=128 windows cost 65536
 * correctly rounded exps per closing token. */
static const kvc_variant_info variants[] = {
    {"v4.save_partial_states/d512/r4", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 4, 512, -1, 4},
    {"v4.save_partial_states/d512/r128", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 128, 512, -1, 3},
    {"v4.save_partial_states/d128/r4", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 4, 128, -1, 3},
    {"v4.save_partial_states/d128/r128", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 128, 128, -1, 3},
    {"v4.compress/d512/r4", KVC_STAGE_V4_COMPRESS, 4, 512, -1, 10},
    {"v4.compress/d512/r128", KVC_STAGE_V4_COMPRESS, 128, 512, -1, 2},
    {"v4.compress/d128/r4", KVC_STAGE_V4_COMPRESS, 4, 128, -1, 8},
    {"v4.compress/d128/r128", KVC_STAGE_V4_COMPRESS, 128, 128, -1, 3},
    {"v4.forward/d512/r4", KVC_STAGE_V4_FORWARD, 4, 512, -1, 8},
    {"v4.forward/d512/r128", KVC_STAGE_V4_FORWARD, 128, 512, -1, 2},
    {"v4.forward/d128/r4", KVC_STAGE_V4_FORWARD, 4, 128, -1, 6},
    {"v4.forward/d128/r128", KVC_STAGE_V4_FORWARD, 128, 128, -1, 2},
    {"v41.save_compress_norm/r1", KVC_STAGE_V41_SAVE_COMPRESS_NORM, 1, 512, -1, 6},
    {"v41.save_compress_norm/r2", KVC_STAGE_V41_SAVE_COMPRESS_NORM, 2, 512, -1, 10},
    {"v41.rope_quant_insert", KVC_STAGE_V41_ROPE_QUANT_INSERT, 0, 512, KVC_CACHE_FP8_DS_MLA, 8},
    {"v41.rope_plain_insert/bf16", KVC_STAGE_V41_ROPE_PLAIN_INSERT, 0, 512, KVC_CACHE_BF16, 5},
    {"v41.rope_plain_insert/fp8", KVC_STAGE_V41_ROPE_PLAIN_INSERT, 0, 512, KVC_CACHE_FP8_E4M3, 5},
    {"v41.forward/r1", KVC_STAGE_V41_FORWARD, 1, 512, KVC_CACHE_FP8_DS_MLA, 4},
    {"v41.forward/r2", KVC_STAGE_V41_FORWARD, 2, 512, KVC_CACHE_FP8_DS_MLA, 8},
    {"history.v4", -1, 0, 0, -1, 2},
    {"history.v41", -1, 0, 512, -1, 3},
};
#define NUM_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

int kvc_variant_count(void) { return NUM_VARIANTS; }
const kvc_variant_info *kvc_variant(int index) { return &variants[index]; }

uint64_t kvc_variant_mask(const char *list, char *bad, size_t bad_size) {
    uint64_t mask = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        uint64_t matched = 0;
        for (int v = 0; v < NUM_VARIANTS; v++)
            if (strncmp(variants[v].name, item, strlen(item)) == 0) matched |= 1ull << v;
        if (!matched) { snprintf(bad, bad_size, "%s", item); return 0; }
        mask |= matched;
    }
    return mask;
}

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

/* ldexpf(x, k) for finite x and |k| < 900: the double product is exact,
 * and its conversion rounds it once to fp32, as ldexpf does (subnormal
 * results included), without a libm call per value. */
static float ldexpf_exact(float x, int k) {
    uint64_t bits = (uint64_t)(1023 + k) << 52;
    double two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return (float)((double)x * two_k);
}

/* x * 2^k with k drawn from [lo, hi] after x. */
static float scaled(kvc_rng *r, float x, int lo, int hi) { return ldexpf_exact(x, (int)kvc_rng_range(r, lo, hi)); }
static float random_sign(kvc_rng *r, float x) { return kvc_rng_chance(r, 1, 2) ? x : -x; }

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
static void edge_block(kvc_rng *r, float *block, int family) {
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

/* ---- case assembly --------------------------------------------------- */

#define MAX_TOKENS 1100   /* the large_batch dimension's save batches: past 8 MiB of state rows */
#define SMALL_TOKENS 96   /* every other case */
#define MAX_REQUESTS 16   /* a wide batch; most cases have 1 to 3 */

typedef struct {
    kvc_rng *r;
    kvc_case *c;
    int family;
    int stage;
    int32_t ratio, head_dim;
    /* tokens */
    int64_t T;
    int num_requests;
    int64_t pos[MAX_TOKENS];
    int32_t req[MAX_TOKENS];
    int64_t slot[MAX_TOKENS];
    int64_t kv_slot[MAX_TOKENS];
    int64_t start[MAX_REQUESTS], count[MAX_REQUESTS];
    unsigned dimensions;     /* KVC_DIM_* */
    float fp8_scale;         /* an adversarial per-tensor scale, or 0 */
    float fp8_probe;         /* the bf16 value whose fp8 code it splits */
    const char *rule;        /* the validation rule a corruption targets */
    kvc_rng *edge_rng;       /* the bounds' own draws (harness/fuzz/edges.c) */
    unsigned edges;          /* KVC_EDGE_* bits a corruption put there */
    int geometry_pool;       /* kvc_gen_config's */
    uint64_t seed;
} gen;

/* A page size from table[n].  With a geometry pool, the draw picks one of
 * geometry_pool sizes fixed by the seed; the stream advances the same
 * either way, so every other draw of the case is unchanged. */
static int64_t pick_page_rows(gen *g, const int64_t *table, int n, uint64_t which) {
    int64_t i = kvc_rng_below(g->r, n);
    if (g->geometry_pool <= 0) return table[i];
    kvc_rng pool;
    kvc_rng_seed(&pool, g->seed, 0x9E0 + which * 64 + (uint64_t)(i % g->geometry_pool));
    return table[kvc_rng_below(&pool, n)];
}

static void *tensor(gen *g, const char *name, kvc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    int64_t shape[3] = {d0, d1, d2};
    kvc_array a;
    if (kvc_array_alloc(&a, dtype, ndim, shape)) return NULL;
    if (kvc_case_put(g->c, name, &a)) { kvc_array_free(&a); return NULL; }
    return a.data;
}

static void fill_values(gen *g, float *dst, int64_t n, int role) { kvc_gen_values(g->r, g->family, role, dst, n); }

/* Random bytes: untouched rows must keep them, bit for bit. */
static void fill_bytes(gen *g, void *dst, int64_t n) {
    uint8_t *p = dst;
    kvc_rng r = *g->r;   /* the state in registers: a store per 8 bytes, not a call */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = kvc_rng_next(&r);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {   /* the last 1 to 7 bytes: the low bytes of one more draw */
        uint64_t v = kvc_rng_next(&r);
        memcpy(p + i, &v, (size_t)(n - i));
    }
    *g->r = r;
}

/* Values for cache rows no correct kernel reads (a page's other rows,
 * spare pages, ring rows away from a request's chunk): uniform in
 * [-1, 1), two from a draw, a fraction of a family value's cost.  Every
 * row gets its own, so a kernel that reads a wrong row still computes a
 * wrong result; only the rows a correct kernel reads need the family's
 * edges.  n is even (rows are multiples of 128 values). */
static void fill_filler(gen *g, float *dst, int64_t n) {
    kvc_rng r = *g->r;
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t x = kvc_rng_next(&r);
        dst[i] = ((float)(x & 0xFFFFFF) - 0x1p23f) * 0x1p-23f;
        dst[i + 1] = ((float)((x >> 32) & 0xFFFFFF) - 0x1p23f) * 0x1p-23f;
    }
    *g->r = r;
}

/* A cache of `rows` rows of a kv half and a score half (width values
 * each): family values on the rows marked in `read`, filler on the rest. */
static void fill_state_rows(gen *g, float *cache, int64_t rows, int64_t width, const uint8_t *read) {
    for (int64_t row = 0; row < rows; row++) {
        float *kv = cache + row * 2 * width;
        if (read[row]) {
            fill_values(g, kv, width, KVC_ROLE_KV);
            fill_values(g, kv + width, width, KVC_ROLE_SCORE);
        } else {
            fill_filler(g, kv, 2 * width);
        }
    }
}

static void shuffle(kvc_rng *r, int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = kvc_rng_below(r, i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static int closing(const gen *g, int64_t t) { return g->slot[t] >= 0 && (g->pos[t] + 1) % g->ratio == 0; }

/* Request q's n tokens at positions history, history + 1 ...; their
 * slots are resolved later (negative = padding). */
static void add_request_tokens(gen *g, int q, int64_t history, int64_t n) {
    g->start[q] = history;
    g->count[q] = n;
    for (int64_t i = 0; i < n; i++, g->T++) {
        g->pos[g->T] = history + i;
        g->req[g->T] = q;
        g->slot[g->T] = 0;
    }
}

/* Requests with a history before this step and a chunk in it: chunked
 * prefill, decode, or a speculative step of a few tokens. */
/* Many requests of one or two tokens each, every request's last token a
 * closing one: enough closing tokens per call for the token-parallel
 * paths and uneven partitions (R = 4 and R = 2 only: R = 128 windows
 * are too costly for the reference). */
static void plan_wide_batch(gen *g, int max_history) {
    g->num_requests = (int)kvc_rng_range(g->r, 5, MAX_REQUESTS);
    g->T = 0;
    g->dimensions |= KVC_DIM_WIDE_BATCH;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t n = kvc_rng_range(g->r, 1, 2);
        int64_t history = kvc_rng_range(g->r, 0, max_history / g->ratio) * g->ratio + g->ratio - n;
        add_request_tokens(g, q, history, n);
    }
}

/* Past the size thresholds where a kernel may switch strategy (threads,
 * streaming stores, tiling): more than 96 tokens, and for the D = 512,
 * R = 4 save more than 8 MiB of state rows (1025+ rows of 8 KiB; the
 * save alone, as compressing that many windows is slow in the reference). */
static void plan_large_batch(gen *g) {
    int past_8_mib = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES && g->head_dim == 512;
    g->num_requests = past_8_mib ? MAX_REQUESTS : (int)kvc_rng_range(g->r, 4, 5);
    g->T = 0;
    g->dimensions |= KVC_DIM_LARGE_BATCH;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t n = past_8_mib ? kvc_rng_range(g->r, 65, 68) : kvc_rng_range(g->r, 25, 32);
        int64_t history = kvc_rng_range(g->r, 0, 40);
        add_request_tokens(g, q, history, n);
    }
}

static void plan_requests(gen *g, int max_history, int max_chunk) {
    int large_odds = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES && g->head_dim == 512 ? 32 : 128;
    if (g->ratio != 128 && kvc_rng_chance(g->r, 1, large_odds)) { plan_large_batch(g); return; }
    if (g->ratio != 128 && kvc_rng_chance(g->r, 1, 16)) { plan_wide_batch(g, max_history); return; }
    g->num_requests = (int)kvc_rng_range(g->r, 1, 3);
    g->T = 0;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t history = 0, n;
        switch (kvc_rng_below(g->r, 4)) {
        case 0: n = kvc_rng_range(g->r, 1, max_chunk); break;                                   /* prefill */
        case 1: history = kvc_rng_range(g->r, 1, max_history); n = kvc_rng_range(g->r, 1, max_chunk); break;
        case 2: history = kvc_rng_range(g->r, 0, max_history); n = 1; break;                    /* decode */
        default: history = kvc_rng_range(g->r, 0, max_history); n = kvc_rng_range(g->r, 2, 4); break; /* spec */
        }
        if (g->ratio == 128 && kvc_rng_chance(g->r, 2, 3)) {
            /* land one closing token in the chunk, at most one */
            n = kvc_rng_range(g->r, 1, 3);
            int64_t group = kvc_rng_range(g->r, 0, 2);
            history = 128 * group + 127 - kvc_rng_below(g->r, n);
        }
        if (g->T + n > SMALL_TOKENS - 4) n = 1;
        add_request_tokens(g, q, history, n);
    }
}

/* Padding tokens after the batch (position 0, slot -1). */
static void append_padding(gen *g) {
    int64_t extra = kvc_rng_chance(g->r, 1, 3) ? kvc_rng_range(g->r, 1, 3) : 0;
    for (int64_t i = 0; i < extra && g->T < MAX_TOKENS; i++, g->T++) {
        g->pos[g->T] = kvc_rng_chance(g->r, 1, 2) ? 0 : kvc_rng_below(g->r, 64);
        g->req[g->T] = 0;
        g->slot[g->T] = -1;
        g->kv_slot[g->T] = -1;
    }
}

/* Save stages read positions only modulo R, the ring size and the state
 * block: move them across the contract's range (SPEC.md 2: up to 2^40)
 * by a multiple of 4096, which keeps every slot what it is. */
static void move_positions_high(gen *g) {
    static const int64_t offsets[] = {((int64_t)1 << 31) - 4096, (int64_t)1 << 31, ((int64_t)1 << 32) - 4096, (int64_t)1 << 32,
                                      ((int64_t)1 << 40) - 65536};
    int saves = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES || g->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    if (!saves || !kvc_rng_chance(g->r, 1, 10)) return;
    int64_t offset = offsets[kvc_rng_below(g->r, (int64_t)(sizeof offsets / sizeof *offsets))];
    for (int64_t t = 0; t < g->T; t++) g->pos[t] += offset;
    g->dimensions |= KVC_DIM_HIGH_POSITIONS;
}

static void put_positions(gen *g) {
    move_positions_high(g);
    int64_t *positions = tensor(g, "positions", KVC_DT_I8, 1, g->T, 0, 0);
    int64_t *slots = tensor(g, "slot_mapping", KVC_DT_I8, 1, g->T, 0, 0);
    memcpy(positions, g->pos, (size_t)g->T * 8);
    memcpy(slots, g->slot, (size_t)g->T * 8);
}

/* Distinct output rows for closing tokens, -1 (or a random row, which no
 * stage may write) for the others. */
static int64_t assign_output_rows(gen *g, int64_t *rows_out, int64_t *page_rows) {
    int64_t closing_count = 0;
    for (int64_t t = 0; t < g->T; t++) closing_count += closing(g, t);
    static const int64_t block_sizes[] = {1, 2, 4, 8, 16, 64};
    int64_t kb = pick_page_rows(g, block_sizes, 6, 0);
    int64_t pages = (closing_count + kvc_rng_range(g->r, 0, 4) + kb - 1) / kb;
    if (pages < 1) pages = 1;
    int64_t rows = pages * kb;
    int64_t *perm = malloc((size_t)rows * sizeof *perm);
    for (int64_t i = 0; i < rows; i++) perm[i] = i;
    shuffle(g->r, perm, rows);
    int64_t next = 0;
    for (int64_t t = 0; t < g->T; t++) {
        if (closing(g, t)) g->kv_slot[t] = perm[next++];
        else if (g->slot[t] >= 0 && kvc_rng_chance(g->r, 1, 4)) g->kv_slot[t] = kvc_rng_below(g->r, rows);
        else g->kv_slot[t] = -1;
    }
    /* A closing position whose state slot is negative but whose output
     * row is valid must be skipped (vLLM's CPU port compresses it): give
     * some of those a free row of their own. */
    for (int64_t t = 0; t < g->T && next < rows; t++)
        if (g->slot[t] < 0 && (g->pos[t] + 1) % g->ratio == 0 && g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM &&
            kvc_rng_chance(g->r, 1, 2))
            g->kv_slot[t] = perm[next++];
    free(perm);
    *rows_out = rows;
    *page_rows = kb;
    return pages;
}

/* A closing position with an output row but a negative state slot is
 * skipped by the contract, but a kernel that ignores the state slot
 * rotates it: its row is in the table too, so that such a kernel writes
 * a wrong row the catalogue's state-slot-ignored explains instead of
 * reading past the table. */
static int rotated_by_some_kernel(const gen *g, int64_t t) {
    return closing(g, t) || (g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM && g->kv_slot[t] >= 0 && (g->pos[t] + 1) % g->ratio == 0);
}

static void put_cos_sin(gen *g) {
    int64_t rows = 1;
    for (int64_t t = 0; t < g->T; t++)
        if (rotated_by_some_kernel(g, t) && (g->pos[t] / g->ratio) * g->ratio + 1 > rows) rows = (g->pos[t] / g->ratio) * g->ratio + 1;
    rows += kvc_rng_range(g->r, 0, 2 * g->ratio);
    float *cos_sin = tensor(g, "cos_sin", KVC_DT_F4, 2, rows, 64, 0);
    if (kvc_rng_chance(g->r, 1, 10)) {   /* the identity rotation */
        for (int64_t i = 0; i < rows; i++)
            for (int j = 0; j < 32; j++) { cos_sin[i * 64 + j] = 1.0f; cos_sin[i * 64 + 32 + j] = 0.0f; }
    } else {
        fill_values(g, cos_sin, rows * 64, KVC_ROLE_COS_SIN);
    }
}

static float pick_eps(gen *g) {
    static const float choices[] = {1e-6f, 1e-5f, 0.0f, 1e-3f, 1e-20f};
    return choices[kvc_rng_below(g->r, 5)];
}

/* ---- V4 -------------------------------------------------------------- */

static void gen_v4(gen *g) {
    int coff = kvc_v4_coff(g->ratio);
    int64_t width = (int64_t)coff * g->head_dim, window = (int64_t)coff * g->ratio;
    plan_requests(g, g->ratio == 4 ? 40 : 300, g->ratio == 4 ? 10 : 4);
    static const int64_t state_block_sizes[] = {1, 2, 3, 4, 8, 16};
    int64_t bs = pick_page_rows(g, state_block_sizes, 6, 1);
    /* Physical pages only for the logical blocks a window or the chunk
     * touches, drawn from a shuffled, sparse pool. */
    int64_t lo_block[MAX_REQUESTS], hi_block[MAX_REQUESTS], needed = 0, max_blocks = 0;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t lo = g->start[q] - window + 1;
        lo_block[q] = (lo < 0 ? 0 : lo) / bs;
        hi_block[q] = (g->start[q] + g->count[q] - 1) / bs;
        needed += hi_block[q] - lo_block[q] + 1;
        if (hi_block[q] + 1 > max_blocks) max_blocks = hi_block[q] + 1;
    }
    max_blocks += kvc_rng_range(g->r, 0, 2);
    int64_t num_pages = needed + kvc_rng_range(g->r, 0, 3);
    int64_t *pool = malloc((size_t)num_pages * sizeof *pool);
    for (int64_t i = 0; i < num_pages; i++) pool[i] = i;
    shuffle(g->r, pool, num_pages);
    /* The save maps tokens through slot_mapping alone: its case carries no
     * block table (the stage-call table, docs/candidates.md), the slots
     * still come from one. */
    int save = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES;
    int32_t *table = save ? malloc((size_t)(g->num_requests * max_blocks) * sizeof *table)
                          : tensor(g, "block_table", KVC_DT_I4, 2, g->num_requests, max_blocks, 0);
    int64_t next = 0;
    for (int q = 0; q < g->num_requests; q++)
        for (int64_t col = 0; col < max_blocks; col++)
            table[q * max_blocks + col] = col >= lo_block[q] && col <= hi_block[q]
                                              ? (int32_t)pool[next++]
                                              : (int32_t)kvc_rng_below(g->r, num_pages);   /* aliases, never read */
    free(pool);
    for (int64_t t = 0; t < g->T; t++) {
        int q = g->req[t];
        g->slot[t] = kvc_rng_chance(g->r, 1, 14) ? -1 : (int64_t)table[q * max_blocks + g->pos[t] / bs] * bs + g->pos[t] % bs;
    }
    if (save) free(table);
    append_padding(g);
    put_positions(g);
    float *state = tensor(g, "state_cache", KVC_DT_F4, 3, num_pages, bs, 2 * width);
    /* The save never reads the state cache: rows are overwritten or kept
     * bit for bit, so random bytes (NaN payloads included) serve, at a
     * fraction of the cost of values (batches past 8 MiB). */
    if (g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) {
        fill_bytes(g, state, num_pages * bs * 2 * width * 4);
    } else {
        /* A correct compress reads, through the table, the rows of the
         * positions of each request's windows before its chunk and of the
         * chunk (which a forward's save writes first); none else. */
        uint8_t *read = calloc((size_t)(num_pages * bs), 1);
        for (int q = 0; q < g->num_requests; q++)
            for (int64_t p = g->start[q] - window + 1 < 0 ? 0 : g->start[q] - window + 1; p < g->start[q] + g->count[q]; p++)
                read[(int64_t)table[q * max_blocks + p / bs] * bs + p % bs] = 1;
        fill_state_rows(g, state, num_pages * bs, width, read);
        free(read);
    }
    if (g->stage != KVC_STAGE_V4_COMPRESS) {
        fill_values(g, tensor(g, "kv", KVC_DT_F4, 2, g->T, width, 0), g->T * width, KVC_ROLE_KV);
        fill_values(g, tensor(g, "score", KVC_DT_F4, 2, g->T, width, 0), g->T * width, KVC_ROLE_SCORE);
        /* The save adds ape row p mod R to a token's score: of R = 128's
         * rows, only the chunk's few are read. */
        float *ape = tensor(g, "ape", KVC_DT_F4, 2, g->ratio, width, 0);
        uint8_t read[128] = {0};
        for (int64_t t = 0; t < g->T; t++) read[g->pos[t] % g->ratio] = 1;
        for (int32_t row = 0; row < g->ratio; row++)
            if (read[row]) fill_values(g, ape + row * width, width, KVC_ROLE_SCORE);
            else fill_filler(g, ape + row * width, width);
    }
    if (g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) return;
    int64_t rows, kb;
    int64_t kv_pages = assign_output_rows(g, &rows, &kb);
    int32_t *token_to_req = tensor(g, "token_to_req", KVC_DT_I4, 1, g->T, 0, 0);
    memcpy(token_to_req, g->req, (size_t)g->T * 4);
    memcpy(tensor(g, "kv_slot_mapping", KVC_DT_I8, 1, g->T, 0, 0), g->kv_slot, (size_t)g->T * 8);
    fill_values(g, tensor(g, "norm_weight", KVC_DT_F4, 1, g->head_dim, 0, 0), g->head_dim, KVC_ROLE_WEIGHT);
    put_cos_sin(g);
    int64_t row_bytes = g->head_dim == 512 ? 584 : 132;
    fill_bytes(g, tensor(g, "kv_cache", KVC_DT_U1, 3, kv_pages, kb, row_bytes), kv_pages * kb * row_bytes);
    g->c->has_cache_dtype = 1;
    g->c->cache_dtype = g->head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
}

/* ---- V4.1 ------------------------------------------------------------ */

static void put_latent_values(gen *g, uint16_t *latent, int64_t tokens) {
    float row[512];
    for (int64_t t = 0; t < tokens; t++) {
        fill_values(g, row, 512, KVC_ROLE_LATENT);
        if (g->family == KVC_FAM_POW2_EDGE || g->family == KVC_FAM_FP8_TIES)
            for (int b = 0; b < 7; b++)
                if (kvc_rng_chance(g->r, 3, 4)) edge_block(g->r, row + b * 64, g->family);
        for (int d = 0; d < 512; d++) latent[t * 512 + d] = kvc_bf16_from_f32(row[d]);
    }
}

/* Three in four NoPE values +-x0 (adversarial_fp8_scale), each one whose
 * fp8 code x * RN(1/s) and x / s disagree on. */
static void put_scaled_midpoints(gen *g, uint16_t *latent) {
    for (int64_t t = 0; t < g->T; t++)
        for (int d = 0; d < 448; d++)
            if (kvc_rng_chance(g->r, 3, 4)) latent[t * 512 + d] = kvc_bf16_from_f32(random_sign(g->r, g->fp8_probe));
}

static void put_norm_weight_bf16(gen *g) {
    uint16_t *w = tensor(g, "norm_weight", KVC_DT_U2, 1, 512, 0, 0);
    for (int d = 0; d < 512; d++) w[d] = kvc_bf16_from_f32(kvc_gen_value(g->r, g->family, KVC_ROLE_WEIGHT));
}

/* R = 2: one ring block per request, chunks of consecutive positions. */
static void plan_v41_ring(gen *g) {
    static const int64_t caps[] = {8, 16, 32};
    int64_t cap = pick_page_rows(g, caps, 3, 2);
    if (kvc_rng_chance(g->r, 1, 12)) {   /* SPEC.md 3: any power of two >= 8 */
        cap = kvc_rng_chance(g->r, 1, 4) ? 128 : 64;
        g->dimensions |= KVC_DIM_LARGE_RING;
    }
    plan_requests(g, 60, kvc_rng_chance(g->r, 1, 8) ? (int)cap + 6 : 10);
    int64_t num_blocks = g->num_requests + kvc_rng_range(g->r, 0, 2);
    int64_t blocks[MAX_REQUESTS + 3];
    for (int64_t i = 0; i < num_blocks; i++) blocks[i] = i;
    shuffle(g->r, blocks, num_blocks);
    for (int64_t t = 0; t < g->T; t++)
        g->slot[t] = kvc_rng_chance(g->r, 1, 16) ? -1 : blocks[g->req[t]] * cap + g->pos[t] % cap;
    int64_t real_tokens = g->T;
    append_padding(g);
    for (int64_t t = real_tokens; t < g->T; t++) g->req[t] = (int32_t)kvc_rng_below(g->r, 5);   /* ignored */
    int32_t *qsl = tensor(g, "query_start_loc", KVC_DT_I4, 1, g->num_requests + 1, 0, 0);
    qsl[0] = 0;
    for (int q = 0; q < g->num_requests; q++) qsl[q + 1] = qsl[q] + (int32_t)g->count[q];
    memcpy(tensor(g, "token_to_req", KVC_DT_I4, 1, g->T, 0, 0), g->req, (size_t)g->T * 4);
    float *ring = tensor(g, "state_cache", KVC_DT_F4, 3, num_blocks, cap, 1024);
    /* A correct kernel reads the ring row of the position before a
     * request's chunk (a closing first token's partner) and writes those
     * of the chunk; none else of its block, nor the spare blocks. */
    uint8_t *read = calloc((size_t)(num_blocks * cap), 1);
    for (int q = 0; q < g->num_requests; q++)
        for (int64_t p = g->start[q] > 0 ? g->start[q] - 1 : 0; p < g->start[q] + g->count[q]; p++) read[blocks[q] * cap + p % cap] = 1;
    fill_state_rows(g, ring, num_blocks * cap, 512, read);
    free(read);
}

/* R = 1: independent tokens; slot_mapping only marks them valid. */
static void plan_v41_plain(gen *g) {
    g->T = kvc_rng_chance(g->r, 1, 16) ? kvc_rng_range(g->r, 17, 40) : kvc_rng_range(g->r, 1, 6);
    if (g->T > 6) g->dimensions |= KVC_DIM_WIDE_BATCH;
    if (kvc_rng_chance(g->r, 1, 128)) {
        g->T = kvc_rng_range(g->r, SMALL_TOKENS + 1, 160);
        g->dimensions |= KVC_DIM_LARGE_BATCH;
    }
    g->num_requests = 1;
    for (int64_t t = 0; t < g->T; t++) {
        g->pos[t] = kvc_rng_below(g->r, 300);
        g->req[t] = 0;
        g->slot[t] = kvc_rng_chance(g->r, 1, 8) ? -1 : t;
    }
}

/* A scale s = RN(x0 / m0), x0 a bf16 value, m0 an fp8 midpoint (an odd
 * 5-bit significand: 17..31 times 2^k), for which x0 * RN(1/s) and
 * RN(x0 / s) land on different sides of m0, or one on it: the fp8 code
 * of x0 then depends on which of the two a kernel computes (the contract
 * multiplies by RN(1/s), SPEC.md 5).  0 when 32 tries find none. */
static int adversarial_fp8_scale(gen *g) {
    for (int attempt = 0; attempt < 32; attempt++) {
        float x0 = ldexpf((float)kvc_rng_range(g->r, 128, 255), (int)kvc_rng_range(g->r, -12, 2));
        float m0 = ldexpf((float)(2 * kvc_rng_range(g->r, 8, 15) + 1), (int)kvc_rng_range(g->r, -10, 3));
        float s = x0 / m0, r = 1.0f / s;
        if (!(s > 0.0f) || !isfinite(s) || !isfinite(r)) continue;
        if (kvc_fp8_from_f32(x0 * r) != kvc_fp8_from_f32(x0 / s)) {
            g->fp8_scale = s;
            g->fp8_probe = x0;
            return 1;
        }
    }
    return 0;
}

static void put_kv_cache_v41(gen *g, kvc_cache_dtype dtype) {
    int64_t rows, kb;
    int64_t pages = assign_output_rows(g, &rows, &kb);
    int64_t width = dtype == KVC_CACHE_FP8_DS_MLA ? 584 : 512;
    kvc_dtype element = dtype == KVC_CACHE_BF16 ? KVC_DT_U2 : KVC_DT_U1;
    void *cache = tensor(g, "kv_cache", element, 3, pages, kb, width);
    fill_bytes(g, cache, pages * kb * width * kvc_dtype_size(element));
    g->c->has_cache_dtype = 1;
    g->c->cache_dtype = dtype;
    if (dtype == KVC_CACHE_FP8_E4M3) {
        float *scale = tensor(g, "fp8_scale", KVC_DT_F4, 1, 1, 0, 0);
        scale[0] = kvc_rng_chance(g->r, 1, 2) ? scaled(g->r, 1.0f, -12, 6) : scaled(g->r, 0.5f + kvc_rng_unit(g->r), -10, 4);
        if (kvc_rng_chance(g->r, 1, 3) && adversarial_fp8_scale(g)) {
            scale[0] = g->fp8_scale;
            g->dimensions |= KVC_DIM_FP8_SCALE;
        }
    }
}

static void gen_v41_norm(gen *g, int forward) {
    if (g->ratio == 2) plan_v41_ring(g);
    else plan_v41_plain(g);
    if (forward && g->ratio == 1) {
        /* R = 1 forward inserts at slot_mapping: rows must be distinct */
        int64_t rows, kb;
        int64_t pages = assign_output_rows(g, &rows, &kb);
        for (int64_t t = 0; t < g->T; t++) g->slot[t] = g->slot[t] >= 0 ? g->kv_slot[t] : -1;
        void *cache = tensor(g, "kv_cache", KVC_DT_U1, 3, pages, kb, 584);
        fill_bytes(g, cache, pages * kb * 584);
        g->c->has_cache_dtype = 1;
        g->c->cache_dtype = KVC_CACHE_FP8_DS_MLA;
    }
    put_positions(g);
    fill_values(g, tensor(g, "kv_score", KVC_DT_F4, 2, g->T, 512 * g->ratio, 0), g->T * 512 * g->ratio, KVC_ROLE_KV);
    if (g->ratio == 2) {   /* the score half of each row */
        float *rows = kvc_case_get(g->c, "kv_score")->data;
        for (int64_t t = 0; t < g->T; t++) fill_values(g, rows + t * 1024 + 512, 512, KVC_ROLE_SCORE);
    }
    put_norm_weight_bf16(g);
    fill_bytes(g, tensor(g, "latent", KVC_DT_U2, 2, g->T, 512, 0), g->T * 1024);
    if (!forward) return;
    if (g->ratio == 2) {
        put_kv_cache_v41(g, KVC_CACHE_FP8_DS_MLA);
        memcpy(tensor(g, "kv_slot_mapping", KVC_DT_I8, 1, g->T, 0, 0), g->kv_slot, (size_t)g->T * 8);
    }
    put_cos_sin(g);
}

static void gen_v41_insert(gen *g, kvc_cache_dtype dtype) {
    g->ratio = (int32_t)kvc_rng_range(g->r, 1, 2);
    g->c->compress_ratio = g->ratio;
    g->T = kvc_rng_chance(g->r, 1, 16) ? kvc_rng_range(g->r, 17, 48) : kvc_rng_range(g->r, 1, 8);
    if (g->T > 8) g->dimensions |= KVC_DIM_WIDE_BATCH;
    if (kvc_rng_chance(g->r, 1, 128)) {
        g->T = kvc_rng_range(g->r, SMALL_TOKENS + 1, 160);
        g->dimensions |= KVC_DIM_LARGE_BATCH;
    }
    g->num_requests = 1;
    for (int64_t t = 0; t < g->T; t++) {
        g->pos[t] = kvc_rng_below(g->r, 400);
        g->slot[t] = kvc_rng_chance(g->r, 1, 8) ? -1 : 0;
    }
    put_kv_cache_v41(g, dtype);
    for (int64_t t = 0; t < g->T; t++) g->slot[t] = g->kv_slot[t];
    put_positions(g);
    uint16_t *latent = tensor(g, "latent", KVC_DT_U2, 2, g->T, 512, 0);
    put_latent_values(g, latent, g->T);
    if (g->fp8_scale != 0.0f) put_scaled_midpoints(g, latent);
    put_cos_sin(g);
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

static void apply_bit_patterns(gen *g) {
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
static void shape_edge_rows(gen *g) {
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
static void other_padding_slots(gen *g) {
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

/* ---- invalid metadata ------------------------------------------------ */

/* Index of a random token satisfying pred, or -1. */
static int64_t pick_token(gen *g, const int64_t *slots, int need_closing) {
    int64_t found[MAX_TOKENS], n = 0;
    for (int64_t t = 0; t < g->T; t++)
        if (slots[t] >= 0 && (!need_closing || (g->pos[t] + 1) % g->ratio == 0)) found[n++] = t;
    return n ? found[kvc_rng_below(g->r, n)] : -1;
}

/* Corrupt one piece of metadata so the stage must reject the case (or,
 * when the corrupted token is never read, must ignore it). */
/* The V4.1 ring and V4 window rules that need a whole request, one per
 * kind (10-15); 0 when this case has nothing the rule could break. */
static int corrupt_targeted(gen *g, int kind, char *what, size_t what_size) {
    kvc_case *c = g->c;
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *positions = kvc_case_get(c, "positions");
    kvc_array *qsl = kvc_case_get(c, "query_start_loc"), *ring = kvc_case_get(c, "state_cache");
    int64_t *s = slots->data, *p = positions->data;
    if (kind == 14) {   /* a closing token's window column past max_blocks */
        kvc_array *table = kvc_case_get(c, "block_table"), *kv_slots = kvc_case_get(c, "kv_slot_mapping");
        if (!table || !kv_slots || !ring || c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) return 0;
        int64_t t = pick_token(g, kv_slots->data, 1), bs = ring->shape[1];
        if (t < 0 || s[t] < 0 || p[t] / bs < 1 || p[t] / bs >= table->shape[1]) return 0;
        int64_t rows = table->shape[0], cols = p[t] / bs, old_cols = table->shape[1];
        int32_t *narrow = table->data;
        for (int64_t r = 0; r < rows; r++) memmove(narrow + r * cols, narrow + r * old_cols, (size_t)cols * 4);
        table->shape[1] = cols;
        table->count = rows * cols;
        g->rule = "window-column-past-table";
        snprintf(what, what_size, "block_table cut to %lld columns (token %lld reads column %lld)", (long long)cols,
                 (long long)t, (long long)(p[t] / bs));
        return 1;
    }
    if (!qsl || !ring || c->compress_ratio != 2) return 0;
    int32_t *q = qsl->data;
    int64_t requests = qsl->count - 1, cap = ring->shape[1];
    if (kind == 15) {   /* the same ring rows as pages of a CAP SPEC.md 8 refuses: 12 (no power of two) or 4 (< 8) */
        int64_t rows = ring->shape[0] * cap, bad_cap = rows % 12 == 0 ? 12 : 4;
        ring->shape[0] = rows / bad_cap;
        ring->shape[1] = bad_cap;
        g->rule = "ring-cap";
        snprintf(what, what_size, "state_cache reshaped to CAP %lld", (long long)bad_cap);
        return 1;
    }
    if (kind == 11) {   /* a valid slot after query_start_loc[NR] */
        if (q[requests] >= g->T) return 0;
        s[g->T - 1] = p[g->T - 1] % cap;
        g->rule = "slot-after-batch";
        snprintf(what, what_size, "padding token %lld given a valid slot", (long long)(g->T - 1));
        return 1;
    }
    int64_t req = kvc_rng_below(g->r, requests), first = q[req], last = q[req + 1] - 1;
    if (kind == 12) {   /* two requests naming one ring block */
        int64_t other = (req + 1) % requests;
        if (requests < 2 || s[first] < 0 || q[other + 1] <= q[other]) return 0;
        for (int64_t t = q[other]; t < q[other + 1]; t++)
            if (s[t] >= 0) s[t] = s[first] / cap * cap + p[t] % cap;
        g->rule = "ring-block-shared";
        snprintf(what, what_size, "requests %lld and %lld name one ring block", (long long)req, (long long)other);
        return 1;
    }
    if (last <= first || s[last] < 0 || s[first] < 0) return 0;
    if (kind == 10) {   /* positions not consecutive within the chunk (the ring row kept) */
        p[last] += cap;
        g->rule = "positions-not-consecutive";
        snprintf(what, what_size, "positions[%lld] jumps by CAP + 1 in request %lld", (long long)last, (long long)req);
        return 1;
    }
    /* kind 13: two ring blocks within one request */
    s[last] = (s[last] / cap + 1) % ring->shape[0] * cap + s[last] % cap;
    g->rule = "two-ring-blocks";
    snprintf(what, what_size, "slot_mapping[%lld] names another ring block than request %lld's", (long long)last, (long long)req);
    return 1;
}

static void corrupt(gen *g, char *what, size_t what_size) {
    kvc_case *c = g->c;
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *kv_slots = kvc_case_get(c, "kv_slot_mapping");
    kvc_array *positions = kvc_case_get(c, "positions"), *table = kvc_case_get(c, "block_table");
    kvc_array *qsl = kvc_case_get(c, "query_start_loc"), *t2r = kvc_case_get(c, "token_to_req");
    kvc_array *cos_sin = kvc_case_get(c, "cos_sin"), *scale = kvc_case_get(c, "fp8_scale");
    int64_t *s = slots->data;
    /* One in two: an input just past one of section 8's bounds. */
    if (g->edge_rng && kvc_rng_chance(g->edge_rng, 1, 2)) {
        const char *rule = NULL;
        unsigned edge = kvc_edges_corrupt(g->edge_rng, c, &rule, what, what_size);
        if (edge) {
            g->rule = rule;
            g->edges |= edge;
            return;
        }
    }
    for (int attempt = 0; attempt < 8; attempt++) {
        int64_t t;
        int kind = (int)kvc_rng_below(g->r, 16);
        if (kind >= 10) {
            if (corrupt_targeted(g, kind, what, what_size)) return;
            continue;
        }
        switch (kind) {
        case 0:
            if ((t = pick_token(g, s, 0)) < 0) break;
            s[t] += 1000000;
            g->rule = "slot-out-of-range";
            snprintf(what, what_size, "slot_mapping[%lld] out of range", (long long)t);
            return;
        case 1:
            if (!kv_slots || (t = pick_token(g, kv_slots->data, 1)) < 0) break;
            ((int64_t *)kv_slots->data)[t] = 1 << 30;
            g->rule = "kv-slot-out-of-range";
            snprintf(what, what_size, "kv_slot_mapping[%lld] out of range", (long long)t);
            return;
        case 2: {
            int64_t *target = kv_slots ? kv_slots->data : s;
            int64_t a = pick_token(g, target, 1), b = pick_token(g, target, 1);
            if (a < 0 || a == b || b < 0 || c->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM) break;
            target[b] = target[a];
            g->rule = "two-writers";
            snprintf(what, what_size, "two writers of one row (%lld, %lld)", (long long)a, (long long)b);
            return;
        }
        case 3:
            if (!table || !table->count) break;
            t = kvc_rng_below(g->r, table->count);
            ((int32_t *)table->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 : 1 << 20;
            g->rule = "block-table-entry";
            snprintf(what, what_size, "block_table entry out of range");
            return;
        case 4:
            if (!t2r || (t = pick_token(g, s, 1)) < 0) break;
            ((int32_t *)t2r->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 : 7;
            g->rule = "token-to-req";
            snprintf(what, what_size, "token_to_req[%lld] wrong", (long long)t);
            return;
        case 5:
            if ((t = pick_token(g, s, 0)) < 0) break;
            ((int64_t *)positions->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 - kvc_rng_below(g->r, 5) : ((int64_t)1 << 41);
            g->rule = "position-out-of-range";
            snprintf(what, what_size, "positions[%lld] out of range", (long long)t);
            return;
        case 6:
            if (!cos_sin || cos_sin->shape[0] < 2) break;
            cos_sin->shape[0] = kvc_rng_range(g->r, 0, 1) ? 1 : cos_sin->shape[0] / 2;
            cos_sin->count = cos_sin->shape[0] * 64;
            g->rule = "cos-sin-too-short";
            snprintf(what, what_size, "cos_sin table too short");
            return;
        case 7:
            if (!qsl || qsl->count < 2) break;
            t = kvc_rng_range(g->r, 0, qsl->count - 1);
            ((int32_t *)qsl->data)[t] += kvc_rng_chance(g->r, 1, 2) ? 3 : -2;
            g->rule = "query-start-loc";
            snprintf(what, what_size, "query_start_loc corrupted");
            return;
        case 8:
            if (!scale) break;
            ((float *)scale->data)[0] = kvc_rng_chance(g->r, 1, 2) ? 0.0f : kvc_f32_from_bits(0x7F800000u);
            g->rule = "fp8-scale";
            snprintf(what, what_size, "fp8_scale not finite and > 0");
            return;
        default:
            if (c->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM || c->compress_ratio != 2 || (t = pick_token(g, s, 0)) < 0) break;
            s[t] ^= 1;   /* ring row no longer p % CAP */
            g->rule = "ring-row";
            snprintf(what, what_size, "slot_mapping[%lld] not at ring row p %% CAP", (long long)t);
            return;
        }
    }
    c->eps = kvc_rng_chance(g->r, 1, 2) ? -1.0f : kvc_f32_from_bits(0x7FC00000u);
    g->rule = "eps";
    snprintf(what, what_size, "eps out of range");
}

/* ---- entry points ---------------------------------------------------- */

static int pick_variant(kvc_rng *r, uint64_t mask) {
    int total = 0;
    for (int v = 0; v < NUM_VARIANTS; v++)
        if (!mask || (mask >> v & 1)) total += variants[v].weight;
    int64_t x = kvc_rng_below(r, total);
    for (int v = 0; v < NUM_VARIANTS; v++) {
        if (mask && !(mask >> v & 1)) continue;
        if (x < variants[v].weight) return v;
        x -= variants[v].weight;
    }
    return 0;
}

int kvc_gen_make_from(const kvc_gen_config *config, kvc_rng *r, kvc_gen_case *out) {
    memset(out, 0, sizeof *out);
    out->variant = pick_variant(r, config->variant_mask);
    out->family = (int)kvc_rng_below(r, KVC_FAM_COUNT);
    while (config->family_mask && !(config->family_mask >> out->family & 1)) out->family = (out->family + 1) % KVC_FAM_COUNT;
    const kvc_variant_info *v = &variants[out->variant];
    if (v->stage < 0) { out->history = 1; return 0; }
    gen g = {.r = r, .c = &out->c, .family = out->family, .stage = v->stage, .ratio = v->compress_ratio, .head_dim = v->head_dim,
             .geometry_pool = config->geometry_pool, .seed = config->seed};
    out->c.stage = (kvc_stage)v->stage;
    out->c.compress_ratio = v->compress_ratio;
    out->c.head_dim = v->head_dim;
    switch (v->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES:
    case KVC_STAGE_V4_COMPRESS:
    case KVC_STAGE_V4_FORWARD: gen_v4(&g); break;
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM: gen_v41_norm(&g, 0); break;
    case KVC_STAGE_V41_FORWARD: gen_v41_norm(&g, 1); break;
    default: gen_v41_insert(&g, (kvc_cache_dtype)v->cache_dtype); break;
    }
    out->c.eps = pick_eps(&g);
    /* The bounds draw from a stream of their own, seeded from the case's
     * without advancing it: every other draw of the case is unchanged. */
    kvc_rng edge_rng;
    kvc_rng_seed(&edge_rng, r->s[0] ^ kvc_rotl64(r->s[3], 17), 0xED6E5);
    g.edge_rng = &edge_rng;
    kvc_edges_draw(&edge_rng, &out->c);
    if (out->family == KVC_FAM_ISOLATED_EDGES || out->family == KVC_FAM_CROSS_MAGNITUDE) shape_edge_rows(&g);
    if (kvc_rng_chance(r, 1, 8)) other_padding_slots(&g);
    if (out->family == KVC_FAM_BIT_PATTERNS) apply_bit_patterns(&g);
    if (out->family == KVC_FAM_ROUNDING_PROBE) kvc_probe_apply(r, &out->c);
    if (config->invalid_per_mille && kvc_rng_below(r, 1000) < config->invalid_per_mille)
        corrupt(&g, out->invalid, sizeof out->invalid);
    out->dimensions = g.dimensions;
    out->rule = g.rule;
    out->edges = kvc_edges_measure(&out->c) | g.edges;
    snprintf(out->c.source, sizeof out->c.source, "kvcmp-fuzz seed %llu variant %s family %s%s%s",
             (unsigned long long)config->seed, v->name, family_names[out->family], out->invalid[0] ? " invalid: " : "",
             out->invalid);
    return 0;
}

int kvc_gen_make(const kvc_gen_config *config, int64_t index, kvc_gen_case *out) {
    kvc_rng r;
    kvc_rng_seed(&r, config->seed, (uint64_t)index);
    return kvc_gen_make_from(config, &r, out);
}

void kvc_gen_free(kvc_gen_case *g) { kvc_case_free(&g->c); }

void kvc_gen_case_name(uint64_t seed, int64_t index, int variant, char *out, size_t size) {
    snprintf(out, size, "fuzz-s%llu-c%lld-%s", (unsigned long long)seed, (long long)index, variants[variant].name);
    for (char *p = out; *p; p++)
        if (*p == '/') *p = '_';
}

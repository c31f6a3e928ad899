/* The fuzzer's scenario generator: seeded, reproducible cases of every
 * stage and variant, built as kvc_case structs in the interchange layout
 * so a failing case can be saved (kvc_case_save) and replayed as is. */
#ifndef KVCMP_FUZZ_GEN_H
#define KVCMP_FUZZ_GEN_H

#include "case.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value families: each case draws all its data from one of them. */
typedef enum {
    KVC_FAM_NORMAL,
    KVC_FAM_HEAVY_TAIL,
    KVC_FAM_TINY,            /* magnitudes below the 1e-4 scale floor */
    KVC_FAM_POW2_EDGE,       /* block maxima at 448*2^k and one bf16 step above */
    KVC_FAM_FP8_TIES,        /* fp8 ties and fp8 subnormals after scaling */
    KVC_FAM_EXP_UNDERFLOW,   /* score spreads past exp's range */
    KVC_FAM_HUGE_SCORES,
    KVC_FAM_NONFINITE,       /* NaN and +-Inf at a low rate */
    KVC_FAM_SMALL_WEIGHT,    /* norm weights that put blocks under 448*2^-14 */
    KVC_FAM_CANCELLATION,    /* magnitudes far apart: summation order shows */
    KVC_FAM_ROUNDING_PROBE,  /* outputs placed exactly on bf16 ties */
    KVC_FAM_BIT_PATTERNS,    /* raw bit patterns: NaN payloads, signalling NaNs, signed zeros
                                (whole -0 kv windows), subnormals, extremes, in fp32 and bf16 */
    KVC_FAM_MIXED,           /* roles from different families: huge kv, underflowing
                                weights, score spreads past exp's range */
    KVC_FAM_EXP_BOUNDARY,    /* scores x - 0 whose exp lies next to an fp32 rounding
                                boundary (fixtures/exp-boundaries) */
    KVC_FAM_ISOLATED_EDGES,  /* -0 kv channels, -inf scores and scores whose exp
                                underflows, in tokens without any NaN or inf */
    KVC_FAM_CROSS_MAGNITUDE, /* underflowing exp weights next to kv ~2^126 larger;
                                exp boundary scores next to kv that cancels */
    KVC_FAM_COUNT
} kvc_family;

const char *kvc_family_name(int family);
/* Families whose name starts with an item of the comma-separated list;
 * 0 when an item matches none (copied to bad). */
uint32_t kvc_family_mask(const char *list, char *bad, size_t bad_size);

/* A variant: one stage with one geometry.  History variants are the
 * multi-step chunking checks (harness/fuzz/history.h), not single cases. */
typedef struct {
    const char *name;        /* e.g. "v4.compress/d512/r4" */
    int stage;               /* kvc_stage, or -1 for a history variant */
    int32_t compress_ratio;
    int32_t head_dim;
    int cache_dtype;         /* kvc_cache_dtype for inserts, -1 otherwise */
    int weight;              /* share of the default mix */
} kvc_variant_info;

int kvc_variant_count(void);
const kvc_variant_info *kvc_variant(int index);
/* Select variants whose name starts with any comma-separated item of
 * list ("v4.compress,v41" ...).  Returns the mask, 0 if an item matched
 * nothing (its name is copied to bad). */
uint64_t kvc_variant_mask(const char *list, char *bad, size_t bad_size);

/* The share of cases `kvcmp fuzz` corrupts unless told otherwise. */
#define KVC_GEN_DEFAULT_INVALID_PER_MILLE 20

typedef struct {
    uint64_t seed;
    uint64_t variant_mask;   /* 0 = all */
    int invalid_per_mille;   /* cases whose metadata is corrupted on purpose */
    uint32_t family_mask;    /* value families to draw from, 0 = all */
    int geometry_pool;       /* > 0: page rows drawn from this many per seed (a
                                slot per case), columns, pages and rows rounded up
                                to this many tiers (a JIT-specialising candidate
                                compiles less; harness/fuzz/gen.c) */
} kvc_gen_config;

/* Generator dimensions besides the value family (bits of
 * kvc_gen_case.dimensions), each a share of the default mix. */
enum {
    KVC_DIM_WIDE_BATCH = 1u << 0,    /* many requests / closing tokens: token-parallel paths */
    KVC_DIM_HIGH_POSITIONS = 1u << 1,/* positions moved past 2^31, 2^32 or near 2^40 */
    KVC_DIM_NEG_ZERO_KV = 1u << 2,   /* every kv entry -0 */
    KVC_DIM_RAW_BF16 = 1u << 3,      /* raw bf16 NaN payloads, -0, subnormals in bf16 inputs */
    KVC_DIM_FP8_SCALE = 1u << 4,     /* an fp8 scale where x * RN(1/s) and x / s round apart */
    KVC_DIM_ISOLATED_EDGES = 1u << 5,/* -0 kv channels, -inf or underflowing scores, no NaN or inf */
    KVC_DIM_CROSS_MAGNITUDE = 1u << 6,/* subnormal exp weights times kv near 2^126 */
    KVC_DIM_PADDING_SLOTS = 1u << 7, /* padding slots other than -1 (-2, INT64_MIN, ...) */
    KVC_DIM_LARGE_RING = 1u << 8,    /* a V4.1 ring of CAP 64 or 128 */
    KVC_DIM_LARGE_BATCH = 1u << 9,   /* past 96 tokens; V4 saves past 8 MiB of state rows */
    KVC_DIM_COUNT = 10
};
const char *kvc_dimension_name(int bit_index);

/* The bounds of SPEC.md 8 a case holds (bits of kvc_gen_case.edges),
 * both sides of each: measured in every case (harness/fuzz/edges.c),
 * drawn on purpose where ordinary draws never land. */
enum {
    KVC_EDGE_POSITION_BELOW = 1u << 0,     /* a valid token at position 2^40 - 1 */
    KVC_EDGE_POSITION_AT = 1u << 1,        /* ... at 2^40, the inclusive bound */
    KVC_EDGE_POSITION_PAST = 1u << 2,      /* ... at 2^40 + 1: refused */
    KVC_EDGE_UNSET_TOKEN_TO_REQ = 1u << 3, /* a slotted V4 token that does not close, token_to_req outside the table */
    KVC_EDGE_EPS_ONE = 1u << 4,            /* eps = 1 */
    KVC_EDGE_EPS_PAST = 1u << 5,           /* eps = 1 + 2^-23: refused */
    KVC_EDGE_SLOT_LAST = 1u << 6,          /* a writer on its cache's last row */
    KVC_EDGE_SLOT_PAST = 1u << 7,          /* ... one row past it: refused */
    KVC_EDGE_REQUEST_LAST = 1u << 8,       /* a V4 closing token of the last request */
    KVC_EDGE_REQUEST_PAST = 1u << 9,       /* token_to_req = num_requests: refused */
    KVC_EDGE_COS_SIN_EXACT = 1u << 10,     /* cos_sin ends at the last row a token rotates with */
    KVC_EDGE_COS_SIN_SHORT = 1u << 11,     /* ... one row short: refused */
    KVC_EDGE_BLOCK_LAST = 1u << 12,        /* a window reads the state cache's last page */
    KVC_EDGE_BLOCK_PAST = 1u << 13,        /* a block-table entry of num_pages: refused */
    KVC_EDGE_COLUMN_LAST = 1u << 14,       /* a window reads the block table's last column */
    KVC_EDGE_COLUMN_PAST = 1u << 15,       /* ... the column past it: refused */
    KVC_EDGE_QSL_BATCH = 1u << 16,         /* query_start_loc[NR] = T (no padding after the requests) */
    KVC_EDGE_QSL_PAST = 1u << 17,          /* query_start_loc[NR] = T + 1: refused */
    KVC_EDGE_FP8_SCALE_MIN = 1u << 18,     /* fp8_scale = 2^-149 */
    KVC_EDGE_FP8_SCALE_ZERO = 1u << 19,    /* fp8_scale = 0: refused */
    KVC_EDGE_CAP_MIN = 1u << 20,           /* a V4.1 ring of CAP 8 */
    KVC_EDGE_COUNT = 21
};
const char *kvc_edge_name(int bit_index);
/* 1 for the edges on the refused side of their bound. */
int kvc_edge_refused(int bit_index);

typedef struct {
    kvc_case c;
    int variant;
    int family;
    char invalid[96];        /* corruption applied ("" = none) */
    int history;             /* 1: a history variant; c is unused */
    unsigned dimensions;     /* KVC_DIM_* bits */
    const char *rule;        /* the validation rule the corruption targets, or NULL */
    unsigned edges;          /* KVC_EDGE_* bits: the bounds the case holds */
    int geometry_slot;       /* with a geometry pool: 1 + the slot (of geometry_pool)
                                that fixed its page rows; 0 without */
} kvc_gen_case;

/* Case `index` of the campaign (stream `index` of the seed). */
int kvc_gen_make(const kvc_gen_config *config, int64_t index, kvc_gen_case *out);
/* The same from an explicit random source (libFuzzer inputs). */
int kvc_gen_make_from(const kvc_gen_config *config, kvc_rng *rng, kvc_gen_case *out);
void kvc_gen_free(kvc_gen_case *g);
/* The directory name of a generated case, "fuzz-s1-c42-v4.compress_d512_r4"
 * (the variant's '/' as '_'), as kvcmp fuzz --save and kvcmp gen write it. */
void kvc_gen_case_name(uint64_t seed, int64_t index, int variant, char *out, size_t size);

/* Value drawing shared with the history driver: one value, or n of one
 * family and role (the same values as n calls of kvc_gen_value). */
float kvc_gen_value(kvc_rng *rng, int family, int role);
void kvc_gen_values(kvc_rng *rng, int family, int role, float *dst, int64_t n);
enum { KVC_ROLE_KV, KVC_ROLE_SCORE, KVC_ROLE_WEIGHT, KVC_ROLE_LATENT, KVC_ROLE_COS_SIN };

/* The rounding-probe construction (harness/fuzz/probe.c): rewrite some
 * inputs of a generated case so that outputs land exactly on bf16 ties,
 * where one ulp of difference in the pipeline flips a stored byte. */
void kvc_probe_apply(kvc_rng *rng, kvc_case *c);

#ifdef __cplusplus
}
#endif

#endif

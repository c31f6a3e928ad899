/* The seeded input corpus of the precision report: one small case per
 * (stage variant, value family, seed), built in memory in the interchange
 * format.  Self-contained (own PRNG) so the report does not move when the
 * fuzzer's generator changes. */
#ifndef KVCMP_REPORT_CORPUS_H
#define KVCMP_REPORT_CORPUS_H

#include <stdint.h>

#include "kvcmp/case.h"

typedef enum {
    KVC_VARIANT_SAVE_D512_R4,
    KVC_VARIANT_SAVE_D128_R128,
    KVC_VARIANT_COMPRESS_D512_R4,
    KVC_VARIANT_COMPRESS_D512_R128,
    KVC_VARIANT_COMPRESS_D128_R4,
    KVC_VARIANT_COMPRESS_D128_R128,
    KVC_VARIANT_NORM_R1,
    KVC_VARIANT_NORM_R2,
    KVC_VARIANT_QUANT_INSERT,
    KVC_VARIANT_PLAIN_BF16,
    KVC_VARIANT_PLAIN_FP8,
    KVC_VARIANT_COUNT
} kvc_corpus_variant;

typedef enum {
    KVC_FAMILY_NORMAL,        /* Gaussian values, moderate score spread */
    KVC_FAMILY_HEAVY_TAILS,   /* log-normal magnitudes over many binades */
    KVC_FAMILY_TINY,          /* magnitudes ~1e-6: eps dominates, scale floor */
    KVC_FAMILY_SMALL_WEIGHT,  /* norm weights ~1e-3: every block under 448*2^-14 */
    KVC_FAMILY_EXP_UNDERFLOW, /* score spread ~60: most weights underflow */
    KVC_FAMILY_EQUAL_SCORES,  /* equal scores: the pool is a plain mean */
    KVC_FAMILY_CANCELLATION,  /* mixed signs that nearly cancel (pool, RoPE) */
    KVC_FAMILY_POW2_EDGE,     /* block magnitudes exactly 448*2^k or one bf16 step above */
    KVC_FAMILY_FP8_TIES,      /* values on fp8 rounding midpoints after scaling */
    KVC_FAMILY_NONFINITE,     /* NaN and +-inf at a low rate */
    KVC_FAMILY_COUNT
} kvc_corpus_family;

const char *kvc_corpus_variant_name(kvc_corpus_variant variant);
const char *kvc_corpus_variant_slug(kvc_corpus_variant variant);
const char *kvc_corpus_family_name(kvc_corpus_family family);
/* 1 if the family means something for the variant's inputs. */
int kvc_corpus_family_applies(kvc_corpus_variant variant, kvc_corpus_family family);

/* Builds the inputs of one case (no NAME.out tensors).  0 on success. */
int kvc_corpus_make_case(kvc_corpus_variant variant, kvc_corpus_family family, uint64_t seed, kvc_case *c);

/* The corpus PRNG (splitmix64), exposed for the tests. */
typedef struct { uint64_t state; } kvc_corpus_rng;
uint64_t kvc_corpus_next(kvc_corpus_rng *rng);
double kvc_corpus_uniform(kvc_corpus_rng *rng);   /* [0, 1) */
double kvc_corpus_normal(kvc_corpus_rng *rng);

#endif

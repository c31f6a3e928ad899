/* Where a difference arises, as far as a stage's outputs can tell: the
 * answer for a failure no deviation of the catalogue explains.
 *
 * The walk of harness/compare/causes.c gives every differing element a
 * region, a distance in its format's steps and a cause; the locus sums
 * them by the place of the row they are in (NoPE dims, RoPE dims, block
 * scales, state rows, latent values, whole rows) with the codes that
 * only follow a block scale left out, and says what the differences
 * follow: the last bit of a rounding, the sign of a zero, a NaN's bits.
 * From the places it reads in which of the contract's steps the first
 * wrong value arises: a difference in NoPE and RoPE dims alike was there
 * before step 7 splits them; one in the RoPE dims alone is step 7's or
 * later (a last-bit difference shows in the bf16 RoPE values far more
 * often than in an fp8 NoPE code, so there it may still be earlier). */
#ifndef KVCMP_HARNESS_DIAGNOSE_LOCATE_H
#define KVCMP_HARNESS_DIAGNOSE_LOCATE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kvcmp/case.h"
#include "kvcmp/run.h"

typedef enum {
    KVC_PLACE_NOPE,     /* NoPE dims: fp8 codes or bf16 values (an indexer row's codes 0 .. 63) */
    KVC_PLACE_ROPE,     /* RoPE dims: bf16 values, or fp8 codes of a plain fp8 row or an indexer row */
    KVC_PLACE_SCALE,    /* block scales (UE8M0 bytes, the indexer's fp32 scale) */
    KVC_PLACE_STATE,    /* fp32 of a V4 state row or a V4.1 ring row */
    KVC_PLACE_LATENT,   /* bf16 latent values */
    KVC_PLACE_ROWS,     /* whole rows only one side wrote */
    KVC_PLACE_COUNT
} kvc_place;

typedef struct {
    int64_t elements[KVC_PLACE_COUNT];    /* differing elements (rows for KVC_PLACE_ROWS), codes that
                                             follow a differing block scale left out */
    int64_t max_steps[KVC_PLACE_COUNT];   /* their largest distance in the format's steps
                                             (a NaN against a number: nan_number) */
    int64_t follows;                      /* codes of a block whose scale differs */
    int64_t last_bit;                     /* elements one step apart (not a zero's sign) */
    int64_t signed_zero;                  /* +0 against -0 */
    int64_t nan_bits;                     /* NaN against NaN of other bits */
    int64_t nan_number;                   /* NaN against a number */
    int64_t subnormal_flush;              /* zero where the contract keeps a subnormal */
    int64_t probe_steps[KVC_PLACE_COUNT]; /* how far a last bit of exp moves the contract's own
                                             bytes there (kvc_locus_probe), 0 when not probed */
    int scale_covers_rope;                /* an indexer row's one scale covers its RoPE dims too: a
                                             scale that differs says nothing of the NoPE dims */
    int cases;                            /* failures summed into it */
} kvc_locus;

/* The locus of the differences of output `name` of case c between the
 * contract's result and another (zeroed when the outputs agree). */
void kvc_locate_output(const kvc_case *c, const char *name, const kvc_run_result *contract, const kvc_run_result *other, kvc_locus *l);

/* How far the last bit of a value before step 7 moves this case's bytes:
 * the contract's outputs with each of the catalogue's last bits there
 * (exp the other faithful value, the softmax summed backwards, the sum
 * of squares backwards, the inverse norm rounded once, the norm's
 * products in the other order) against its own, the largest distance
 * per place into l->probe_steps.  Where values cancel (a window's
 * products, a rotation's two terms) one ulp moves the bytes after it by
 * many steps. */
void kvc_locus_probe(const kvc_case *c, const char *name, const kvc_run_result *contract, kvc_locus *l);

/* Whether the differences are what a last bit before step 7 writes: no
 * NaN against a number, no whole row, and in each place at most one step
 * or, where the probe's one ulp moved the bytes more than one step, no
 * more than a few times as far (a candidate's exp may be more than an
 * ulp off). */
int kvc_locus_within_last_bit(const kvc_locus *l);

/* into += more (counts summed, largest distances kept). */
void kvc_locus_add(kvc_locus *into, const kvc_locus *more);

/* Which dims a value difference is in, the part of a failure's signature
 * that localises it: "NoPE and RoPE dims", "RoPE dims only", "NoPE dims
 * or scales only", "latent", "state rows", or "" when no value differs. */
const char *kvc_locus_dims(const kvc_locus *l);

/* In which of the contract's steps of `stage` ("v4.compress") the first
 * wrong value arises, as far as the places tell, with what most likely
 * wrote it: "before step 7: the pooled or normed values (steps 1-6)". */
const char *kvc_locus_origin(const kvc_locus *l, const char *stage);

/* "NoPE codes x3 (max 1 step), RoPE values x12 (max 1 step), block
 * scales x1 (max 1 step; 64 codes follow); last bit of a rounding x15;
 * arises before step 7: ...", or "" for an empty locus. */
void kvc_locus_text(const kvc_locus *l, const char *stage, char *out, size_t size);

/* The locus as a JSON object (the caller owns it). */
cJSON *kvc_locus_json(const kvc_locus *l, const char *stage);

#endif

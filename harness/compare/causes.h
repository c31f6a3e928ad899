/* Causes of byte differences between the contract's outputs and another
 * implementation's, read from the bytes (and the case's inputs) alone.
 *
 * One classifier for everything that explains a difference: the parity
 * report (upstream cases against the reference) and failure signatures
 * use it.  The walk visits every element of every row where the two
 * outputs differ, measures it in steps of its format and gives it one
 * cause; whole rows that only one side wrote are one event each. */
#ifndef KVCMP_CAUSES_H
#define KVCMP_CAUSES_H

#include <stdint.h>

#include <stddef.h>

#include "kvcmp/case.h"
#include "kvcmp/run.h"

/* In order of precedence: the first that explains an element is its cause. */
typedef enum {
    KVC_CAUSE_SCALE_FLOOR,      /* scale byte 114 where the contract floors the magnitude first */
    KVC_CAUSE_SCALE_FOLLOWS,    /* a code of a block whose scale differs */
    KVC_CAUSE_NAN,              /* NaN on one side, no more specific cause */
    KVC_CAUSE_SUBNORMAL_FLUSH,  /* other side zero where the contract keeps a subnormal */
    KVC_CAUSE_LAST_BIT,         /* one step apart, no other explanation */
    KVC_CAUSE_MULTI_STEP,       /* more than one step apart */
    KVC_CAUSE_ROW_WRITTEN,      /* the other side wrote a row the contract leaves untouched */
    KVC_CAUSE_ROW_SKIPPED,      /* the other side left a row the contract writes */
    KVC_CAUSE_STAGE_ERROR,      /* the reference rejected or could not run the case */
    KVC_CAUSE_NAN_TO_448,       /* a NaN reached the fp8 clamp: +-448, or a finite block scale */
    KVC_CAUSE_NAN_ALL_ONES,     /* NaN written as 0x7fff / 0x7fffffff, the contract's is canonical */
    KVC_CAUSE_NAN_PAYLOAD,      /* a NaN's sign or payload kept, the contract's is canonical */
    KVC_CAUSE_NOPE_PAIR_ROTATED, /* a non-finite NoPE input spread to its pair neighbour */
    KVC_CAUSE_RING_AFTER_PADDING, /* V4.1 ring rows not stored when the request's first token is padding */
    KVC_CAUSE_NEG_STATE_SLOT,   /* a kv row written for a token whose state slot is -1 */
    KVC_CAUSE_SIGNED_ZERO,      /* +0 against -0 */
    KVC_CAUSE_COUNT
} kvc_parity_cause;

/* "NaN reaching the fp8 clamp (...)": for reports. */
const char *kvc_parity_cause_name(kvc_parity_cause cause);
/* "nan-to-448": short, stable, for signatures and JSON. */
const char *kvc_cause_slug(kvc_parity_cause cause);

/* Regions of the walk (like compare.h's, with the scale split out). */
typedef enum {
    KVC_PREGION_NOPE_CODE, KVC_PREGION_SCALE, KVC_PREGION_ROPE, KVC_PREGION_NOPE_BF16,
    KVC_PREGION_STATE, KVC_PREGION_LATENT, KVC_PREGION_COUNT
} kvc_parity_region;
const char *kvc_parity_region_name(kvc_parity_region region);
const char *kvc_parity_region_unit(kvc_parity_region region);

/* One visit of the walk: an element of a differing row (is_element = 1,
 * distance 0 when this element is identical, -1 for NaN against a number
 * or different NaN bits), or a whole row one side wrote (is_element = 0). */
typedef struct {
    int is_element;
    kvc_parity_region region;
    int64_t distance;
    int differs;
    kvc_parity_cause cause;     /* meaningful when differs */
    const char *where;          /* "page 1 row 2 nope[128]", ... */
    const char *detail;         /* extra words for examples ("upstream byte 114, contract 105"), or "" */
    int dim;                    /* the element's dim in its row (0 .. 511 of a 512-wide row, 0 .. 127 of an
                                   indexer row, the column of a state row), -1 for a scale or a whole row */
} kvc_difference;

typedef void (*kvc_difference_fn)(void *context, const kvc_difference *d);

/* Walks output `name` ("kv_cache", "state_cache", "latent") of case c:
 * `contract` is what the contract (the reference) writes, `other` what
 * the other implementation wrote; the case's tensor `name` is the buffer
 * before the stage (NULL-safe).  Returns 1 when any byte differs. */
int kvc_classify_output(const kvc_case *c, const char *name, const kvc_array *contract, const kvc_array *other, kvc_difference_fn fn,
                        void *context);

/* Every output of a stage result against the case's NAME.out tensors
 * (other = the case's, as parity reads upstream cases) or against another
 * result (other = `other`, as the fuzzer compares a candidate), counted
 * per cause into counts.  Returns the number of differing elements and rows. */
int64_t kvc_cause_counts(const kvc_case *c, const kvc_run_result *contract, const kvc_run_result *other,
                         int64_t counts[KVC_CAUSE_COUNT]);
/* The same for the output `name` alone. */
int64_t kvc_output_cause_counts(const kvc_case *c, const char *name, const kvc_run_result *contract, const kvc_run_result *other,
                                int64_t counts[KVC_CAUSE_COUNT]);
/* The class of a failure whose differences have these causes, for
 * failure signatures: one bug, one class, whichever elements a case
 * happens to show ("last bit", "NaN to fp8" ... "wrong values" for any
 * other mix), "" when nothing differs. */
const char *kvc_cause_class(const int64_t counts[KVC_CAUSE_COUNT]);
/* A result whose outputs are the case's NAME.out tensors, for the outputs
 * `like` has (shallow: it points into c, never free it). */
void kvc_case_expected_view(const kvc_case *c, const kvc_run_result *like, kvc_run_result *view);
/* "nan-to-448 x128, scale-follows x64" (the largest counts first), or "". */
void kvc_cause_summary(const int64_t counts[KVC_CAUSE_COUNT], char *out, size_t size);

#endif

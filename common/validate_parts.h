/* The validators of validate.h in two parts, for a backend that checks
 * the per-token rules its own (parallel) way: *_fields runs every check
 * of the call's scalars, caches, pointers and memory ranges, in the
 * validator's order; the full validator is *_fields followed by the
 * per-token loop (positions, slots, windows, one writer per row).  A
 * backend that finds a token its fast check cannot pass runs the full
 * validator, so that its error is the reference's, word for word. */
#ifndef KVCMP_COMMON_VALIDATE_PARTS_H
#define KVCMP_COMMON_VALIDATE_PARTS_H

#include "kvcmp/kvcmp.h"

int kvc_validate_v4_save_fields(const kvc_v4_save_args *a, kvc_error *err);
int kvc_validate_v4_compress_fields(const kvc_v4_compress_args *a, kvc_error *err);
int kvc_validate_v41_insert_fields(const kvc_v41_insert_args *a, int expect_quant, kvc_error *err);
/* The same checks as kvc_validate_v41_norm less its per-token and
 * per-request loops.  The full validator checks positions between the
 * two groups of fields, so its first error can be a position's even when
 * this one fails: on any failure here, run the full validator. */
int kvc_validate_v41_norm_fields(const kvc_v41_norm_args *a, kvc_error *err);

#endif

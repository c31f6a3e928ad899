/* Shrinking a failing case to a small one that still fails the same way:
 * fewer requests, fewer tokens (so fewer window entries and closing
 * tokens), tokens turned into padding, simpler values (zeros, unit
 * weights, identity rotations). */
#ifndef KVCMP_FUZZ_SHRINK_H
#define KVCMP_FUZZ_SHRINK_H

#include "case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the case still shows the failure being shrunk. */
typedef int (*kvc_still_fails_fn)(const kvc_case *c, void *context);

typedef struct {
    int attempts;          /* candidate cases tried */
    int accepted;          /* reductions kept */
    int64_t tokens_before, tokens_after;
} kvc_shrink_stats;

/* Shrinks c in place within `seconds`. */
void kvc_shrink_case(kvc_case *c, kvc_still_fails_fn still_fails, void *context, double seconds, kvc_shrink_stats *stats);

/* Number of packed tokens of a case (positions length). */
int64_t kvc_case_tokens(const kvc_case *c);

#ifdef __cplusplus
}
#endif

#endif

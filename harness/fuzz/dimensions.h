/* What a campaign covered, per generator dimension: the candidate's
 * thread counts (and the thread check's second counts), closing tokens
 * per call, position ranges, the dimensions of kvc_gen_case.dimensions,
 * the bounds of SPEC.md 8 the cases reached (kvc_gen_case.edges, both
 * sides of each), and the validation rules whose corruption the
 * reference rejected.
 * Printed in the summary and written to the JSON report. */
#ifndef KVCMP_FUZZ_DIMENSIONS_H
#define KVCMP_FUZZ_DIMENSIONS_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "kvcmp/generate.h"

#define KVC_MAX_COUNTED_THREADS 8
#define KVC_CLOSING_BUCKETS 6
#define KVC_POSITION_BUCKETS 6
#define KVC_MAX_RULES 24

/* One case as the tally sees it. */
typedef struct {
    int threads, other_threads;   /* 0: not run (a skipped case, a history) */
    int team_rule;                /* the optimized backend's team rule: 0 not run, 1 spinning, 2 sleeping */
    int64_t page_padding;         /* the candidate's page padding, 0 when not run */
    int aliased;                  /* the aliased-buffers check ran (SPEC.md 8.1) */
    int alias_unavailable;        /* it was drawn, but the candidate gets copies of its tensors */
    int64_t closing_tokens;       /* valid closing tokens of the call */
    int64_t max_position;         /* the largest position of a valid token, -1 for none */
    unsigned dimensions;          /* KVC_DIM_* */
    unsigned edges;               /* KVC_EDGE_*: the bounds of SPEC.md 8 the case holds */
    const char *rule;             /* a corruption's rule, or NULL */
    int rejected;                 /* the reference rejected the case */
    int wait_policy;              /* OMP_WAIT_POLICY the case ran under: 0 not run, 1 passive, 2 active, 3 default */
    int ring_wrap;                /* V4.1 ring: 0 none, 1 chunks of CAP rows or fewer, 2 a chunk past CAP,
                                     3 one with a padding row among its last CAP rows */
} kvc_case_coverage;

typedef struct {
    int64_t cases;
    int64_t threads[KVC_MAX_COUNTED_THREADS + 1], other_threads[KVC_MAX_COUNTED_THREADS + 1];
    int64_t closing[KVC_CLOSING_BUCKETS], positions[KVC_POSITION_BUCKETS];
    int64_t dimensions[KVC_DIM_COUNT];
    int64_t edges[KVC_EDGE_COUNT];
    int64_t padding[2];           /* page padding of whole 64-byte lines, of other multiples of 4 */
    int64_t aliased, alias_unavailable;
    int64_t team_rule[2];         /* cases run under the spinning and the sleeping team rule */
    int64_t wait_policy[3];       /* cases run under OMP_WAIT_POLICY passive, active, default */
    int64_t ring_wrap[3];         /* V4.1 ring cases; those with a chunk past CAP; with padding in its last CAP rows */
    int num_rules;
    struct { char name[32]; int64_t cases, rejected; } rules[KVC_MAX_RULES];
} kvc_coverage_tally;

/* The coverage of generated case c (closing tokens, positions). */
void kvc_case_coverage_of(const kvc_gen_case *g, kvc_case_coverage *k);
void kvc_coverage_add(kvc_coverage_tally *t, const kvc_case_coverage *k);
void kvc_coverage_print(FILE *f, const kvc_coverage_tally *t);
cJSON *kvc_coverage_json(const kvc_coverage_tally *t);

#endif

/* Running one generated case: the reference and the candidate on the
 * same input, every byte compared (canary-filled caches, page padding on
 * the candidate's side), plus the metamorphic checks that need no second
 * implementation: thread count and physical-block permutation. */
#ifndef KVCMP_FUZZ_RUN_H
#define KVCMP_FUZZ_RUN_H

#include "harness/compare/causes.h"
#include "harness/diagnose/locate.h"
#include "kvcmp/compare.h"
#include "kvcmp/rng.h"

typedef struct {
    const kvc_backend *reference;
    const kvc_backend *candidate;
    kvc_policy policy;
    int threads;              /* OpenMP threads of the candidate's calls */
    int metamorphic_per_mille;/* cases that also get the thread/permutation checks */
    int64_t replay_padding;   /* > 0: run as `kvcmp replay --page-padding N` does
                                 (canary 0xA5, no metamorphic checks) */
    int vary_threads;         /* 1: each case draws the candidate's thread count
                                 (1 to 8, odd counts included) and the thread
                                 check's other count from the salt */
    int geometry_pool;        /* > 0: the page padding is one of this many values
                                 fixed by geometry_salt (a JIT-compiling candidate
                                 specialises on the page stride) */
    uint64_t geometry_salt;
    int geometry_slot;        /* with the pool: the case's geometry slot + 1
                                 (kvc_gen_case.geometry_slot), which picks the
                                 padding with the page rows; 0: drawn here */
} kvc_fuzz_target;

/* How the candidate side of one check ran: what `kvcmp replay` needs to
 * run a saved case the same way (case.json meta "replay"). */
typedef struct {
    int64_t page_padding;
    uint8_t canary;
    int threads;              /* the candidate's OpenMP threads */
    int other_threads;        /* > 0: the thread check's second count */
    int spinning_team;        /* the optimized backend's team rule (kvc_optimized_set_team_rule):
                                 1 spinning (static ranges, token checks over the team), 0 sleeping */
    int permuted;             /* 1: the permutation check ran */
    uint64_t permutation_seed;/* its pages' permutation (kvc_permute_case_pages) */
    uint64_t alias_seed;      /* != 0: the case also gets the aliased-buffers check
                                 (kvc_run_options.alias_seed), a small share */
    int aliased;              /* 1: that check ran */
    int alias_unavailable;    /* 1: drawn, but the candidate's tensors are copied
                                 (a py: candidate's shared memory): not run */
} kvc_fuzz_conditions;

typedef enum { KVC_FUZZ_PASS = 0, KVC_FUZZ_FAIL = 1, KVC_FUZZ_SKIP = 2 } kvc_fuzz_outcome;

typedef struct {
    kvc_fuzz_outcome outcome;
    char kind[32];            /* status, bytes, padding, written-on-error, threads, permutation, chunking */
    char detail[900];
    kvc_fuzz_conditions conditions;
    int has_report;           /* report holds the failing comparison (bytes, threads, permutation) */
    kvc_compare_report report;
    int64_t causes[KVC_CAUSE_COUNT];   /* the causes of the first failing tensor's differences (with report) */
    kvc_locus locus;                   /* where they are (with report; harness/diagnose/locate.h) */
    int reference_status, candidate_status;
    char failure_stage[40];   /* an out-of-process candidate's failure: the stage it failed in */
    char failure_class[64];   /* and its class: "ValueError", "signal 6" ... */
} kvc_fuzz_verdict;

/* 1 when the backend offers at least one stage. */
/* The OpenMP wait policy of this process as libgomp read it at load
 * (OMP_WAIT_POLICY then): "active", "passive" or "default" (unset or
 * another value).  libgomp reads it once, so a fork keeps it; kvcmp fuzz
 * records it per case (case.json meta replay, the coverage). */
const char *kvc_wait_policy_at_load(void);

int kvc_backend_offers_any(const kvc_backend *backend);
/* 1 when the backend implements the stage(s) of the case. */
int kvc_backend_has_stage(const kvc_backend *backend, const kvc_case *c);
/* The generator variants whose cases the backend runs (a history's steps
 * are forwards): `kvcmp fuzz --stage offered`. */
uint64_t kvc_backend_variant_mask(const kvc_backend *backend);
/* salt picks the padding, the canary and whether the metamorphic checks
 * run, so a case index reproduces the same check. */
kvc_fuzz_outcome kvc_fuzz_check_case(const kvc_fuzz_target *target, const kvc_case *c, uint64_t salt, kvc_fuzz_verdict *verdict);
/* The candidate-side conditions kvc_fuzz_check_case draws from salt
 * (before any metamorphic check): for a case whose check crashed. */
void kvc_fuzz_draw_conditions(const kvc_fuzz_target *target, uint64_t salt, kvc_fuzz_conditions *conditions);
/* 0 for a candidate that gets copies of its tensors (a py: candidate's
 * shared memory), where no two tensors can overlap; else 1. */
int kvc_backend_takes_aliased_memory(const kvc_backend *backend);
/* The aliased-buffers check (SPEC.md 8.1) of a case the reference
 * accepts: run with o's options and alias_seed, the candidate must return
 * conflict with every byte of every buffer unchanged.  0 when it does, 1
 * with detail filled when not, -1 when the call has no two tensors to
 * overlap (nothing ran). */
int kvc_fuzz_check_aliased(const kvc_backend *candidate, const kvc_case *c, const kvc_run_options *o, uint64_t alias_seed, char *detail,
                           size_t size);
/* The reference's outputs as NAME.out tensors, to make a case a fixture
 * (nothing is added when the reference rejects the case). */
int kvc_fuzz_add_expected(const kvc_backend *reference, kvc_case *c);

#endif

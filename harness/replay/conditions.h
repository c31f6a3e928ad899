/* The conditions a saved fuzz failure was found under (case.json meta
 * "replay", written by kvcmp fuzz): page padding and its canary, the
 * candidate's thread counts (a thread-check failure lists two), and the
 * seed of a physical-block permutation, the seed of the aliased-buffers
 * check.  kvcmp replay honours them, so a metamorphic or aliasing failure
 * fails its replay too. */
#ifndef KVCMP_REPLAY_CONDITIONS_H
#define KVCMP_REPLAY_CONDITIONS_H

#include "kvcmp/compare.h"

#define KVC_REPLAY_MAX_THREADS 4

typedef struct {
    int present;              /* the case has a "replay" object */
    int64_t page_padding;     /* -1: not recorded */
    int canary;               /* -1: not recorded */
    int threads[KVC_REPLAY_MAX_THREADS];
    int num_threads;
    int permuted;
    uint64_t permutation_seed;
    int aliased;              /* the aliased-buffers check (SPEC.md 8.1) ran */
    uint64_t alias_seed;
    int team_rule;            /* the optimized backend's: 0 not recorded, 1 spinning, 2 sleeping */
    char wait_policy[8];      /* OMP_WAIT_POLICY the case was found under ("active", "passive", "default"), "" not recorded;
                                 libgomp reads it once per process, so replay names a difference and cannot change it */
} kvc_replay_conditions;

/* Reads c->meta_json's "replay"; 0, or -1 with a message naming the field. */
int kvc_replay_conditions_read(const kvc_case *c, kvc_replay_conditions *k, char *error, size_t error_size);
/* Runs the case under the conditions beyond the first run (its other
 * thread counts, its permutation) and compares each run with the expected
 * outputs (policy) and with `first` (exactly).  Returns 1 with detail
 * filled when one differs, else 0. */
int kvc_replay_check_conditions(const kvc_backend *backend, const kvc_case *c, const kvc_run_options *run,
                                const kvc_replay_conditions *k, const kvc_run_result *first, kvc_policy policy, char *detail,
                                size_t size);
/* Appends to detail that the case's recorded aliased-buffers check did
 * not run when the outputs came from copies of the tensors (in_process 0:
 * outside outputs, a py: candidate), where no two can overlap. */
void kvc_replay_note_unrun_alias(const kvc_case *c, int in_process, char *detail, size_t size);
/* " (threads 1,3; permuted pages)" for the replay line, "" without. */
void kvc_replay_conditions_describe(const kvc_replay_conditions *k, char *out, size_t size);

#endif

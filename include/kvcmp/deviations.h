/* The catalogue of deviations and the diagnosis of a failure.
 *
 * A deviation is a bug kernel authors write, named and described in
 * SPEC.md's terms ("bf16-half-away", SPEC 1 bf16: bf16(x) rounds ties
 * away from zero instead of to even).  Each is a switch on the reference
 * (reference/deviations.h): its variant is the reference's own step
 * functions with that one step done the wrong way.
 *
 * Diagnosis runs the variants, alone and in pairs, on a failing case and
 * names those whose outputs equal the candidate's bytes exactly: the
 * fuzzer's signatures, replay's FAIL lines and the reports say which
 * line of a kernel is wrong, not only which bytes differ. */
#ifndef KVCMP_DEVIATIONS_H
#define KVCMP_DEVIATIONS_H

#include "kvcmp.h"
#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deviations are numbered 0 .. count-1; out-of-range indices give NULL. */
int kvc_deviation_count(void);
const char *kvc_deviation_name(int index);          /* "bf16-half-away" */
const char *kvc_deviation_spec(int index);          /* "SPEC 1 bf16" */
const char *kvc_deviation_description(int index);   /* one sentence */
int kvc_deviation_find(const char *name);           /* -1 if none */

/* The reference with deviation `index` (a candidate such as
 * `--candidate deviation:bf16-half-away`, kvc_backend_by_name). */
const kvc_backend *kvc_deviation_backend(int index);

/* Turns deviations first and second (-1: none) on for the reference's
 * calls on this thread, until the next call; previous (may be NULL)
 * receives the pair that was active.  (-1, -1) is the contract. */
void kvc_deviation_activate(int first, int second, int previous[2]);

/* Runs case c on the reference with deviations first and second (-1:
 * none) active; as kvc_run_case. */
int kvc_deviation_run_case(int first, int second, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result);

#define KVC_DIAGNOSIS_MAX 8

typedef struct {
    int count;                            /* explanations found */
    int first[KVC_DIAGNOSIS_MAX];         /* deviation indices of explanation i */
    int second[KVC_DIAGNOSIS_MAX];        /* -1 for a single deviation */
    int singles_run, pairs_run;
    int out_of_time;                      /* pairs were left untried */
} kvc_diagnosis;

/* Which deviations explain `candidate`, the candidate's run of case c
 * under `options`: every single one whose variant gives the same status
 * and, when it ran, the same output bytes, and differs from the contract
 * there (a variant that changes nothing explains nothing); when no single one does, the
 * pairs of those that change c's outputs at all, until `seconds` have
 * passed (<= 0: no limit).  Returns d->count (0: unexplained). */
int kvc_diagnose(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, kvc_diagnosis *d);

/* Explanation i as a name ("bf16-half-away", a pair "a+b") or with its
 * SPEC places ("bf16-half-away (SPEC 1 bf16)"). */
void kvc_diagnosis_name(const kvc_diagnosis *d, int i, char *out, size_t size);
void kvc_diagnosis_text(const kvc_diagnosis *d, int i, char *out, size_t size);

/* kvc_diagnose as one clause of a FAIL line: "explained by: a (SPEC x),
 * b (SPEC y)" or "unexplained by the deviation catalogue" (", pairs not
 * all tried" when the time ran out). */
void kvc_diagnose_clause(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, char *out,
                         size_t size);

#ifdef __cplusplus
}
#endif

#endif

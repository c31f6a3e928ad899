/* The catalogue of deviations and the diagnosis of a failure.
 *
 * A deviation is a bug kernel authors write, named and described in
 * SPEC.md's terms ("bf16-half-away", SPEC 1 bf16: bf16(x) rounds ties
 * away from zero instead of to even).  Its variant is the reference's own
 * stages with that step done the wrong way: the reference's table of
 * steps with the steps it varies replaced (harness/diagnose/deviations.c);
 * the reference itself knows no deviation.
 *
 * Diagnosis runs the variants, alone, in pairs and composed up to four at
 * once, on a failing case and names those whose outputs equal the
 * candidate's bytes exactly: the fuzzer's signatures, replay's FAIL lines
 * and the reports say which line of a kernel is wrong, not only which
 * bytes differ. */
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

/* The most deviations on at once: the members of one explanation. */
#define KVC_DIAGNOSIS_DEPTH 4

/* Turns deviations first and second (-1: none) on for the reference's
 * calls on this thread, until the next call; previous (may be NULL)
 * receives the first two of those that were active.  (-1, -1) is the
 * contract. */
void kvc_deviation_activate(int first, int second, int previous[2]);

/* Turns the deviations ids[0 .. count-1] on as kvc_deviation_activate
 * does: indices outside the catalogue (-1) are skipped, those after the
 * first KVC_DIAGNOSIS_DEPTH valid ones ignored; previous (may be NULL)
 * receives the set that was active, -1 after its last member. */
void kvc_deviation_activate_set(const int *ids, int count, int previous[KVC_DIAGNOSIS_DEPTH]);

/* Runs case c on the reference with deviations first and second (-1:
 * none) active; as kvc_run_case. */
int kvc_deviation_run_case(int first, int second, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result);

/* Runs case c on the reference with the set ids[0 .. count-1] active (as
 * kvc_deviation_activate_set takes it); as kvc_run_case. */
int kvc_deviation_run_case_set(const int *ids, int count, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result);

#define KVC_DIAGNOSIS_MAX 8

typedef struct {
    int count;                                             /* explanations found */
    int members[KVC_DIAGNOSIS_MAX][KVC_DIAGNOSIS_DEPTH];   /* explanation i's deviation indices in
                                                              catalogue order, -1 after its last */
    int singles_run, pairs_run, compositions_run;          /* variants run alone, in pairs, in the
                                                              greedy search's steps */
    int out_of_time;                                       /* pairs or compositions were left untried */
} kvc_diagnosis;

/* Which deviations explain `candidate`, the candidate's run of case c
 * under `options`: every single one whose variant gives the same status
 * and, when it ran, the same output bytes, and differs from the contract
 * there (a variant that changes nothing explains nothing).  When no
 * single one does, the pairs of those that change c's outputs at all;
 * when no pair does either, one composition of up to
 * KVC_DIAGNOSIS_DEPTH, searched greedily: from a changing single, add
 * the deviation that lowers most the number of output bytes where the
 * variant differs from the candidate, until that is 0 or nothing lowers
 * it; the searches start from the single nearest the candidate, then the
 * next nearest, until one explains.  A composition explains only when it
 * matches exactly and each of its members is needed (without any one it
 * no longer matches).  Pairs and compositions are tried until `seconds`
 * have passed (<= 0: no limit).  Returns d->count (0: unexplained). */
int kvc_diagnose(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, kvc_diagnosis *d);

/* Explanation i as a name ("bf16-half-away", a composition "a+b+c") or
 * with its SPEC places ("bf16-half-away (SPEC 1 bf16)", "a (SPEC x) +
 * b (SPEC y)"). */
void kvc_diagnosis_name(const kvc_diagnosis *d, int i, char *out, size_t size);
void kvc_diagnosis_text(const kvc_diagnosis *d, int i, char *out, size_t size);

/* kvc_diagnose as one clause of a FAIL line: "explained by: a (SPEC x),
 * b (SPEC y)" or "unexplained by the deviation catalogue" (", out of
 * time: compositions not all tried" when the time ran out). */
void kvc_diagnose_clause(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, char *out,
                         size_t size);

/* The same for a case a campaign saved (its case.json meta "diagnosis",
 * the signature's final diagnosis) and replayed with the campaign's
 * candidate (meta "candidate" equal to `candidate_name`): only what the
 * campaign proved names the case, "explained by: a (SPEC x); proven by
 * the campaign on F failing and P passing cases", and a name that fits
 * this case alone but that the campaign refuted is said so
 * ("unexplained by the deviation catalogue (as the campaign found on F
 * failing cases); fits this case alone: b (SPEC y), refuted on the
 * others").  Any other case: kvc_diagnose_clause. */
void kvc_diagnose_clause_proven(const kvc_case *c, const char *candidate_name, const kvc_run_options *options,
                                const kvc_run_result *candidate, double seconds, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif

/* The parts of the diagnosis (harness/diagnose/diagnose.c) that its
 * tests take on their own. */
#ifndef KVCMP_HARNESS_DIAGNOSE_H
#define KVCMP_HARNESS_DIAGNOSE_H

#include "kvcmp/deviations.h"

/* The position in set[0 .. size-1] (size at most KVC_DIAGNOSIS_DEPTH) of
 * the first deviation without which the others still give the
 * candidate's status and bytes on case c; -1 when each one is needed.
 * A composition explains only with -1. */
int kvc_diagnose_unneeded_member(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, const int *set,
                                 int size);

/* Whether the deviations set[0 .. size-1], planted alone, give `want`'s
 * status and, when it ran, its exact output bytes on case c: a claim
 * checked on one more case (want: the candidate's run of a failing case,
 * or the contract's of a case the candidate passed). */
int kvc_explanation_holds(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *want, const int *set, int size);

/* The deviation indices of an explanation's name ("a" or "a+b+c") into
 * set (KVC_DIAGNOSIS_DEPTH of them at most); their number, or -1 for a
 * name outside the catalogue. */
int kvc_explanation_parse(const char *name, int set[KVC_DIAGNOSIS_DEPTH]);

#endif

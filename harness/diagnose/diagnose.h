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

#endif

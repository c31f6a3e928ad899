/* The optimized backend (OpenMP), with an AVX-512 and an AVX2 + FMA path
 * built from one source (isa.h).  kvc_optimized_backend_get returns the
 * best path this CPU has, at or below KVCMP_MAX_CPU_ISA (avx512, avx2 or
 * none) when that is set, or NULL with the reason (a CPU with neither, an
 * aarch64 build). */
#ifndef KVCMP_OPTIMIZED_H
#define KVCMP_OPTIMIZED_H

#include <stddef.h>

#include "kvcmp/kvcmp.h"

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size);
/* One path by name ("avx512", "avx2"), whatever KVCMP_MAX_CPU_ISA says;
 * NULL with the feature this CPU lacks. */
const kvc_backend *kvc_optimized_backend_for(const char *isa, char *error, size_t error_size);
/* Whether b is one of the optimized paths, and which ISA it runs (NULL
 * for any other backend). */
int kvc_optimized_backend_is(const kvc_backend *b);
const char *kvc_optimized_isa(const kvc_backend *b);
/* 1, with the message, when KVCMP_MAX_CPU_ISA holds a value that names
 * no ISA (a typo must not quietly turn the optimized backend off). */
int kvc_optimized_cap_invalid(char *error, size_t error_size);
/* One line: the path `opt` runs here, and each path this CPU or build
 * lacks with the reason (kvcmp --version prints it). */
void kvc_optimized_describe(char *out, size_t size);

/* Each stage runs on as many of the allowed threads as its work pays
 * for: at least `nanoseconds` of estimated one-thread work per thread
 * (default: 10 us under OMP_WAIT_POLICY=passive, 2 us otherwise; stages.h).  0 uses every allowed thread,
 * as the fuzzer does, so that its 1-vs-N-thread check splits even small
 * cases over the threads. */
void kvc_optimized_set_thread_work(double nanoseconds);
double kvc_optimized_thread_work(void);
/* The team rule (stages.h): 1 as for spinning threads (OMP_WAIT_POLICY
 * unset or active: light calls split statically, token checks over the
 * team), 0 as for sleeping ones (passive: dynamic chunks, token checks on
 * the calling thread).  The library follows OMP_WAIT_POLICY; the fuzzer
 * draws one per case, so that both kinds of split are fuzzed whatever
 * policy its workers run under. */
void kvc_optimized_set_team_rule(int spinning);
int kvc_optimized_team_rule(void);

#endif

/* The optimized backend's stage functions, one file each (mirroring
 * reference/), collected into the "opt" backend table in backend.c. */
#ifndef KVCMP_OPTIMIZED_STAGES_H
#define KVCMP_OPTIMIZED_STAGES_H

#include <omp.h>

#include "kvcmp/kvcmp.h"

/* Below this much work per thread (in nanoseconds of one thread's time,
 * estimated) another thread costs more than it saves: waking a sleeping
 * thread takes microseconds, tens of them on a virtual machine. */
#define OPT_NANOSECONDS_PER_THREAD 100000.0
/* Estimates of one thread's time, from the bench on a 2-core host. */
#define OPT_NANOSECONDS_PER_EXP 0.6
#define OPT_NANOSECONDS_PER_BYTE 0.05
#define OPT_NANOSECONDS_PER_INSERTED_ROW 120.0

/* The threads that pay off for a call of `nanoseconds` on one thread
 * (every allowed one under kvc_optimized_set_thread_work(0)):
 * at least 1, at most what the caller allows (omp_get_max_threads).
 * The count decides which thread computes a row, never how: every
 * output bit is the same at any count. */
extern double opt_nanoseconds_per_thread;   /* kvc_optimized_set_thread_work */
static inline int opt_threads_for(double nanoseconds) {
    int allowed = omp_get_max_threads();
    if (opt_nanoseconds_per_thread <= 0) return allowed;
    double useful = nanoseconds / opt_nanoseconds_per_thread;
    return useful < 1 ? 1 : useful < allowed ? (int)useful : allowed;
}

int opt_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err);
int opt_v4_compress(const kvc_v4_compress_args *a, kvc_error *err);
int opt_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err);
int opt_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err);
int opt_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err);

#endif

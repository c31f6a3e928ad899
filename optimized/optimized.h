/* The AVX-512 + OpenMP backend.  kvc_optimized_backend_get returns NULL
 * (with the reason) on a machine without AVX-512F/BW/VL. */
#ifndef KVCMP_OPTIMIZED_H
#define KVCMP_OPTIMIZED_H

#include <stddef.h>

#include "kvcmp/kvcmp.h"

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size);

/* Each stage runs on as many of the allowed threads as its work pays
 * for: at least `nanoseconds` of estimated one-thread work per thread
 * (default: 10 us under OMP_WAIT_POLICY=passive, 2 us otherwise; stages.h).  0 uses every allowed thread,
 * as the fuzzer does, so that its 1-vs-N-thread check splits even small
 * cases over the threads. */
void kvc_optimized_set_thread_work(double nanoseconds);
double kvc_optimized_thread_work(void);

#endif

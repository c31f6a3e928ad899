/* Which GPU each worker of a campaign sees.  With several NVIDIA GPUs
 * visible (CUDA_VISIBLE_DEVICES, else /proc/driver/nvidia/gpus), job j's
 * worker sees only the (j mod N)-th, so a Python candidate's "cuda" is
 * that device and a fault on it costs that worker alone. */
#ifndef KVCMP_HARNESS_FUZZ_GPUS_H
#define KVCMP_HARNESS_FUZZ_GPUS_H

#include <stddef.h>

/* The device job `job` sees, as CUDA_VISIBLE_DEVICES names it, into out;
 * 0 when fewer than two GPUs are visible (out is then ""). */
int kvc_gpu_for_job(int job, char *out, size_t size);
/* In a worker: CUDA_VISIBLE_DEVICES narrowed to that device. */
void kvc_spread_over_gpus(int job);

#endif

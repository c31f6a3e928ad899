/* What one ISA's build of the kernels exports: the stage table and the
 * array forms of its vector math (vector_arrays.h), under one name per
 * ISA (opt_avx512_kit, opt_avx2_kit; kit.c, compiled with each).  Only
 * backend.c, compiled for the baseline ISA, reads them, after asking the
 * CPU. */
#ifndef KVCMP_OPTIMIZED_KIT_H
#define KVCMP_OPTIMIZED_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "kvcmp/kvcmp.h"

typedef struct {
    const char *isa;      /* "avx512", "avx2" */
    kvc_backend backend;  /* named "opt (ISA)" */
    void (*exp_array)(const float *x, float *y, int64_t n);
    void (*exp_in_range_array)(const float *x, float *y, int64_t n);
    void (*bf16_array)(const float *x, uint16_t *y, int64_t n);
    void (*fp8_array)(const float *x, uint8_t *y, int64_t n);
    void (*fp8_in_range_array)(const float *x, uint8_t *y, int64_t n);
    void (*fp8_scaled_bf16_array)(const uint16_t *z, int scale_exp, uint8_t *codes, uint8_t *below_normal, int64_t n);
    uint8_t (*quantize_bf16_block_ue8m0)(const uint16_t *z, uint8_t *codes);
    uint64_t (*stream_read)(const void *data, size_t bytes);
    void (*stream_copy)(void *destination, const void *source, size_t bytes);
    void (*stream_write)(void *destination, size_t bytes, int non_temporal);
    float (*sum_of_squares)(const float *values, int count);
} opt_kit;

/* Which kits are linked: both on x86-64; a plug-in built from one ISA's
 * kernels (an optimized mutant, mk/fuzz.mk) turns the other off with
 * -DOPT_HAVE_AVX512=0 or -DOPT_HAVE_AVX2=0. */
#if !defined(__x86_64__)
#undef OPT_HAVE_AVX512
#undef OPT_HAVE_AVX2
#define OPT_HAVE_AVX512 0
#define OPT_HAVE_AVX2 0
#endif
#if !defined(OPT_HAVE_AVX512)
#define OPT_HAVE_AVX512 1
#endif
#if !defined(OPT_HAVE_AVX2)
#define OPT_HAVE_AVX2 1
#endif
extern const opt_kit opt_avx512_kit, opt_avx2_kit;

#endif

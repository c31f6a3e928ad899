/* The instruction set a kernel object is compiled for.  The kernel
 * sources (every C file of optimized/ but backend.c and validate_tokens.c) are
 * compiled once per ISA, each time with this header forced first
 * (-include, see the Makefile):
 * - KVCMP_ISA_AVX512: -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma,
 *   the intrinsics are the compiler's own;
 * - KVCMP_ISA_AVX2: -mavx2 -mfma, the same AVX-512 intrinsics are SIMDe's
 *   (a 512-bit value in two 256-bit halves), plus optimized/simde_more.h
 *   for those Debian's SIMDe lacks.
 * One source, so the two paths cannot drift apart; SIMDe's operations on
 * halves are the same IEEE operations lane by lane (add, mul, div, sqrt,
 * fma with -mfma, min/max, compares, exact conversions), so both compute
 * the same bits, which the differential tests check at every thread
 * count.  Each object's global names carry its ISA (opt_avx2_v4_compress),
 * so both sets link into one library; backend.c chooses one at run time
 * through the kit table each ISA exports (kit.h). */
#ifndef KVCMP_OPTIMIZED_ISA_H
#define KVCMP_OPTIMIZED_ISA_H

#if defined(KVCMP_ISA_AVX512)
#include <immintrin.h>
#define OPT_ISA_NAME(name) opt_avx512_##name
#define OPT_ISA_STRING "avx512"
#elif defined(KVCMP_ISA_AVX2)
/* SIMDe's AVX-512 emulation under the intrinsics' own names. */
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include "optimized/simde_more.h"
#define OPT_ISA_NAME(name) opt_avx2_##name
#define OPT_ISA_STRING "avx2"
#else
#error "optimized kernel sources are compiled once per ISA, with -DKVCMP_ISA_AVX512 or -DKVCMP_ISA_AVX2 (the Makefile's kernel rules)"
#endif

/* The kernels' global names, per ISA. */
#define opt_bf16_array OPT_ISA_NAME(bf16_array)
#define opt_block_magnitude OPT_ISA_NAME(block_magnitude)
#define opt_exp16_any OPT_ISA_NAME(exp16_any)
#define opt_exp16_scalar_lanes OPT_ISA_NAME(exp16_scalar_lanes)
#define opt_exp_array OPT_ISA_NAME(exp_array)
#define opt_exp_in_range_array OPT_ISA_NAME(exp_in_range_array)
#define opt_exp_table_adjusted OPT_ISA_NAME(exp_table_adjusted)
#define opt_fp8_array OPT_ISA_NAME(fp8_array)
#define opt_fp8_in_range_array OPT_ISA_NAME(fp8_in_range_array)
#define opt_fp8_scaled_bf16_array OPT_ISA_NAME(fp8_scaled_bf16_array)
#define opt_quantize_bf16_block_ue8m0 OPT_ISA_NAME(quantize_bf16_block_ue8m0)
#define opt_quantize_block_ue8m0 OPT_ISA_NAME(quantize_block_ue8m0)
#define opt_quantize_codes64 OPT_ISA_NAME(quantize_codes64)
#define opt_rms_norm OPT_ISA_NAME(rms_norm)
#define opt_rope OPT_ISA_NAME(rope)
#define opt_scale_multiplier OPT_ISA_NAME(scale_multiplier)
#define opt_scale_value OPT_ISA_NAME(scale_value)
#define opt_store_bf16x64 OPT_ISA_NAME(store_bf16x64)
#define opt_store_ds_mla OPT_ISA_NAME(store_ds_mla)
#define opt_stream_copy OPT_ISA_NAME(stream_copy)
#define opt_stream_read OPT_ISA_NAME(stream_read)
#define opt_stream_write OPT_ISA_NAME(stream_write)
#define opt_sum_of_squares OPT_ISA_NAME(sum_of_squares)
#define opt_v4_save_partial_states OPT_ISA_NAME(v4_save_partial_states)
#define opt_v4_compress OPT_ISA_NAME(v4_compress)
#define opt_v41_save_compress_norm OPT_ISA_NAME(v41_save_compress_norm)
#define opt_v41_rope_quant_insert OPT_ISA_NAME(v41_rope_quant_insert)
#define opt_v41_rope_plain_insert OPT_ISA_NAME(v41_rope_plain_insert)

#endif

/* Array forms of the optimized vector math, with plain C types, for code
 * compiled without ISA flags (tests, the bench, tools/exhaustive.c): they
 * run on the path kvc_optimized_backend_get chooses (backend.c).  Call
 * them only after it has returned a backend.  Any count n >= 0 works
 * (tails are padded). */
#ifndef KVCMP_OPTIMIZED_VECTOR_ARRAYS_H
#define KVCMP_OPTIMIZED_VECTOR_ARRAYS_H

#include <stddef.h>
#include <stdint.h>

/* y[i] = kvc_expf_cr(x[i]), computed by opt_exp16. */
void opt_exp_array(const float *x, float *y, int64_t n);
/* y[i] = kvc_bf16_from_f32(x[i]), computed 16 lanes at a time. */
void opt_bf16_array(const float *x, uint16_t *y, int64_t n);
/* y[i] = kvc_fp8_from_f32(x[i]), computed 16 lanes at a time. */
void opt_fp8_array(const float *x, uint8_t *y, int64_t n);
/* The same by the shortcut for values in [-448, 448] (opt_fp8_lanes_in_range):
 * y[i] = kvc_fp8_from_f32(x[i]) when |x[i]| <= 448; anything for others. */
void opt_fp8_in_range_array(const float *x, uint8_t *y, int64_t n);
/* opt_fp8_codes_scaled_bf16x32 over an array: codes[i] and below_normal[i]
 * (0 or 1) for z[i] * 2^-scale_exp; see vector_math.h for when it holds. */
void opt_fp8_scaled_bf16_array(const uint16_t *z, int scale_exp, uint8_t *codes, uint8_t *below_normal, int64_t n);
/* Step 9 for one block of 64 bf16 values given as bits: the same codes
 * and scale byte as opt_quantize_block_ue8m0 on the widened values.  The
 * usual block (finite scale, no value below the fp8 normal range) is
 * quantised 32 lanes at a time on the bf16 bits; any other block goes
 * through the float path. */
uint8_t opt_quantize_bf16_block_ue8m0(const uint16_t *z, uint8_t *codes);
/* The bench's bandwidth roofline: a streaming read (returns the sum of
 * the 64-bit words) and a streaming copy (no read of the destination),
 * both with software prefetch. */
uint64_t opt_stream_read(const void *data, size_t bytes);
void opt_stream_copy(void *destination, const void *source, size_t bytes);
/* Writes `bytes` bytes of a constant pattern, by streaming stores when
 * non_temporal is set (and the destination 64-byte aligned), else by
 * ordinary stores: the bench keeps whichever is faster. */
void opt_stream_write(void *destination, size_t bytes, int non_temporal);
/* y[i] = kvc_expf_cr(x[i]) by the fast path without its range test
 * (opt_exp16_in_range), for every x[i] in [-87, 88]; n a multiple of 16.
 * The cheapest exact exp the backend has: the bench's compute bound. */
void opt_exp_in_range_array(const float *x, float *y, int64_t n);
/* Step 4 on values[0..count), count a multiple of 16. */
float opt_sum_of_squares(const float *values, int count);

#endif

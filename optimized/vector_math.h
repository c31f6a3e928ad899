/* AVX-512 building blocks of the optimized backend: the correctly rounded
 * vector exp, NaN-propagating maxima, the canonical sum of squares, RNE
 * bf16 / fp8 e4m3fn conversions and the UE8M0 block quantisation.  Each
 * one returns exactly the bits of its scalar counterpart in
 * common/formats.c or reference/steps.c, for every input. */
#ifndef KVCMP_OPTIMIZED_VECTOR_MATH_H
#define KVCMP_OPTIMIZED_VECTOR_MATH_H

#include "optimized/isa.h"
#include <stdint.h>

/* Forced inline: a vector passed to or returned from a call goes through
 * memory (a 64-byte value; in the AVX2 build a 64-byte union), which cost
 * the AVX2 build's hot loops more than their arithmetic.  Inlining moves
 * no operation, so the bits are the same. */
#define OPT_INLINE static inline __attribute__((always_inline))

#include "kvcmp/formats.h"
#include "optimized/vector_arrays.h"

/* ---- 16 lanes of kvc_expf_cr (error bounds: vector_math.c) ---- */

#define OPT_LN2_OVER_16_HI 0x1.62e42fefa39efp-5
#define OPT_SIXTEEN_OVER_LN2 0x1.71547652b82fep+4
/* 1.5 * 2^52: adding it rounds to an integer kept in the low mantissa bits. */
#define OPT_ROUNDING_SHIFTER 0x1.8p52
/* Undecided when the dropped bits are within this many double ulps of a
 * midpoint (a power of two); the fast path's error is below 23,500 ulps. */
#define OPT_EXP_FAST_MARGIN 32768

extern const int64_t opt_exp_table_adjusted[16];
/* Any input: clamped, band-tested (the slow path). */
__m512 opt_exp16_any(__m512 x);
/* Recompute the given lanes with the scalar kvc_expf_cr. */
__m512 opt_exp16_scalar_lanes(__m512 x, __m512 result, __mmask16 lanes);

/* exp of 8 lanes in [-87, 88] in double, relative error < 2^-38.48. */
OPT_INLINE __m512d opt_exp_fast_double8(__m512d x) {
    /* t = x * 16/ln2 + 1.5 * 2^52, one rounding: the low bits of t hold n,
     * the integer nearest to x * 16/ln2, in two's complement. */
    __m512d shifted = _mm512_fmadd_pd(x, _mm512_set1_pd(OPT_SIXTEEN_OVER_LN2), _mm512_set1_pd(OPT_ROUNDING_SHIFTER));
    __m512d n = _mm512_sub_pd(shifted, _mm512_set1_pd(OPT_ROUNDING_SHIFTER));
    __m512i n_bits = _mm512_castpd_si512(shifted);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(OPT_LN2_OVER_16_HI), x);
    /* Degree 4, fitted to exp on |r| <= 1.0001 * ln2/32 (coefficients in
     * vector_math.c's comment): one fma fewer than the Taylor degree 5. */
    __m512d p = _mm512_set1_pd(0x1.55570abe5482fp-5);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.5557e5734c36ap-3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.fffffffe5b9aep-2));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.fffffffb12cf8p-1));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    /* The permute reads the low 4 bits of each index, n & 15.  t << 48
     * holds n & 15 in bits 48..51 (cancelled by the adjusted table) and
     * floor(n / 16) modulo 2^12 in the exponent field: the 64-bit add
     * gives exactly 2^(n >> 4) * 2^((n & 15) / 16) rounded. */
    __m512i table_low = _mm512_loadu_si512(opt_exp_table_adjusted), table_high = _mm512_loadu_si512(opt_exp_table_adjusted + 8);
    __m512i scale = _mm512_add_epi64(_mm512_permutex2var_epi64(table_low, n_bits, table_high), _mm512_slli_epi64(n_bits, 48));
    return _mm512_mul_pd(_mm512_castsi512_pd(scale), p);
}

/* 8 lanes in [-87, 88]: the rounded float, and the lanes whose dropped
 * bits m are within OPT_EXP_FAST_MARGIN double ulps of a midpoint. */
OPT_INLINE __m256 opt_exp_fast_float8(__m256 x, __mmask8 *undecided) {
    __m512d y = opt_exp_fast_double8(_mm512_cvtps_pd(x));
    /* m + MARGIN - 2^28 (mod 2^29) is below 2 * MARGIN, a power of two,
     * exactly when m - 2^28 is in [-MARGIN, MARGIN): one bit test finds
     * those lanes (bits above the low 29 of y do not reach them). */
    __m512i distance = _mm512_add_epi64(_mm512_castpd_si512(y), _mm512_set1_epi64(OPT_EXP_FAST_MARGIN - (1LL << 28)));
    *undecided = _mm512_testn_epi64_mask(distance, _mm512_set1_epi64((1LL << 29) - 2 * OPT_EXP_FAST_MARGIN));
    return _mm512_cvtpd_ps(y);
}

/* 16 lanes of kvc_expf_cr, every lane known to be in [-87, 88]: the fast
 * path alone. */
OPT_INLINE __m512 opt_exp16_in_range(__m512 x) {
    __mmask8 undecided_low, undecided_high;
    __m256 low = opt_exp_fast_float8(_mm512_castps512_ps256(x), &undecided_low);
    __m256 high = opt_exp_fast_float8(_mm512_extractf32x8_ps(x, 1), &undecided_high);
    __m512 result = _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
    __mmask16 undecided = (__mmask16)((unsigned)undecided_high << 8 | undecided_low);
    if (__builtin_expect(undecided != 0, 0)) return opt_exp16_scalar_lanes(x, result, undecided);
    return result;
}

/* 16 lanes of kvc_expf_cr: the fast path when every lane is in [-87, 88]
 * (softmax weights exp(s - m) nearly always are), else opt_exp16_any. */
OPT_INLINE __m512 opt_exp16(__m512 x) {
    /* Ordered compares: a NaN lane is out of range. */
    __mmask16 in_range = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ) &
                         _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_LE_OQ);
    if (__builtin_expect(in_range != 0xFFFF, 0)) return opt_exp16_any(x);
    return opt_exp16_in_range(x);
}

/* Every stage ends with this: it clears the upper halves of the vector
 * registers, so that scalar SSE code running after the stage (the
 * reference, libm) does not pay for a dirty AVX-512 state; measured: the
 * reference's decode forward took 92 ms instead of 4 ms after an
 * optimized call without it.  It changes no data. */
OPT_INLINE void opt_leave_vector_code(void) { _mm256_zeroupper(); }

/* Fetch [data, data + bytes) towards L1 ahead of use: the hardware
 * prefetcher of this class of machine (a VM) was measured to follow
 * streams poorly, and a prefetch never faults, so it may run past the end
 * of an array. */
OPT_INLINE void opt_prefetch_bytes(const void *data, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) _mm_prefetch((const char *)data + i, _MM_HINT_T0);
}

/* kvc_max_nan per lane: NaN (canonical) where either input is NaN. */
OPT_INLINE __m512 opt_max_nan16(__m512 a, __m512 b) {
    __mmask16 either_nan = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
    __m512 larger = _mm512_max_ps(a, b);
    return _mm512_mask_blend_ps(either_nan, larger, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

/* Step 4 (the canonical sum of squares) is opt_sum_of_squares, declared
 * in vector_arrays.h with the other plain-C entry points. */

/* Steps 4-6: normed[d] = (pooled[d] * inv) * weight[d]. */
void opt_rms_norm(const float *pooled, const float *weight, int head_dim, float eps, float *normed);

/* fp32 -> bf16 (kvc_bf16_from_f32) for 16 lanes. */
OPT_INLINE __m256i opt_bf16_from_f32x16(__m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
    /* Round to nearest even on the 16 dropped bits, as the scalar does:
     * the same integer add, so the same carries. */
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    rounded = _mm512_srli_epi32(rounded, 16);
    rounded = _mm512_mask_blend_epi32(is_nan, rounded, _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(rounded);
}

/* bf16 -> fp32, exact. */
OPT_INLINE __m512 opt_f32_from_bf16x16(__m256i bf16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}

/* fp32 -> bf16 -> fp32: the value a bf16 store would hold. */
OPT_INLINE __m512 opt_round_to_bf16x16(__m512 x) {
    return opt_f32_from_bf16x16(opt_bf16_from_f32x16(x));
}

/* kvc_clamp_fp8_range per lane: min/max take their second operand when
 * one is NaN, so putting x second lets NaN through like the scalar. */
OPT_INLINE __m512 opt_clamp_fp8_range16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(448.0f), x);
    return _mm512_max_ps(_mm512_set1_ps(-448.0f), x);
}

/* The fp8 e4m3fn code of |x| (bits of a non-negative float): the same
 * integer round-half-even as the scalar kvc_fp8_from_f32.  0x7F and above
 * mean NaN, infinity or a magnitude that rounds past 448. */
OPT_INLINE __m512i opt_fp8_magnitude_code(__m512i magnitude) {
    /* Normal fp8 range (|x| >= 2^-6): keep 3 fraction bits; a carry bumps
     * the exponent. */
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(magnitude, 20), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(magnitude, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFFF)));
    __m512i normal_code = _mm512_sub_epi32(_mm512_srli_epi32(rounded, 20), _mm512_set1_epi32(120 << 3));
    /* Subnormal range: 2^14 + |x| is rounded (RNE) to a multiple of 2^-9,
     * the fp8 quantum there, which is the scalar's nearbyint(|x| * 2^9). */
    __m512 shifted = _mm512_add_ps(_mm512_castsi512_ps(magnitude), _mm512_set1_ps(16384.0f));
    __m512i subnormal_code = _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x46800000));
    __mmask16 is_subnormal = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(0x3C800000));
    return _mm512_mask_blend_epi32(is_subnormal, normal_code, subnormal_code);
}

/* The sign bit of x moved to bit 7 of each 32-bit lane. */
OPT_INLINE __m512i opt_fp8_sign(__m512i bits) {
    return _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
}

/* fp32 -> fp8 e4m3fn (kvc_fp8_from_f32) for 16 lanes, one code per
 * 32-bit lane (0..255).  Inline: as an out-of-line function returning a
 * vector it left the upper halves of the zmm registers dirty for its
 * callers (GCC emits no vzeroupper there). */
OPT_INLINE __m512i opt_fp8_lanes_from_f32x16(__m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i code = opt_fp8_magnitude_code(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
    /* NaN, infinity and past 448 all become the unsigned NaN byte, like
     * the scalar. */
    __mmask16 is_nan = _mm512_cmpge_epu32_mask(code, _mm512_set1_epi32(0x7F));
    return _mm512_mask_blend_epi32(is_nan, _mm512_or_si512(code, opt_fp8_sign(bits)), _mm512_set1_epi32(0x7F));
}

/* The same for lanes known to be in [-448, 448] (no NaN): there the code
 * is below 0x7F, so the NaN blend of the general case would change
 * nothing and is left out. */
OPT_INLINE __m512i opt_fp8_lanes_in_range(__m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i code = opt_fp8_magnitude_code(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
    return _mm512_or_si512(code, opt_fp8_sign(bits));
}

/* The same 16 codes as bytes. */
OPT_INLINE __m128i opt_fp8_from_f32x16(__m512 x) { return _mm512_cvtepi32_epi8(opt_fp8_lanes_from_f32x16(x)); }

/* 4 x 16 codes (codes 0-15, 16-31, 32-47, 48-63, each 0..255 in a 32-bit
 * lane) -> 64 bytes in order.  The saturating packs keep every value (all
 * fit) but interleave the 128-bit lanes; one permute puts the dwords back.
 * One store instead of four narrowing vpmovdb stores, which were the
 * costliest part of the quantiser. */
OPT_INLINE __m512i opt_pack_bytes64(__m512i codes0, __m512i codes16, __m512i codes32, __m512i codes48) {
    __m512i words_low = _mm512_packus_epi32(codes0, codes16);
    __m512i words_high = _mm512_packus_epi32(codes32, codes48);
    __m512i bytes = _mm512_packus_epi16(words_low, words_high);
    /* dword k of 128-bit lane L holds codes (16 k + 4 L .. 16 k + 4 L + 3). */
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), bytes);
}

/* 64 codes fp8(clamp(y * 2^-e)): 64 values of one block (64 or 128
 * values) whose scale 2^e was computed from that block's magnitude, as in
 * step 9; the shortcut for finite scales relies on it. */
void opt_quantize_codes64(const float *y, kvc_block_scale scale, uint8_t *codes);

/* Step 9 for one 64-wide block of widened bf16 values: 64 codes, and the
 * UE8M0 scale byte is returned (same as ref_quantize_block_ue8m0). */
uint8_t opt_quantize_block_ue8m0(const float *y, uint8_t *codes);

/* fp8 codes of 32 bf16 values z (bits, 16-bit lanes) times 2^-e, for a
 * block with the finite scale 2^e (so |z * 2^-e| <= 448, see
 * quantize16_in_range), one code per 16-bit lane.  z * 2^-e is exact
 * when it is a normal float, and its fp32 bits are z's with e subtracted
 * from the exponent field: the scalar's integer rounding on those bits
 * drops 20 bits of which the low 16 are zero, which is the same rounding
 * as dropping 4 bits of the 16-bit pattern.  Lanes below the fp8 normal
 * range (|z * 2^-e| < 2^-6, fp32 subnormals included) are not handled:
 * they are set in *below_normal and their codes are meaningless. */
OPT_INLINE __m512i opt_fp8_codes_scaled_bf16x32(__m512i z, int scale_exp, __mmask32 *below_normal) {
    /* e in [-22, 120] for finite blocks (magnitude in [1e-4, FLT_MAX]),
     * and every lane's scaled exponent field is at most 135 (448): the
     * 16-bit differences below stay within int16. */
    __m512i scaled = _mm512_sub_epi16(_mm512_and_si512(z, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16((short)(scale_exp * 128)));
    *below_normal = _mm512_cmplt_epi16_mask(scaled, _mm512_set1_epi16(121 << 7));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(scaled, 4), _mm512_set1_epi16(1));
    __m512i rounded = _mm512_add_epi16(scaled, _mm512_add_epi16(lsb, _mm512_set1_epi16(7)));
    __m512i code = _mm512_sub_epi16(_mm512_srli_epi16(rounded, 4), _mm512_set1_epi16(120 << 3));
    __m512i sign = _mm512_srli_epi16(_mm512_and_si512(z, _mm512_set1_epi16((short)0x8000)), 8);
    return _mm512_or_si512(code, sign);
}

/* opt_quantize_bf16_block_ue8m0 (step 9 on bf16 bits) is declared in
 * vector_arrays.h, where the tests can reach it. */

/* kvc_scale_multiplier (2^-e) and kvc_scale_value (2^e), same bits. */
float opt_scale_multiplier(kvc_block_scale s);
float opt_scale_value(kvc_block_scale s);

/* max(1e-4, max |values[0..count)|) with NaN propagating (canonical NaN);
 * count a multiple of 16. */
float opt_block_magnitude(const float *values, int count);

/* Step 7 on the 64 RoPE dims (in place), one cos_sin row. */
void opt_rope(float *rope_dims, const float *cos_sin_row);

/* Store 64 fp32 values as little-endian bf16 at an unaligned address. */
void opt_store_bf16x64(uint8_t *destination, const float *values);

/* D = 512 store (steps 8-9), same contract as ref_store_ds_mla, with the
 * 448 NoPE values given as bf16 bits. */
void opt_store_ds_mla(const uint16_t *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales);

#endif

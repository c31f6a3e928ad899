/* The AVX-512 intrinsics that the kernels use and that Debian 12's SIMDe
 * (0.7.4) does not provide, written for the AVX2 + FMA build the same way
 * SIMDe writes the others: a 512-bit value is two 256-bit halves, and each
 * operation is the AVX2 instruction on each half.  Included only by
 * optimized/isa.h, after SIMDe, when KVCMP_ISA_AVX2 is defined.
 *
 * Every function here is exact (integer moves, compares, conversions that
 * are exact or round like the AVX-512 instruction under the same MXCSR), so
 * the AVX2 build computes the bits of the AVX-512 one.  Masked loads and
 * stores touch only the selected elements, as the AVX-512 ones do: a tail
 * never reads or writes past its array.  Two of SIMDe's own functions are
 * replaced (permutex2var_epi64 and permutexvar_epi32, scalar loops in
 * SIMDe 0.7.4) by AVX2 permutes, because the vector exp looks up its table
 * with the first on every call; they select the same elements. */
#ifndef KVCMP_OPTIMIZED_SIMDE_MORE_H
#define KVCMP_OPTIMIZED_SIMDE_MORE_H

#include <immintrin.h>
#include <stdint.h>

#define OPT_HALVES_PS(v) (simde__m512_to_private(v).m256)
#define OPT_HALVES_PD(v) (simde__m512d_to_private(v).m256d)
#define OPT_HALVES_SI(v) (simde__m512i_to_private(v).m256i)

static inline __attribute__((always_inline)) simde__m512 opt_ps_from_halves(__m256 low, __m256 high) {
    simde__m512_private r;
    r.m256[0] = low, r.m256[1] = high;
    return simde__m512_from_private(r);
}
static inline __attribute__((always_inline)) simde__m512d opt_pd_from_halves(__m256d low, __m256d high) {
    simde__m512d_private r;
    r.m256d[0] = low, r.m256d[1] = high;
    return simde__m512d_from_private(r);
}
static inline __attribute__((always_inline)) simde__m512i opt_si_from_halves(__m256i low, __m256i high) {
    simde__m512i_private r;
    r.m256i[0] = low, r.m256i[1] = high;
    return simde__m512i_from_private(r);
}

/* ---- compares to masks, masks to vectors ----
 * SIMDe 0.7.4 turns every AVX-512 mask into and out of a vector one lane
 * at a time; these use movemask and a compare against the lane bits
 * instead, selecting the same lanes. */

static inline __attribute__((always_inline)) uint16_t opt_mm512_cmp_ps_mask_halves(__m256 low, __m256 high) {
    return (uint16_t)(_mm256_movemask_ps(low) | _mm256_movemask_ps(high) << 8);
}
#define opt_mm512_cmp_ps_mask(a, b, predicate)                                                                             \
    opt_mm512_cmp_ps_mask_halves(_mm256_cmp_ps(OPT_HALVES_PS(a)[0], OPT_HALVES_PS(b)[0], (predicate)),                     \
                                 _mm256_cmp_ps(OPT_HALVES_PS(a)[1], OPT_HALVES_PS(b)[1], (predicate)))
/* Lane i of the result is all ones when bit (first + i) of k is set, for
 * 8 lanes of 32 bits. */
static inline __attribute__((always_inline)) __m256i opt_lanes_from_mask8(unsigned k) {
    __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(k & 0xFF)), bits), bits);
}
static inline __attribute__((always_inline)) simde__m512 opt_mm512_mask_blend_ps(uint16_t k, simde__m512 a, simde__m512 b) {
    return opt_ps_from_halves(_mm256_blendv_ps(OPT_HALVES_PS(a)[0], OPT_HALVES_PS(b)[0], _mm256_castsi256_ps(opt_lanes_from_mask8(k))),
                              _mm256_blendv_ps(OPT_HALVES_PS(a)[1], OPT_HALVES_PS(b)[1], _mm256_castsi256_ps(opt_lanes_from_mask8(k >> 8u))));
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_mask_blend_epi32(uint16_t k, simde__m512i a, simde__m512i b) {
    return opt_si_from_halves(_mm256_blendv_epi8(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(b)[0], opt_lanes_from_mask8(k)),
                              _mm256_blendv_epi8(OPT_HALVES_SI(a)[1], OPT_HALVES_SI(b)[1], opt_lanes_from_mask8(k >> 8u)));
}
/* 16 lanes of 16 bits from 16 bits of k. */
static inline __attribute__((always_inline)) __m256i opt_lanes_from_mask16(unsigned k) {
    __m256i bits = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, (short)32768);
    __m256i spread = _mm256_set1_epi16((short)(k & 0xFFFF));
    return _mm256_cmpeq_epi16(_mm256_and_si256(spread, bits), bits);
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_mask_blend_epi16(uint32_t k, simde__m512i a, simde__m512i b) {
    return opt_si_from_halves(_mm256_blendv_epi8(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(b)[0], opt_lanes_from_mask16(k)),
                              _mm256_blendv_epi8(OPT_HALVES_SI(a)[1], OPT_HALVES_SI(b)[1], opt_lanes_from_mask16(k >> 16)));
}
/* Lanes (of 64 bits) where a & b is zero. */
static inline __attribute__((always_inline)) uint8_t opt_mm512_testn_epi64_mask(simde__m512i a, simde__m512i b) {
    __m256i zero = _mm256_setzero_si256();
    __m256i low = _mm256_cmpeq_epi64(_mm256_and_si256(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(b)[0]), zero);
    __m256i high = _mm256_cmpeq_epi64(_mm256_and_si256(OPT_HALVES_SI(a)[1], OPT_HALVES_SI(b)[1]), zero);
    return (uint8_t)(_mm256_movemask_pd(_mm256_castsi256_pd(low)) | _mm256_movemask_pd(_mm256_castsi256_pd(high)) << 4);
}

static inline __attribute__((always_inline)) uint8_t opt_mm256_cmpeq_epi32_mask(__m256i a, __m256i b) {
    return (uint8_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)));
}
/* Unsigned and signed "greater than" on halves, as bit masks: unsigned
 * order is signed order after flipping the sign bits. */
static inline __attribute__((always_inline)) uint16_t opt_mask_from_epi32_halves(__m256i low, __m256i high) {
    return (uint16_t)(_mm256_movemask_ps(_mm256_castsi256_ps(low)) | _mm256_movemask_ps(_mm256_castsi256_ps(high)) << 8);
}
static inline __attribute__((always_inline)) uint16_t opt_mm512_cmpgt_epu32_mask(simde__m512i a, simde__m512i b) {
    __m256i flip = _mm256_set1_epi32(INT32_MIN);
    return opt_mask_from_epi32_halves(
        _mm256_cmpgt_epi32(_mm256_xor_si256(OPT_HALVES_SI(a)[0], flip), _mm256_xor_si256(OPT_HALVES_SI(b)[0], flip)),
        _mm256_cmpgt_epi32(_mm256_xor_si256(OPT_HALVES_SI(a)[1], flip), _mm256_xor_si256(OPT_HALVES_SI(b)[1], flip)));
}
static inline __attribute__((always_inline)) uint16_t opt_mm512_cmplt_epu32_mask(simde__m512i a, simde__m512i b) { return opt_mm512_cmpgt_epu32_mask(b, a); }
static inline __attribute__((always_inline)) uint16_t opt_mm512_cmpge_epu32_mask(simde__m512i a, simde__m512i b) { return (uint16_t)~opt_mm512_cmpgt_epu32_mask(b, a); }
/* 16-bit lanes: the compare's 0/-1 words packed to bytes (saturation
 * keeps 0 and -1), whose sign bits movemask collects; the pack works per
 * 128-bit lane, so the bytes come out in the order low half's lane 0, high
 * half's lane 0, low 1, high 1, and a permute of quadwords restores it. */
static inline __attribute__((always_inline)) uint32_t opt_mask_from_epi16_halves(__m256i low, __m256i high) {
    __m256i bytes = _mm256_permute4x64_epi64(_mm256_packs_epi16(low, high), 0xD8);
    return (uint32_t)_mm256_movemask_epi8(bytes);
}
static inline __attribute__((always_inline)) uint32_t opt_mm512_cmplt_epi16_mask(simde__m512i a, simde__m512i b) {
    return opt_mask_from_epi16_halves(_mm256_cmpgt_epi16(OPT_HALVES_SI(b)[0], OPT_HALVES_SI(a)[0]),
                                      _mm256_cmpgt_epi16(OPT_HALVES_SI(b)[1], OPT_HALVES_SI(a)[1]));
}
static inline __attribute__((always_inline)) uint32_t opt_mm512_cmpgt_epu16_mask(simde__m512i a, simde__m512i b) {
    __m256i flip = _mm256_set1_epi16(INT16_MIN);
    return opt_mask_from_epi16_halves(
        _mm256_cmpgt_epi16(_mm256_xor_si256(OPT_HALVES_SI(a)[0], flip), _mm256_xor_si256(OPT_HALVES_SI(b)[0], flip)),
        _mm256_cmpgt_epi16(_mm256_xor_si256(OPT_HALVES_SI(a)[1], flip), _mm256_xor_si256(OPT_HALVES_SI(b)[1], flip)));
}

/* ---- conversions ---- */

/* Truncating narrowings (vpmovdw, vpmovdb): keep the low bits of each lane. */
static inline __attribute__((always_inline)) __m256i opt_mm512_cvtepi32_epi16(simde__m512i a) {
    __m256i keep = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                    0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i low = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(OPT_HALVES_SI(a)[0], keep), 0x08);
    __m256i high = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(OPT_HALVES_SI(a)[1], keep), 0x80);
    return _mm256_blend_epi32(low, high, 0xF0);
}
static inline __attribute__((always_inline)) __m128i opt_mm512_cvtepi32_epi8(simde__m512i a) {
    __m256i keep = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                    0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i low = _mm256_shuffle_epi8(OPT_HALVES_SI(a)[0], keep);   /* bytes 0-3, 16-19 */
    __m256i high = _mm256_shuffle_epi8(OPT_HALVES_SI(a)[1], keep);
    __m256i dwords = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
    __m128i l = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(low, dwords));
    __m128i h = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(high, dwords));
    return _mm_unpacklo_epi64(l, h);
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_cvtepu16_epi32(__m256i a) {
    return opt_si_from_halves(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(a)), _mm256_cvtepu16_epi32(_mm256_extracti128_si256(a, 1)));
}
/* float -> double is exact; double -> float rounds under MXCSR, per lane,
 * as vcvtpd2ps does at either width. */
static inline __attribute__((always_inline)) simde__m512d opt_mm512_cvtps_pd(__m256 a) {
    return opt_pd_from_halves(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
}
static inline __attribute__((always_inline)) __m256 opt_mm512_cvtpd_ps(simde__m512d a) {
    return _mm256_set_m128(_mm256_cvtpd_ps(OPT_HALVES_PD(a)[1]), _mm256_cvtpd_ps(OPT_HALVES_PD(a)[0]));
}
static inline __attribute__((always_inline)) __m256 opt_mm512_extractf32x8_ps(simde__m512 a, int index) { return OPT_HALVES_PS(a)[index & 1]; }

/* ---- permutes ---- */

/* 8 quadwords chosen from the 16 of a:b by the low 4 bits of idx.  Each
 * quadword is two dwords: index 2k and 2k + 1 of the 32-bit view. */
static inline __attribute__((always_inline)) __m256i opt_blend_quadwords(__m256i a, __m256i b, __m256i top_bit) {
    return _mm256_castpd_si256(_mm256_blendv_pd(_mm256_castsi256_pd(a), _mm256_castsi256_pd(b), _mm256_castsi256_pd(top_bit)));
}
static inline __attribute__((always_inline)) __m256i opt_permute2_quadwords(__m256i a_low, __m256i a_high, __m256i b_low, __m256i b_high, __m256i idx) {
    __m256i pair = _mm256_slli_epi64(_mm256_and_si256(idx, _mm256_set1_epi64x(7)), 1);
    __m256i dwords = _mm256_or_si256(pair, _mm256_slli_epi64(_mm256_add_epi64(pair, _mm256_set1_epi64x(1)), 32));
    __m256i upper = _mm256_slli_epi64(idx, 61), second = _mm256_slli_epi64(idx, 60); /* bits 2 and 3 to bit 63 */
    __m256i from_a = opt_blend_quadwords(_mm256_permutevar8x32_epi32(a_low, dwords), _mm256_permutevar8x32_epi32(a_high, dwords), upper);
    __m256i from_b = opt_blend_quadwords(_mm256_permutevar8x32_epi32(b_low, dwords), _mm256_permutevar8x32_epi32(b_high, dwords), upper);
    return opt_blend_quadwords(from_a, from_b, second);
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_permutex2var_epi64(simde__m512i a, simde__m512i idx, simde__m512i b) {
    __m256i a_low = OPT_HALVES_SI(a)[0], a_high = OPT_HALVES_SI(a)[1], b_low = OPT_HALVES_SI(b)[0], b_high = OPT_HALVES_SI(b)[1];
    return opt_si_from_halves(opt_permute2_quadwords(a_low, a_high, b_low, b_high, OPT_HALVES_SI(idx)[0]),
                              opt_permute2_quadwords(a_low, a_high, b_low, b_high, OPT_HALVES_SI(idx)[1]));
}
/* 16 dwords of a chosen by the low 4 bits of idx. */
static inline __attribute__((always_inline)) __m256i opt_permute_dwords(__m256i low, __m256i high, __m256i idx) {
    __m256i in_high = _mm256_slli_epi32(idx, 28); /* bit 3 to bit 31 */
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(low, idx)),
                                                _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(high, idx)), _mm256_castsi256_ps(in_high)));
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_permutexvar_epi32(simde__m512i idx, simde__m512i a) {
    __m256i low = OPT_HALVES_SI(a)[0], high = OPT_HALVES_SI(a)[1];
    return opt_si_from_halves(opt_permute_dwords(low, high, OPT_HALVES_SI(idx)[0]), opt_permute_dwords(low, high, OPT_HALVES_SI(idx)[1]));
}

/* ---- integer arithmetic: wrapping, as the instructions wrap ----
 * SIMDe 0.7.4 adds and shifts signed lanes in C, where an overflow or a
 * shifted-out sign is undefined (and the sanitized test build stops on
 * it); the AVX2 instructions on each half wrap like the AVX-512 ones. */
#define OPT_SI_BINARY(name, op)                                                                                            \
    static inline __attribute__((always_inline)) simde__m512i name(simde__m512i a, simde__m512i b) {                         \
        return opt_si_from_halves(op(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(b)[0]), op(OPT_HALVES_SI(a)[1], OPT_HALVES_SI(b)[1])); \
    }
OPT_SI_BINARY(opt_mm512_add_epi16, _mm256_add_epi16)
OPT_SI_BINARY(opt_mm512_sub_epi16, _mm256_sub_epi16)
OPT_SI_BINARY(opt_mm512_add_epi32, _mm256_add_epi32)
OPT_SI_BINARY(opt_mm512_sub_epi32, _mm256_sub_epi32)
OPT_SI_BINARY(opt_mm512_add_epi64, _mm256_add_epi64)
#define OPT_SI_SHIFT(name, op)                                                                                             \
    static inline __attribute__((always_inline)) simde__m512i name(simde__m512i a, unsigned count) {                        \
        return opt_si_from_halves(op(OPT_HALVES_SI(a)[0], (int)count), op(OPT_HALVES_SI(a)[1], (int)count));                \
    }
OPT_SI_SHIFT(opt_mm512_slli_epi32, _mm256_slli_epi32)
OPT_SI_SHIFT(opt_mm512_slli_epi64, _mm256_slli_epi64)
OPT_SI_SHIFT(opt_mm512_srli_epi16, _mm256_srli_epi16)
OPT_SI_SHIFT(opt_mm512_srli_epi32, _mm256_srli_epi32)
OPT_SI_SHIFT(opt_mm512_srli_epi64, _mm256_srli_epi64)

/* ---- reductions ---- */

static inline __attribute__((always_inline)) uint32_t opt_mm512_reduce_max_epu32(simde__m512i a) {
    __m256i m = _mm256_max_epu32(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(a)[1]);
    __m128i q = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    q = _mm_max_epu32(q, _mm_shuffle_epi32(q, 0x4E));
    q = _mm_max_epu32(q, _mm_shuffle_epi32(q, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(q);
}
/* Unsigned 64-bit sums: wrap-around, like the instruction. */
static inline __attribute__((always_inline)) int64_t opt_mm512_reduce_add_epi64(simde__m512i a) {
    __m256i s = _mm256_add_epi64(OPT_HALVES_SI(a)[0], OPT_HALVES_SI(a)[1]);
    __m128i q = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    q = _mm_add_epi64(q, _mm_unpackhi_epi64(q, q));
    return (int64_t)(uint64_t)_mm_cvtsi128_si64(q);
}

/* ---- masked and streaming memory access: only the selected elements ---- */

static inline __attribute__((always_inline)) simde__m512 opt_mm512_maskz_loadu_ps(uint16_t mask, const void *p) {
    float lanes[16] = {0};
    for (int i = 0; i < 16; i++)
        if (mask >> i & 1) lanes[i] = ((const float *)p)[i];
    return simde_mm512_loadu_ps(lanes);
}
static inline __attribute__((always_inline)) simde__m512i opt_mm512_maskz_loadu_epi16(uint32_t mask, const void *p) {
    uint16_t lanes[32] = {0};
    for (int i = 0; i < 32; i++)
        if (mask >> i & 1) lanes[i] = ((const uint16_t *)p)[i];
    return simde_mm512_loadu_si512(lanes);
}
static inline __attribute__((always_inline)) void opt_mm512_mask_storeu_ps(void *p, uint16_t mask, simde__m512 a) {
    float lanes[16];
    simde_mm512_storeu_ps(lanes, a);
    for (int i = 0; i < 16; i++)
        if (mask >> i & 1) ((float *)p)[i] = lanes[i];
}
static inline __attribute__((always_inline)) void opt_mm256_mask_storeu_epi16(void *p, uint16_t mask, __m256i a) {
    uint16_t lanes[16];
    _mm256_storeu_si256((__m256i *)lanes, a);
    for (int i = 0; i < 16; i++)
        if (mask >> i & 1) ((uint16_t *)p)[i] = lanes[i];
}
static inline __attribute__((always_inline)) void opt_mm256_mask_storeu_epi8(void *p, uint32_t mask, __m256i a) {
    uint8_t lanes[32];
    _mm256_storeu_si256((__m256i *)lanes, a);
    for (int i = 0; i < 32; i++)
        if (mask >> i & 1) ((uint8_t *)p)[i] = lanes[i];
}
static inline __attribute__((always_inline)) void opt_mm_mask_storeu_epi8(void *p, uint16_t mask, __m128i a) {
    uint8_t lanes[16];
    _mm_storeu_si128((__m128i *)lanes, a);
    for (int i = 0; i < 16; i++)
        if (mask >> i & 1) ((uint8_t *)p)[i] = lanes[i];
}
/* Non-temporal stores of 64 bytes (the destination is 64-byte aligned). */
static inline __attribute__((always_inline)) void opt_mm512_stream_si512(void *p, simde__m512i a) {
    _mm256_stream_si256((__m256i *)p, OPT_HALVES_SI(a)[0]);
    _mm256_stream_si256((__m256i *)p + 1, OPT_HALVES_SI(a)[1]);
}
static inline __attribute__((always_inline)) void opt_mm512_stream_ps(void *p, simde__m512 a) {
    _mm256_stream_ps((float *)p, OPT_HALVES_PS(a)[0]);
    _mm256_stream_ps((float *)p + 8, OPT_HALVES_PS(a)[1]);
}

#undef _mm512_add_epi16
#define _mm512_add_epi16 opt_mm512_add_epi16
#undef _mm512_sub_epi16
#define _mm512_sub_epi16 opt_mm512_sub_epi16
#undef _mm512_add_epi32
#define _mm512_add_epi32 opt_mm512_add_epi32
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 opt_mm512_sub_epi32
#undef _mm512_add_epi64
#define _mm512_add_epi64 opt_mm512_add_epi64
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 opt_mm512_slli_epi32
#undef _mm512_slli_epi64
#define _mm512_slli_epi64 opt_mm512_slli_epi64
#undef _mm512_srli_epi16
#define _mm512_srli_epi16 opt_mm512_srli_epi16
#undef _mm512_srli_epi32
#define _mm512_srli_epi32 opt_mm512_srli_epi32
#undef _mm512_srli_epi64
#define _mm512_srli_epi64 opt_mm512_srli_epi64
/* The intrinsics' own names, for the kernel sources (clang defines some
 * of them as macros: each is undefined first). */
#undef _mm512_cmp_ps_mask
#define _mm512_cmp_ps_mask opt_mm512_cmp_ps_mask
#undef _mm512_mask_blend_ps
#define _mm512_mask_blend_ps opt_mm512_mask_blend_ps
#undef _mm512_mask_blend_epi32
#define _mm512_mask_blend_epi32 opt_mm512_mask_blend_epi32
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi16 opt_mm512_mask_blend_epi16
#undef _mm512_testn_epi64_mask
#define _mm512_testn_epi64_mask opt_mm512_testn_epi64_mask
#undef _mm512_cmpge_epu32_mask
#define _mm512_cmpge_epu32_mask opt_mm512_cmpge_epu32_mask
#undef _mm256_cmpeq_epi32_mask
#define _mm256_cmpeq_epi32_mask opt_mm256_cmpeq_epi32_mask
#undef _mm512_cmpgt_epu32_mask
#define _mm512_cmpgt_epu32_mask opt_mm512_cmpgt_epu32_mask
#undef _mm512_cmplt_epu32_mask
#define _mm512_cmplt_epu32_mask opt_mm512_cmplt_epu32_mask
#undef _mm512_cmplt_epi16_mask
#define _mm512_cmplt_epi16_mask opt_mm512_cmplt_epi16_mask
#undef _mm512_cmpgt_epu16_mask
#define _mm512_cmpgt_epu16_mask opt_mm512_cmpgt_epu16_mask
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16 opt_mm512_cvtepi32_epi16
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8 opt_mm512_cvtepi32_epi8
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 opt_mm512_cvtepu16_epi32
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd opt_mm512_cvtps_pd
#undef _mm512_cvtpd_ps
#define _mm512_cvtpd_ps opt_mm512_cvtpd_ps
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps opt_mm512_extractf32x8_ps
#undef _mm512_permutex2var_epi64
#define _mm512_permutex2var_epi64 opt_mm512_permutex2var_epi64
#undef _mm512_permutexvar_epi32
#define _mm512_permutexvar_epi32 opt_mm512_permutexvar_epi32
#undef _mm512_reduce_max_epu32
#define _mm512_reduce_max_epu32 opt_mm512_reduce_max_epu32
#undef _mm512_reduce_add_epi64
#define _mm512_reduce_add_epi64 opt_mm512_reduce_add_epi64
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps opt_mm512_maskz_loadu_ps
#undef _mm512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi16 opt_mm512_maskz_loadu_epi16
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps opt_mm512_mask_storeu_ps
#undef _mm256_mask_storeu_epi16
#define _mm256_mask_storeu_epi16 opt_mm256_mask_storeu_epi16
#undef _mm256_mask_storeu_epi8
#define _mm256_mask_storeu_epi8 opt_mm256_mask_storeu_epi8
#undef _mm_mask_storeu_epi8
#define _mm_mask_storeu_epi8 opt_mm_mask_storeu_epi8
#undef _mm512_stream_si512
#define _mm512_stream_si512 opt_mm512_stream_si512
#undef _mm512_stream_ps
#define _mm512_stream_ps opt_mm512_stream_ps

#endif

/* AVX-512 building blocks: see vector_math.h.  Compiled with
 * -ffp-contract=off: every fma below is written as one, every other
 * product and sum is rounded separately, like the reference. */
#include "optimized/vector_math.h"
#include "optimized/vector_arrays.h"

#include <math.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"

/* ---- Correctly rounded exp ------------------------------------------
 *
 * Each float lane is widened to double and exp is evaluated there.  The
 * accurate evaluation (exp_double8, used by the slow path):
 *   x = n * ln2/16 + r,  n = nearest integer to x * 16/ln2,  |r| <= ln2/32,
 *   exp(x) = 2^(n >> 4) * T[n & 15] * P(r),  T[j] = 2^(j/16) rounded,
 *   P = degree-7 Taylor polynomial of exp, evaluated by Horner with fma.
 * Relative error of the double y against the exact exp(x), |r| <= 0.02167:
 *   reduction: r1 = fma(-n, L_hi, x), r = fma(-n, L_lo, r1), two roundings
 *     of at most 2^-53 |r| each, plus n * |ln2/16 - L_hi - L_lo| <=
 *     2400 * 2^-113: absolute error in r < 2^-57.5, hence relative < 2^-57.5;
 *   truncation: r^8/8! * e^|r| < 0.02167^8 / 40320 * 1.03 < 2^-59.3;
 *   Horner: the last fma rounds once (2^-53); the one before contributes
 *     2^-53 * 1.011 * |r| < 2^-58.5; earlier ones and the rounded 1/k!
 *     coefficients (relative 2^-53 each, weighted by r^k/k!) are smaller:
 *     < 2^-53 * 1.06 in all;
 *   T[j]: correctly rounded, 2^-53; the product T * P: 2^-53;
 *   2^(n >> 4): added to the exponent field, exact (results stay normal
 *     doubles: x is in [-104, 89]).
 * Sum: < (1.06 + 1 + 1) * 2^-53 + 2^-57.5 + 2^-59.3 < 3.2 * 2^-53 < 2^-51.3.
 *
 * Fast path (opt_exp16 in vector_math.h; every lane in [-87, 88], so
 * exp(x) is a normal float): the same scheme with a one-step reduction
 * r = fma(-n, L_hi, x) and a degree-4 polynomial P4 = c4 r^4 + ... + c1 r
 * + 1, c4..c1 = 0x1.55570abe5482fp-5, 0x1.5557e5734c36ap-3,
 * 0x1.fffffffe5b9aep-2, 0x1.fffffffb12cf8p-1: a Chebyshev fit of exp on
 * |r| <= 1.0001 * ln2/32 (n is the nearest integer to x times a rounded
 * 16/ln2, so |r| exceeds ln2/32 by far less than the 1.0001 slack),
 * computed at 200 bits and rounded to double.  Its error, sampled at
 * 20,001 points of that interval at 200 bits: |P4(r)/exp(r) - 1| <
 * 2^-38.52.  The constant L_hi is ln2/16 within 2^-59.2, times |n| <=
 * 2032: < 2^-48.2; the roundings as above: < 3.2 * 2^-53.  In all
 * < 2^-38.48 relative.  y lies in [2^e, 2^(e+1)) and its double ulp is
 * 2^(e-52), so |y - exp(x)| < 2^-38.48 * 2^(e+1) = 2^14.52 ulps < 23,500
 * ulps.  (The sampled bound is not a proof by itself; the proof is make
 * exhaustive, which compares this path with kvc_expf_cr on all 2^32
 * inputs, the whole fast-path domain included.)  The float rounding
 * boundaries near y are the midpoints, where the 29 bits that the
 * conversion to float drops (m, in double ulps) equal 2^28.  When
 * |m - 2^28| > 32768 the exact value lies on the same side of the midpoint
 * and rounds to the same float as y (at a binade edge the neighbouring
 * midpoint is 2^27 ulps away).  About one lane in 2^13 is undecided.
 * Slow path (opt_exp16_any, anything else, clamped to [-104, 89]): the
 * band test of kvc_expf_cr in common/formats.c, y * (1 -+ 2^-49) with
 * endpoints rounded by at most 2^-53 y, still contains exp(x) because
 * 3.2 * 2^-53 < 2^-49 - 2^-53 = 15 * 2^-53; if both endpoints round to
 * the same float, so does exp(x).
 * exp(-104) < 2^-150 rounds to +0 as does exp of anything below
 * (including -inf), and exp(89) > FLT_MAX rounds to +inf as does
 * anything above, so the clamp changes no rounded result.  Undecided
 * lanes (slow path: about one in 2^24) are recomputed by the scalar
 * kvc_expf_cr; NaN lanes return x itself, as kvc_expf_cr does.  The
 * result is therefore the correctly rounded exp, the same bits as
 * kvc_expf_cr, in every lane (also checked on all 2^32 inputs by make
 * exhaustive). */

static const double exp2_sixteenths[16] = {
    0x1p+0,
    0x1.0b5586cf9890fp+0,
    0x1.172b83c7d517bp+0,
    0x1.2387a6e756238p+0,
    0x1.306fe0a31b715p+0,
    0x1.3dea64c123422p+0,
    0x1.4bfdad5362a27p+0,
    0x1.5ab07dd485429p+0,
    0x1.6a09e667f3bcdp+0,
    0x1.7a11473eb0187p+0,
    0x1.8ace5422aa0dbp+0,
    0x1.9c49182a3f09p+0,
    0x1.ae89f995ad3adp+0,
    0x1.c199bdd85529cp+0,
    0x1.d5818dcfba487p+0,
    0x1.ea4afa2a490dap+0,
};

#define LN2_OVER_16_LO 0x1.abc9e3b39803fp-60

/* Fast path table: the bits of 2^(j/16) minus j << 48 (see
 * opt_exp_fast_double8: adding t << 48 puts back j and adds the exponent). */
const int64_t opt_exp_table_adjusted[16] = {
    0x3FF0000000000000LL, 0x3FEFB5586CF9890FLL, 0x3FEF72B83C7D517BLL, 0x3FEF387A6E756238LL,
    0x3FEF06FE0A31B715LL, 0x3FEEDEA64C123422LL, 0x3FEEBFDAD5362A27LL, 0x3FEEAB07DD485429LL,
    0x3FEEA09E667F3BCDLL, 0x3FEEA11473EB0187LL, 0x3FEEACE5422AA0DBLL, 0x3FEEC49182A3F090LL,
    0x3FEEE89F995AD3ADLL, 0x3FEF199BDD85529CLL, 0x3FEF5818DCFBA487LL, 0x3FEFA4AFA2A490DALL,
};

/* exp of 8 lanes in double, relative error < 2^-51.3 (see above), for
 * x in [-104, 89]. */
static inline __m512d exp_double8(__m512d x) {
    /* t = x * 16/ln2 + 1.5 * 2^52 with one rounding: its low mantissa bits
     * hold n, the integer nearest to x * 16/ln2, in two's complement. */
    __m512d shifted = _mm512_fmadd_pd(x, _mm512_set1_pd(OPT_SIXTEEN_OVER_LN2), _mm512_set1_pd(OPT_ROUNDING_SHIFTER));
    __m512d n = _mm512_sub_pd(shifted, _mm512_set1_pd(OPT_ROUNDING_SHIFTER));
    __m512i n_bits = _mm512_castpd_si512(shifted);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(OPT_LN2_OVER_16_HI), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_OVER_16_LO), r);
    __m512d p = _mm512_set1_pd(0x1.a01a01a01a01ap-13);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.6c16c16c16c17p-10));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.1111111111111p-7));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.5555555555555p-5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1.5555555555555p-3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0x1p-1));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    /* The permute reads only the low 4 bits of each index: n & 15. */
    __m512d table_low = _mm512_loadu_pd(exp2_sixteenths), table_high = _mm512_loadu_pd(exp2_sixteenths + 8);
    __m512d y = _mm512_mul_pd(_mm512_permutex2var_pd(table_low, n_bits, table_high), p);
    /* (bits >> 4) << 52 is floor(n / 16) in the exponent field modulo 2^12
     * (the shifter's own bits shift out); the 64-bit add is exact. */
    __m512i exponent_shift = _mm512_slli_epi64(_mm512_srli_epi64(n_bits, 4), 52);
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(y), exponent_shift));
}

/* Slow path, any 8 lanes: clamped, and the band test of kvc_expf_cr. */
static inline __m256 exp_float8_any(__m256 x, __mmask8 *undecided) {
    __m512d wide = _mm512_cvtps_pd(x);
    wide = _mm512_max_pd(wide, _mm512_set1_pd(-104.0));   /* NaN lanes become -104; replaced later */
    wide = _mm512_min_pd(wide, _mm512_set1_pd(89.0));
    __m512d y = exp_double8(wide);
    __m512d band = _mm512_mul_pd(y, _mm512_set1_pd(0x1p-49));
    __m256 rounded = _mm512_cvtpd_ps(y);
    __m256 low = _mm512_cvtpd_ps(_mm512_sub_pd(y, band));
    __m256 high = _mm512_cvtpd_ps(_mm512_add_pd(y, band));
    __mmask8 same_low = _mm256_cmpeq_epi32_mask(_mm256_castps_si256(low), _mm256_castps_si256(rounded));
    __mmask8 same_high = _mm256_cmpeq_epi32_mask(_mm256_castps_si256(high), _mm256_castps_si256(rounded));
    *undecided = (__mmask8)~(same_low & same_high);
    return rounded;
}

/* The rare lanes neither path could decide: the scalar kvc_expf_cr. */
__m512 opt_exp16_scalar_lanes(__m512 x, __m512 result, __mmask16 lanes) {
    float lanes_in[16], lanes_out[16];
    _mm512_storeu_ps(lanes_in, x);
    _mm512_storeu_ps(lanes_out, result);
    for (unsigned bits = lanes; bits; bits &= bits - 1) {
        int lane = __builtin_ctz(bits);
        lanes_out[lane] = kvc_expf_cr(lanes_in[lane]);
    }
    return _mm512_loadu_ps(lanes_out);
}

__m512 opt_exp16_any(__m512 x) {
    __mmask8 undecided_low, undecided_high;
    __m256 low = exp_float8_any(_mm512_castps512_ps256(x), &undecided_low);
    __m256 high = exp_float8_any(_mm512_extractf32x8_ps(x, 1), &undecided_high);
    __m512 result = _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
    __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    result = _mm512_mask_blend_ps(is_nan, result, x);
    __mmask16 undecided = (__mmask16)(((unsigned)undecided_high << 8 | undecided_low) & ~(unsigned)is_nan);
    return undecided ? opt_exp16_scalar_lanes(x, result, undecided) : result;
}

/* ---- RMSNorm -------------------------------------------------------- */

float opt_sum_of_squares(const float *values, int count) {
    /* One zmm accumulator: lane j sees values[j], values[j+16], ... in the
     * reference's order, one fma each, so every lane is the reference's. */
    __m512 lanes = _mm512_setzero_ps();
    for (int d = 0; d < count; d += 16) {
        __m512 v = _mm512_loadu_ps(values + d);
        lanes = _mm512_fmadd_ps(v, v, lanes);
    }
    /* The halving fold: lanes j + (j+8), then + (j+4), + (j+2), 0 + 1;
     * each add pairs exactly the lanes the reference pairs. */
    __m256 fold8 = _mm256_add_ps(_mm512_castps512_ps256(lanes), _mm512_extractf32x8_ps(lanes, 1));
    __m128 fold4 = _mm_add_ps(_mm256_castps256_ps128(fold8), _mm256_extractf128_ps(fold8, 1));
    __m128 fold2 = _mm_add_ps(fold4, _mm_movehl_ps(fold4, fold4));
    __m128 fold1 = _mm_add_ss(fold2, _mm_shuffle_ps(fold2, fold2, 1));
    return _mm_cvtss_f32(fold1);
}

void opt_rms_norm(const float *pooled, const float *weight, int head_dim, float eps, float *normed) {
    float sum_of_squares = opt_sum_of_squares(pooled, head_dim);
    float inv = 1.0f / sqrtf(sum_of_squares / (float)head_dim + eps);
    __m512 inv16 = _mm512_set1_ps(inv);
    for (int d = 0; d < head_dim; d += 16) {
        /* (pooled * inv) * weight: two separate roundings, as step 6. */
        __m512 scaled = _mm512_mul_ps(_mm512_loadu_ps(pooled + d), inv16);
        _mm512_storeu_ps(normed + d, _mm512_mul_ps(scaled, _mm512_loadu_ps(weight + d)));
    }
}

/* ---- Block quantisation --------------------------------------------- */

/* 2^k as fp32, bit for bit what ldexpf(1.0f, k) returns (the exact power,
 * 0 below 2^-149 since 2^-150 is a tie to even, inf above 2^127), built
 * from its bits instead of a libm call per block. */
static float power_of_two(int k) {
    if (k > 127) return kvc_f32_from_bits(0x7F800000u);
    if (k >= -126) return kvc_f32_from_bits((uint32_t)(k + 127) << 23);
    if (k >= -149) return kvc_f32_from_bits(1u << (k + 149));
    return 0.0f;
}

float opt_scale_multiplier(kvc_block_scale s) {
    if (s.kind == KVC_SCALE_INF) return 0.0f;
    if (s.kind == KVC_SCALE_NAN) return kvc_f32_from_bits(KVC_F32_NAN_BITS);
    return power_of_two(-s.scale_exp);
}

float opt_scale_value(kvc_block_scale s) {
    if (s.kind == KVC_SCALE_INF) return kvc_f32_from_bits(0x7F800000u);
    if (s.kind == KVC_SCALE_NAN) return kvc_f32_from_bits(KVC_F32_NAN_BITS);
    return power_of_two(s.scale_exp);
}

/* Step 9's a = max(1e-4, max |y|) from the largest |y| bits: NaN when
 * those are a NaN's (the reference's running kvc_max_nan is NaN as soon as
 * one value is). */
static float magnitude_from_largest_bits(uint32_t largest_bits) {
    if (largest_bits > 0x7F800000u) return kvc_f32_from_bits(KVC_F32_NAN_BITS);
    float magnitude = kvc_f32_from_bits(largest_bits);
    return magnitude > 1e-4f ? magnitude : 1e-4f;
}

float opt_block_magnitude(const float *values, int count) {
    /* The bits of non-negative floats order as unsigned integers, and
     * every NaN's bits are above +inf's: the largest |value| bits are
     * NaN's exactly when some value is, and otherwise the maximum's, whose
     * value does not depend on the order of a running max. */
    __m512i largest = _mm512_setzero_si512();
    for (int j = 0; j < count; j += 16)
        largest = _mm512_max_epu32(largest, _mm512_and_si512(_mm512_loadu_si512(values + j), _mm512_set1_epi32(0x7FFFFFFF)));
    return magnitude_from_largest_bits(_mm512_reduce_max_epu32(largest));
}

/* 16 codes of one block, one per 32-bit lane: fp8(clamp(y * multiplier)). */
static inline __m512i quantize16(const float *y, __m512 multiplier) {
    return opt_fp8_lanes_from_f32x16(opt_clamp_fp8_range16(_mm512_mul_ps(_mm512_loadu_ps(y), multiplier)));
}

/* The same in a block with a finite scale 2^e, e = ceil(log2(q)),
 * q = RN(a / 448), a = max(1e-4, max |y|): then |y * 2^-e| <= 448.  If
 * a / 448 exceeded 2^e while q rounded down to 2^e, a would lie in
 * (448 * 2^e, 448 * 2^e * (1 + 2^-24)], where no float is (the next float
 * above 448 * 2^e is 2^-23.8 above it, relatively); rounding the product
 * is monotone.  So the clamp changes nothing and no lane is NaN. */
static inline __m512i quantize16_in_range(const float *y, __m512 multiplier) {
    return opt_fp8_lanes_in_range(_mm512_mul_ps(_mm512_loadu_ps(y), multiplier));
}

void opt_quantize_codes64(const float *y, kvc_block_scale scale, uint8_t *codes) {
    __m512 multiplier = _mm512_set1_ps(opt_scale_multiplier(scale));
    __m512i codes0, codes16, codes32, codes48;
    if (scale.kind == KVC_SCALE_FINITE) {
        codes0 = quantize16_in_range(y, multiplier), codes16 = quantize16_in_range(y + 16, multiplier);
        codes32 = quantize16_in_range(y + 32, multiplier), codes48 = quantize16_in_range(y + 48, multiplier);
    } else {
        codes0 = quantize16(y, multiplier), codes16 = quantize16(y + 16, multiplier);
        codes32 = quantize16(y + 32, multiplier), codes48 = quantize16(y + 48, multiplier);
    }
    _mm512_storeu_si512(codes, opt_pack_bytes64(codes0, codes16, codes32, codes48));
}

/* The largest of 32 unsigned 16-bit lanes. */
static inline uint16_t reduce_max_epu16(__m512i lanes) {
    __m256i half = _mm256_max_epu16(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64(lanes, 1));
    __m128i quarter = _mm_max_epu16(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
    /* phminposuw finds the smallest; the largest is the complement of the
     * smallest complement. */
    __m128i smallest_complement = _mm_minpos_epu16(_mm_xor_si128(quarter, _mm_set1_epi16(-1)));
    return (uint16_t)~_mm_cvtsi128_si32(smallest_complement);
}

uint8_t opt_quantize_bf16_block_ue8m0(const uint16_t *z, uint8_t *codes) {
    __m512i low = _mm512_loadu_si512(z), high = _mm512_loadu_si512(z + 32);
    /* As opt_block_magnitude: |z| bits order as unsigned integers, NaN's
     * above +inf's; a bf16 pattern shifted left 16 is the widened float. */
    __m512i largest = _mm512_max_epu16(_mm512_and_si512(low, _mm512_set1_epi16(0x7FFF)),
                                       _mm512_and_si512(high, _mm512_set1_epi16(0x7FFF)));
    float magnitude = magnitude_from_largest_bits((uint32_t)reduce_max_epu16(largest) << 16);
    kvc_block_scale scale = kvc_block_scale_from_quotient(magnitude / KVC_FP8_MAX);
    if (scale.kind == KVC_SCALE_FINITE) {
        __mmask32 below_low, below_high;
        __m512i codes_low = opt_fp8_codes_scaled_bf16x32(low, scale.scale_exp, &below_low);
        __m512i codes_high = opt_fp8_codes_scaled_bf16x32(high, scale.scale_exp, &below_high);
        if (!(below_low | below_high)) {
            /* Codes fit a byte; the pack interleaves the 128-bit lanes
             * (qwords: low's lane L at 2L, high's at 2L + 1), the permute
             * restores the order. */
            __m512i bytes = _mm512_packus_epi16(codes_low, codes_high);
            _mm512_storeu_si512(codes, _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), bytes));
            return kvc_ue8m0_from_scale(scale);
        }
    }
    float y[KVC_QUANT_BLOCK];
    for (int j = 0; j < KVC_QUANT_BLOCK; j += 16)
        _mm512_storeu_ps(y + j, opt_f32_from_bf16x16(_mm256_loadu_si256((const __m256i *)(z + j))));
    opt_quantize_codes64(y, scale, codes);
    return kvc_ue8m0_from_scale(scale);
}

uint8_t opt_quantize_block_ue8m0(const float *y, uint8_t *codes) {
    float magnitude = opt_block_magnitude(y, KVC_QUANT_BLOCK);
    kvc_block_scale scale = kvc_block_scale_from_quotient(magnitude / KVC_FP8_MAX);
    opt_quantize_codes64(y, scale, codes);
    return kvc_ue8m0_from_scale(scale);
}

/* ---- RoPE and stores ------------------------------------------------- */

void opt_rope(float *rope_dims, const float *cos_sin_row) {
    const __m512i even_index = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd_index = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i interleave_low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i interleave_high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int half = 0; half < 2; half++) {
        /* Pairs i = 16*half .. 16*half+15 live in rope_dims[32*half ..+32). */
        float *x = rope_dims + 32 * half;
        __m512 first = _mm512_loadu_ps(x), second = _mm512_loadu_ps(x + 16);
        __m512 x_even = _mm512_permutex2var_ps(first, even_index, second);
        __m512 x_odd = _mm512_permutex2var_ps(first, odd_index, second);
        __m512 c = _mm512_loadu_ps(cos_sin_row + 16 * half);
        __m512 s = _mm512_loadu_ps(cos_sin_row + KVC_ROPE_DIMS / 2 + 16 * half);
        /* fma(x_e, c, -(x_o * s)) is fmsub(x_e, c, x_o * s): negating the
         * rounded product is exact, so the single rounding is the same. */
        __m512 new_even = _mm512_fmsub_ps(x_even, c, _mm512_mul_ps(x_odd, s));
        __m512 new_odd = _mm512_fmadd_ps(x_odd, c, _mm512_mul_ps(x_even, s));
        _mm512_storeu_ps(x, _mm512_permutex2var_ps(new_even, interleave_low, new_odd));
        _mm512_storeu_ps(x + 16, _mm512_permutex2var_ps(new_even, interleave_high, new_odd));
    }
}

void opt_store_bf16x64(uint8_t *destination, const float *values) {
    /* x86 is little-endian: the 16-bit lanes land in the contract's order. */
    for (int j = 0; j < 64; j += 16)
        _mm256_storeu_si256((__m256i *)(destination + 2 * j), opt_bf16_from_f32x16(_mm512_loadu_ps(values + j)));
}

void opt_store_ds_mla(const uint16_t *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales) {
    int nope_dims = KVC_V41_HEAD_DIM - KVC_ROPE_DIMS;
    for (int block = 0; block < nope_dims / KVC_QUANT_BLOCK; block++)
        scales[block] = opt_quantize_bf16_block_ue8m0(nope_bf16 + block * KVC_QUANT_BLOCK, token + block * KVC_QUANT_BLOCK);
    scales[KVC_FP8_DS_MLA_SCALE_BYTES - 1] = 0;
    opt_store_bf16x64(token + nope_dims, rope_rotated);
}

/* ---- Array forms (vector_arrays.h) ------------------------------------ */

/* Up to 16 values into a full register; missing lanes read as 0. */
static __m512 load_partial(const float *x, int64_t remaining) {
    __mmask16 mask = remaining >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1);
    return _mm512_maskz_loadu_ps(mask, x);
}
static __mmask16 tail_mask(int64_t remaining) {
    return remaining >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1);
}

void opt_exp_array(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16)
        _mm512_mask_storeu_ps(y + i, tail_mask(n - i), opt_exp16(load_partial(x + i, n - i)));
}

void opt_bf16_array(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16)
        _mm256_mask_storeu_epi16(y + i, tail_mask(n - i), opt_bf16_from_f32x16(load_partial(x + i, n - i)));
}

void opt_fp8_array(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16)
        _mm_mask_storeu_epi8(y + i, tail_mask(n - i), opt_fp8_from_f32x16(load_partial(x + i, n - i)));
}

void opt_fp8_scaled_bf16_array(const uint16_t *z, int scale_exp, uint8_t *codes, uint8_t *below_normal, int64_t n) {
    for (int64_t i = 0; i < n; i += 32) {
        __mmask32 lanes = n - i >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << (n - i)) - 1);
        __mmask32 below;
        __m512i lane_codes = opt_fp8_codes_scaled_bf16x32(_mm512_maskz_loadu_epi16(lanes, z + i), scale_exp, &below);
        _mm256_mask_storeu_epi8(codes + i, lanes, _mm512_cvtepi16_epi8(lane_codes));
        _mm256_mask_storeu_epi8(below_normal + i, lanes, _mm256_maskz_mov_epi8(below, _mm256_set1_epi8(1)));
    }
}

void opt_fp8_in_range_array(const float *x, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __m512i codes = opt_fp8_lanes_in_range(load_partial(x + i, n - i));
        _mm_mask_storeu_epi8(y + i, tail_mask(n - i), _mm512_cvtepi32_epi8(codes));
    }
}

/* ---- Streaming kernels for the bench's bandwidth roofline ------------- */

/* Prefetch distance: 16 lines (1 KiB) ahead of the loads. */
#define STREAM_PREFETCH_BYTES 1024

uint64_t opt_stream_read(const void *data, size_t bytes) {
    const uint8_t *p = data;
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 128 <= bytes; i += 128) {
        _mm_prefetch((const char *)(p + i + STREAM_PREFETCH_BYTES), _MM_HINT_T0);
        _mm_prefetch((const char *)(p + i + STREAM_PREFETCH_BYTES + 64), _MM_HINT_T0);
        sum0 = _mm512_add_epi64(sum0, _mm512_loadu_si512(p + i));
        sum1 = _mm512_add_epi64(sum1, _mm512_loadu_si512(p + i + 64));
    }
    /* GCC's _mm512_reduce_add_epi64 adds signed lanes in C (overflow is
     * undefined): fold the lanes as unsigned words instead. */
    uint64_t lanes[8], total = 0;
    _mm512_storeu_si512(lanes, _mm512_add_epi64(sum0, sum1));
    for (int lane = 0; lane < 8; lane++) total += lanes[lane];
    for (; i + 8 <= bytes; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        total += word;
    }
    return total;
}

void opt_stream_copy(void *destination, const void *source, size_t bytes) {
    uint8_t *d = destination;
    const uint8_t *s = source;
    size_t i = 0;
    /* Streaming stores (no read of the destination) need 64-byte alignment. */
    if (((uintptr_t)d & 63) == 0)
        for (; i + 64 <= bytes; i += 64) {
            _mm_prefetch((const char *)(s + i + STREAM_PREFETCH_BYTES), _MM_HINT_T0);
            _mm512_stream_si512((__m512i *)(d + i), _mm512_loadu_si512(s + i));
        }
    _mm_sfence();
    memcpy(d + i, s + i, bytes - i);
}

/* A streaming write of a constant: with non_temporal (and a 64-byte
 * aligned destination) by streaming stores, which skip the read for
 * ownership that an ordinary store to an uncached line costs; otherwise
 * by ordinary stores, which win while the buffer fits in the caches. */
void opt_stream_write(void *destination, size_t bytes, int non_temporal) {
    uint8_t *d = destination;
    __m512i pattern = _mm512_set1_epi64((long long)0x5A5A5A5A5A5A5A5AULL);
    size_t i = 0;
    if (non_temporal && ((uintptr_t)d & 63) == 0) {
        for (; i + 64 <= bytes; i += 64) _mm512_stream_si512((__m512i *)(d + i), pattern);
        _mm_sfence();
    } else {
        for (; i + 64 <= bytes; i += 64) _mm512_storeu_si512(d + i, pattern);
    }
    memset(d + i, 0x5A, bytes - i);
}

void opt_exp_in_range_array(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, opt_exp16_in_range(_mm512_loadu_ps(x + i)));
}

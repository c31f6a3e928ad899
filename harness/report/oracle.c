/* The MPFR precision oracle: see report_oracle.h. */
#include "harness/report/oracle.h"

#include <math.h>
#include <stdlib.h>

/* Products of a 160-bit value and an fp32 value need 184 bits to be exact;
 * temporaries that hold a product before a sum get this much room. */
#define PRODUCT_BITS (2 * KVC_ORACLE_BITS + 32)

/* NaN-propagating maximum of the scores (step 1). */
static void max_of_scores(mpfr_t m, const float *score, int entries) {
    mpfr_set_flt(m, score[0], MPFR_RNDN);
    for (int w = 1; w < entries; w++) {
        if (mpfr_nan_p(m)) return;
        if (isnan(score[w])) { mpfr_set_nan(m); return; }
        if (mpfr_cmp_d(m, (double)score[w]) < 0) mpfr_set_flt(m, score[w], MPFR_RNDN);
    }
}

static void weighted_mean(mpfr_t out, const float *window_kv, const float *window_score, int entries, int absolute) {
    mpfr_t m, weight, product, denom, acc;
    mpfr_inits2(KVC_ORACLE_BITS, m, weight, denom, acc, (mpfr_ptr)0);
    mpfr_init2(product, PRODUCT_BITS);
    max_of_scores(m, window_score, entries);
    mpfr_set_zero(denom, 1);
    mpfr_set_zero(acc, 1);
    for (int w = 0; w < entries; w++) {
        /* s_w - m is exact at this precision unless the two are 2^160
         * apart, where exp of the difference is 0 to any precision. */
        mpfr_set_flt(weight, window_score[w], MPFR_RNDN);
        mpfr_sub(weight, weight, m, MPFR_RNDN);
        mpfr_exp(weight, weight, MPFR_RNDN);
        mpfr_add(denom, denom, weight, MPFR_RNDN);
        mpfr_mul_d(product, weight, absolute ? fabs((double)window_kv[w]) : (double)window_kv[w], MPFR_RNDN);
        mpfr_add(acc, acc, product, MPFR_RNDN);
    }
    mpfr_div(out, acc, denom, MPFR_RNDN);
    mpfr_clears(m, weight, product, denom, acc, (mpfr_ptr)0);
}

void kvc_oracle_pool(mpfr_t out, const float *window_kv, const float *window_score, int entries) {
    weighted_mean(out, window_kv, window_score, entries, 0);
}

void kvc_oracle_pool_magnitude(mpfr_t out, const float *window_kv, const float *window_score, int entries) {
    weighted_mean(out, window_kv, window_score, entries, 1);
}

void kvc_oracle_rms_norm(mpfr_t *normed, mpfr_t *pooled, const float *weight, int head_dim, float eps) {
    mpfr_t sum_of_squares, square, inverse_rms;
    mpfr_inits2(PRODUCT_BITS, sum_of_squares, square, (mpfr_ptr)0);
    mpfr_init2(inverse_rms, KVC_ORACLE_BITS);
    mpfr_set_zero(sum_of_squares, 1);
    for (int d = 0; d < head_dim; d++) {
        mpfr_sqr(square, pooled[d], MPFR_RNDN);
        mpfr_add(sum_of_squares, sum_of_squares, square, MPFR_RNDN);
    }
    mpfr_div_ui(inverse_rms, sum_of_squares, (unsigned long)head_dim, MPFR_RNDN);
    mpfr_add_d(inverse_rms, inverse_rms, (double)eps, MPFR_RNDN);
    mpfr_rec_sqrt(inverse_rms, inverse_rms, MPFR_RNDN);
    for (int d = 0; d < head_dim; d++) {
        mpfr_mul(normed[d], pooled[d], inverse_rms, MPFR_RNDN);
        mpfr_mul_d(normed[d], normed[d], (double)weight[d], MPFR_RNDN);
    }
    mpfr_clears(sum_of_squares, square, inverse_rms, (mpfr_ptr)0);
}

void kvc_oracle_rope(mpfr_t *out, mpfr_t *in, const float *cos_sin_row) {
    mpfr_t even_cos, odd_sin, odd_cos, even_sin;
    mpfr_inits2(PRODUCT_BITS, even_cos, odd_sin, odd_cos, even_sin, (mpfr_ptr)0);
    for (int i = 0; i < 32; i++) {
        double c = (double)cos_sin_row[i], s = (double)cos_sin_row[32 + i];
        mpfr_mul_d(even_cos, in[2 * i], c, MPFR_RNDN);
        mpfr_mul_d(odd_sin, in[2 * i + 1], s, MPFR_RNDN);
        mpfr_mul_d(odd_cos, in[2 * i + 1], c, MPFR_RNDN);
        mpfr_mul_d(even_sin, in[2 * i], s, MPFR_RNDN);
        mpfr_sub(out[2 * i], even_cos, odd_sin, MPFR_RNDN);
        mpfr_add(out[2 * i + 1], odd_cos, even_sin, MPFR_RNDN);
    }
    mpfr_clears(even_cos, odd_sin, odd_cos, even_sin, (mpfr_ptr)0);
}

void kvc_oracle_rope_magnitude(mpfr_t out, mpfr_t *in, const float *cos_sin_row, int i) {
    int pair = i / 2;
    mpfr_t even_term, odd_term;
    mpfr_inits2(PRODUCT_BITS, even_term, odd_term, (mpfr_ptr)0);
    /* x_e' = x_e c - x_o s and x_o' = x_o c + x_e s: same magnitudes, swapped. */
    mpfr_mul_d(even_term, in[2 * pair], fabs((double)cos_sin_row[i % 2 ? 32 + pair : pair]), MPFR_RNDN);
    mpfr_mul_d(odd_term, in[2 * pair + 1], fabs((double)cos_sin_row[i % 2 ? pair : 32 + pair]), MPFR_RNDN);
    mpfr_abs(even_term, even_term, MPFR_RNDN);
    mpfr_abs(odd_term, odd_term, MPFR_RNDN);
    mpfr_add(out, even_term, odd_term, MPFR_RNDN);
    mpfr_clears(even_term, odd_term, (mpfr_ptr)0);
}

kvc_block_scale kvc_oracle_block_scale(mpfr_t magnitude) {
    kvc_block_scale s = {KVC_SCALE_FINITE, 0};
    if (mpfr_nan_p(magnitude)) { s.kind = KVC_SCALE_NAN; return s; }
    if (mpfr_inf_p(magnitude)) { s.kind = KVC_SCALE_INF; return s; }
    mpfr_t q;
    mpfr_init2(q, KVC_ORACLE_BITS);
    /* The floor applies to the magnitude, before the division. */
    if (mpfr_cmp_d(magnitude, (double)1e-4f) < 0) mpfr_set_flt(q, 1e-4f, MPFR_RNDN);
    else mpfr_set(q, magnitude, MPFR_RNDN);
    mpfr_div_ui(q, q, 448, MPFR_RNDN);
    /* q = f * 2^E with f in [1/2, 1): ceil(log2 q) is E, or E-1 when q is
     * exactly 2^(E-1).  (a / 448 is a power of two only when a = 448*2^k,
     * and then the 160-bit quotient is exact.) */
    mpfr_exp_t exponent = mpfr_get_exp(q);
    s.scale_exp = mpfr_cmp_ui_2exp(q, 1, exponent - 1) == 0 ? (int)exponent - 1 : (int)exponent;
    mpfr_clear(q);
    return s;
}

/* Round x to a binary format with `precision` significand bits whose
 * smallest quantum is 2^min_exp (its subnormal spacing), ties to even.
 * No overflow handling: callers check the range. */
static void round_to_format(mpfr_t out, mpfr_t x, int precision, int min_exp) {
    mpfr_set(out, x, MPFR_RNDN);
    if (!mpfr_regular_p(out)) return;
    mpfr_exp_t quantum = mpfr_get_exp(out) - precision;
    if (quantum < min_exp) quantum = min_exp;
    mpfr_mul_2si(out, out, -quantum, MPFR_RNDN);   /* exact */
    mpfr_rint(out, out, MPFR_RNDN);                /* nearest, ties to even */
    mpfr_mul_2si(out, out, quantum, MPFR_RNDN);
}

/* A rounded value past the largest finite binary32 (same range for bf16). */
static int beyond_f32_range(mpfr_t rounded) { return mpfr_regular_p(rounded) && mpfr_get_exp(rounded) > 128; }

float kvc_oracle_to_f32(mpfr_t x) {
    if (mpfr_nan_p(x)) return kvc_f32_from_bits(KVC_F32_NAN_BITS);
    mpfr_t r;
    mpfr_init2(r, KVC_ORACLE_BITS);
    round_to_format(r, x, 24, -149);
    float f = beyond_f32_range(r) ? (mpfr_signbit(r) ? -INFINITY : INFINITY) : mpfr_get_flt(r, MPFR_RNDN);
    mpfr_clear(r);
    return f;
}

uint16_t kvc_oracle_to_bf16(mpfr_t x) {
    if (mpfr_nan_p(x)) return KVC_BF16_NAN;
    mpfr_t r;
    mpfr_init2(r, KVC_ORACLE_BITS);
    round_to_format(r, x, 8, -133);
    float f = beyond_f32_range(r) ? (mpfr_signbit(r) ? -INFINITY : INFINITY) : mpfr_get_flt(r, MPFR_RNDN);
    mpfr_clear(r);
    return (uint16_t)(kvc_f32_bits(f) >> 16);   /* exact: the low bits are zero */
}

/* fp8 e4m3fn byte of an exactly representable magnitude v in [0, 448]. */
static uint8_t encode_fp8_magnitude(mpfr_t v) {
    if (mpfr_zero_p(v)) return 0;
    mpfr_exp_t exponent = mpfr_get_exp(v) - 1;    /* v in [2^exponent, 2^(exponent+1)) */
    mpfr_t scaled;
    mpfr_init2(scaled, KVC_ORACLE_BITS);
    uint8_t code;
    if (exponent < -6) {
        mpfr_mul_2si(scaled, v, 9, MPFR_RNDN);    /* subnormal: m * 2^-9 */
        code = (uint8_t)mpfr_get_ui(scaled, MPFR_RNDN);
    } else {
        mpfr_mul_2si(scaled, v, 3 - exponent, MPFR_RNDN);   /* 8 + mantissa */
        code = (uint8_t)(((exponent + 7) << 3) | (mpfr_get_ui(scaled, MPFR_RNDN) - 8));
    }
    mpfr_clear(scaled);
    return code;
}

uint8_t kvc_oracle_to_fp8(mpfr_t x) {
    if (mpfr_nan_p(x)) return KVC_FP8_NAN;
    mpfr_t r;
    mpfr_init2(r, KVC_ORACLE_BITS);
    mpfr_set(r, x, MPFR_RNDN);
    if (mpfr_cmp_si(r, 448) > 0) mpfr_set_si(r, 448, MPFR_RNDN);
    if (mpfr_cmp_si(r, -448) < 0) mpfr_set_si(r, -448, MPFR_RNDN);
    round_to_format(r, r, 4, -9);
    int negative = mpfr_signbit(r);
    mpfr_abs(r, r, MPFR_RNDN);
    uint8_t code = (uint8_t)((negative ? 0x80 : 0) | encode_fp8_magnitude(r));
    mpfr_clear(r);
    return code;
}

uint8_t kvc_oracle_block_code(mpfr_t y, kvc_block_scale s) {
    if (s.kind == KVC_SCALE_NAN || mpfr_nan_p(y)) return KVC_FP8_NAN;
    if (s.kind == KVC_SCALE_INF) return mpfr_inf_p(y) ? KVC_FP8_NAN : (mpfr_signbit(y) ? 0x80 : 0x00);
    mpfr_t scaled;
    mpfr_init2(scaled, KVC_ORACLE_BITS);
    mpfr_mul_2si(scaled, y, -s.scale_exp, MPFR_RNDN);   /* exact */
    uint8_t code = kvc_oracle_to_fp8(scaled);
    mpfr_clear(scaled);
    return code;
}

double kvc_oracle_ulps_of(float got, mpfr_t exact, mpfr_t scale) {
    int got_nan = isnan(got), exact_nan = mpfr_nan_p(exact) != 0;
    if (got_nan || exact_nan) return got_nan && exact_nan ? 0.0 : INFINITY;
    if (isinf(got) || mpfr_inf_p(exact)) {
        int same = isinf(got) && mpfr_inf_p(exact) && (signbit(got) != 0) == (mpfr_signbit(exact) != 0);
        return same ? 0.0 : INFINITY;
    }
    if (!mpfr_number_p(scale)) return INFINITY;
    mpfr_t difference;
    mpfr_init2(difference, PRODUCT_BITS);
    mpfr_set_flt(difference, got, MPFR_RNDN);
    mpfr_sub(difference, difference, exact, MPFR_RNDN);
    mpfr_abs(difference, difference, MPFR_RNDN);
    /* ulp of the scale: 2^(E-24) for scale in [2^(E-1), 2^E), at least 2^-149. */
    long ulp_exp = mpfr_zero_p(scale) ? -149 : (long)mpfr_get_exp(scale) - 24;
    if (ulp_exp < -149) ulp_exp = -149;
    mpfr_mul_2si(difference, difference, -ulp_exp, MPFR_RNDN);
    double ulps = mpfr_get_d(difference, MPFR_RNDN);
    mpfr_clear(difference);
    return ulps;
}

double kvc_oracle_ulps(float got, mpfr_t exact) { return kvc_oracle_ulps_of(got, exact, exact); }


/* Number formats against independent formulations: bf16 and fp8 on every
 * one of the 2^32 fp32 inputs, the UE8M0 exponent on every positive
 * float, expf against an MPFR oracle on a large sample and hard cases. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>

#include "kvcmp/formats.h"

/* bf16 by comparing distances in double (exact for neighbouring floats). */
static uint16_t bf16_by_distance(uint32_t bits) {
    float x = kvc_f32_from_bits(bits);
    if (isnan(x)) return KVC_BF16_NAN;
    if (isinf(x)) return (uint16_t)(bits >> 16);
    uint16_t low = (uint16_t)(bits >> 16), high = (uint16_t)(low + 1);
    double d_low = fabs((double)x - (double)kvc_f32_from_bf16(low));
    float high_value = kvc_f32_from_bf16(high);
    if (isinf(high_value)) {
        /* Past the largest bf16: rounds to infinity iff x >= max + half ulp. */
        double half_ulp = ldexp(1.0, 127 - 8);
        return fabs((double)x) - fabs((double)kvc_f32_from_bf16(low)) >= half_ulp ? high : low;
    }
    double d_high = fabs((double)high_value - (double)x);
    if (d_low < d_high) return low;
    if (d_high < d_low) return high;
    return (low & 1) ? high : low;
}

Test(formats, bf16_every_fp32_input, .timeout = 300) {
    uint64_t failures = 0;
    /* Two threads: the loop is 2^32 independent checks. */
#pragma omp parallel for num_threads(2) reduction(+ : failures) schedule(static)
    for (uint64_t i = 0; i <= 0xFFFFFFFFu; i++) {
        uint32_t bits = (uint32_t)i;
        uint16_t got = kvc_bf16_from_f32(kvc_f32_from_bits(bits)), want = bf16_by_distance(bits);
        if (got != want && failures++ < 5)
            fprintf(stderr, "FAIL x=0x%08x ref=0x%04x got=0x%04x\n", bits, want, got);
    }
    cr_assert_eq(failures, 0, "%llu bf16 conversions differ", (unsigned long long)failures);
}

Test(formats, bf16_widening_is_exact) {
    for (uint32_t b = 0; b <= 0xFFFF; b++) {
        uint32_t bits = kvc_f32_bits(kvc_f32_from_bf16((uint16_t)b));
        cr_assert_eq(bits, b << 16, "FAIL b=0x%04x got=0x%08x", b, bits);
    }
}

/* fp8 e4m3fn decoded from the format's definition in double. */
static double fp8_value(int code) {
    int sign = code >> 7, exponent = (code >> 3) & 15, mantissa = code & 7;
    double magnitude = exponent == 0 ? ldexp(mantissa, -9) : ldexp(8 + mantissa, exponent - 10);
    return sign ? -magnitude : magnitude;
}

Test(formats, fp8_decode_every_code) {
    for (int code = 0; code < 256; code++) {
        float got = kvc_f32_from_fp8((uint8_t)code);
        if ((code & 0x7F) == 0x7F) { cr_assert(isnan(got), "FAIL code=0x%02x not NaN", code); continue; }
        cr_assert_eq(kvc_f32_bits(got), kvc_f32_bits((float)fp8_value(code)), "FAIL code=0x%02x", code);
    }
}

/* Nearest of the 127 non-negative finite fp8 magnitudes, ties to the even
 * code.  Past 448 the next step of the grid would be 480 (odd mantissa):
 * 464 ties back to 448, anything above has no finite neighbour (NaN). */
static double fp8_magnitudes[127];

static uint8_t fp8_by_search(uint32_t bits) {
    float x = kvc_f32_from_bits(bits);
    if (isnan(x)) return KVC_FP8_NAN;
    uint8_t sign = (bits >> 31) ? 0x80 : 0;
    double magnitude = fabs((double)x);
    if (magnitude > 464.0) return KVC_FP8_NAN;
    if (magnitude >= 448.0) return (uint8_t)(sign | 126);
    if (magnitude <= 0x1p-10) return sign;   /* at most half the smallest subnormal: ties to 0 */
    int low = 0, high = 126;   /* codes 0..126 are increasing magnitudes */
    while (high - low > 1) {
        int mid = (low + high) / 2;
        if (fp8_magnitudes[mid] <= magnitude) low = mid; else high = mid;
    }
    double d_low = magnitude - fp8_magnitudes[low], d_high = fp8_magnitudes[high] - magnitude;
    int code = d_low < d_high ? low : d_high < d_low ? high : (low % 2 == 0 ? low : high);
    return (uint8_t)(sign | code);
}

Test(formats, fp8_every_fp32_input, .timeout = 300) {
    uint64_t failures = 0;
    for (int code = 0; code < 127; code++) fp8_magnitudes[code] = fp8_value(code);
#pragma omp parallel for num_threads(2) reduction(+ : failures) schedule(static)
    for (uint64_t i = 0; i <= 0xFFFFFFFFu; i++) {
        uint32_t bits = (uint32_t)i;
        uint8_t got = kvc_fp8_from_f32(kvc_f32_from_bits(bits)), want = fp8_by_search(bits);
        if (got != want && failures++ < 5) fprintf(stderr, "FAIL x=0x%08x ref=0x%02x got=0x%02x\n", bits, want, got);
    }
    cr_assert_eq(failures, 0, "%llu fp8 conversions differ", (unsigned long long)failures);
}

Test(formats, fp8_ties_round_to_even) {
    /* 1.0625 lies halfway between 1.0 (0x38) and 1.125 (0x39): even is 0x38. */
    cr_assert_eq(kvc_fp8_from_f32(1.0625f), 0x38);
    /* 1.1875 lies halfway between 1.125 (0x39) and 1.25 (0x3A): even is 0x3A. */
    cr_assert_eq(kvc_fp8_from_f32(1.1875f), 0x3A);
    /* Subnormal tie: 2.5 * 2^-9 between codes 2 and 3 goes to 2. */
    cr_assert_eq(kvc_fp8_from_f32(ldexpf(2.5f, -9)), 0x02);
    /* Half the smallest subnormal rounds to zero, keeping the sign. */
    cr_assert_eq(kvc_fp8_from_f32(-ldexpf(1.0f, -10)), 0x80);
    cr_assert_eq(kvc_fp8_from_f32(448.0f), 0x7E);
    cr_assert_eq(kvc_fp8_from_f32(-448.0f), 0xFE);
}

/* ceil(log2(q)) by frexp: q = m * 2^E with m in [0.5, 1). */
static int ceil_log2_by_frexp(float q) {
    int exponent = 0;   /* frexpf always sets it; GCC cannot see that */
    float m = frexpf(q, &exponent);
    return m == 0.5f ? exponent - 1 : exponent;
}

Test(formats, block_scale_every_positive_float) {
    uint64_t failures = 0;
#pragma omp parallel for num_threads(2) reduction(+ : failures) schedule(static)
    for (uint32_t bits = 1; bits < 0x7F800000u; bits++) {
        float q = kvc_f32_from_bits(bits);
        kvc_block_scale s = kvc_block_scale_from_quotient(q);
        int want = ceil_log2_by_frexp(q);
        if ((s.kind != KVC_SCALE_FINITE || s.scale_exp != want) && failures++ < 5)
            fprintf(stderr, "FAIL q=0x%08x ref=%d got=%d\n", bits, want, s.scale_exp);
    }
    cr_assert_eq(failures, 0);
    cr_assert_eq(kvc_block_scale_from_quotient(INFINITY).kind, KVC_SCALE_INF);
    cr_assert_eq(kvc_block_scale_from_quotient(NAN).kind, KVC_SCALE_NAN);
    cr_assert_eq(kvc_ue8m0_from_scale(kvc_block_scale_from_quotient(INFINITY)), 255);
    cr_assert_eq(kvc_ue8m0_from_scale(kvc_block_scale_from_quotient(NAN)), 255);
    cr_assert_eq(kvc_f32_bits(kvc_scale_multiplier(kvc_block_scale_from_quotient(INFINITY))), 0u);
}

Test(formats, ue8m0_byte_clamps) {
    kvc_block_scale low = {KVC_SCALE_FINITE, -140}, high = {KVC_SCALE_FINITE, 140}, one = {KVC_SCALE_FINITE, 0};
    cr_assert_eq(kvc_ue8m0_from_scale(low), 0);
    cr_assert_eq(kvc_ue8m0_from_scale(high), 255);
    cr_assert_eq(kvc_ue8m0_from_scale(one), 127);
}

/* The oracle: exp at 24 bits with the binary32 exponent range, so that
 * subnormal results are rounded once, on the subnormal grid. */
static float expf_oracle(float x) {
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    mpfr_t r;
    mpfr_init2(r, 24);
    mpfr_set_flt(r, x, MPFR_RNDN);
    int inexact = mpfr_exp(r, r, MPFR_RNDN);
    inexact = mpfr_subnormalize(r, inexact, MPFR_RNDN);
    float y = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_clear(r);
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
    return y;
}

static void check_expf(float x, uint64_t *failures) {
    float got = kvc_expf_cr(x), want = expf_oracle(x);
    if (isnan(got) && isnan(want)) return;
    if (kvc_f32_bits(got) != kvc_f32_bits(want) && (*failures)++ < 5)
        cr_log_error("FAIL x=0x%08x ref=0x%08x got=0x%08x", kvc_f32_bits(x), kvc_f32_bits(want), kvc_f32_bits(got));
}

Test(formats, expf_matches_mpfr_on_a_sample, .timeout = 120) {
    uint64_t failures = 0, state = 0x9E3779B97F4A7C15u;
    /* Random negative binary32 patterns (the stages only take exp of
     * s - m <= 0), and a slice of every input near each boundary. */
    for (int i = 0; i < 1 << 20; i++) {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        uint32_t bits = 0x80000000u | (uint32_t)(state % 0x42D00000u);
        check_expf(kvc_f32_from_bits(bits), &failures);
    }
    /* Around the subnormal and zero thresholds, the 1 - tiny region, and
     * ordinary points; from -0 only outwards (below it lie positive NaNs). */
    const float boundaries[] = {-87.336544f, -103.27893f, -103.97208f, -1e-8f, -0.5f, -1.0f, -10.0f, -88.72284f};
    for (int k = 0; k <= 100000; k++) check_expf(kvc_f32_from_bits(0x80000000u + (uint32_t)k * 9973u), &failures);
    for (size_t b = 0; b < sizeof boundaries / sizeof boundaries[0]; b++)
        for (int k = -2000; k <= 2000; k++) {
            uint32_t bits = kvc_f32_bits(boundaries[b]) + (uint32_t)k;
            check_expf(kvc_f32_from_bits(bits), &failures);
        }
    cr_assert_eq(failures, 0, "%llu expf results differ from MPFR", (unsigned long long)failures);
}

Test(formats, expf_specials_and_fallback) {
    cr_assert_eq(kvc_f32_bits(kvc_expf_cr(-INFINITY)), 0u);
    cr_assert_eq(kvc_f32_bits(kvc_expf_cr(0.0f)), kvc_f32_bits(1.0f));
    cr_assert_eq(kvc_f32_bits(kvc_expf_cr(-0.0f)), kvc_f32_bits(1.0f));
    cr_assert(isnan(kvc_expf_cr(NAN)));
    cr_assert_eq(kvc_f32_bits(kvc_expf_cr(-200.0f)), 0u);
    cr_assert(isinf(kvc_expf_cr(100.0f)));
    /* The MPFR path alone agrees with the oracle too. */
    for (float x = -104.0f; x < 0.0f; x += 0.37f)
        cr_assert_eq(kvc_f32_bits(kvc_expf_mpfr(x)), kvc_f32_bits(expf_oracle(x)), "FAIL x=%a", (double)x);
}

/* kvc_expf_mpfr remembers its results (formats.c): asked again after
 * more inputs than its table holds (every entry replaced), right after
 * the same input, and from several threads at once, it gives the
 * oracle's value each time. */
Test(formats, expf_mpfr_remembered_results_are_the_oracles, .timeout = 120) {
    enum { INPUTS = 3000 };
    static float x[INPUTS], want[INPUTS];
    for (int i = 0; i < INPUTS; i++) {
        x[i] = -0.0291f * (float)(i + 1);
        want[i] = expf_oracle(x[i]);
    }
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < INPUTS; i++)
            for (int again = 0; again < 2; again++)
                cr_assert_eq(kvc_f32_bits(kvc_expf_mpfr(x[i])), kvc_f32_bits(want[i]), "FAIL x=%a (round %d)", (double)x[i], round);
    int wrong = 0;
#pragma omp parallel for num_threads(4) reduction(+ : wrong)
    for (int i = 0; i < 4 * INPUTS; i++) wrong += kvc_f32_bits(kvc_expf_mpfr(x[i * 7 % INPUTS])) != kvc_f32_bits(want[i * 7 % INPUTS]);
    cr_assert_eq(wrong, 0, "%d results from 4 threads differ from the oracle", wrong);
    cr_assert(isnan(kvc_expf_mpfr(NAN)));
    cr_assert(isnan(kvc_expf_mpfr(kvc_f32_from_bits(0xFFFFFFFFu))));
}

Test(formats, max_propagates_nan) {
    cr_assert(kvc_f32_is_nan(kvc_max_nan(NAN, 1.0f)));
    cr_assert(kvc_f32_is_nan(kvc_max_nan(1.0f, -NAN)));
    cr_assert_eq(kvc_f32_bits(kvc_max_nan(NAN, 1.0f)), KVC_F32_NAN_BITS);
    cr_assert_eq(kvc_f32_bits(kvc_max_nan(-INFINITY, -1.0f)), kvc_f32_bits(-1.0f));
}

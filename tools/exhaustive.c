/* make exhaustive: checks that need every binary32 input.
 *   (a) kvc_expf_cr against an MPFR oracle of its own (binary32 emulated
 *       by precision 24, exponent range [-148, 128] and mpfr_subnormalize;
 *       independent of kvc_expf_mpfr, which works at 200 bits and rounds
 *       once) on every x <= 0: every pattern with the sign bit set (-0,
 *       the negatives, -inf, negative NaNs), +0 and every positive NaN.
 *   (b) the optimized vector exp against kvc_expf_cr on all 2^32 inputs
 *       (its fast path also takes positive x up to 88).
 *   (c) the optimized vector bf16 and fp8 conversions against the scalar
 *       ones on all 2^32 inputs (the fp8 in-range shortcut on every input
 *       in [-448, 448]).
 * Usage: kvcmp-exhaustive [--vector-only | --mpfr-only] (default: all).
 * Parallel with OpenMP; a progress line on stderr; prints how long each
 * check took, `FAIL x=<hex> ref=<hex> got=<hex>` per mismatch (the first
 * 100 of each check) and `N passed, M failed` (inputs) at the end. */
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvcmp/formats.h"
#include "optimized/optimized.h"
#include "optimized/vector_arrays.h"

#define CHUNK ((uint64_t)1 << 14)     /* inputs per work item */
#define MAX_PRINTED_FAILURES 100

typedef struct {
    const char *name;
    uint64_t passed, failed;
    double seconds;
} check_result;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The inputs x <= 0, as a dense index 0 .. count-1: first every pattern
 * with the sign bit set, then +0, then the positive NaNs. */
#define NEGATIVE_PATTERNS ((uint64_t)1 << 31)
#define POSITIVE_NANS ((uint64_t)0x7FFFFFFF - 0x7F800000)
#define NONPOSITIVE_INPUTS (NEGATIVE_PATTERNS + 1 + POSITIVE_NANS)

static uint32_t nonpositive_input(uint64_t index) {
    if (index < NEGATIVE_PATTERNS) return 0x80000000u + (uint32_t)index;
    if (index == NEGATIVE_PATTERNS) return 0;
    return 0x7F800000u + (uint32_t)(index - NEGATIVE_PATTERNS);
}

static void print_failure(check_result *r, uint32_t x, uint32_t want, uint32_t got) {
    uint64_t count;
#pragma omp atomic capture
    count = ++r->failed;
    if (count <= MAX_PRINTED_FAILURES) {
#pragma omp critical(print)
        printf("FAIL %s x=0x%08x ref=0x%08x got=0x%08x\n", r->name, x, want, got);
    }
}

static void progress(const char *name, uint64_t done, uint64_t total, double start) {
    fprintf(stderr, "\r%s: %5.1f%% (%llu / %llu inputs) %.0f s   ", name, 100.0 * (double)done / (double)total,
            (unsigned long long)done, (unsigned long long)total, now_seconds() - start);
    fflush(stderr);
}

/* Run `check_chunk(first_index, count, result)` over [0, total) in chunks,
 * in parallel, with a progress line from thread 0. */
typedef void (*chunk_checker)(uint64_t first, uint64_t count, check_result *r);

static void run_check(check_result *r, uint64_t total, chunk_checker check_chunk) {
    double start = now_seconds();
    uint64_t chunks = (total + CHUNK - 1) / CHUNK, done = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (uint64_t c = 0; c < chunks; c++) {
        uint64_t first = c * CHUNK, count = first + CHUNK <= total ? CHUNK : total - first;
        check_chunk(first, count, r);
        uint64_t finished;
#pragma omp atomic capture
        finished = done += count;
        if (omp_get_thread_num() == 0 && (c & 63) == 0) progress(r->name, finished, total, start);
    }
    r->seconds = now_seconds() - start;
    progress(r->name, total, total, start);
    fprintf(stderr, "\n");
    r->passed = total - r->failed;
    printf("%s: %llu inputs, %llu failed, %.1f s\n", r->name, (unsigned long long)total, (unsigned long long)r->failed,
           r->seconds);
    fflush(stdout);
}

/* ---- (a) kvc_expf_cr against MPFR ---------------------------------------- */

/* exp(x) rounded to binary32 by MPFR alone: correct rounding to 24 bits in
 * binary32's exponent range, then subnormalize re-rounds results below
 * 2^-126 to their fewer bits using the ternary value (no double rounding). */
static uint32_t mpfr_binary32_exp(uint32_t x_bits, mpfr_t x, mpfr_t y) {
    float x_value = kvc_f32_from_bits(x_bits);
    mpfr_set_flt(x, x_value, MPFR_RNDN);   /* exact: x has 24 bits */
    int ternary = mpfr_exp(y, x, MPFR_RNDN);
    ternary = mpfr_subnormalize(y, ternary, MPFR_RNDN);
    return kvc_f32_bits(mpfr_get_flt(y, MPFR_RNDN));   /* exact: y fits binary32 */
}

static void check_expf_against_mpfr(uint64_t first, uint64_t count, check_result *r) {
    /* The exponent range is per thread in a thread-safe MPFR. */
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    mpfr_t x, y;
    mpfr_init2(x, 24);
    mpfr_init2(y, 24);
    for (uint64_t i = first; i < first + count; i++) {
        uint32_t x_bits = nonpositive_input(i);
        uint32_t got = kvc_f32_bits(kvc_expf_cr(kvc_f32_from_bits(x_bits)));
        uint32_t want = mpfr_binary32_exp(x_bits, x, y);
        int both_nan = kvc_f32_is_nan(kvc_f32_from_bits(got)) && kvc_f32_is_nan(kvc_f32_from_bits(want));
        if (got != want && !both_nan) print_failure(r, x_bits, want, got);
    }
    mpfr_clear(x);
    mpfr_clear(y);
}

/* ---- (b) vector exp against kvc_expf_cr ------------------------------------ */

/* Every binary32 pattern, positive x included: the fast path's domain
 * [-87, 88] is covered by this check alone (see optimized/vector_math.c). */
static void check_vector_exp(uint64_t first, uint64_t count, check_result *r) {
    float x[CHUNK] = {0}, got[CHUNK];
    for (uint64_t i = 0; i < count; i++) x[i] = kvc_f32_from_bits((uint32_t)(first + i));
    opt_exp_array(x, got, (int64_t)count);
    for (uint64_t i = 0; i < count; i++) {
        /* Bit for bit, NaN payload included (both return x for NaN). */
        uint32_t want = kvc_f32_bits(kvc_expf_cr(x[i])), have = kvc_f32_bits(got[i]);
        if (want != have) print_failure(r, kvc_f32_bits(x[i]), want, have);
    }
}

/* ---- (c) vector conversions against the scalar ones --------------------- */

static void check_vector_conversions(uint64_t first, uint64_t count, check_result *r) {
    float x[CHUNK] = {0};
    uint16_t bf16[CHUNK];
    uint8_t fp8[CHUNK], fp8_in_range[CHUNK];
    for (uint64_t i = 0; i < count; i++) x[i] = kvc_f32_from_bits((uint32_t)(first + i));
    opt_bf16_array(x, bf16, (int64_t)count);
    opt_fp8_array(x, fp8, (int64_t)count);
    opt_fp8_in_range_array(x, fp8_in_range, (int64_t)count);
    for (uint64_t i = 0; i < count; i++) {
        uint16_t want_bf16 = kvc_bf16_from_f32(x[i]);
        uint8_t want_fp8 = kvc_fp8_from_f32(x[i]);
        int in_range = fabsf(x[i]) <= KVC_FP8_MAX;   /* false for NaN */
        if (want_bf16 != bf16[i]) print_failure(r, kvc_f32_bits(x[i]), want_bf16, bf16[i]);
        else if (want_fp8 != fp8[i]) print_failure(r, kvc_f32_bits(x[i]), want_fp8, fp8[i]);
        else if (in_range && want_fp8 != fp8_in_range[i]) print_failure(r, kvc_f32_bits(x[i]), want_fp8, fp8_in_range[i]);
    }
}

int main(int argc, char **argv) {
    int vector_checks = 1, mpfr_check = 1;
    if (argc > 1 && strcmp(argv[1], "--vector-only") == 0) mpfr_check = 0;
    else if (argc > 1 && strcmp(argv[1], "--mpfr-only") == 0) vector_checks = 0;
    else if (argc > 1) {
        fprintf(stderr, "usage: kvcmp-exhaustive [--vector-only | --mpfr-only]\n");
        return 2;
    }
    char error[256] = "";
    int have_vector = kvc_optimized_backend_get(error, sizeof error) != NULL;
    printf("kvcmp exhaustive: %d threads\n", omp_get_max_threads());
    check_result results[3] = {
        {"(b) vector exp vs kvc_expf_cr, all 2^32 inputs", 0, 0, 0},
        {"(c) vector bf16 and fp8 vs scalar, all 2^32 inputs", 0, 0, 0},
        {"(a) kvc_expf_cr vs MPFR binary32 oracle, every x <= 0", 0, 0, 0},
    };
    int ran[3] = {0, 0, 0};
    if (vector_checks && !have_vector) printf("skipping the vector checks: %s\n", error);
    if (vector_checks && have_vector) {
        run_check(&results[0], (uint64_t)1 << 32, check_vector_exp);
        run_check(&results[1], (uint64_t)1 << 32, check_vector_conversions);
        ran[0] = ran[1] = 1;
    }
    if (mpfr_check) {
        run_check(&results[2], NONPOSITIVE_INPUTS, check_expf_against_mpfr);
        ran[2] = 1;
    }
    uint64_t passed = 0, failed = 0;
    for (int i = 0; i < 3; i++) {
        if (!ran[i]) continue;
        printf("  %-56s %8.1f s  %llu failed\n", results[i].name, results[i].seconds, (unsigned long long)results[i].failed);
        passed += results[i].passed;
        failed += results[i].failed;
    }
    printf("%llu passed, %llu failed\n", (unsigned long long)passed, (unsigned long long)failed);
    return failed ? 1 : 0;
}

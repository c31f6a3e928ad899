/* Writes harness/fuzz/exp_boundaries.inc: the fp32 inputs x in
 * [-87, 0) whose exp(x) lies within 2^-22 of an fp32 ulp of a rounding
 * boundary (the midpoint between two fp32 values).  An exp evaluated in
 * double and rounded once to fp32 is correctly rounded unless its error
 * reaches that distance (2^7 double ulps); an approximate fp32 exp gets
 * these wrong first.  The generator's exp_boundary family puts them into
 * score windows (harness/fuzz/gen_values.c).
 *
 * Every float of the range is screened in double, then each candidate's
 * distance is measured with MPFR at 200 bits.  Run once, by
 *   make exp-boundaries
 * which builds this file and rewrites harness/fuzz/exp_boundaries.inc, a
 * source of the fuzzer (not a fixture: the build needs it). */
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* |exp(x) - midpoint| in units of the fp32 ulp there, exactly (MPFR). */
static double boundary_distance(float x) {
    mpfr_t y, m;
    mpfr_inits2(200, y, m, (mpfr_ptr)0);
    mpfr_set_flt(y, x, MPFR_RNDN);
    mpfr_exp(y, y, MPFR_RNDN);
    float low = mpfr_get_flt(y, MPFR_RNDD), high = nextafterf(low, INFINITY);
    mpfr_set_flt(m, low, MPFR_RNDN);
    mpfr_add_d(m, m, ((double)high - (double)low) / 2, MPFR_RNDN);   /* exact: one more bit */
    mpfr_sub(m, y, m, MPFR_RNDN);
    double d = fabs(mpfr_get_d(m, MPFR_RNDN)) / ((double)high - (double)low);
    mpfr_clears(y, m, (mpfr_ptr)0);
    return d;
}

int main(void) {
    const double limit = 0x1p-22;
    int found = 0;
    printf("/* fp32 x in [-87, 0) with exp(x) within 2^-22 fp32 ulp of a rounding boundary;\n"
           " * written by tools/exp_boundaries.c (see there how to rerun it). */\n");
    /* negative floats: bits 0x80000001 (-min subnormal) up to -87 */
    for (uint32_t u = 0x80000001u; u <= 0xC2AE0000u; u++) {
        float x = from_bits(u);
        double y = exp((double)x);
        float low = (float)y;
        if ((double)low > y) low = nextafterf(low, -INFINITY);
        double ulp = (double)nextafterf(low, INFINITY) - (double)low;
        double d = fabs(y - ((double)low + ulp / 2)) / ulp;
        if (d > 4 * limit) continue;   /* double's own error is far below this */
        if (boundary_distance(x) >= limit) continue;
        printf("%a,\n", (double)x);
        found++;
    }
    fprintf(stderr, "exp_boundaries: %d inputs\n", found);
    return 0;
}

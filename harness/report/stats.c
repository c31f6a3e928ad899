/* Error statistics of the reports: moments, histogram, percentiles and
 * error by magnitude.  See report.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/report.h"

int kvc_hist_bin(double error) {
    if (error <= 0) return 0;
    if (error <= 0.5) return 1;
    if (error <= 1) return 2;
    int exponent;
    frexp(error, &exponent);   /* error in [2^(exponent-1), 2^exponent) */
    /* (2^(k-3), 2^(k-2)] -> k; an exact power 2^j belongs to bin j+2. */
    int bin = ldexp(1.0, exponent - 1) == error ? exponent + 1 : exponent + 2;
    return bin < KVC_HIST_BINS ? bin : KVC_HIST_BINS - 1;
}

void kvc_hist_bin_label(int bin, char *out, size_t size) {
    if (bin == 0) snprintf(out, size, "0");
    else if (bin == 1) snprintf(out, size, "<=1/2");
    else if (bin == KVC_HIST_BINS - 1) snprintf(out, size, ">2^%d", bin - 3);
    else if (bin - 2 < 10) snprintf(out, size, "<=%d", 1 << (bin - 2));
    else snprintf(out, size, "<=2^%d", bin - 2);
}

int kvc_magnitude_bin(double magnitude) {
    if (!(magnitude > 0) || isinf(magnitude)) return -1;
    int exponent;
    frexp(magnitude, &exponent);
    int bin = exponent - 1 - KVC_MAG_MIN_EXP;
    if (bin < 0) bin = 0;
    if (bin >= KVC_MAG_BINS) bin = KVC_MAG_BINS - 1;
    return bin;
}

void kvc_stats_init(kvc_error_stats *s, const char *name, kvc_error_unit unit) {
    memset(s, 0, sizeof *s);
    s->name = name;
    s->unit = unit;
}

void kvc_stats_add(kvc_error_stats *s, double error, int equal, double magnitude, const char *where) {
    s->count++;
    if (equal) s->exact++;
    if (error < 0 || isinf(error) || isnan(error)) {
        s->nonfinite_mismatch++;
        return;
    }
    if (s->count - s->nonfinite_mismatch > s->capacity) {
        int64_t grown = s->capacity ? 2 * s->capacity : 4096;
        float *values = realloc(s->values, (size_t)grown * sizeof *values);
        if (!values) return;   /* keeps the moments, loses percentile samples */
        s->values = values;
        s->capacity = grown;
    }
    s->values[s->count - s->nonfinite_mismatch - 1] = (float)error;
    s->sum += error;
    if (error > s->max || (s->max == 0 && s->worst_where[0] == 0)) {
        s->max = error;
        if (where) snprintf(s->worst_where, sizeof s->worst_where, "%s", where);
    }
    s->hist[kvc_hist_bin(error)]++;
    int bin = kvc_magnitude_bin(magnitude);
    if (bin >= 0) {
        s->mag_count[bin]++;
        s->mag_sum[bin] += error;
        if (error > s->mag_max[bin]) s->mag_max[bin] = error;
    }
}

void kvc_stats_free(kvc_error_stats *s) {
    free(s->values);
    s->values = NULL;
    s->capacity = 0;
}

static int compare_floats(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

double kvc_stats_percentile(kvc_error_stats *s, double p) {
    int64_t n = s->count - s->nonfinite_mismatch;
    if (n <= 0 || !s->values || n > s->capacity) return 0;
    qsort(s->values, (size_t)n, sizeof *s->values, compare_floats);
    /* Nearest rank: the smallest value with at least p of the sample at or below it. */
    int64_t rank = (int64_t)ceil(p * (double)n);
    if (rank < 1) rank = 1;
    return s->values[rank - 1];
}

double kvc_stats_mean(const kvc_error_stats *s) {
    int64_t n = s->count - s->nonfinite_mismatch;
    return n > 0 ? s->sum / (double)n : 0;
}

const char *kvc_unit_name(kvc_error_unit unit) {
    switch (unit) {
    case KVC_UNIT_F32_ULPS: return "fp32 ulps";
    case KVC_UNIT_BF16_ULPS: return "bf16 ulps";
    case KVC_UNIT_FP8_STEPS: return "fp8 steps";
    case KVC_UNIT_SCALE_STEPS: return "scale steps";
    }
    return "?";
}

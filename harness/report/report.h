/* kvcmp report: precision of the reference against an MPFR oracle, and
 * parity of upstream implementations' cases with the reference.  The two
 * analyses fill the structures below; report_render.c writes them as
 * Markdown, a self-contained HTML page with SVG plots, and JSON. */
#ifndef KVCMP_REPORT_H
#define KVCMP_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "kvcmp/case.h"
#include "kvcmp/kvcmp.h"
#include "harness/compare/causes.h"

/* ---- error statistics ------------------------------------------------ */

/* Histogram bins of an error e >= 0 (ulps or format steps):
 * bin 0: e == 0; bin 1: (0, 1/2]; bin 2: (1/2, 1]; bin k >= 3: (2^(k-3), 2^(k-2)];
 * the last bin also takes everything larger. */
#define KVC_HIST_BINS 24
/* Error against magnitude: one bin per binade of |exact|, 2^-40 .. 2^40. */
#define KVC_MAG_BINS 80
#define KVC_MAG_MIN_EXP (-40)

typedef enum { KVC_UNIT_F32_ULPS, KVC_UNIT_BF16_ULPS, KVC_UNIT_FP8_STEPS, KVC_UNIT_SCALE_STEPS } kvc_error_unit;

typedef struct {
    const char *name;         /* "pooled", "normed", "fp8 code", ... */
    kvc_error_unit unit;
    int64_t count;            /* elements compared */
    int64_t exact;            /* elements equal to the ideal (exactly rounded) value */
    int64_t nonfinite_mismatch; /* NaN/inf on one side only (not in the moments) */
    double sum, max;
    float *values;            /* finite errors, for percentiles */
    int64_t capacity;
    int64_t hist[KVC_HIST_BINS];
    int64_t mag_count[KVC_MAG_BINS];
    double mag_sum[KVC_MAG_BINS], mag_max[KVC_MAG_BINS];
    char worst_where[200];    /* which case/element had the max */
} kvc_error_stats;

int kvc_hist_bin(double error);
/* Text label of a bin: "0", "<=1/2", "<=1", "<=2", ... ">2^20". */
void kvc_hist_bin_label(int bin, char *out, size_t size);
/* Binade of a magnitude, clamped to the bin range; -1 for zero/non-finite. */
int kvc_magnitude_bin(double magnitude);

void kvc_stats_init(kvc_error_stats *s, const char *name, kvc_error_unit unit);
/* Adds one comparison.  error < 0 or infinite: NaN/inf on one side only.
 * equal: the value is the ideal one (for fp32 intermediates: the exactly
 * rounded fp32 value, so an error of up to 1/2 ulp still counts as equal).
 * magnitude: |exact| (for the error-vs-magnitude plot), 0 if none. */
void kvc_stats_add(kvc_error_stats *s, double error, int equal, double magnitude, const char *where);
void kvc_stats_free(kvc_error_stats *s);
/* Percentile p in [0, 1] of the finite errors (sorts in place). */
double kvc_stats_percentile(kvc_error_stats *s, double p);
double kvc_stats_mean(const kvc_error_stats *s);
const char *kvc_unit_name(kvc_error_unit unit);

/* ---- precision ------------------------------------------------------- */

typedef enum {
    KVC_METRIC_POOLED,      /* fp32 pooled value (steps 1-3) */
    KVC_METRIC_POOLED_SCALED, /* the same error in ulps of the weighted mean |kv| */
    KVC_METRIC_NORMED,      /* fp32 normed value (steps 4-6) */
    KVC_METRIC_ROPE,        /* fp32 RoPE output (step 7), before any store */
    KVC_METRIC_ROPE_SCALED, /* the same error in ulps of |x_e cos| + |x_o sin| */
    KVC_METRIC_STATE,       /* fp32 score + ape of a V4 state row */
    KVC_METRIC_SCALE,       /* block scale exponent (UE8M0 byte / indexer fp32) */
    KVC_METRIC_CODE,        /* fp8 code (NoPE blocks, indexer, plain fp8 rows) */
    KVC_METRIC_BF16,        /* bf16 value stored in a cache (RoPE dims, plain rows) */
    KVC_METRIC_LATENT,      /* bf16 latent of v41.save_compress_norm */
    KVC_METRIC_COUNT
} kvc_precision_metric;

#define KVC_PRECISION_WORST 2

typedef struct {
    kvc_case c;               /* inputs and the reference's outputs (NAME.out) */
    double score;             /* ranking: output distance first, then ulps */
    char description[320];
    char saved_dir[512];
} kvc_worst_case;

typedef struct {
    char name[64];            /* "v4.compress D=512 R=4" */
    char slug[64];            /* "v4.compress-d512-r4" */
    int cases, rows;          /* cases run, output rows (closing tokens) checked */
    int skipped;              /* corpus cases of a stage the implementation does not offer */
    int families_mask;        /* value families that ran */
    kvc_error_stats metrics[KVC_METRIC_COUNT];
    /* A candidate's stored values split in two classes: those with the
     * reference's bits (their distance from the exact value is the
     * contract's own rounding: bf16 then fp8, its evaluation order) and
     * those whose bits differ from the reference's (the candidate's
     * departures), each binned by its distance from the exact value.
     * For the reference every value is of the first class. */
    int64_t departures[KVC_METRIC_COUNT];
    int64_t departures_at_ideal[KVC_METRIC_COUNT];   /* of those, values equal to the ideal one */
    int64_t departure_hist[KVC_METRIC_COUNT][KVC_HIST_BINS];
    int compared_with_reference;      /* the reference ran on the same cases (a candidate's report) */
    int num_worst;
    kvc_worst_case worst[KVC_PRECISION_WORST];
} kvc_precision_variant;

typedef struct {
    uint64_t seed;
    int cases_per_family;
    const char *impl_name;    /* "ref", or the candidate measured (--impl) */
    int stored_only;          /* a candidate: only its stored values are measured */
    int num_variants;
    kvc_precision_variant *variants;
    double seconds;
} kvc_precision_report;

/* Why a stage's table is empty ("" when it has values): the
 * implementation does not offer the stage, or no case wrote a row. */
void kvc_precision_empty_reason(const kvc_precision_report *r, const kvc_precision_variant *v, char *out, size_t size);

/* Runs the seeded corpus; out_dir receives the worst case directories. */
int kvc_precision_run(uint64_t seed, int cases_per_family, const char *out_dir, kvc_precision_report *report);
/* The same for another implementation (a candidate library, opt): its
 * stored values against exact math.  Its intermediates are not visible,
 * so only the stored metrics are measured; stages it does not offer are
 * left out (variant cases 0). */
int kvc_precision_run_impl(const kvc_backend *backend, const char *impl_name, uint64_t seed, int cases_per_family, const char *out_dir,
                           kvc_precision_report *report);
void kvc_precision_free(kvc_precision_report *report);
/* One stage variant (kvc_corpus_variant) over the families in family_mask
 * (bit i: kvc_corpus_family i); for the tests and for the loop above. */
int kvc_precision_run_variant(int variant, unsigned family_mask, uint64_t seed, int cases_per_family, kvc_precision_variant *v);
int kvc_precision_run_variant_on(const kvc_backend *backend, int variant, unsigned family_mask, uint64_t seed, int cases_per_family,
                                 kvc_precision_variant *v);
void kvc_precision_variant_free(kvc_precision_variant *v);

/* ---- parity ---------------------------------------------------------- */

/* Causes and regions: harness/compare/causes.h (one classifier for reports and signatures). */

#define KVC_PARITY_DIST_BINS 12   /* 0, 1, 2, 3-4, 5-8, ..., >512, NaN */

#define KVC_PARITY_EXPLANATIONS 12
typedef struct {
    char source[64];
    char stage[64];           /* stage name plus D/R, e.g. "v4.compress D=512 R=4" */
    int cases, cases_identical;
    int64_t bytes, bytes_identical;
    int64_t elements[KVC_PREGION_COUNT], identical[KVC_PREGION_COUNT];
    int64_t distance_hist[KVC_PREGION_COUNT][KVC_PARITY_DIST_BINS];
    int64_t causes[KVC_CAUSE_COUNT];
    char example[KVC_CAUSE_COUNT][240];   /* one case + element per cause */
    char example_dir[KVC_CAUSE_COUNT][240];   /* that case's directory, for its repro line */
    char first_differing[240];            /* the first case of the group that differs */
    /* The diagnosis of its differing cases (include/kvcmp/deviations.h):
     * how many each explanation names, and those none does. */
    int num_explanations;
    char explanation[KVC_PARITY_EXPLANATIONS][160];   /* "bf16-half-away", a composition "a+b+c" */
    int explained_cases[KVC_PARITY_EXPLANATIONS];
    int unexplained_cases;
} kvc_parity_group;

typedef struct {
    int num_groups, capacity;
    kvc_parity_group *groups;
    int cases, cases_identical;
    char paths[8][512];
    int num_paths;
} kvc_parity_report;

int kvc_parity_dist_bin(int64_t distance);   /* distance < 0: the NaN bin */
void kvc_parity_dist_label(int bin, char *out, size_t size);

/* Adds every case under path to the report. */
int kvc_parity_add_path(kvc_parity_report *report, const char *path);
/* One loaded case (exposed for the tests). */
void kvc_parity_add_case(kvc_parity_report *report, const kvc_case *c, const char *dir);
void kvc_parity_free(kvc_parity_report *report);

/* ---- rendering ------------------------------------------------------- */

int kvc_render_precision(const kvc_precision_report *report, const char *out_dir);
/* The legend of the two classes of stored values (kvc_precision_variant.departures). */
extern const char *const kvc_precision_contract_class, *const kvc_precision_departure_class;
int kvc_render_parity(const kvc_parity_report *report, const char *out_dir);

/* ---- the mutant check's verdict (mutants.c) ----------------------------- */

int kvc_report_mutants(int argc, char **argv);

#endif

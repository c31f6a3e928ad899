/* Small SVG plots drawn by the project for the report pages: no plotting
 * library, no external assets; every plot is one inline <svg> element. */
#ifndef KVCMP_REPORT_SVG_H
#define KVCMP_REPORT_SVG_H

#include <stdint.h>
#include <stdio.h>

/* Vertical bars with a log10(1 + count) axis, labels under each bar and
 * x_title under them.  highlight_first colours bar 0 (the "exact" bin). */
void kvc_svg_histogram(FILE *f, const char *title, const char *x_title, const int64_t *counts, const char *const *labels, int bins,
                       int highlight_first);

/* The same for two classes of one measure, side by side in each bin
 * with a legend above the plot naming each class (the precision
 * report: the contract's own rounding, a candidate's departures). */
void kvc_svg_histogram_classes(FILE *f, const char *title, const char *x_title, const int64_t *contract, const int64_t *departures,
                               const char *const *labels, int bins, const char *contract_legend, const char *departure_legend);

/* Error against magnitude: x = binade of |exact| (2^x), y = log2 of the
 * error; the max (and mean) error of each binade as points joined by lines. */
typedef struct {
    int first_exp;            /* binade of bin 0 */
    int bins;
    const int64_t *count;
    const double *max, *mean_sum;   /* mean = mean_sum / count */
} kvc_svg_series;
void kvc_svg_error_vs_magnitude(FILE *f, const char *title, const char *unit, const kvc_svg_series *series);

/* A grid of fractions, with the rows' and the columns' axis titles: rows x cols cells, values[r * cols + c] in [0, 1]
 * or < 0 for an empty cell; texts (same layout, may be NULL) are printed
 * in the cells, values colour them. */
void kvc_svg_heatmap(FILE *f, const char *title, const char *row_title, const char *const *row_labels, int rows, const char *col_title,
                     const char *const *col_labels, int cols, const double *values, const char *const *texts);

/* HTML-escaped text. */
void kvc_html_text(FILE *f, const char *text);

#endif

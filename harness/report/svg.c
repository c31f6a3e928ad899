/* SVG plots of the reports: see report_svg.h. */
#include "harness/report/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define FONT "font-family=\"system-ui,sans-serif\""
#define EXACT_COLOUR "#2a9d8f"
#define BAR_COLOUR "#4c78a8"
#define MAX_COLOUR "#d1495b"
#define MEAN_COLOUR "#4c78a8"
#define CONTRACT_COLOUR "#8d99ae"
#define DEPARTURE_COLOUR "#e76f51"

void kvc_html_text(FILE *f, const char *text) {
    for (; *text; text++) {
        switch (*text) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*text, f);
        }
    }
}

static void title_text(FILE *f, double x, double y, const char *title) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"600\" %s>", x, y, FONT);
    kvc_html_text(f, title);
    fputs("</text>\n", f);
}

/* Tick label of a count: 1, 10, 100, 1k ... 1M ... */
static void count_label(char *out, size_t size, double count) {
    static const char *const suffix[] = {"", "k", "M", "G", "T"};
    int k = 0;
    while (count >= 1000 && k < 4) { count /= 1000; k++; }
    snprintf(out, size, "%.0f%s", count, suffix[k]);
}

static void axis_titles(FILE *f, double x_mid, double x_y, const char *x_title, double y_mid, const char *y_title) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" %s>", x_mid, x_y, FONT);
    kvc_html_text(f, x_title);
    fprintf(f, "</text>\n<text transform=\"translate(11,%.1f) rotate(-90)\" font-size=\"10\" text-anchor=\"middle\" %s>", y_mid, FONT);
    kvc_html_text(f, y_title);
    fputs("</text>\n", f);
}

/* The log-scale count axis of a histogram: a grid line and label per power of ten. */
static void log_ticks(FILE *f, double left, double plot_w, double top, double plot_h, int64_t most, double scale) {
    for (double tick = 1; tick <= (double)most; tick *= 10) {
        double y = top + plot_h - log10(1.0 + tick) * scale;
        char text[16];
        count_label(text, sizeof text, tick);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>", left, left + plot_w, y, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"end\" %s>%s</text>\n", left - 3, y + 3, FONT, text);
    }
}

/* A bin's label under the plot, turned so that long ones fit. */
static void bin_label(FILE *f, double x, double bar, double bottom, const char *label) {
    fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-55)\" font-size=\"9\" text-anchor=\"end\" %s>", x + bar / 2 + 3,
            bottom + 10, FONT);
    kvc_html_text(f, label);
    fputs("</text>\n", f);
}

/* The axis titles and the baseline, which end the picture. */
static void log_axis_end(FILE *f, double left, double plot_w, double top, double plot_h, double height, const char *x_title) {
    axis_titles(f, left + plot_w / 2, height - 6, x_title, top + plot_h / 2, "elements (log scale)");
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n</svg>\n", left, left + plot_w, top + plot_h,
            top + plot_h);
}

void kvc_svg_histogram(FILE *f, const char *title, const char *x_title, const int64_t *counts, const char *const *labels, int bins,
                       int highlight_first) {
    const double width = 380, height = 236, left = 52, right = 8, top = 26, bottom = 74;
    double plot_w = width - left - right, plot_h = height - top - bottom, bar = plot_w / bins;
    int64_t most = 1;
    for (int i = 0; i < bins; i++) if (counts[i] > most) most = counts[i];
    /* Log scale: a single last-bit error among a million exact values
     * stays visible.  Bars start at a count of 1 (an empty bin has no bar),
     * so the axis never needs a zero. */
    double scale = plot_h / log10(1.0 + (double)most);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", width,
            height, width, height);
    title_text(f, left, 16, title);
    log_ticks(f, left, plot_w, top, plot_h, most, scale);
    for (int i = 0; i < bins; i++) {
        double h = log10(1.0 + (double)counts[i]) * scale, x = left + i * bar;
        const char *colour = highlight_first && i == 0 ? EXACT_COLOUR : BAR_COLOUR;
        /* Labels such as "<=1/2" must be escaped to stay XML. */
        if (counts[i]) {
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x + 1, top + plot_h - h, bar - 2, h,
                    colour);
            kvc_html_text(f, labels[i]);
            fprintf(f, ": %lld</title></rect>\n", (long long)counts[i]);
        }
        bin_label(f, x, bar, top + plot_h, labels[i]);
    }
    log_axis_end(f, left, plot_w, top, plot_h, height, x_title);
}

void kvc_svg_histogram_classes(FILE *f, const char *title, const char *x_title, const int64_t *contract, const int64_t *departures,
                               const char *const *labels, int bins, const char *contract_legend, const char *departure_legend) {
    const double width = 380, height = 270, left = 52, right = 8, top = 60, bottom = 74;
    double plot_w = width - left - right, plot_h = height - top - bottom, bar = plot_w / bins;
    int64_t most = 1;
    for (int i = 0; i < bins; i++) {
        if (contract[i] > most) most = contract[i];
        if (departures[i] > most) most = departures[i];
    }
    double scale = plot_h / log10(1.0 + (double)most);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", width,
            height, width, height);
    title_text(f, left, 16, title);
    /* The legend: which colour is which class. */
    const char *legend[2] = {contract_legend, departure_legend}, *colour[2] = {CONTRACT_COLOUR, DEPARTURE_COLOUR};
    for (int k = 0; k < 2; k++) {
        double y = 26 + 14 * k;
        fprintf(f, "<g class=\"legend\"><rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", left, y, colour[k]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" %s>", left + 14, y + 9, FONT);
        kvc_html_text(f, legend[k]);
        fputs("</text></g>\n", f);
    }
    log_ticks(f, left, plot_w, top, plot_h, most, scale);
    for (int i = 0; i < bins; i++) {
        double x = left + i * bar;
        const int64_t *counts[2] = {contract, departures};
        /* Two half bars per bin: the contract's on the left, the departures on the right. */
        for (int k = 0; k < 2; k++) {
            if (!counts[k][i]) continue;
            double h = log10(1.0 + (double)counts[k][i]) * scale;
            fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
                    k ? "departure" : "contract", x + 1 + k * (bar - 2) / 2, top + plot_h - h, (bar - 2) / 2, h, colour[k]);
            kvc_html_text(f, legend[k]);
            fputs(", ", f);
            kvc_html_text(f, labels[i]);
            fprintf(f, ": %lld</title></rect>\n", (long long)counts[k][i]);
        }
        bin_label(f, x, bar, top + plot_h, labels[i]);
    }
    log_axis_end(f, left, plot_w, top, plot_h, height, x_title);
}

/* Width that a label in 11px system-ui takes, roughly, for layout. */
static double label_width(const char *const *labels, int n) {
    size_t longest = 0;
    for (int i = 0; i < n; i++) if (strlen(labels[i]) > longest) longest = strlen(labels[i]);
    return 6.2 * (double)longest + 12;
}

static const char *fraction_colour(double fraction) {
    return fraction >= 1.0 ? EXACT_COLOUR : fraction >= 0.99 ? "#e9c46a" : MAX_COLOUR;
}

void kvc_svg_heatmap(FILE *f, const char *title, const char *row_title, const char *const *row_labels, int rows, const char *col_title,
                     const char *const *col_labels, int cols, const double *values, const char *const *texts) {
    const double cell_w = 150, cell_h = 22, top = 62, label_w = label_width(row_labels, rows) + 16;
    double width = label_w + cols * cell_w + 8, height = top + rows * cell_h + 8;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", width,
            height, width, height);
    title_text(f, 4, 16, title);
    /* Axis titles: the columns' above their labels, the rows' along the left edge. */
    fprintf(f, "<text x=\"%.1f\" y=\"34\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\" %s>", label_w + cols * cell_w / 2, FONT);
    kvc_html_text(f, col_title);
    fprintf(f, "</text>\n<text transform=\"translate(11,%.1f) rotate(-90)\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\" %s>",
            top + rows * cell_h / 2, FONT);
    kvc_html_text(f, row_title);
    fputs("</text>\n", f);
    for (int c = 0; c < cols; c++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" font-weight=\"600\" text-anchor=\"middle\" %s>", label_w + (c + 0.5) * cell_w,
                top - 8, FONT);
        kvc_html_text(f, col_labels[c]);
        fputs("</text>\n", f);
    }
    for (int r = 0; r < rows; r++) {
        double y = top + r * cell_h;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" %s>", label_w - 6, y + 15, FONT);
        kvc_html_text(f, row_labels[r]);
        fputs("</text>\n", f);
        for (int c = 0; c < cols; c++) {
            double v = values[r * cols + c], x = label_w + c * cell_w;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"#fff\"/>", x, y, cell_w, cell_h,
                    v < 0 ? "#f2f2f2" : fraction_colour(v));
            const char *text = texts && texts[r * cols + c] ? texts[r * cols + c] : v < 0 ? "-" : "";
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"%s\" %s>", x + cell_w / 2, y + 15,
                    v >= 0 && v < 0.99 ? "#fff" : "#222", FONT);
            kvc_html_text(f, text);
            fputs("</text>\n", f);
        }
    }
    fputs("</svg>\n", f);
}

/* log2 of an error for the y axis; zero errors sit on the floor. */
static double error_y(double error, double floor_exp) { return error > 0 ? fmax(log2(error), floor_exp) : floor_exp; }

static void series_line(FILE *f, const kvc_svg_series *s, int use_max, double x0, double y0, double sx, double sy, int xmin,
                        double floor_exp, const char *colour) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
    for (int i = 0; i < s->bins; i++) {
        if (!s->count[i]) continue;
        double e = use_max ? s->max[i] : s->mean_sum[i] / (double)s->count[i];
        fprintf(f, "%.1f,%.1f ", x0 + (s->first_exp + i - xmin) * sx, y0 - (error_y(e, floor_exp) - floor_exp) * sy);
    }
    fputs("\"/>\n", f);
    for (int i = 0; i < s->bins; i++) {
        if (!s->count[i]) continue;
        double e = use_max ? s->max[i] : s->mean_sum[i] / (double)s->count[i];
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>|exact| in [2^%d, 2^%d): %s %.3g (%lld values)</title></circle>\n",
                x0 + (s->first_exp + i - xmin) * sx, y0 - (error_y(e, floor_exp) - floor_exp) * sy, colour, s->first_exp + i,
                s->first_exp + i + 1, use_max ? "max" : "mean", e, (long long)s->count[i]);
    }
}

void kvc_svg_error_vs_magnitude(FILE *f, const char *title, const char *unit, const kvc_svg_series *s) {
    const double width = 380, height = 230, left = 52, right = 10, top = 42, bottom = 36;
    int xmin = 1000, xmax = -1000;
    double ymax = 0, ymin = 0;
    for (int i = 0; i < s->bins; i++) {
        if (!s->count[i]) continue;
        int x = s->first_exp + i;
        if (x < xmin) xmin = x;
        if (x > xmax) xmax = x;
        if (s->max[i] > 0) ymax = fmax(ymax, ceil(log2(s->max[i])));
        double mean = s->mean_sum[i] / (double)s->count[i];
        if (mean > 0) ymin = fmin(ymin, floor(log2(mean)));
    }
    if (xmin > xmax) { xmin = -1; xmax = 1; }
    if (xmax == xmin) xmax = xmin + 1;
    double floor_exp = fmax(ymin, -12) - 1, plot_w = width - left - right, plot_h = height - top - bottom;
    if (ymax <= floor_exp) ymax = floor_exp + 1;
    double sx = plot_w / (xmax - xmin), sy = plot_h / (ymax - floor_exp), x0 = left, y0 = top + plot_h;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", width,
            height, width, height);
    title_text(f, left, 16, title);
    int ystep = (int)ceil((ymax - floor_exp) / 6.0);
    for (int y = (int)floor_exp; y <= (int)ymax; y += ystep) {
        double py = y0 - (y - floor_exp) * sy;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>", x0, x0 + plot_w, py, py);
        /* A log axis has no zero: errors of 0 (and below the floor) sit on the floor, labelled as such. */
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"end\" %s>%s2^%d</text>\n", x0 - 3, py + 3, FONT,
                y == (int)floor_exp ? "&#8804;" : "", y);
    }
    int xstep = (xmax - xmin) > 20 ? 8 : (xmax - xmin) > 8 ? 4 : 1;
    for (int x = xmin; x <= xmax; x += xstep)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\" %s>2^%d</text>\n", x0 + (x - xmin) * sx, y0 + 13, FONT, x);
    char y_title[96];
    snprintf(y_title, sizeof y_title, "error (%s, log2)", unit);
    axis_titles(f, x0 + plot_w / 2, y0 + 28, "|exact value| (binade, log2)", top + plot_h / 2, y_title);
    series_line(f, s, 1, x0, y0, sx, sy, xmin, floor_exp, MAX_COLOUR);
    series_line(f, s, 0, x0, y0, sx, sy, xmin, floor_exp, MEAN_COLOUR);
    /* The legend has a row of its own under the title: a long title cannot run into it. */
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"29\" y2=\"29\" stroke=\"%s\" stroke-width=\"2\"/>"
               "<text x=\"%.1f\" y=\"32\" font-size=\"10\" %s>max per binade</text>"
               "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"29\" y2=\"29\" stroke=\"%s\" stroke-width=\"2\"/>"
               "<text x=\"%.1f\" y=\"32\" font-size=\"10\" %s>mean per binade</text>\n",
            left, left + 14, MAX_COLOUR, left + 18, FONT, left + 110, left + 124, MEAN_COLOUR, left + 128, FONT);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n</svg>\n", x0, x0 + plot_w, y0, y0);
}

/* Rendering of the precision and parity reports: Markdown for reading in
 * a terminal or a review, a self-contained HTML page with SVG plots for
 * looking at, and JSON for tracking over time. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/atomic_file.h"
#include "harness/report/report.h"
#include "harness/report/oracle.h"
#include "harness/report/svg.h"
#include "harness/report/run_info.h"
#include "harness/options/options.h"

/* Each report file is written aside and renamed into place
 * (common/atomic_file.h): a full disk leaves the old report, not a
 * truncated one, and fails the command. */
static int open_out(const char *out_dir, const char *name, kvc_atomic_file *a) {
    char path[4096], error[4400];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    if (kvc_atomic_open(a, path, error, sizeof error) == 0) return 0;
    fprintf(stderr, "kvcmp report: %s (give --out a writable directory)\n", error);
    return -1;
}

static int close_out(kvc_atomic_file *a) {
    char error[4400];
    if (kvc_atomic_commit(a, error, sizeof error) == 0) return 0;
    fprintf(stderr, "kvcmp report: %s (check the free space there; the old file, if any, is unchanged)\n", error);
    return -1;
}

static int write_json(const char *out_dir, const char *name, cJSON *root) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    kvc_atomic_file a;
    int rc = text && open_out(out_dir, name, &a) == 0 ? 0 : -1;
    if (rc == 0) {
        fprintf(a.f, "%s\n", text);
        rc = close_out(&a);
    }
    free(text);
    return rc;
}

static void timestamp(char *out, size_t size) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, size, "%Y-%m-%d %H:%M UTC", &tm);
}

static const char *page_style =
    "<style>body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;line-height:1.45}"
    "h1{font-size:24px}h2{font-size:19px;margin-top:34px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:18px 0 6px}"
    "table{border-collapse:collapse;font-size:12.5px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}"
    "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.plots{display:flex;flex-wrap:wrap;gap:10px}"
    ".card{border:1px solid #e3e3e3;border-radius:6px;padding:10px 14px;margin:14px 0}.ok{color:#2a9d8f}.bad{color:#d1495b}"
    "code{background:#f4f4f4;padding:1px 4px;border-radius:3px;font-size:12px}.note{color:#555;font-size:13px}</style>\n";

/* ---- precision ----------------------------------------------------- */

static double fraction(int64_t part, int64_t whole) { return whole ? (double)part / (double)whole : -1; }

static double p999(const kvc_error_stats *s) { return kvc_stats_percentile((kvc_error_stats *)s, 0.999); }

static void format_fraction(char *out, size_t size, int64_t part, int64_t whole) {
    if (!whole) snprintf(out, size, "-");
    else if (part == whole) snprintf(out, size, "100%%");
    else snprintf(out, size, "%.4f%%", 100.0 * (double)part / (double)whole);
}

/* The stored values, in the columns of the summaries. */
#define OUTPUT_METRICS 5
static const kvc_precision_metric output_metrics[OUTPUT_METRICS] = {KVC_METRIC_CODE, KVC_METRIC_SCALE, KVC_METRIC_BF16, KVC_METRIC_LATENT,
                                                                    KVC_METRIC_STATE};

static const char *const precision_intro[] = {
    "The reference (and so the optimized backend, bit-identical to it) is compared with an MPFR oracle at 160 bits that "
    "recomputes every stage from the same fp32/bf16 inputs without rounding, except where the contract stores a value in a "
    "format: the bf16 NoPE values before quantisation, the stored bf16 RoPE and latent values, the fp8 codes, the fp32 state row.",
    "Ideal block scale: ceil(log2(max(a, 1e-4)/448)) of the ideal bf16 block magnitude a, computed exactly; ideal code: the "
    "exactly rounded fp8 value of y*2^-e. Stored values are measured in steps of their format from these.",
    "Intermediates (pooled, normed, RoPE output, score+ape) are errors of the reference's fp32 value in ulps of the exact value, "
    "end to end; \"= ideal\" means the fp32 value is the exactly rounded one.",
    "Where terms cancel, the exact value is tiny and its own ulps explode while the absolute error stays at the rounding level "
    "of the terms (see error vs magnitude). \"pooled vs mean abs kv\" gives the same error in ulps of the weighted mean magnitude of "
    "the window's entries, \"RoPE vs abs products\" in ulps of |x_e cos| + |x_o sin|: the scales the rounding errors are proportional to.",
    "NaN or infinity on one side only is counted apart: exact math and the contract's IEEE steps can differ there "
    "(inf*exp(-200) is inf exactly, but inf*0 = NaN once exp underflows in fp32).",
};
#define PRECISION_INTRO_ITEMS (int)(sizeof precision_intro / sizeof precision_intro[0])

const char *const kvc_precision_contract_class =
    "the contract's own rounding: stored values with the reference's bits, whose distance from the exact value the contract "
    "itself requires (its double rounding, e.g. bf16 then fp8, and its evaluation order)";
const char *const kvc_precision_departure_class =
    "the candidate's departures: stored values whose bits differ from the reference's on the same case";

/* Values of metric m that are not the ideal one but have the reference's bits. */
static int64_t contract_inexact(const kvc_precision_variant *v, int m) {
    const kvc_error_stats *s = &v->metrics[m];
    return (s->count - s->exact) - (v->departures[m] - v->departures_at_ideal[m]);
}

/* The stored values (the metrics a candidate's report measures). */
static int is_stored(int m) { return m >= KVC_METRIC_SCALE || m == KVC_METRIC_STATE; }

static const char *const legend_note =
    "Two classes of stored values are drawn apart (grey and orange in the histograms, two columns in the tables): ";

/* Who was measured, and the command that measures it again. */
static void precision_subject(const kvc_precision_report *r, char *who, size_t who_size, char *command, size_t command_size) {
    int candidate = r->impl_name && strcmp(r->impl_name, "ref") != 0;
    if (candidate) snprintf(who, who_size, "%s", r->impl_name);
    else snprintf(who, who_size, "the reference");
    snprintf(command, command_size, "kvcmp report precision --seed %llu --cases %d%s%s", (unsigned long long)r->seed, r->cases_per_family,
             candidate ? " --impl " : "", candidate ? r->impl_name : "");
}

static const char *const candidate_note =
    "A candidate is measured by its stored values only (fp8 codes, block scales, bf16 values, latents, state rows): its "
    "intermediates are not visible from outside, and the pooled, normed and RoPE rows below are absent. Stages it does not "
    "offer have no cases. Its worst cases are saved with its own outputs: replay them with --impl and the same library.";

static void precision_markdown(FILE *f, const kvc_precision_report *r, const char *when) {
    char who[300], command[400];
    precision_subject(r, who, sizeof who, command, sizeof command);
    fprintf(f, "# Precision of %s against exact arithmetic\n\nGenerated %s by `%s` in %.1f s.\n\n", who, when, command, r->seconds);
    if (r->stored_only) fprintf(f, "%s\n\n", candidate_note);
    for (int i = 0; i < PRECISION_INTRO_ITEMS; i++) fprintf(f, "- %s\n", precision_intro[i]);
    fprintf(f, "\n**Legend.** %s\n\n- **contract**: %s;\n- **departure**: %s%s.\n\n", legend_note, kvc_precision_contract_class,
            kvc_precision_departure_class, r->stored_only ? "" : " (none here: the reference is measured)");
    fprintf(f, "## Summary: stored values equal to the exactly rounded result\n\n");
    fprintf(f, "| stage | cases | rows | fp8 codes | scales | bf16 values | latent | fp32 state | max pooled error (ulps of mean abs kv) | max normed ulps | max RoPE error (ulps of abs products) |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->num_variants; i++) {
        const kvc_precision_variant *v = &r->variants[i];
        fprintf(f, "| %s | %d | %d", v->name, v->cases, v->rows);
        for (int k = 0; k < OUTPUT_METRICS; k++) {
            char text[32];
            const kvc_error_stats *s = &v->metrics[output_metrics[k]];
            format_fraction(text, sizeof text, s->exact, s->count);
            fprintf(f, " | %s", text);
        }
        const kvc_precision_metric inner[3] = {KVC_METRIC_POOLED_SCALED, KVC_METRIC_NORMED, KVC_METRIC_ROPE_SCALED};
        for (int k = 0; k < 3; k++) {
            const kvc_error_stats *s = &v->metrics[inner[k]];
            if (s->count) fprintf(f, " | %.3g", s->max);
            else fprintf(f, " | -");
        }
        fprintf(f, " |\n");
    }
    for (int i = 0; i < r->num_variants; i++) {
        const kvc_precision_variant *v = &r->variants[i];
        fprintf(f, "\n## %s\n\n%d cases, %d output rows checked.\n\n", v->name, v->cases, v->rows);
        char empty[256];
        kvc_precision_empty_reason(r, v, empty, sizeof empty);
        if (empty[0]) { fprintf(f, "No values measured: %s.\n", empty); continue; }
        fprintf(f, "| value | unit | compared | = ideal | contract: off the ideal with the reference's bits | departure: bits other than "
                   "the reference's | max | mean | p99.9 | NaN/inf on one side | worst at |\n");
        fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int m = 0; m < KVC_METRIC_COUNT; m++) {
            const kvc_error_stats *s = &v->metrics[m];
            if (!s->count) continue;
            char exact[32], contract[32] = "-", departed[32] = "-";
            format_fraction(exact, sizeof exact, s->exact, s->count);
            if (is_stored(m)) {
                snprintf(contract, sizeof contract, "%lld", (long long)contract_inexact(v, m));
                snprintf(departed, sizeof departed, "%lld", (long long)v->departures[m]);
            }
            fprintf(f, "| %s | %s | %lld | %s | %s | %s | %.3g | %.3g | %.3g | %lld | %s |\n", s->name, kvc_unit_name(s->unit), (long long)s->count,
                    exact, contract, departed, s->max, kvc_stats_mean(s), p999(s), (long long)s->nonfinite_mismatch, s->worst_where);
        }
        if (v->num_worst)
            fprintf(f, "\nWorst cases (replay: `%s replay --impl %s DIR`; the expected tensors are %s own outputs):\n\n",
                    kvc_invocation(), r->stored_only ? r->impl_name : "ref", r->stored_only ? "the candidate's" : "the reference's");
        for (int w = 0; w < v->num_worst; w++)
            fprintf(f, "- `%s` — %s\n", v->worst[w].saved_dir[0] ? v->worst[w].saved_dir : "(not saved)", v->worst[w].description);
    }
}

static void precision_histograms(FILE *f, const kvc_precision_variant *v) {
    char label_text[KVC_HIST_BINS][16];
    const char *labels[KVC_HIST_BINS];
    for (int b = 0; b < KVC_HIST_BINS; b++) { kvc_hist_bin_label(b, label_text[b], sizeof label_text[b]); labels[b] = label_text[b]; }
    fputs("<div class=\"plots\">\n", f);
    for (int m = 0; m < KVC_METRIC_COUNT; m++) {
        const kvc_error_stats *s = &v->metrics[m];
        if (!s->count) continue;
        char x_title[96];
        snprintf(x_title, sizeof x_title, "error in %s", kvc_unit_name(s->unit));
        if (!is_stored(m)) { kvc_svg_histogram(f, s->name, x_title, s->hist, labels, KVC_HIST_BINS, 1); continue; }
        /* A stored value: the contract's own rounding apart from the departures. */
        int64_t contract[KVC_HIST_BINS];
        for (int b = 0; b < KVC_HIST_BINS; b++) contract[b] = s->hist[b] - v->departure_hist[m][b];
        kvc_svg_histogram_classes(f, s->name, x_title, contract, v->departure_hist[m], labels, KVC_HIST_BINS,
                                  "contract: the reference's bits (the contract's own rounding)",
                                  "departure: bits other than the reference's");
    }
    for (int m = 0; m < KVC_METRIC_COUNT; m++) {
        const kvc_error_stats *s = &v->metrics[m];
        if (!s->count || s->exact == s->count) continue;
        kvc_svg_series series = {KVC_MAG_MIN_EXP, KVC_MAG_BINS, s->mag_count, s->mag_max, s->mag_sum};
        char title[96];
        snprintf(title, sizeof title, "%s: error vs magnitude", s->name);
        kvc_svg_error_vs_magnitude(f, title, kvc_unit_name(s->unit), &series);
    }
    fputs("</div>\n", f);
}

static void precision_table_html(FILE *f, const kvc_precision_variant *v) {
    fputs("<table><tr><th>value</th><th>unit</th><th>compared</th><th>= ideal</th><th>contract: off the ideal with the reference's "
          "bits</th><th>departure: bits other than the reference's</th><th>max</th><th>mean</th><th>p99.9</th>"
          "<th>NaN/inf one side</th><th>worst at</th></tr>\n", f);
    for (int m = 0; m < KVC_METRIC_COUNT; m++) {
        const kvc_error_stats *s = &v->metrics[m];
        if (!s->count) continue;
        char exact[32], contract[32] = "-", departed[32] = "-";
        format_fraction(exact, sizeof exact, s->exact, s->count);
        if (is_stored(m)) {
            snprintf(contract, sizeof contract, "%lld", (long long)contract_inexact(v, m));
            snprintf(departed, sizeof departed, "%lld", (long long)v->departures[m]);
        }
        fprintf(f, "<tr><td>%s</td><td>%s</td><td>%lld</td><td class=\"%s\">%s</td><td class=\"contract\">%s</td>"
                   "<td class=\"departure\">%s</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%lld</td><td>",
                s->name, kvc_unit_name(s->unit), (long long)s->count, s->exact == s->count ? "ok" : "", exact, contract, departed, s->max,
                kvc_stats_mean(s), p999(s), (long long)s->nonfinite_mismatch);
        kvc_html_text(f, s->worst_where);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Variant x stored-value grid: the share of values equal to the exactly rounded result. */
static void precision_summary_plot(FILE *f, const kvc_precision_report *r) {
    enum { MAX_ROWS = 32 };
    const char *rows[MAX_ROWS], *cols[OUTPUT_METRICS] = {"fp8 codes", "block scales", "bf16 values", "latent (bf16)", "fp32 state"};
    double values[MAX_ROWS * OUTPUT_METRICS];
    char text[MAX_ROWS * OUTPUT_METRICS][48];
    const char *texts[MAX_ROWS * OUTPUT_METRICS];
    int n = r->num_variants < MAX_ROWS ? r->num_variants : MAX_ROWS;
    for (int i = 0; i < n; i++) {
        rows[i] = r->variants[i].name;
        for (int k = 0; k < OUTPUT_METRICS; k++) {
            const kvc_error_stats *s = &r->variants[i].metrics[output_metrics[k]];
            values[i * OUTPUT_METRICS + k] = fraction(s->exact, s->count);
            texts[i * OUTPUT_METRICS + k] = NULL;
            if (!s->count) continue;
            if (s->exact == s->count) snprintf(text[i * OUTPUT_METRICS + k], sizeof text[0], "all %lld", (long long)s->count);
            else snprintf(text[i * OUTPUT_METRICS + k], sizeof text[0], "%lld of %lld differ", (long long)(s->count - s->exact), (long long)s->count);
            texts[i * OUTPUT_METRICS + k] = text[i * OUTPUT_METRICS + k];
        }
    }
    kvc_svg_heatmap(f, "Stored values equal to the exactly rounded result", "stage", rows, n, "stored value", cols, OUTPUT_METRICS, values,
                    texts);
}

static void precision_html(FILE *f, const kvc_precision_report *r, const char *when) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvcmp precision report</title>\n", f);
    fputs(page_style, f);
    char who[300], command[400];
    precision_subject(r, who, sizeof who, command, sizeof command);
    fputs("</head><body>\n<h1>Precision of ", f);
    kvc_html_text(f, who);
    fputs(" against exact arithmetic</h1>\n<p class=\"note\">Generated ", f);
    kvc_html_text(f, when);
    fputs(" by <code>", f);
    kvc_html_text(f, command);
    fprintf(f, "</code> in %.1f s.</p>\n", r->seconds);
    if (r->stored_only) {
        fputs("<p class=\"note\">", f);
        kvc_html_text(f, candidate_note);
        fputs("</p>\n", f);
    }
    fputs("<ul class=\"note\">\n", f);
    for (int i = 0; i < PRECISION_INTRO_ITEMS; i++) {
        fputs("<li>", f);
        kvc_html_text(f, precision_intro[i]);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n<p class=\"note legend\"><b>Legend.</b> ", f);
    kvc_html_text(f, legend_note);
    fputs("</p>\n<ul class=\"note legend\">\n<li><b>contract</b> (grey): ", f);
    kvc_html_text(f, kvc_precision_contract_class);
    fputs(";</li>\n<li><b>departure</b> (orange): ", f);
    kvc_html_text(f, kvc_precision_departure_class);
    fputs(r->stored_only ? ".</li>\n</ul>\n" : " (none here: the reference is measured).</li>\n</ul>\n", f);
    fputs("<div class=\"card\">\n", f);
    precision_summary_plot(f, r);
    fputs("</div>\n", f);
    for (int i = 0; i < r->num_variants; i++) {
        const kvc_precision_variant *v = &r->variants[i];
        fprintf(f, "<h2 id=\"%s\">%s</h2>\n<p class=\"note\">%d cases, %d output rows checked.</p>\n", v->slug, v->name, v->cases, v->rows);
        char empty[256];
        kvc_precision_empty_reason(r, v, empty, sizeof empty);
        if (empty[0]) {
            fputs("<p class=\"note\">No values measured: ", f);
            kvc_html_text(f, empty);
            fputs(".</p>\n", f);
            continue;
        }
        precision_table_html(f, v);
        precision_histograms(f, v);
        if (v->num_worst) fputs("<h3>Worst cases</h3><ul>\n", f);
        for (int w = 0; w < v->num_worst; w++) {
            fputs("<li><code>", f);
            kvc_html_text(f, kvc_invocation());
            fputs(" replay --impl ", f);
            kvc_html_text(f, r->stored_only ? r->impl_name : "ref");
            fputc(' ', f);
            kvc_html_text(f, v->worst[w].saved_dir);
            fputs("</code> — ", f);
            kvc_html_text(f, v->worst[w].description);
            fputs("</li>\n", f);
        }
        if (v->num_worst) fputs("</ul>\n", f);
    }
    fputs("</body></html>\n", f);
}

static cJSON *stats_json(const kvc_error_stats *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", kvc_unit_name(s->unit));
    cJSON_AddNumberToObject(o, "count", (double)s->count);
    cJSON_AddNumberToObject(o, "exact", (double)s->exact);
    cJSON_AddNumberToObject(o, "exact_fraction", s->count ? (double)s->exact / (double)s->count : 0);
    cJSON_AddNumberToObject(o, "nonfinite_mismatch", (double)s->nonfinite_mismatch);
    cJSON_AddNumberToObject(o, "max", s->max);
    cJSON_AddNumberToObject(o, "mean", kvc_stats_mean(s));
    cJSON_AddNumberToObject(o, "p999", p999(s));
    cJSON *hist = cJSON_AddArrayToObject(o, "histogram");
    for (int b = 0; b < KVC_HIST_BINS; b++) cJSON_AddItemToArray(hist, cJSON_CreateNumber((double)s->hist[b]));
    cJSON_AddStringToObject(o, "worst_at", s->worst_where);
    return o;
}

static cJSON *precision_json(const kvc_precision_report *r, const char *when) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "kvcmp-precision/1");
    cJSON *options = cJSON_CreateObject();
    cJSON_AddNumberToObject(options, "cases_per_family", r->cases_per_family);
    cJSON_AddStringToObject(options, "impl", r->impl_name ? r->impl_name : "ref");
    cJSON_AddItemToObject(root, "run", kvc_run_info(r->seed, 1, options));
    cJSON_AddStringToObject(root, "generated", when);
    cJSON_AddNumberToObject(root, "seed", (double)r->seed);
    cJSON_AddNumberToObject(root, "cases_per_family", r->cases_per_family);
    cJSON_AddStringToObject(root, "impl", r->impl_name ? r->impl_name : "ref");
    cJSON_AddBoolToObject(root, "stored_values_only", r->stored_only);
    cJSON_AddNumberToObject(root, "oracle_bits", KVC_ORACLE_BITS);
    cJSON_AddNumberToObject(root, "seconds", r->seconds);
    cJSON *classes = cJSON_AddObjectToObject(root, "classes");
    cJSON_AddStringToObject(classes, "contract_rounding", kvc_precision_contract_class);
    cJSON_AddStringToObject(classes, "departures", kvc_precision_departure_class);
    cJSON *labels = cJSON_AddArrayToObject(root, "histogram_bins");
    for (int b = 0; b < KVC_HIST_BINS; b++) {
        char text[16];
        kvc_hist_bin_label(b, text, sizeof text);
        cJSON_AddItemToArray(labels, cJSON_CreateString(text));
    }
    cJSON *variants = cJSON_AddArrayToObject(root, "stages");
    for (int i = 0; i < r->num_variants; i++) {
        const kvc_precision_variant *v = &r->variants[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", v->name);
        cJSON_AddNumberToObject(o, "cases", v->cases);
        cJSON_AddNumberToObject(o, "rows", v->rows);
        char empty[256];
        kvc_precision_empty_reason(r, v, empty, sizeof empty);
        if (empty[0]) cJSON_AddStringToObject(o, "empty_reason", empty);
        cJSON *metrics = cJSON_AddObjectToObject(o, "metrics");
        for (int m = 0; m < KVC_METRIC_COUNT; m++)
            if (v->metrics[m].count) {
                cJSON *stats = stats_json(&v->metrics[m]);
                if (is_stored(m)) {
                    /* The two classes of the legend ("classes" at the top). */
                    cJSON_AddNumberToObject(stats, "contract_rounding", (double)contract_inexact(v, m));
                    cJSON_AddNumberToObject(stats, "departures", (double)v->departures[m]);
                    cJSON *hist = cJSON_AddArrayToObject(stats, "departure_histogram");
                    for (int b = 0; b < KVC_HIST_BINS; b++) cJSON_AddItemToArray(hist, cJSON_CreateNumber((double)v->departure_hist[m][b]));
                }
                cJSON_AddItemToObject(metrics, v->metrics[m].name, stats);
            }
        cJSON *worst = cJSON_AddArrayToObject(o, "worst_cases");
        for (int w = 0; w < v->num_worst; w++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "dir", v->worst[w].saved_dir);
            cJSON_AddStringToObject(c, "description", v->worst[w].description);
            cJSON_AddItemToArray(worst, c);
        }
        cJSON_AddItemToArray(variants, o);
    }
    return root;
}

int kvc_render_precision(const kvc_precision_report *report, const char *out_dir) {
    char when[64];
    timestamp(when, sizeof when);
    kvc_atomic_file md, html;
    int rc = 0;
    if (open_out(out_dir, "precision.md", &md) == 0) { precision_markdown(md.f, report, when); rc |= close_out(&md); } else rc = -1;
    if (open_out(out_dir, "precision.html", &html) == 0) { precision_html(html.f, report, when); rc |= close_out(&html); } else rc = -1;
    rc |= write_json(out_dir, "precision.json", precision_json(report, when));
    return rc ? -1 : 0;
}

/* ---- parity -------------------------------------------------------- */

static const char *parity_intro =
    "Every case under the given directories is run through the reference and its expected tensors (NAME.out.npy, "
    "written by the upstream implementation named in case.json \"source\") are compared byte for byte. Where they "
    "differ, each element is measured in steps of its format and given one cause. Known upstream differences "
    "(SPEC.md 4.2 step 9): the AVX-512 CPU port floors the scale after the division (byte 114 on D=512 blocks "
    "whose magnitude is at most 448*2^-14, where the contract gives 105..113), flushes subnormals in its bf16 store, "
    "and handles NaN differently; vLLM's own tests tolerate 1 fp8 step, 1 bf16 ulp and 1 scale step.";

static void parity_markdown(FILE *f, const kvc_parity_report *r, const char *when) {
    fprintf(f, "# Parity of upstream implementations with the reference\n\nGenerated %s by `kvcmp report parity`", when);
    for (int i = 0; i < r->num_paths; i++) fprintf(f, " `%s`", r->paths[i]);
    fprintf(f, ".\n\n%s\n\n**%d cases, %d bit-identical to the reference.**\n\n", parity_intro, r->cases, r->cases_identical);
    fprintf(f, "| source | stage | cases | identical cases | bytes identical | NoPE codes | scales | RoPE | state | latent | first differing case |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    const kvc_parity_region shown[5] = {KVC_PREGION_NOPE_CODE, KVC_PREGION_SCALE, KVC_PREGION_ROPE, KVC_PREGION_STATE, KVC_PREGION_LATENT};
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        char bytes[32];
        format_fraction(bytes, sizeof bytes, g->bytes_identical, g->bytes);
        fprintf(f, "| %s | %s | %d | %d | %s", g->source, g->stage, g->cases, g->cases_identical, bytes);
        for (int k = 0; k < 5; k++) {
            char text[32];
            format_fraction(text, sizeof text, g->identical[shown[k]], g->elements[shown[k]]);
            fprintf(f, " | %s", text);
        }
        if (g->first_differing[0]) fprintf(f, " | `%s replay --impl ref --policy exact %s` |\n", kvc_invocation(), g->first_differing);
        else fprintf(f, " | - |\n");
    }
    fprintf(f, "\nRegion columns: identical elements among the rows where the two sides differ at all (\"-\": no such row).\n");
    fprintf(f, "\n## Causes of the differences\n\nEach cause is read from the bytes (harness/compare/causes.c); the example's "
               "command replays it and prints the first differing element.\n\n"
               "| source | stage | cause | elements | example | reproduce |\n|---|---|---|---:|---|---|\n");
    for (int i = 0; i < r->num_groups; i++)
        for (int c = 0; c < KVC_CAUSE_COUNT; c++)
            if (r->groups[i].causes[c])
                fprintf(f, "| %s | %s | %s (`%s`) | %lld | %s | `%s replay --impl ref --policy exact %s` |\n", r->groups[i].source,
                        r->groups[i].stage, kvc_parity_cause_name(c), kvc_cause_slug(c), (long long)r->groups[i].causes[c],
                        r->groups[i].example[c], kvc_invocation(), r->groups[i].example_dir[c]);
    fprintf(f, "\n## Diagnosis\n\nThe deviations of the catalogue (include/kvcmp/deviations.h) whose outputs equal the upstream "
               "bytes of a differing case exactly, alone or composed (a+b+c: up to 4 at once); a case may fit several.\n\n"
               "| source | stage | explained by | cases |\n|---|---|---|---:|\n");
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        for (int k = 0; k < g->num_explanations; k++)
            fprintf(f, "| %s | %s | %s | %d |\n", g->source, g->stage, g->explanation[k], g->explained_cases[k]);
        if (g->unexplained_cases) fprintf(f, "| %s | %s | (unexplained) | %d |\n", g->source, g->stage, g->unexplained_cases);
    }
    fprintf(f, "\n## Distance histograms (differing rows only)\n\n");
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        for (int k = 0; k < KVC_PREGION_COUNT; k++) {
            if (g->elements[k] == g->identical[k]) continue;
            fprintf(f, "- %s, %s, %s (%s):", g->source, g->stage, kvc_parity_region_name(k), kvc_parity_region_unit(k));
            for (int b = 0; b < KVC_PARITY_DIST_BINS; b++) {
                if (!g->distance_hist[k][b]) continue;
                char label[16];
                kvc_parity_dist_label(b, label, sizeof label);
                fprintf(f, " %s: %lld;", label, (long long)g->distance_hist[k][b]);
            }
            fprintf(f, "\n");
        }
    }
}

static void parity_group_plots(FILE *f, const kvc_parity_group *g) {
    char label_text[KVC_PARITY_DIST_BINS][16];
    const char *labels[KVC_PARITY_DIST_BINS];
    for (int b = 0; b < KVC_PARITY_DIST_BINS; b++) { kvc_parity_dist_label(b, label_text[b], sizeof label_text[b]); labels[b] = label_text[b]; }
    fputs("<div class=\"plots\">\n", f);
    for (int k = 0; k < KVC_PREGION_COUNT; k++) {
        if (g->elements[k] == g->identical[k]) continue;
        char x_title[96];
        snprintf(x_title, sizeof x_title, "distance from the reference in %s", kvc_parity_region_unit(k));
        kvc_svg_histogram(f, kvc_parity_region_name(k), x_title, g->distance_hist[k], labels, KVC_PARITY_DIST_BINS, 1);
    }
    fputs("</div>\n<table><tr><th>cause</th><th>elements</th><th>example</th><th>reproduce</th></tr>\n", f);
    for (int c = 0; c < KVC_CAUSE_COUNT; c++) {
        if (!g->causes[c]) continue;
        fprintf(f, "<tr><td>%s (<code>%s</code>)</td><td>%lld</td><td style=\"text-align:left\">", kvc_parity_cause_name(c), kvc_cause_slug(c),
                (long long)g->causes[c]);
        kvc_html_text(f, g->example[c]);
        fputs("</td><td style=\"text-align:left\"><code>", f);
        kvc_html_text(f, kvc_invocation());
        fputs(" replay --impl ref --policy exact ", f);
        kvc_html_text(f, g->example_dir[c]);
        fputs("</code></td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Distinct values of a group field, in order of first appearance. */
static int distinct(const kvc_parity_report *r, int use_source, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < r->num_groups; i++) {
        const char *value = use_source ? r->groups[i].source : r->groups[i].stage;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = strcmp(out[k], value) == 0;
        if (!seen && n < max) out[n++] = value;
    }
    return n;
}

#define MAX_AXIS 64

/* Stage x source grid of identical-byte fractions: one glance shows who agrees. */
static void parity_heatmap(FILE *f, const kvc_parity_report *r) {
    const char *stages[MAX_AXIS], *sources[MAX_AXIS];
    int rows = distinct(r, 0, stages, MAX_AXIS), cols = distinct(r, 1, sources, MAX_AXIS);
    double *values = malloc((size_t)(rows * cols + 1) * sizeof *values);
    char (*text)[48] = calloc((size_t)(rows * cols + 1), sizeof *text);
    const char **texts = calloc((size_t)(rows * cols + 1), sizeof *texts);
    if (!values || !text || !texts) { free(values); free(text); free(texts); return; }
    for (int k = 0; k < rows * cols; k++) values[k] = -1;
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        int row = 0, col = 0;
        while (strcmp(stages[row], g->stage)) row++;
        while (strcmp(sources[col], g->source)) col++;
        int k = row * cols + col;
        values[k] = fraction(g->bytes_identical, g->bytes);
        if (g->cases_identical == g->cases) snprintf(text[k], sizeof text[k], "identical (%d)", g->cases);
        else snprintf(text[k], sizeof text[k], "%.3f%% (%d/%d differ)", 100.0 * values[k], g->cases - g->cases_identical, g->cases);
        texts[k] = text[k];
    }
    kvc_svg_heatmap(f, "Output bytes identical to the reference (cases that differ / cases)", "stage", stages, rows,
                    "upstream implementation (case.json source)", sources, cols, values, texts);
    free(values);
    free(text);
    free(texts);
}

/* One line per source: how many cases agree and what explains the rest. */
static void parity_source_table(FILE *f, const kvc_parity_report *r) {
    const char *sources[MAX_AXIS];
    int n = distinct(r, 1, sources, MAX_AXIS);
    fputs("<table><tr><th>source</th><th>cases</th><th>bit-identical</th><th>bytes identical</th><th>differences by cause</th></tr>\n", f);
    for (int s = 0; s < n; s++) {
        int cases = 0, identical = 0;
        int64_t bytes = 0, same = 0, causes[KVC_CAUSE_COUNT] = {0};
        for (int i = 0; i < r->num_groups; i++) {
            const kvc_parity_group *g = &r->groups[i];
            if (strcmp(g->source, sources[s])) continue;
            cases += g->cases;
            identical += g->cases_identical;
            bytes += g->bytes;
            same += g->bytes_identical;
            for (int c = 0; c < KVC_CAUSE_COUNT; c++) causes[c] += g->causes[c];
        }
        char percent[32];
        format_fraction(percent, sizeof percent, same, bytes);
        fprintf(f, "<tr><td>%s</td><td>%d</td><td class=\"%s\">%d</td><td>%s</td><td style=\"text-align:left\">", sources[s], cases,
                identical == cases ? "ok" : "bad", identical, percent);
        int any = 0;
        for (int c = 0; c < KVC_CAUSE_COUNT; c++)
            if (causes[c]) fprintf(f, "%s%lld: %s", any++ ? "<br>" : "", (long long)causes[c], kvc_parity_cause_name(c));
        fputs(any ? "</td></tr>\n" : "none</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void parity_html(FILE *f, const kvc_parity_report *r, const char *when) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvcmp parity report</title>\n", f);
    fputs(page_style, f);
    fprintf(f, "</head><body>\n<h1>Parity of upstream implementations with the reference</h1>\n<p class=\"note\">Generated %s by "
               "<code>kvcmp report parity</code>; <b>%d cases, %d bit-identical to the reference</b>.</p>\n<p>",
            when, r->cases, r->cases_identical);
    kvc_html_text(f, parity_intro);
    fputs("</p>\n", f);
    parity_source_table(f, r);
    fputs("<div class=\"card\">\n", f);
    parity_heatmap(f, r);
    fputs("</div>\n", f);
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        if (g->cases_identical == g->cases) continue;
        fprintf(f, "<h2>%s — %s</h2>\n<p class=\"note\">%d of %d cases differ; %lld of %lld bytes identical. First differing case: "
                   "<code>", g->source, g->stage,
                g->cases - g->cases_identical, g->cases, (long long)g->bytes_identical, (long long)g->bytes);
        kvc_html_text(f, kvc_invocation());
        fputs(" replay --impl ref --policy exact ", f);
        kvc_html_text(f, g->first_differing);
        fputs("</code></p>\n", f);
        parity_group_plots(f, g);
    }
    fputs("<h2>Sources that agree bit for bit</h2><ul>\n", f);
    for (int i = 0; i < r->num_groups; i++)
        if (r->groups[i].cases_identical == r->groups[i].cases)
            fprintf(f, "<li>%s — %s: %d cases</li>\n", r->groups[i].source, r->groups[i].stage, r->groups[i].cases);
    fputs("</ul></body></html>\n", f);
}

static cJSON *parity_json(const kvc_parity_report *r, const char *when) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "kvcmp-parity/1");
    cJSON *options = cJSON_CreateObject(), *paths = cJSON_AddArrayToObject(options, "paths");
    for (int i = 0; i < r->num_paths; i++) cJSON_AddItemToArray(paths, cJSON_CreateString(r->paths[i]));
    cJSON_AddItemToObject(root, "run", kvc_run_info(0, 0, options));
    cJSON_AddStringToObject(root, "generated", when);
    cJSON_AddNumberToObject(root, "cases", r->cases);
    cJSON_AddNumberToObject(root, "cases_identical", r->cases_identical);
    cJSON *groups = cJSON_AddArrayToObject(root, "groups");
    for (int i = 0; i < r->num_groups; i++) {
        const kvc_parity_group *g = &r->groups[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "source", g->source);
        cJSON_AddStringToObject(o, "stage", g->stage);
        cJSON_AddNumberToObject(o, "cases", g->cases);
        cJSON_AddNumberToObject(o, "cases_identical", g->cases_identical);
        cJSON_AddNumberToObject(o, "bytes", (double)g->bytes);
        cJSON_AddNumberToObject(o, "bytes_identical", (double)g->bytes_identical);
        cJSON *regions = cJSON_AddObjectToObject(o, "regions");
        for (int k = 0; k < KVC_PREGION_COUNT; k++) {
            if (!g->elements[k]) continue;
            cJSON *region = cJSON_CreateObject();
            cJSON_AddStringToObject(region, "unit", kvc_parity_region_unit(k));
            cJSON_AddNumberToObject(region, "elements_in_differing_rows", (double)g->elements[k]);
            cJSON_AddNumberToObject(region, "identical", (double)g->identical[k]);
            cJSON *hist = cJSON_AddObjectToObject(region, "distance_histogram");
            for (int b = 0; b < KVC_PARITY_DIST_BINS; b++) {
                char label[16];
                kvc_parity_dist_label(b, label, sizeof label);
                if (g->distance_hist[k][b]) cJSON_AddNumberToObject(hist, label, (double)g->distance_hist[k][b]);
            }
            cJSON_AddItemToObject(regions, kvc_parity_region_name(k), region);
        }
        cJSON *causes = cJSON_AddObjectToObject(o, "causes");
        for (int c = 0; c < KVC_CAUSE_COUNT; c++)
            if (g->causes[c]) cJSON_AddNumberToObject(causes, kvc_parity_cause_name(c), (double)g->causes[c]);
        cJSON *explained = cJSON_AddObjectToObject(o, "explained_by");
        for (int k = 0; k < g->num_explanations; k++) cJSON_AddNumberToObject(explained, g->explanation[k], g->explained_cases[k]);
        cJSON_AddNumberToObject(o, "unexplained_cases", g->unexplained_cases);
        cJSON *by_slug = cJSON_AddArrayToObject(o, "cause_list");
        for (int c = 0; c < KVC_CAUSE_COUNT; c++) {
            if (!g->causes[c]) continue;
            char repro[1200];
            snprintf(repro, sizeof repro, "%s replay --impl ref --policy exact %s", kvc_invocation(), g->example_dir[c]);
            cJSON *item = cJSON_CreateObject();
            cJSON_AddStringToObject(item, "cause", kvc_cause_slug(c));
            cJSON_AddStringToObject(item, "name", kvc_parity_cause_name(c));
            cJSON_AddNumberToObject(item, "elements", (double)g->causes[c]);
            cJSON_AddStringToObject(item, "example", g->example[c]);
            cJSON_AddStringToObject(item, "repro", repro);
            cJSON_AddItemToArray(by_slug, item);
        }
        cJSON_AddItemToArray(groups, o);
    }
    return root;
}

int kvc_render_parity(const kvc_parity_report *report, const char *out_dir) {
    char when[64];
    timestamp(when, sizeof when);
    kvc_atomic_file md, html;
    int rc = 0;
    if (open_out(out_dir, "parity.md", &md) == 0) { parity_markdown(md.f, report, when); rc |= close_out(&md); } else rc = -1;
    if (open_out(out_dir, "parity.html", &html) == 0) { parity_html(html.f, report, when); rc |= close_out(&html); } else rc = -1;
    rc |= write_json(out_dir, "parity.json", parity_json(report, when));
    return rc ? -1 : 0;
}

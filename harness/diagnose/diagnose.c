/* Diagnosis of a failing case against the catalogue of deviations
 * (include/kvcmp/deviations.h). */
#include "kvcmp/deviations.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvcmp/run.h"

int kvc_deviation_run_case(int first, int second, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result) {
    int previous[2];
    kvc_deviation_activate(first, second, previous);
    int rc = kvc_run_case(&kvc_reference_backend, c, options, result);
    kvc_deviation_activate(previous[0], previous[1], NULL);
    return rc;
}

/* Same status and, when both ran, the same bytes in every output. */
static int same_results(const kvc_run_result *a, const kvc_run_result *b) {
    if (a->status != b->status) return 0;
    if (a->status != KVC_OK) return 1;
    if (a->num_outputs != b->num_outputs) return 0;
    for (int i = 0; i < a->num_outputs; i++) {
        const kvc_array *x = &a->outputs[i].array, *y = &b->outputs[i].array;
        size_t bytes = (size_t)x->count * (size_t)kvc_dtype_size(x->dtype);
        if (strcmp(a->outputs[i].name, b->outputs[i].name) != 0 || x->dtype != y->dtype || x->count != y->count ||
            memcmp(x->data, y->data, bytes) != 0)
            return 0;
    }
    return 1;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs the variant (first, second); 1 when it matches the candidate, and
 * *changes = whether it differs from the contract at all. */
static int variant_matches(int first, int second, const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate,
                           const kvc_run_result *contract, int *changes) {
    kvc_run_result r;
    memset(&r, 0, sizeof r);
    kvc_deviation_run_case(first, second, c, options, &r);
    int matches = same_results(&r, candidate);
    if (changes) *changes = !same_results(&r, contract);
    kvc_run_result_free(&r);
    return matches;
}

static void add_explanation(kvc_diagnosis *d, int first, int second) {
    if (d->count == KVC_DIAGNOSIS_MAX) return;
    d->first[d->count] = first;
    d->second[d->count] = second;
    d->count++;
}

int kvc_diagnose(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, kvc_diagnosis *d) {
    memset(d, 0, sizeof *d);
    double deadline = seconds > 0 ? seconds_now() + seconds : 0;
    kvc_run_result contract;
    memset(&contract, 0, sizeof contract);
    kvc_deviation_run_case(-1, -1, c, options, &contract);
    int n = kvc_deviation_count(), changes[256] = {0};
    for (int i = 0; i < n; i++) {
        /* A variant that writes the contract's bytes here explains no difference. */
        if (variant_matches(i, -1, c, options, candidate, &contract, &changes[i]) && changes[i]) add_explanation(d, i, -1);
        d->singles_run++;
    }
    /* Two bugs at once: only deviations that change this case's outputs
     * can be half of an explanation. */
    for (int i = 0; i < n && !d->count && !d->out_of_time; i++)
        for (int j = i + 1; j < n && changes[i] && !d->out_of_time; j++) {
            if (!changes[j]) continue;
            if (deadline && seconds_now() > deadline) { d->out_of_time = 1; break; }
            if (variant_matches(i, j, c, options, candidate, &contract, NULL)) add_explanation(d, i, j);
            d->pairs_run++;
        }
    kvc_run_result_free(&contract);
    return d->count;
}

void kvc_diagnosis_name(const kvc_diagnosis *d, int i, char *out, size_t size) {
    if (i < 0 || i >= d->count) { snprintf(out, size, "%s", ""); return; }
    if (d->second[i] < 0) snprintf(out, size, "%s", kvc_deviation_name(d->first[i]));
    else snprintf(out, size, "%s+%s", kvc_deviation_name(d->first[i]), kvc_deviation_name(d->second[i]));
}

void kvc_diagnosis_text(const kvc_diagnosis *d, int i, char *out, size_t size) {
    if (i < 0 || i >= d->count) { snprintf(out, size, "%s", ""); return; }
    if (d->second[i] < 0) snprintf(out, size, "%s (%s)", kvc_deviation_name(d->first[i]), kvc_deviation_spec(d->first[i]));
    else
        snprintf(out, size, "%s (%s) + %s (%s)", kvc_deviation_name(d->first[i]), kvc_deviation_spec(d->first[i]),
                 kvc_deviation_name(d->second[i]), kvc_deviation_spec(d->second[i]));
}

void kvc_diagnose_clause(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, char *out,
                         size_t size) {
    kvc_diagnosis d;
    kvc_diagnose(c, options, candidate, seconds, &d);
    size_t n = (size_t)snprintf(out, size, "%s", d.count ? "explained by: " : "unexplained by the deviation catalogue");
    for (int i = 0; i < d.count && n < size; i++) {
        char text[300];
        kvc_diagnosis_text(&d, i, text, sizeof text);
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", text);
    }
    if (d.out_of_time && n < size) snprintf(out + n, size - n, ", pairs not all tried");
}

/* Diagnosis of a failing case against the catalogue of deviations
 * (include/kvcmp/deviations.h). */
#include "harness/diagnose/diagnose.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "kvcmp/run.h"

int kvc_deviation_run_case_set(const int *ids, int count, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result) {
    int previous[KVC_DIAGNOSIS_DEPTH];
    kvc_deviation_activate_set(ids, count, previous);
    int rc = kvc_run_case(&kvc_reference_backend, c, options, result);
    kvc_deviation_activate_set(previous, KVC_DIAGNOSIS_DEPTH, NULL);
    return rc;
}

int kvc_deviation_run_case(int first, int second, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result) {
    int pair[2] = {first, second};
    return kvc_deviation_run_case_set(pair, 2, c, options, result);
}

/* No distance: another status, or outputs of another name or shape. */
#define FAR SIZE_MAX

/* The output bytes, over all outputs, where a and b differ: 0 when they
 * are the same status and, when both ran, the same bytes. */
static size_t distance(const kvc_run_result *a, const kvc_run_result *b) {
    if (a->status != b->status) return FAR;
    if (a->status != KVC_OK) return 0;
    if (a->num_outputs != b->num_outputs) return FAR;
    size_t differ = 0;
    for (int i = 0; i < a->num_outputs; i++) {
        const kvc_array *x = &a->outputs[i].array, *y = &b->outputs[i].array;
        if (strcmp(a->outputs[i].name, b->outputs[i].name) != 0 || x->dtype != y->dtype || x->count != y->count) return FAR;
        size_t bytes = (size_t)x->count * (size_t)kvc_dtype_size(x->dtype);
        const uint8_t *p = x->data, *q = y->data;
        for (size_t k = 0; k < bytes; k++) differ += p[k] != q[k];
    }
    return differ;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const kvc_case *c;
    const kvc_run_options *options;
    const kvc_run_result *candidate, *contract;
    double deadline;   /* 0: none */
    kvc_diagnosis *d;
} diagnosis_run;

/* Sets out_of_time once the deadline has passed. */
static int out_of_time(diagnosis_run *r) {
    if (r->deadline && seconds_now() > r->deadline) r->d->out_of_time = 1;
    return r->d->out_of_time;
}

/* The variant `set`'s distance from the candidate; *changes (may be
 * NULL) = whether it differs from the contract at all. */
static size_t variant_distance(const diagnosis_run *r, const int *set, int size, int *changes) {
    kvc_run_result v;
    memset(&v, 0, sizeof v);
    kvc_deviation_run_case_set(set, size, r->c, r->options, &v);
    size_t away = distance(&v, r->candidate);
    if (changes) *changes = distance(&v, r->contract) != 0;
    kvc_run_result_free(&v);
    return away;
}

static int by_index(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Explanations are named in catalogue order: the same set, the same name. */
static void add_explanation(kvc_diagnosis *d, const int *set, int size) {
    if (d->count == KVC_DIAGNOSIS_MAX) return;
    int *members = d->members[d->count++];
    for (int k = 0; k < KVC_DIAGNOSIS_DEPTH; k++) members[k] = k < size ? set[k] : -1;
    qsort(members, (size_t)size, sizeof *members, by_index);
}

/* Two bugs at once: only deviations that change this case's outputs
 * can be half of an explanation. */
static void try_pairs(diagnosis_run *r, const int *changes) {
    int n = kvc_deviation_count();
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n && changes[i]; j++) {
            if (!changes[j]) continue;
            if (out_of_time(r)) return;
            int pair[2] = {i, j};
            if (variant_distance(r, pair, 2, NULL) == 0) add_explanation(r->d, pair, 2);
            r->d->pairs_run++;
        }
}

int kvc_diagnose_unneeded_member(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, const int *set,
                                 int size) {
    for (int drop = 0; drop < size; drop++) {
        int rest[KVC_DIAGNOSIS_DEPTH], n = 0;
        for (int k = 0; k < size; k++)
            if (k != drop) rest[n++] = set[k];
        kvc_run_result v;
        memset(&v, 0, sizeof v);
        kvc_deviation_run_case_set(rest, n, c, options, &v);
        size_t away = distance(&v, candidate);
        kvc_run_result_free(&v);
        if (away == 0) return drop;
    }
    return -1;
}

int kvc_explanation_holds(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *want, const int *set, int size) {
    kvc_run_result v;
    memset(&v, 0, sizeof v);
    kvc_deviation_run_case_set(set, size, c, options, &v);
    size_t away = distance(&v, want);
    kvc_run_result_free(&v);
    return away == 0;
}

int kvc_explanation_parse(const char *name, int set[KVC_DIAGNOSIS_DEPTH]) {
    int size = 0;
    for (const char *p = name; *p;) {
        size_t n = strcspn(p, "+");
        char member[100];
        if (size == KVC_DIAGNOSIS_DEPTH || n >= sizeof member) return -1;
        snprintf(member, sizeof member, "%.*s", (int)n, p);
        if ((set[size++] = kvc_deviation_find(member)) < 0) return -1;
        p += n + (p[n] == '+');
    }
    return size ? size : -1;
}

/* Three or four bugs at once (real kernels carry several): greedy, from
 * the single `start`, each step adding the deviation that brings the
 * variant nearest the candidate, while it gets nearer. */
static int compose_from(diagnosis_run *r, int start, size_t nearest) {
    int n = kvc_deviation_count(), set[KVC_DIAGNOSIS_DEPTH] = {start}, size = 1;
    while (nearest && size < KVC_DIAGNOSIS_DEPTH) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            int member = 0;
            for (int k = 0; k < size; k++) member |= set[k] == j;
            if (member) continue;
            if (out_of_time(r)) return 0;
            set[size] = j;
            size_t away = variant_distance(r, set, size + 1, NULL);
            r->d->compositions_run++;
            if (away < nearest) nearest = away, best = j;
        }
        if (best < 0) return 0;
        set[size++] = best;
    }
    if (nearest || kvc_diagnose_unneeded_member(r->c, r->options, r->candidate, set, size) >= 0) return 0;
    add_explanation(r->d, set, size);
    return 1;
}

/* A greedy search can take a wrong first step: the searches start from
 * each changing single in turn, the nearest the candidate first, until
 * one finds an explanation or the time runs out. */
static void compose(diagnosis_run *r, const int *changes, const size_t *single) {
    int n = kvc_deviation_count(), tried[256] = {0};
    for (;;) {
        int start = -1;
        for (int i = 0; i < n; i++)
            if (changes[i] && !tried[i] && single[i] != FAR && (start < 0 || single[i] < single[start])) start = i;
        if (start < 0) return;
        tried[start] = 1;
        if (compose_from(r, start, single[start]) || r->d->out_of_time) return;
    }
}

int kvc_diagnose(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, kvc_diagnosis *d) {
    memset(d, 0, sizeof *d);
    kvc_run_result contract;
    memset(&contract, 0, sizeof contract);
    kvc_deviation_run_case_set(NULL, 0, c, options, &contract);
    diagnosis_run r = {c, options, candidate, &contract, seconds > 0 ? seconds_now() + seconds : 0, d};
    int n = kvc_deviation_count(), changes[256] = {0};
    size_t single[256];
    for (int i = 0; i < n; i++) {
        single[i] = variant_distance(&r, &i, 1, &changes[i]);
        /* A variant that writes the contract's bytes here explains no difference. */
        if (single[i] == 0 && changes[i]) add_explanation(d, &i, 1);
        d->singles_run++;
    }
    /* The contract's own bytes: nothing to explain, however composed. */
    if (!d->count && distance(&contract, candidate) != 0) {
        try_pairs(&r, changes);
        if (!d->count && !d->out_of_time) compose(&r, changes, single);
    }
    kvc_run_result_free(&contract);
    return d->count;
}

static int explanation_size(const kvc_diagnosis *d, int i) {
    int size = 0;
    while (size < KVC_DIAGNOSIS_DEPTH && d->members[i][size] >= 0) size++;
    return size;
}

void kvc_diagnosis_name(const kvc_diagnosis *d, int i, char *out, size_t size) {
    snprintf(out, size, "%s", "");
    if (i < 0 || i >= d->count) return;
    size_t n = 0;
    for (int k = 0; k < explanation_size(d, i) && n < size; k++)
        n += (size_t)snprintf(out + n, size - n, "%s%s", k ? "+" : "", kvc_deviation_name(d->members[i][k]));
}

void kvc_diagnosis_text(const kvc_diagnosis *d, int i, char *out, size_t size) {
    snprintf(out, size, "%s", "");
    if (i < 0 || i >= d->count) return;
    size_t n = 0;
    for (int k = 0; k < explanation_size(d, i) && n < size; k++) {
        int member = d->members[i][k];
        n += (size_t)snprintf(out + n, size - n, "%s%s (%s)", k ? " + " : "", kvc_deviation_name(member), kvc_deviation_spec(member));
    }
}

void kvc_diagnose_clause(const kvc_case *c, const kvc_run_options *options, const kvc_run_result *candidate, double seconds, char *out,
                         size_t size) {
    kvc_diagnosis d;
    kvc_diagnose(c, options, candidate, seconds, &d);
    size_t n = (size_t)snprintf(out, size, "%s", d.count ? "explained by: " : "unexplained by the deviation catalogue");
    for (int i = 0; i < d.count && n < size; i++) {
        char text[600];
        kvc_diagnosis_text(&d, i, text, sizeof text);
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", text);
    }
    if (d.out_of_time && n < size) snprintf(out + n, size - n, ", out of time: compositions not all tried");
}

/* The campaign's diagnosis in c's meta, when c was saved by a campaign of
 * candidate_name (NULL otherwise; the caller deletes the root). */
static const cJSON *campaign_diagnosis(const kvc_case *c, const char *candidate_name, cJSON **root) {
    *root = c->meta_json ? cJSON_Parse(c->meta_json) : NULL;
    const cJSON *diagnosis = cJSON_GetObjectItemCaseSensitive(*root, "diagnosis");
    const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(*root, "candidate");
    if (!cJSON_IsObject(diagnosis) || !cJSON_IsString(candidate) || !candidate_name || strcmp(candidate->valuestring, candidate_name) != 0)
        return NULL;
    return diagnosis;
}

static int array_has(const cJSON *array, const char *name) {
    const cJSON *item;
    cJSON_ArrayForEach(item, array)
        if (cJSON_IsString(item) && strcmp(item->valuestring, name) == 0) return 1;
    return 0;
}

void kvc_diagnose_clause_proven(const kvc_case *c, const char *candidate_name, const kvc_run_options *options,
                                const kvc_run_result *candidate, double seconds, char *out, size_t size) {
    cJSON *root;
    const cJSON *proven = campaign_diagnosis(c, candidate_name, &root);
    if (!proven) {
        cJSON_Delete(root);
        kvc_diagnose_clause(c, options, candidate, seconds, out, size);
        return;
    }
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(proven, "explained_by");
    double failing = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(proven, "failing_cases_checked"));
    double passing = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(proven, "passing_cases_checked"));
    kvc_diagnosis d;
    kvc_diagnose(c, options, candidate, seconds, &d);
    char held[600] = "", alone[600] = "", text[600];
    for (int i = 0; i < d.count; i++) {
        char name[200];
        kvc_diagnosis_name(&d, i, name, sizeof name);
        kvc_diagnosis_text(&d, i, text, sizeof text);
        char *into = array_has(names, name) ? held : alone;
        size_t n = strlen(into), more = strlen(text);
        /* Whole explanations only. */
        if (n + more + 3 > sizeof held) continue;
        if (n) memcpy(into + n, ", ", 2), n += 2;
        memcpy(into + n, text, more + 1);
    }
    size_t n;
    if (held[0])
        n = (size_t)snprintf(out, size, "explained by: %s; proven by the campaign on %.0f failing and %.0f passing cases", held,
                             isnan(failing) ? 0.0 : failing, isnan(passing) ? 0.0 : passing);
    else
        n = (size_t)snprintf(out, size, "unexplained by the deviation catalogue (as the campaign found on %.0f failing cases)",
                             isnan(failing) ? 0.0 : failing);
    if (alone[0] && n < size) snprintf(out + n, size - n, "; fits this case alone: %s, refuted on the others", alone);
    cJSON_Delete(root);
}

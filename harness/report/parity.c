/* kvcmp report parity: replay upstream cases through the reference and
 * classify every element where the upstream bytes differ, by cause. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/deviations.h"
#include "kvcmp/formats.h"
#include "harness/report/parity.h"
#include "harness/report/oracle.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"
#include "harness/report/paths.h"

/* 0, 1, 2, then (2^(k-2), 2^(k-1)] for k = 3..9, > 256, and NaN last. */
int kvc_parity_dist_bin(int64_t distance) {
    if (distance < 0) return KVC_PARITY_DIST_BINS - 1;
    if (distance <= 2) return (int)distance;
    for (int k = 3; k <= 9; k++)
        if (distance <= ((int64_t)1 << (k - 1))) return k;
    return KVC_PARITY_DIST_BINS - 2;
}

void kvc_parity_dist_label(int bin, char *out, size_t size) {
    if (bin <= 2) snprintf(out, size, "%d", bin);
    else if (bin == KVC_PARITY_DIST_BINS - 1) snprintf(out, size, "NaN");
    else if (bin == KVC_PARITY_DIST_BINS - 2) snprintf(out, size, ">256");
    else snprintf(out, size, "%d-%d", (1 << (bin - 2)) + 1, 1 << (bin - 1));
}

/* ---- groups -------------------------------------------------------- */

static void stage_key(const kvc_case *c, char *out, size_t size) {
    int v41 = c->stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    if (c->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT)
        snprintf(out, size, "%s %s R=%d", kvc_stage_name(c->stage), c->has_cache_dtype ? kvc_cache_dtype_name(c->cache_dtype) : "?",
                 c->compress_ratio);
    else if (v41) snprintf(out, size, "%s R=%d", kvc_stage_name(c->stage), c->compress_ratio);
    else snprintf(out, size, "%s D=%d R=%d", kvc_stage_name(c->stage), c->head_dim, c->compress_ratio);
}

static kvc_parity_group *group_for(kvc_parity_report *r, const char *source, const char *stage) {
    for (int i = 0; i < r->num_groups; i++)
        if (strcmp(r->groups[i].source, source) == 0 && strcmp(r->groups[i].stage, stage) == 0) return &r->groups[i];
    if (r->num_groups == r->capacity) {
        int capacity = r->capacity ? 2 * r->capacity : 16;
        kvc_parity_group *grown = realloc(r->groups, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        r->groups = grown;
        r->capacity = capacity;
    }
    kvc_parity_group *g = &r->groups[r->num_groups++];
    memset(g, 0, sizeof *g);
    snprintf(g->source, sizeof g->source, "%s", source);
    snprintf(g->stage, sizeof g->stage, "%s", stage);
    return g;
}

/* ---- the element walk ---------------------------------------------- */

typedef struct {
    kvc_parity_group *group;
    const char *dir;
    int differs;              /* any byte of the case differs */
} walk;

static void add_cause(walk *w, kvc_parity_cause cause, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_cause(walk *w, kvc_parity_cause cause, const char *fmt, ...) {
    kvc_parity_group *g = w->group;
    g->causes[cause]++;
    if (g->example[cause][0]) return;
    snprintf(g->example_dir[cause], sizeof g->example_dir[cause], "%s", w->dir);
    int n = snprintf(g->example[cause], sizeof g->example[cause], "%s: ", w->dir);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof g->example[cause]) vsnprintf(g->example[cause] + n, sizeof g->example[cause] - (size_t)n, fmt, ap);
    va_end(ap);
}

static void count(walk *w, kvc_parity_region region, int64_t distance) {
    w->group->elements[region]++;
    if (distance == 0) w->group->identical[region]++;
    w->group->distance_hist[region][kvc_parity_dist_bin(distance)]++;
}

/* A visit of the shared classifier (harness/compare/causes.c). */
static void on_difference(void *p, const kvc_difference *d) {
    walk *w = p;
    if (d->is_element) {
        count(w, d->region, d->distance);
        if (!d->differs) return;
    }
    if (d->detail[0]) add_cause(w, d->cause, "%s: %s", d->where, d->detail);
    else if (d->is_element && d->cause == KVC_CAUSE_MULTI_STEP && d->distance > 0)
        add_cause(w, d->cause, "%s (%lld steps)", d->where, (long long)d->distance);
    else add_cause(w, d->cause, "%s", d->where);
}

static void walk_output(walk *w, const kvc_case *c, const char *name, const kvc_array *upstream, const kvc_array *ref) {
    const uint8_t *up = upstream->data, *rf = ref->data;
    int64_t bytes = upstream->count * kvc_dtype_size(upstream->dtype);
    w->group->bytes += bytes;
    for (int64_t i = 0; i < bytes; i++) w->group->bytes_identical += up[i] == rf[i];
    if (kvc_classify_output(c, name, ref, upstream, on_difference, w)) w->differs = 1;
}

static int has_expected_outputs(const kvc_case *c) {
    for (int i = 0; i < c->num_tensors; i++) {
        size_t n = strlen(c->tensors[i].name);
        if (n > 4 && strcmp(c->tensors[i].name + n - 4, ".out") == 0) return 1;
    }
    return 0;
}

/* The group of case c (by source and stage), with the case counted in it
 * and w set to walk it; NULL when out of memory. */
static kvc_parity_group *count_case(kvc_parity_report *report, const kvc_case *c, const char *dir, walk *w) {
    char source[64], stage[64];
    kvc_case_source_label(c, source, sizeof source);
    stage_key(c, stage, sizeof stage);
    kvc_parity_group *g = group_for(report, source, stage);
    if (!g) return NULL;
    *w = (walk){.group = g, .dir = dir};
    g->cases++;
    report->cases++;
    return g;
}

/* What a differing case's diagnosis may spend on compositions of deviations. */
#define PARITY_DIAGNOSIS_SECONDS 1.0

/* Which deviations write the other side's bytes (`other`: the case's
 * tensors with suffix .out or .got), counted in the case's group. */
static void diagnose_case(kvc_parity_group *g, const kvc_case *c, const kvc_run_result *result, const char *suffix) {
    kvc_run_result other;
    memset(&other, 0, sizeof other);
    for (int i = 0; i < result->num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.%s", result->outputs[i].name, suffix);
        const kvc_array *a = kvc_case_get(c, name);
        if (!a) return;
        other.outputs[i] = result->outputs[i];
        other.outputs[i].array = *a;   /* borrowed from the case */
        other.num_outputs++;
    }
    kvc_run_options options = {.canary = 0xA5};
    kvc_diagnosis d;
    if (!kvc_diagnose(c, &options, &other, PARITY_DIAGNOSIS_SECONDS, &d)) { g->unexplained_cases++; return; }
    for (int i = 0; i < d.count; i++) {
        char name[sizeof g->explanation[0]];
        kvc_diagnosis_name(&d, i, name, sizeof name);
        int k = 0;
        while (k < g->num_explanations && strcmp(g->explanation[k], name) != 0) k++;
        if (k == KVC_PARITY_EXPLANATIONS) continue;
        if (k == g->num_explanations) snprintf(g->explanation[g->num_explanations++], sizeof g->explanation[k], "%s", name);
        g->explained_cases[k]++;
    }
}

/* The other side is the case's NAME.out tensors (an upstream case) or,
 * with an outside status, the outside outputs NAME.got. */
static void add_case(kvc_parity_report *report, const kvc_case *c, const char *dir, const kvc_outside_status *outside) {
    walk w;
    kvc_parity_group *g = count_case(report, c, dir, &w);
    if (!g) return;
    kvc_run_result result;
    int status = kvc_run_case(&kvc_reference_backend, c, NULL, &result);
    char verdict[1400];
    int disagree = 0;
    if (outside) {
        /* Both sides rejected (nothing written), both ran (the bytes
         * below), or they disagree: a stage error with the status. */
        disagree = kvc_outside_status_verdict(c, outside, status, &result, verdict, sizeof verdict);
        if (disagree == 0) status = -1;   /* agreed rejection: identical */
    } else if (status != KVC_OK) {
        /* A case without NAME.out is an input to reject (SPEC.md 10): the
         * reference agrees with it by rejecting it. */
        if (has_expected_outputs(c)) { disagree = 1; snprintf(verdict, sizeof verdict, "%s", result.error.message); }
        else status = -1;
    } else if (!has_expected_outputs(c)) {
        disagree = 1;
        snprintf(verdict, sizeof verdict, "the case has no expected outputs (an input to reject), but the reference accepts it");
    }
    if (disagree == 1) {
        add_cause(&w, KVC_CAUSE_STAGE_ERROR, "%s", verdict);
        if (!g->first_differing[0]) snprintf(g->first_differing, sizeof g->first_differing, "%s", dir);
        kvc_run_result_free(&result);
        return;
    }
    for (int i = 0; status == KVC_OK && i < result.num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.%s", result.outputs[i].name, outside ? "got" : "out");
        kvc_array *other = kvc_case_get(c, name);
        if (!other || other->count != result.outputs[i].array.count || other->dtype != result.outputs[i].array.dtype) {
            if (!outside) continue;
            add_cause(&w, KVC_CAUSE_STAGE_ERROR, "outside output %s is %s (the reference writes %s %lld elements)", result.outputs[i].name,
                      other ? "misshapen" : "missing", kvc_dtype_descr(result.outputs[i].array.dtype),
                      (long long)result.outputs[i].array.count);
            w.differs = 1;
            continue;
        }
        walk_output(&w, c, result.outputs[i].name, other, &result.outputs[i].array);
    }
    if (w.differs && status == KVC_OK) diagnose_case(g, c, &result, outside ? "got" : "out");
    kvc_run_result_free(&result);
    if (!w.differs) { g->cases_identical++; report->cases_identical++; }
    else if (!g->first_differing[0]) snprintf(g->first_differing, sizeof g->first_differing, "%s", dir);
}

void kvc_parity_add_case(kvc_parity_report *report, const kvc_case *c, const char *dir) { add_case(report, c, dir, NULL); }

/* A case whose outside outputs cannot be read: a stage error of its group. */
static void add_unreadable_outside(kvc_parity_report *report, const kvc_case *c, const char *dir, const char *error) {
    walk w;
    kvc_parity_group *g = count_case(report, c, dir, &w);
    if (!g) return;
    add_cause(&w, KVC_CAUSE_STAGE_ERROR, "cannot read the outside outputs: %s", error);
    if (!g->first_differing[0]) snprintf(g->first_differing, sizeof g->first_differing, "%.239s", dir);
}

int kvc_parity_add_outside_path(kvc_parity_report *report, const char *path, const char *outputs_dir) {
    char **dirs;
    int n = kvc_find_cases(path, &dirs);
    if (n == 0) {
        fprintf(stderr, "kvcmp report parity: no case directory (with case.json) under %s\n", path);
        return -1;
    }
    if (report->num_paths < 8) kvc_relative_path(path, report->paths[report->num_paths++], sizeof report->paths[0]);
    for (int i = 0; i < n; i++) {
        kvc_case c;
        char error[1400];
        if (kvc_case_load(dirs[i], &c, error, sizeof error)) {
            fprintf(stderr, "kvcmp report parity: %s\n", error);   /* skipped, named */
            continue;
        }
        char relative[512];
        kvc_relative_path(dirs[i], relative, sizeof relative);
        if (outputs_dir) {
            kvc_outside_status status;
            if (kvc_load_outside_outputs(&c, outputs_dir, dirs[i], &status, error, sizeof error))
                add_unreadable_outside(report, &c, relative, error);
            else add_case(report, &c, relative, &status);
        } else {
            add_case(report, &c, relative, NULL);
        }
        kvc_case_free(&c);
    }
    kvc_free_case_list(dirs, n);
    return 0;
}

int kvc_parity_add_path(kvc_parity_report *report, const char *path) { return kvc_parity_add_outside_path(report, path, NULL); }

void kvc_parity_free(kvc_parity_report *report) {
    free(report->groups);
    memset(report, 0, sizeof *report);
}

/* Failure signatures: see signature.h. */
#include "harness/fuzz/signature.h"

#include <stdio.h>
#include <string.h>

#include <omp.h>

#include "kvcmp/deviations.h"
#include "kvcmp/validate.h"

/* The stage whose output holds the first failing element: a forward's
 * first stage writes the state cache (V4) or the latent and ring (V4.1). */
static const char *blamed_stage(const kvc_case *c, const kvc_fuzz_verdict *v) {
    const char *tensor = v->has_report ? v->report.first_tensor : "";
    if (c->stage == KVC_STAGE_V4_FORWARD && tensor[0])
        return strcmp(tensor, "state_cache") == 0 ? "v4.save_partial_states" : "v4.compress";
    if (c->stage == KVC_STAGE_V41_FORWARD && tensor[0])
        return strcmp(tensor, "kv_cache") == 0 ? "v41.rope_quant_insert" : "v41.save_compress_norm";
    return kvc_stage_name(c->stage);
}

static void list_regions(const kvc_compare_report *r, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < KVC_REGION_COUNT && n < size; i++)
        if (r->failing[i]) n += (size_t)snprintf(out + n, size - n, "%s%s", n ? "+" : "", kvc_region_name((kvc_region)i));
    if (r->missing_expected && n < size) snprintf(out + n, size - n, "%soutput missing", n ? "+" : "");
}

static void make_key(kvc_fuzz_signature *s) {
    snprintf(s->key, sizeof s->key, "%s %s: %s", s->stage, s->check, s->cause[0] ? s->cause : s->regions[0] ? s->regions : "-");
}

void kvc_fuzz_signature_of(const kvc_case *c, const kvc_fuzz_verdict *v, kvc_fuzz_signature *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->stage, sizeof s->stage, "%s", v->failure_stage[0] ? v->failure_stage : blamed_stage(c, v));
    snprintf(s->check, sizeof s->check, "%s", v->kind[0] ? v->kind : "?");
    if (v->failure_class[0]) {
        snprintf(s->cause, sizeof s->cause, "%s", v->failure_class);
    } else if (v->has_report) {
        list_regions(&v->report, s->regions, sizeof s->regions);
        const char *cause = kvc_cause_class(v->causes);
        snprintf(s->cause, sizeof s->cause, "%s", cause[0] || !v->report.missing_expected ? cause : "output missing");
    } else if (strcmp(v->kind, "status") == 0 || strcmp(v->kind, "threads") == 0 || strcmp(v->kind, "permutation") == 0) {
        snprintf(s->cause, sizeof s->cause, "status %s vs %s", kvc_status_name(v->reference_status), kvc_status_name(v->candidate_status));
        if (strcmp(v->kind, "status") != 0) snprintf(s->cause, sizeof s->cause, "status depends on the %s", v->kind);
    } else if (strcmp(v->kind, "padding") == 0) {
        snprintf(s->cause, sizeof s->cause, "page padding written");
    } else if (strcmp(v->kind, "written-on-error") == 0) {
        snprintf(s->cause, sizeof s->cause, "written although rejected");
    }
    make_key(s);
}

void kvc_fuzz_signature_of_lost(const kvc_case *c, const char *kind, const char *cause, kvc_fuzz_signature *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->stage, sizeof s->stage, "%s", kvc_stage_name(c->stage));
    snprintf(s->check, sizeof s->check, "%s", kind);
    snprintf(s->cause, sizeof s->cause, "%s", cause);
    make_key(s);
}

void kvc_fuzz_signature_diagnose(const kvc_fuzz_target *target, const kvc_case *c, const kvc_fuzz_verdict *v, double seconds,
                                 kvc_fuzz_signature *s) {
    if (strcmp(v->kind, "bytes") != 0 && strcmp(v->kind, "status") != 0) return;
    kvc_run_options options = {.page_padding = v->conditions.page_padding, .canary = v->conditions.canary};
    kvc_run_result candidate;
    memset(&candidate, 0, sizeof candidate);
    omp_set_num_threads(v->conditions.threads > 0 ? v->conditions.threads : 1);
    kvc_run_case(target->candidate, c, &options, &candidate);
    kvc_diagnosis d;
    kvc_diagnose(c, &options, &candidate, seconds, &d);
    kvc_run_result_free(&candidate);
    size_t n = 0;
    s->explained_by[0] = 0;
    for (int i = 0; i < d.count && n < sizeof s->explained_by; i++) {
        char name[sizeof s->explained_by];
        kvc_diagnosis_name(&d, i, name, sizeof name);
        /* Whole names only: a list cut in a name would name another deviation. */
        if (n + strlen(name) + 2 > sizeof s->explained_by) break;
        n += (size_t)snprintf(s->explained_by + n, sizeof s->explained_by - n, "%s%s", n ? "," : "", name);
    }
    s->diagnosed = 1;
}

uint64_t kvc_fuzz_signature_hash(const char *key) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *key; key++) h = (h ^ (uint8_t)*key) * 0x100000001b3ull;
    return h ? h : 1;
}

/* Failure signatures: see signature.h. */
#include "harness/fuzz/signature.h"

#include <stdio.h>
#include <string.h>

#include <omp.h>

#include "harness/diagnose/diagnose.h"
#include "kvcmp/backends.h"
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

/* What the key says of an input the contract rejects. */
#define REJECTED_INPUT " [on inputs the contract rejects]"

static void make_key(kvc_fuzz_signature *s) {
    snprintf(s->key, sizeof s->key, "%s %s: %.90s%s", s->stage, s->check, s->cause[0] ? s->cause : s->regions[0] ? s->regions : "-",
             s->rejected_input ? REJECTED_INPUT : "");
}

/* A cause class with no place of its own ("wrong values") says where the
 * values differ: one value bug, one signature; two, two. */
static void localise(kvc_fuzz_signature *s) {
    const char *dims = kvc_locus_dims(&s->locus);
    if (strcmp(s->cause, "wrong values") != 0 || !dims[0]) return;
    /* Steps that a last bit before step 7 writes on this case (a window
     * that cancels amplifies it): the last-bit class of the stage. */
    if (kvc_locus_within_last_bit(&s->locus)) {
        snprintf(s->cause, sizeof s->cause, "last bit");
        return;
    }
    size_t n = strlen(s->cause);
    snprintf(s->cause + n, sizeof s->cause - n, " in %s", dims);
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
        s->locus = v->locus;
        localise(s);
    } else if (strcmp(v->kind, "status") == 0 || strcmp(v->kind, "threads") == 0 || strcmp(v->kind, "permutation") == 0) {
        snprintf(s->cause, sizeof s->cause, "status %s vs %s", kvc_status_name(v->reference_status), kvc_status_name(v->candidate_status));
        if (strcmp(v->kind, "status") != 0) snprintf(s->cause, sizeof s->cause, "status depends on the %s", v->kind);
    } else if (strcmp(v->kind, "padding") == 0) {
        snprintf(s->cause, sizeof s->cause, "page padding written");
    } else if (strcmp(v->kind, "written-on-error") == 0) {
        snprintf(s->cause, sizeof s->cause, "written although rejected");
    }
    /* A status or written-on-error key already says which side rejected. */
    s->rejected_input = v->reference_status != KVC_OK && strcmp(v->kind, "status") != 0 && strcmp(v->kind, "written-on-error") != 0;
    make_key(s);
}

void kvc_fuzz_signature_of_lost(const kvc_case *c, const char *kind, const char *cause, kvc_fuzz_signature *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->stage, sizeof s->stage, "%s", kvc_stage_name(c->stage));
    snprintf(s->check, sizeof s->check, "%s", kind);
    snprintf(s->cause, sizeof s->cause, "%s", cause);
    /* A lost worker left no verdict: the reference says whether the input is valid. */
    if (c->num_tensors) {
        kvc_run_options options = {.canary = 0xA5};
        kvc_run_result contract;
        s->rejected_input = kvc_run_case(&kvc_reference_backend, c, &options, &contract) != KVC_OK;
        kvc_run_result_free(&contract);
    }
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
    s->refuted[0] = 0;
    s->proof_cases = 1;
    s->diagnosed = 1;
}

/* ---- an explanation proven on the case before and after shrinking ---- */

static int diagnosable(const kvc_fuzz_verdict *v) { return strcmp(v->kind, "bytes") == 0 || strcmp(v->kind, "status") == 0; }

/* The candidate's run of c under the conditions v was checked with. */
static void candidate_run(const kvc_fuzz_target *target, const kvc_case *c, const kvc_fuzz_verdict *v, kvc_run_options *options,
                          kvc_run_result *r) {
    *options = (kvc_run_options){.page_padding = v->conditions.page_padding, .canary = v->conditions.canary};
    memset(r, 0, sizeof *r);
    omp_set_num_threads(v->conditions.threads > 0 ? v->conditions.threads : 1);
    kvc_run_case(target->candidate, c, options, r);
}

static int list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *at = strstr(list, name); at; at = strstr(at + 1, name))
        if ((at == list || at[-1] == ',') && (at[n] == 0 || at[n] == ',')) return 1;
    return 0;
}

/* Whole names only: a list cut in a name would name another deviation. */
static void list_add(char *list, size_t size, const char *name) {
    size_t n = strlen(list);
    if (!list_has(list, name) && n + strlen(name) + 2 <= size) snprintf(list + n, size - n, "%s%s", n ? "," : "", name);
}

/* Each explanation of d (found on one case) checked on the other case
 * (other: the candidate's run there): into held or refuted. */
static void check_on(const kvc_diagnosis *d, const kvc_case *other_case, const kvc_run_options *options, const kvc_run_result *other,
                     kvc_fuzz_signature *s) {
    for (int i = 0; i < d->count; i++) {
        char name[sizeof s->explained_by];
        kvc_diagnosis_name(d, i, name, sizeof name);
        int size = 0;
        while (size < KVC_DIAGNOSIS_DEPTH && d->members[i][size] >= 0) size++;
        if (!other_case || kvc_explanation_holds(other_case, options, other, d->members[i], size))
            list_add(s->explained_by, sizeof s->explained_by, name);
        else
            list_add(s->refuted, sizeof s->refuted, name);
    }
}

void kvc_fuzz_signature_prove(const kvc_fuzz_target *target, const kvc_case *unshrunk, const kvc_fuzz_verdict *before,
                              const kvc_case *minimal, const kvc_fuzz_verdict *after, double seconds, kvc_fuzz_signature *s) {
    if (!diagnosable(after)) return;
    s->explained_by[0] = s->refuted[0] = 0;
    kvc_run_options min_options, un_options;
    kvc_run_result min_run, un_run;
    candidate_run(target, minimal, after, &min_options, &min_run);
    if (unshrunk) candidate_run(target, unshrunk, before, &un_options, &un_run);
    kvc_diagnosis d;
    kvc_diagnose(minimal, &min_options, &min_run, seconds, &d);
    check_on(&d, unshrunk, &un_options, &un_run, s);
    /* Nothing found on the minimal case held on the case it came from:
     * what explains that one, if it writes the minimal case's bytes too
     * (a second bug the shrinker left out, say). */
    if (unshrunk && d.count && !s->explained_by[0] && diagnosable(before)) {
        kvc_diagnose(unshrunk, &un_options, &un_run, seconds, &d);
        check_on(&d, minimal, &min_options, &min_run, s);
    }
    /* A name that held is not refuted by another way of reaching it. */
    char refuted[sizeof s->refuted] = "", item[sizeof s->refuted];
    for (const char *p = s->refuted; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(item, sizeof item, "%.*s", (int)n, p);
        if (!list_has(s->explained_by, item)) list_add(refuted, sizeof refuted, item);
        p += n + (p[n] == ',');
    }
    snprintf(s->refuted, sizeof s->refuted, "%s", refuted);
    s->proof_cases = 1 + (unshrunk != NULL);
    s->diagnosed = 1;
    kvc_run_result_free(&min_run);
    if (unshrunk) kvc_run_result_free(&un_run);
}

uint64_t kvc_fuzz_signature_hash(const char *key) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *key; key++) h = (h ^ (uint8_t)*key) * 0x100000001b3ull;
    return h ? h : 1;
}

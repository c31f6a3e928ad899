/* One fuzz case, differential and metamorphic: see fuzz_run.h. */
#include "harness/fuzz/run.h"

#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kvcmp/generate.h"
#include "kvcmp/validate.h"
#include "optimized/optimized.h"
#include "harness/fuzz/permute.h"
#include "harness/fuzz/teams.h"

static const char *wait_policy = "default";

/* Runs with the other constructors, before main: the environment libgomp
 * (loaded before this image's constructors run) read. */
__attribute__((constructor)) static void read_wait_policy(void) {
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (policy && strcasecmp(policy, "active") == 0) wait_policy = "active";
    else if (policy && strcasecmp(policy, "passive") == 0) wait_policy = "passive";
}

const char *kvc_wait_policy_at_load(void) { return wait_policy; }

int kvc_backend_has_stage(const kvc_backend *b, const kvc_case *c) {
    switch (c->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES: return b->v4_save_partial_states != NULL;
    case KVC_STAGE_V4_COMPRESS: return b->v4_compress != NULL;
    case KVC_STAGE_V4_FORWARD: return b->v4_save_partial_states && b->v4_compress;
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM: return b->v41_save_compress_norm != NULL;
    case KVC_STAGE_V41_ROPE_QUANT_INSERT: return b->v41_rope_quant_insert != NULL;
    case KVC_STAGE_V41_ROPE_PLAIN_INSERT: return b->v41_rope_plain_insert != NULL;
    case KVC_STAGE_V41_FORWARD: return b->v41_save_compress_norm && b->v41_rope_quant_insert;
    default: return 0;
    }
}

uint64_t kvc_backend_variant_mask(const kvc_backend *b) {
    uint64_t mask = 0;
    for (int v = 0; v < kvc_variant_count(); v++) {
        const kvc_variant_info *info = kvc_variant(v);
        kvc_case c = {.stage = info->stage >= 0 ? (kvc_stage)info->stage
                               : info->head_dim ? KVC_STAGE_V41_FORWARD : KVC_STAGE_V4_FORWARD};   /* history.v41, history.v4 */
        if (kvc_backend_has_stage(b, &c)) mask |= UINT64_C(1) << v;
    }
    return mask;
}

int kvc_backend_offers_any(const kvc_backend *b) {
    return b->v4_save_partial_states || b->v4_compress || b->v41_save_compress_norm || b->v41_rope_quant_insert ||
           b->v41_rope_plain_insert;
}

static kvc_fuzz_outcome fail(kvc_fuzz_verdict *v, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static kvc_fuzz_outcome fail(kvc_fuzz_verdict *v, const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    v->outcome = KVC_FUZZ_FAIL;
    snprintf(v->kind, sizeof v->kind, "%s", kind);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    return KVC_FUZZ_FAIL;
}

/* With every allowed thread used however small the case, under the
 * case's team rule (static or dynamic splits: both are fuzzed whatever
 * OMP_WAIT_POLICY the workers run under; the optimized backend would keep
 * a small case on one; a plug-in with a work threshold
 * of its own reads KVCMP_CANDIDATE_THREADS, plugin.h): the 1-vs-N check
 * must split.  The optimized backend's stages run on the master thread
 * of their team size (teams.h), where no call creates threads; a plug-in
 * stays on this thread (one that forks must copy the worker, which the
 * case protocol catches, not a master waiting for a job). */
static int run_with_threads(const kvc_backend *b, const kvc_case *c, const kvc_run_options *o, int threads, int spinning_team,
                            kvc_run_result *r) {
    double thread_work = kvc_optimized_thread_work();
    int team_rule = kvc_optimized_team_rule();
    kvc_optimized_set_thread_work(0);
    kvc_optimized_set_team_rule(spinning_team);
    omp_set_num_threads(threads);
    char count[16];
    snprintf(count, sizeof count, "%d", threads);
    setenv("KVCMP_CANDIDATE_THREADS", count, 1);
    setenv("KVCMP_CANDIDATE_TEAM_RULE", spinning_team ? "spinning" : "sleeping", 1);
    kvc_backend proxy;
    if (kvc_optimized_backend_is(b)) b = kvc_team_backend(b, threads, &proxy);
    int rc = kvc_run_case(b, c, o, r);
    kvc_optimized_set_thread_work(thread_work);
    kvc_optimized_set_team_rule(team_rule);
    return rc;
}

/* Differences between two results, "" when none fail the policy; the
 * comparison goes to v's report and the causes of the first failing
 * tensor's differences to v's causes (for the failure's signature: in a
 * forward, what the second stage does with a wrong first-stage output is
 * not the cause). */
static int results_differ(const kvc_case *c, const kvc_run_result *a, const kvc_run_result *b, kvc_policy policy,
                          kvc_fuzz_verdict *v, char *out, size_t size) {
    /* The classifying comparison formats a location for every element;
     * identical outputs (nearly every case) skip it. */
    int identical = a->num_outputs == b->num_outputs;
    for (int i = 0; identical && i < a->num_outputs; i++) {
        const kvc_array *x = &a->outputs[i].array, *y = &b->outputs[i].array;
        identical = x->count == y->count && x->dtype == y->dtype &&
                    memcmp(x->data, y->data, (size_t)x->count * (size_t)kvc_dtype_size(x->dtype)) == 0;
    }
    if (identical) return 0;
    kvc_compare_report report;
    kvc_compare_results(c, a, b, policy, &report);
    if (!kvc_report_failed(&report)) return 0;
    char summary[600];
    kvc_report_summary(&report, summary, sizeof summary);
    snprintf(out, size, "%.300s; first: %.300s", summary, report.has_first ? report.first : "-");
    v->report = report;
    v->has_report = 1;
    kvc_output_cause_counts(c, report.first_tensor, a, b, v->causes);
    kvc_locate_output(c, report.first_tensor, a, b, &v->locus);
    return 1;
}

/* A rejected input must leave every cache as it was (a forward too:
 * SPEC.md 4.3, arguments its second stage rejects never reach its first). */
static int written_on_error(const kvc_case *c, const kvc_run_result *r, char *out, size_t size) {
    for (int i = 0; i < r->num_outputs; i++) {
        kvc_array *input = kvc_case_get(c, r->outputs[i].name);
        const kvc_array *got = &r->outputs[i].array;
        if (!input || input->count != got->count) continue;
        size_t bytes = (size_t)got->count * (size_t)kvc_dtype_size(got->dtype);
        for (size_t k = 0; k < bytes; k++)
            if (((uint8_t *)input->data)[k] != ((uint8_t *)got->data)[k]) {
                snprintf(out, size, "%s byte %zu changed although the stage returned an error", r->outputs[i].name, k);
                return 1;
            }
    }
    return 0;
}

/* The check an out-of-process candidate's own failure fails, or NULL. */
static const char *candidate_failure_kind(int status) {
    switch (status) {
    case KVC_ERR_CANDIDATE: return "exception";
    case KVC_ERR_CRASHED: return "crash";
    case KVC_ERR_DEVICE_LOST: return "device-lost";
    default: return NULL;
    }
}

/* "STAGE: CLASS: detail" of an out-of-process candidate's failure; the
 * check it fails: kind, or the class where that is a check of its own (a
 * reply stream out of step, a worker that did not start in time). */
static const char *split_failure(const char *message, const char *kind, kvc_fuzz_verdict *v) {
    size_t stage = strcspn(message, ":");
    snprintf(v->failure_stage, sizeof v->failure_stage, "%.*s", (int)stage, message);
    const char *rest = message[stage] ? message + stage + 1 : message + stage;
    rest += strspn(rest, " ");
    snprintf(v->failure_class, sizeof v->failure_class, "%.*s", (int)strcspn(rest, ":"), rest);
    if (strcmp(v->failure_class, "protocol") == 0 || strcmp(v->failure_class, "startup-timeout") == 0) return v->failure_class;
    return kind;
}

/* A metamorphic re-run that failed on its own (an exception, a crash,
 * a lost device): that failure, not a status that "depends on" the check. */
static int candidate_failed_alone(const kvc_run_result *r, kvc_fuzz_verdict *v) {
    const char *kind = candidate_failure_kind(r->status);
    if (!kind) return 0;
    kind = split_failure(r->error.message, kind, v);
    fail(v, kind, "%s (on a metamorphic re-run)", r->error.message);
    return 1;
}

/* ---- physical-block permutation ------------------------------------ */

static kvc_fuzz_outcome check_permutation(const kvc_fuzz_target *t, const kvc_case *c, const kvc_run_result *base,
                                           const kvc_run_options *o, kvc_fuzz_verdict *v) {
    kvc_case permuted;
    if (kvc_case_copy(&permuted, c)) return KVC_FUZZ_PASS;
    kvc_page_permutation perm;
    kvc_permute_case_pages(&permuted, v->conditions.permutation_seed, &perm);
    v->conditions.permuted = 1;
    kvc_run_result r;
    run_with_threads(t->candidate, &permuted, o, v->conditions.threads, v->conditions.spinning_team, &r);
    kvc_fuzz_outcome outcome = KVC_FUZZ_PASS;
    if (candidate_failed_alone(&r, v)) {
        outcome = KVC_FUZZ_FAIL;
    } else if (r.status != base->status) {
        outcome = fail(v, "permutation", "permuting physical blocks changed the status: %s -> %s (%s)", kvc_status_name(base->status),
                       kvc_status_name(r.status), r.error.message);
    } else if (r.status == KVC_OK) {
        kvc_unpermute_outputs(&r, &perm);
        char diff[700];
        if (results_differ(c, base, &r, KVC_POLICY_EXACT, v, diff, sizeof diff))
            outcome = fail(v, "permutation", "permuting physical blocks changed logical outputs: %s", diff);
    }
    kvc_run_result_free(&r);
    kvc_page_permutation_free(&perm);
    kvc_case_free(&permuted);
    return outcome;
}

/* ---- const inputs --------------------------------------------------- */

/* Tensors a backend reads in place: kvc_run_case hands it copies of the
 * caches, and expected outputs are not its to see. */
static int read_in_place(const kvc_named_array *t) {
    size_t n = strlen(t->name);
    return strcmp(t->name, "state_cache") != 0 && strcmp(t->name, "kv_cache") != 0 && !(n > 4 && strcmp(t->name + n - 4, ".out") == 0);
}

static size_t tensor_bytes(const kvc_array *a) { return (size_t)a->count * (size_t)kvc_dtype_size(a->dtype); }

/* A copy of the bytes of c's in-place inputs (NULL without memory: no check). */
static uint8_t *snapshot_inputs(const kvc_case *c) {
    size_t total = 1;
    for (int i = 0; i < c->num_tensors; i++)
        if (read_in_place(&c->tensors[i])) total += tensor_bytes(&c->tensors[i].array);
    uint8_t *copy = malloc(total), *p = copy;
    for (int i = 0; copy && i < c->num_tensors; i++)
        if (read_in_place(&c->tensors[i]) && tensor_bytes(&c->tensors[i].array)) {
            memcpy(p, c->tensors[i].array.data, tensor_bytes(&c->tensors[i].array));
            p += tensor_bytes(&c->tensors[i].array);
        }
    return copy;
}

/* A candidate that writes into its const inputs fails as "input-write",
 * whatever it did to its outputs (a later call would see other inputs:
 * not a thread or permutation difference).  The inputs are put back. */
static int inputs_written(const kvc_case *c, const uint8_t *copy, kvc_fuzz_verdict *v) {
    const uint8_t *p = copy;
    for (int i = 0; copy && i < c->num_tensors; i++) {
        const kvc_named_array *t = &c->tensors[i];
        size_t bytes = read_in_place(t) ? tensor_bytes(&t->array) : 0;
        uint8_t *now = t->array.data;
        if (bytes && memcmp(now, p, bytes) != 0) {
            size_t k = 0;
            while (now[k] == p[k]) k++;
            fail(v, "input-write", "candidate wrote into its input %s: byte %zu changed from 0x%02x to 0x%02x (inputs are const)", t->name, k,
                 p[k], now[k]);
            snprintf(v->failure_class, sizeof v->failure_class, "input %s written", t->name);
            v->has_report = 0;
            memcpy(now, p, bytes);
            return 1;
        }
        p += bytes;
    }
    return 0;
}

/* ---- aliased buffers ------------------------------------------------ */

int kvc_backend_takes_aliased_memory(const kvc_backend *b) { return strncmp(b->name, "py:", 3) != 0; }

/* Any output of r whose bytes differ from the case's tensor of that name. */
static int output_changed(const kvc_case *c, const kvc_run_result *r, char *out, size_t size) {
    for (int i = 0; i < r->num_outputs; i++) {
        kvc_array *input = kvc_case_get(c, r->outputs[i].name);
        const kvc_array *got = &r->outputs[i].array;
        size_t bytes = tensor_bytes(got);
        if (!input || tensor_bytes(input) != bytes || memcmp(input->data, got->data, bytes) == 0) continue;
        size_t k = 0;
        while (((uint8_t *)input->data)[k] == ((uint8_t *)got->data)[k]) k++;
        snprintf(out, size, "%s byte %zu changed", r->outputs[i].name, k);
        return 1;
    }
    return 0;
}

int kvc_fuzz_check_aliased(const kvc_backend *candidate, const kvc_case *c, const kvc_run_options *o, uint64_t alias_seed, char *detail,
                           size_t size) {
    kvc_run_options aliased = *o;
    aliased.alias_seed = alias_seed;
    aliased.keep_outputs_on_error = 1;
    kvc_run_result r;
    kvc_run_case(candidate, c, &aliased, &r);
    char changed[160];
    int failed = r.aliased;
    if (!r.aliased)
        failed = -1;
    else if (r.status != KVC_ERR_CONFLICT)
        snprintf(detail, size, "with %s, the candidate returned %s (%s); SPEC.md 8.1: overlapping buffers are a conflict, nothing written",
                 r.alias_message, kvc_status_name(r.status), r.status ? r.error.message : "it ran the call");
    else if (r.alias_written)
        snprintf(detail, size, "the candidate rejected the aliased call but wrote into it: %s", r.alias_message);
    else if (r.padding_touched)
        snprintf(detail, size, "the candidate rejected the aliased call but wrote page padding: %s", r.padding_message);
    else if (output_changed(c, &r, changed, sizeof changed))
        snprintf(detail, size, "the candidate rejected the aliased call (%s) but wrote: %s", r.alias_message, changed);
    else
        failed = 0;
    kvc_run_result_free(&r);
    return failed;
}

/* The share of checks that also get the aliased-buffers check, from a
 * stream of the salt of its own: the other conditions draw as before. */
#define ALIAS_PER_MILLE 30

static uint64_t draw_alias_seed(uint64_t salt) {
    kvc_rng rng;
    kvc_rng_seed(&rng, salt, 0xA11A5);
    return kvc_rng_below(&rng, 1000) < ALIAS_PER_MILLE ? kvc_rng_next(&rng) | 1 : 0;
}

/* ---- the check ------------------------------------------------------ */

static kvc_fuzz_outcome compare_runs(const kvc_fuzz_target *t, const kvc_case *c, kvc_run_result *ref, kvc_run_result *cand,
                                     kvc_fuzz_verdict *v) {
    char detail[700];
    const char *kind = candidate_failure_kind(cand->status);
    if (kind) {
        kind = split_failure(cand->error.message, kind, v);
        return fail(v, kind, "%s (the reference returned %s)", cand->error.message, kvc_status_name(ref->status));
    }
    if (cand->padding_touched) return fail(v, "padding", "%s", cand->padding_message);
    if (ref->status != cand->status)
        return fail(v, "status", "reference returned %s (%s), candidate returned %s (%s)", kvc_status_name(ref->status),
                    ref->status ? ref->error.message : "ok", kvc_status_name(cand->status), cand->status ? cand->error.message : "ok");
    if (ref->status != KVC_OK) {
        if (written_on_error(c, ref, detail, sizeof detail)) return fail(v, "written-on-error", "reference: %s", detail);
        if (written_on_error(c, cand, detail, sizeof detail)) return fail(v, "written-on-error", "candidate: %s", detail);
        if (results_differ(c, ref, cand, KVC_POLICY_EXACT, v, detail, sizeof detail))
            return fail(v, "written-on-error", "after the same error: %s", detail);
        return KVC_FUZZ_PASS;
    }
    if (results_differ(c, ref, cand, t->policy, v, detail, sizeof detail)) {
        /* Many steps: perhaps a last bit that the case amplifies. */
        if (strcmp(kvc_cause_class(v->causes), "wrong values") == 0) kvc_locus_probe(c, v->report.first_tensor, ref, &v->locus);
        return fail(v, "bytes", "%s", detail);
    }
    return KVC_FUZZ_PASS;
}

/* Thread counts of the varied-threads dimension: odd counts leave a
 * remainder in every static partition; 8 reaches the token-parallel
 * paths of small batches. */
static const int candidate_thread_counts[] = {1, 1, 1, 1, 1, 2, 2, 3, 3, 4, 5, 7, 8};
static const int other_thread_counts[] = {2, 3, 5, 7};

/* The candidate side's conditions, all drawn from the salt. */
/* Page padding: mostly whole cache lines; one in eight a multiple of 4
 * that is not one (SPEC.md 3 and 8 allow any stride >= page_bytes that
 * keeps fp32 rows aligned), so pages start off cache-line boundaries. */
static int64_t draw_page_padding(kvc_rng *rng) {
    if (kvc_rng_chance(rng, 1, 8)) return 4 * (16 * kvc_rng_range(rng, 0, 2) + kvc_rng_range(rng, 1, 15));
    return 64 * kvc_rng_range(rng, 1, 3);
}

static void draw_conditions(const kvc_fuzz_target *t, kvc_rng *rng, kvc_fuzz_conditions *k) {
    k->page_padding = draw_page_padding(rng);
    if (t->geometry_pool > 0) {
        /* The pool: geometry_pool paddings fixed for the campaign, so a
         * specialising kernel sees only that many page strides. */
        kvc_rng pool;
        uint64_t which = (uint64_t)kvc_rng_below(rng, t->geometry_pool);
        if (t->geometry_slot > 0) which = (uint64_t)(t->geometry_slot - 1) % (uint64_t)t->geometry_pool;
        kvc_rng_seed(&pool, t->geometry_salt, 0x6E0 + which);
        k->page_padding = draw_page_padding(&pool);
    }
    k->canary = (uint8_t)kvc_rng_below(rng, 256);
    k->threads = t->threads;
    k->permutation_seed = kvc_rng_next(rng);
    if (t->vary_threads) {
        int n = (int)(sizeof candidate_thread_counts / sizeof *candidate_thread_counts);
        k->threads = candidate_thread_counts[kvc_rng_below(rng, n)];
    }
    if (t->replay_padding) {
        k->page_padding = t->replay_padding;
        k->canary = 0xA5;
    }
    /* Drawn last, so that the draws above are those of older campaigns. */
    k->spinning_team = kvc_rng_chance(rng, 1, 2);
}

static void draw_all_conditions(const kvc_fuzz_target *t, uint64_t salt, kvc_rng *rng, kvc_fuzz_conditions *k) {
    kvc_rng_seed(rng, salt, 0x5A17);
    draw_conditions(t, rng, k);
    k->alias_seed = t->replay_padding ? 0 : draw_alias_seed(salt);
}

void kvc_fuzz_draw_conditions(const kvc_fuzz_target *t, uint64_t salt, kvc_fuzz_conditions *k) {
    kvc_rng rng;
    memset(k, 0, sizeof *k);
    draw_all_conditions(t, salt, &rng, k);
}

static int other_thread_count(const kvc_fuzz_target *t, kvc_rng *rng, int threads) {
    if (threads != 1) return 1;
    if (!t->vary_threads) return 2;
    return other_thread_counts[kvc_rng_below(rng, (int64_t)(sizeof other_thread_counts / sizeof *other_thread_counts))];
}

/* The same call with another thread count: 1 against N. */
static kvc_fuzz_outcome check_threads(const kvc_fuzz_target *t, const kvc_case *c, const kvc_run_result *cand,
                                      const kvc_run_options *o, kvc_rng *rng, kvc_fuzz_verdict *v) {
    int threads = v->conditions.threads, other_threads = other_thread_count(t, rng, threads);
    v->conditions.other_threads = other_threads;
    kvc_run_result other;
    run_with_threads(t->candidate, c, o, other_threads, v->conditions.spinning_team, &other);
    char diff[700];
    kvc_fuzz_outcome outcome = KVC_FUZZ_PASS;
    if (candidate_failed_alone(&other, v))
        outcome = KVC_FUZZ_FAIL;
    else if (other.status != cand->status)
        outcome = fail(v, "threads", "%d thread(s) returned %s, %d thread(s) %s", other_threads, kvc_status_name(other.status),
                       threads, kvc_status_name(cand->status));
    else if (other.status == KVC_OK && results_differ(c, cand, &other, KVC_POLICY_EXACT, v, diff, sizeof diff))
        outcome = fail(v, "threads", "%d thread(s) vs %d thread(s): %s", threads, other_threads, diff);
    kvc_run_result_free(&other);
    return outcome;
}

/* The aliased-buffers check of a case both sides accepted. */
static kvc_fuzz_outcome check_aliasing(const kvc_fuzz_target *t, const kvc_case *c, const kvc_run_options *o, const uint8_t *inputs,
                                       kvc_fuzz_verdict *v) {
    if (!kvc_backend_takes_aliased_memory(t->candidate)) {
        v->conditions.alias_unavailable = 1;
        return KVC_FUZZ_PASS;
    }
    char detail[600];
    int failed = kvc_fuzz_check_aliased(t->candidate, c, o, v->conditions.alias_seed, detail, sizeof detail);
    v->conditions.aliased = failed >= 0;
    if (inputs_written(c, inputs, v)) return KVC_FUZZ_FAIL;
    return failed == 1 ? fail(v, "aliasing", "%s", detail) : KVC_FUZZ_PASS;
}

kvc_fuzz_outcome kvc_fuzz_check_case(const kvc_fuzz_target *t, const kvc_case *c, uint64_t salt, kvc_fuzz_verdict *v) {
    memset(v, 0, sizeof *v);
    if (!kvc_backend_has_stage(t->candidate, c)) {
        v->outcome = KVC_FUZZ_SKIP;
        snprintf(v->detail, sizeof v->detail, "candidate %s has no %s", t->candidate->name, kvc_stage_name(c->stage));
        return KVC_FUZZ_SKIP;
    }
    kvc_rng rng;
    draw_all_conditions(t, salt, &rng, &v->conditions);
    kvc_run_options ref_options = {.page_padding = 0, .canary = 0xA5, .keep_outputs_on_error = 1};
    kvc_run_options cand_options = {.page_padding = v->conditions.page_padding, .canary = v->conditions.canary,
                                    .keep_outputs_on_error = 1};
    kvc_run_result ref, cand;
    kvc_run_case(t->reference, c, &ref_options, &ref);
    uint8_t *inputs = snapshot_inputs(c);
    run_with_threads(t->candidate, c, &cand_options, v->conditions.threads, v->conditions.spinning_team, &cand);
    v->reference_status = ref.status;
    v->candidate_status = cand.status;
    kvc_fuzz_outcome outcome = inputs_written(c, inputs, v) ? KVC_FUZZ_FAIL : compare_runs(t, c, &ref, &cand, v);
    int metamorphic = outcome == KVC_FUZZ_PASS && kvc_rng_below(&rng, 1000) < t->metamorphic_per_mille && !t->replay_padding;
    if (metamorphic) outcome = check_threads(t, c, &cand, &cand_options, &rng, v);
    if (metamorphic && outcome == KVC_FUZZ_PASS && cand.status == KVC_OK)
        outcome = check_permutation(t, c, &cand, &cand_options, v);
    if (metamorphic && inputs_written(c, inputs, v)) outcome = KVC_FUZZ_FAIL;
    if (outcome == KVC_FUZZ_PASS && ref.status == KVC_OK && v->conditions.alias_seed)
        outcome = check_aliasing(t, c, &cand_options, inputs, v);
    free(inputs);
    if (outcome == KVC_FUZZ_PASS) v->has_report = 0;
    omp_set_num_threads(t->threads);
    kvc_run_result_free(&ref);
    kvc_run_result_free(&cand);
    return outcome;
}

int kvc_fuzz_add_expected(const kvc_backend *reference, kvc_case *c) {
    kvc_run_result r;
    kvc_run_options o = {.page_padding = 0, .canary = 0xA5};
    if (kvc_run_case(reference, c, &o, &r) != KVC_OK) { kvc_run_result_free(&r); return -1; }
    for (int i = 0; i < r.num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.out", r.outputs[i].name);
        kvc_case_put(c, name, &r.outputs[i].array);
        r.outputs[i].array.data = NULL;
    }
    r.num_outputs = 0;
    return 0;
}

/* The campaign's worker side (harness/fuzz/fuzz.c): one case at a time,
 * generated, checked, shrunk and saved inside a worker process, each
 * reported to the parent through a pipe. */

#include "harness/fuzz/campaign_internal.h"

/* ---- one case, inside a worker --------------------------------------- */

static void send_message(worker *w, message *m) {
    m->at_seconds = now_seconds() - w->started;
    ssize_t done = write(w->write_fd, m, sizeof *m);
    (void)done;   /* a vanished parent ends the campaign anyway */
}

/* The parent's answer to a MSG_RESULT that asks to save: 1 to shrink and
 * save.  The control state lives in the parent, out of the candidate's
 * reach (memory shared with workers would not be). */
static int parent_allows_save(worker *w) {
    for (;;) {
        char byte;
        ssize_t r = read(w->control_fd, &byte, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r != 1) { w->stopped = 1; return 0; }
        if (byte == 'S') { w->stopped = 1; continue; }
        return byte == 'Y';
    }
}

/* Between cases: has the parent asked the worker to stop? */
static int parent_says_stop(worker *w) {
    struct pollfd p = {.fd = w->control_fd, .events = POLLIN};
    if (!w->stopped && poll(&p, 1, 0) > 0) w->stopped = 1;   /* 'S', or the parent's end closed */
    return w->stopped;
}

/* The predicate the shrinker keeps: the same signature and, for a
 * failure a single deviation explains, the same explanation, so that a
 * reduction cannot trade the bug for another one of the same byte class
 * (a padding token whose metadata the shrinker left out of range, read
 * by a kernel that ignores its negative slot, says nothing about the
 * deviation).  The salt fixes the candidate's conditions (padding,
 * canary, threads, permutation), so every reduction is checked the way
 * the saved case will be replayed. */
/* A diagnosis with no time for pairs: the single deviations only. */
#define SINGLES_ONLY 1e-9

typedef struct {
    const kvc_fuzz_target *target;
    uint64_t salt;
    const char *signature_key;
    char deviation[100];      /* the single deviation that explained the failure, or "" */
} shrink_context;

/* Whether the deviation named in list (comma-separated) is among them. */
static int names_deviation(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *at = strstr(list, name); at; at = strstr(at + 1, name))
        if ((at == list || at[-1] == ',') && (at[n] == 0 || at[n] == ',')) return 1;
    return 0;
}

static int still_fails(const kvc_case *c, void *p) {
    shrink_context *s = p;
    kvc_fuzz_verdict v;
    if (kvc_fuzz_check_case(s->target, c, s->salt, &v) != KVC_FUZZ_FAIL) return 0;
    kvc_fuzz_signature signature;
    kvc_fuzz_signature_of(c, &v, &signature);
    if (strcmp(signature.key, s->signature_key) != 0) return 0;
    if (!s->deviation[0]) return 1;
    kvc_fuzz_signature_diagnose(s->target, c, &v, SINGLES_ONLY, &signature);
    return names_deviation(signature.explained_by, s->deviation);
}

/* The single deviation that explains the unshrunk failure, for the
 * shrinker to keep ("" when none or only a pair does). */
static void explanation_to_keep(const kvc_fuzz_target *target, const kvc_case *c, const kvc_fuzz_verdict *v, shrink_context *ctx) {
    kvc_fuzz_signature before;
    memset(&before, 0, sizeof before);
    kvc_fuzz_signature_diagnose(target, c, v, SINGLES_ONLY, &before);
    size_t n = strcspn(before.explained_by, ",");
    if (n < sizeof ctx->deviation && !memchr(before.explained_by, '+', n))
        snprintf(ctx->deviation, sizeof ctx->deviation, "%.*s", (int)n, before.explained_by);
}

/* case.json meta "replay": how `kvcmp replay` must run the case to see
 * the failure (harness/replay/conditions.c reads it). */
cJSON *replay_object(const kvc_fuzz_conditions *k) {
    cJSON *replay = cJSON_CreateObject();
    cJSON_AddNumberToObject(replay, "page_padding", (double)k->page_padding);
    cJSON_AddNumberToObject(replay, "canary", k->canary);
    int threads[2] = {k->threads, k->other_threads};
    cJSON_AddItemToObject(replay, "threads", cJSON_CreateIntArray(threads, k->other_threads > 0 ? 2 : 1));
    cJSON_AddStringToObject(replay, "team_rule", k->spinning_team ? "spinning" : "sleeping");
    cJSON_AddStringToObject(replay, "omp_wait_policy", kvc_wait_policy_at_load());
    char seed[32];   /* a string: JSON numbers lose 64-bit integers */
    if (k->permuted) {
        snprintf(seed, sizeof seed, "0x%016llx", (unsigned long long)k->permutation_seed);
        cJSON_AddStringToObject(replay, "permutation_seed", seed);
    }
    if (k->aliased) {
        snprintf(seed, sizeof seed, "0x%016llx", (unsigned long long)k->alias_seed);
        cJSON_AddStringToObject(replay, "alias_seed", seed);
    }
    return replay;
}

/* What picks a case's check conditions (padding, canary, threads ...). */
uint64_t case_salt(const fuzz_options *o, int64_t index) { return o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)index; }

/* Saves a failing case under --save, never over an existing one; the
 * path, or the error, goes to m. */
void save_case(const fuzz_options *o, const kvc_gen_case *g, int64_t index, message *m) {
    char name[128], error[512];
    kvc_child_standard_fds();   /* a candidate that closed 1 and 2 must not log into the case's files */
    kvc_gen_case_name(o->seed, index, g->variant, name, sizeof name);
    m->save_failed = kvc_case_save_new(o->save_dir, name, &g->c, m->saved, sizeof m->saved, error, sizeof error) != 0;
    if (m->save_failed) snprintf(m->saved, sizeof m->saved, "%.390s", error);
}

/* The pairs' share of a diagnosis: it runs in the shrinking phase, which
 * the parent cuts at --shrink-seconds + 2 x --timeout. */
static double diagnosis_seconds(const fuzz_options *o) {
    double t = o->limits.timeout_seconds;
    return t > 0 && t / 2 < DIAGNOSIS_PAIR_SECONDS ? t / 2 : DIAGNOSIS_PAIR_SECONDS;
}

/* Shrink, add the reference's outputs and save; the path goes to m->saved. */
static void shrink_and_save(worker *w, kvc_gen_case *g, int64_t index, uint64_t salt, const kvc_fuzz_verdict *v, message *m) {
    shrink_context ctx = {.target = &w->target, .salt = salt, .signature_key = m->signature.key};
    explanation_to_keep(&w->target, &g->c, v, &ctx);
    /* The case as it first failed: its diagnosis must hold there too. */
    kvc_case unshrunk;
    int kept = kvc_case_copy(&unshrunk, &g->c) == 0;
    kvc_shrink_stats stats;
    /* A lost device poisons its worker: each attempt gets a fresh one. */
    kvc_pyworker_fresh_each_call(strcmp(m->kind, "device-lost") == 0);
    kvc_shrink_case(&g->c, still_fails, &ctx, w->o->shrink_seconds, &stats);
    kvc_pyworker_fresh_each_call(0);
    m->tokens_before = stats.tokens_before;
    m->tokens_after = stats.tokens_after;
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "generator", "kvcmp fuzz");
    cJSON_AddNumberToObject(meta, "seed", (double)w->o->seed);
    cJSON_AddNumberToObject(meta, "case", (double)index);
    cJSON_AddStringToObject(meta, "variant", kvc_variant(g->variant)->name);
    cJSON_AddStringToObject(meta, "family", kvc_family_name(g->family));
    cJSON_AddStringToObject(meta, "failure", m->kind);
    cJSON_AddStringToObject(meta, "signature", m->signature.key);
    cJSON_AddStringToObject(meta, "candidate", w->o->candidate_name);
    cJSON_AddNumberToObject(meta, "shrink_attempts", stats.attempts);
    cJSON_AddItemToObject(meta, "run", kvc_run_info(w->o->seed, 1, options_json(w->o)));
    kvc_fuzz_verdict final;
    kvc_fuzz_outcome outcome = kvc_fuzz_check_case(&w->target, &g->c, salt, &final);
    const kvc_fuzz_conditions *k = outcome == KVC_FUZZ_FAIL ? &final.conditions : &v->conditions;
    /* The minimal case names its bug: the catalogue's deviations, run on
     * it, each kept only where it writes the unshrunk case's bytes too. */
    if (outcome == KVC_FUZZ_FAIL)
        kvc_fuzz_signature_prove(&w->target, kept ? &unshrunk : NULL, v, &g->c, &final, diagnosis_seconds(w->o), &m->signature);
    if (kept) kvc_case_free(&unshrunk);
    if (m->signature.diagnosed) cJSON_AddStringToObject(meta, "explained_by", m->signature.explained_by);
    cJSON_AddItemToObject(meta, "replay", replay_object(k));
    m->page_padding = k->page_padding;
    free(g->c.meta_json);
    g->c.meta_json = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
    kvc_fuzz_add_expected(w->target.reference, &g->c);
    save_case(w->o, g, index, m);
}

/* After a case: a worker grown past --rss-limit-mb fails the case as
 * "memory" (saved unshrunk: shrinking would only grow it further) and
 * retires.  A worker whose memory runs away inside one call is killed
 * by the parent at HARD_RSS_FACTOR x the limit (enforce_limits). */
static int outgrew_memory_limit(worker *w, kvc_gen_case *g, int64_t index, message *m) {
    int64_t limit = w->o->limits.rss_limit_mb;
    if (limit <= 0) return 0;
    int64_t python = kvc_pyworker_rss_bytes(), own = kvc_own_rss_above(limit * 1024 * 1024 - python);
    if (!own) return 0;
    int64_t rss = own + python;
    m->type = MSG_RESULT;
    m->outcome = KVC_FUZZ_FAIL;
    m->will_save = !g->history && w->o->save_dir[0];
    snprintf(m->rule, sizeof m->rule, "%s", g->rule ? g->rule : "");
    snprintf(m->kind, sizeof m->kind, "memory");
    kvc_fuzz_signature_of_lost(&g->c, "memory", "", &m->signature);
    snprintf(m->detail, sizeof m->detail,
             "the worker's resident memory reached %lld MB after this case (--rss-limit-mb %lld): the candidate leaks or keeps memory; "
             "the worker was replaced",
             (long long)(rss >> 20), (long long)limit);
    send_message(w, m);
    if (m->will_save && parent_allows_save(w)) {
        kvc_fuzz_add_expected(w->target.reference, &g->c);
        m->tokens_before = m->tokens_after = kvc_case_tokens(&g->c);
        save_case(w->o, g, index, m);
        m->type = MSG_SAVED;
        send_message(w, m);
    }
    m->type = MSG_RETIRE;
    send_message(w, m);
    return 1;
}

/* The chunking check.  First the reference and the candidate take the
 * same steps in lockstep (chunks, or token by token with speculative
 * drafts): the first step after which they differ becomes a single case
 * (g->c), shrunk and saved like any other.  Then the candidate's chunked
 * result must equal the reference's single prefill. */
static kvc_fuzz_outcome check_history(worker *w, kvc_gen_case *g, int64_t index, uint64_t salt, kvc_fuzz_verdict *v) {
    kvc_rng r;
    kvc_rng_seed(&r, w->o->seed, (uint64_t)index);
    kvc_history h;
    /* Under a geometry pool the history's page rows and padding are one
     * campaign slot's (its sizes rounded up), as a generated case's are. */
    kvc_rng pool, *pooled = NULL;
    if (w->o->geometry_pool > 0) {
        kvc_rng slot;
        kvc_rng_seed(&slot, w->o->seed, 0x4157A000ull + (uint64_t)index);
        kvc_rng_seed(&pool, w->o->seed, 0x4157B000ull + kvc_rng_below(&slot, (uint64_t)w->o->geometry_pool));
        pooled = &pool;
    }
    kvc_history_generate_pooled(&r, kvc_variant(g->variant)->head_dim ? 41 : 4, 0, 0, g->family == KVC_FAM_ROUNDING_PROBE ? 0 : g->family,
                                pooled, &h);
    kvc_feed_mode mode = (kvc_feed_mode)kvc_rng_range(&r, 1, 2);
    memset(v, 0, sizeof *v);
    omp_set_num_threads(w->target.threads);
    char detail[600] = "";
    kvc_case step;
    int diverged = kvc_history_lockstep(w->target.reference, w->target.candidate, &h, mode, (uint64_t)index, &step, detail, sizeof detail);
    if (diverged < 0) {
        v->outcome = KVC_FUZZ_SKIP;
    } else if (diverged) {
        kvc_fuzz_verdict single;
        if (kvc_fuzz_check_case(&w->target, &step, salt, &single) == KVC_FUZZ_FAIL) {
            *v = single;
            snprintf(v->detail, sizeof v->detail, "history %.200s; as a single case: %.600s", detail, single.detail);
            kvc_case_free(&g->c);
            g->c = step;            /* saved and shrunk like a generated case */
            g->history = 0;
        } else {
            kvc_case_free(&step);
            v->outcome = KVC_FUZZ_FAIL;
            snprintf(v->kind, sizeof v->kind, "chunking");
            snprintf(v->detail, sizeof v->detail, "history diverged at %s", detail);
        }
    } else {
        kvc_history_result expected, got;
        kvc_error err_ref = {0}, err_cand = {0};
        int rc_ref = kvc_history_feed(w->target.reference, &h, KVC_FEED_PREFILL, index, &expected, &err_ref);
        int rc_cand = kvc_history_feed(w->target.candidate, &h, mode, index, &got, &err_cand);
        if (rc_ref || rc_cand) {
            v->outcome = KVC_FUZZ_FAIL;
            snprintf(v->kind, sizeof v->kind, "chunking");
            snprintf(v->detail, sizeof v->detail, "a step was rejected: reference %s, candidate (%s) %s", rc_ref ? err_ref.message : "ok",
                     kvc_feed_mode_name(mode), rc_cand ? err_cand.message : "ok");
        } else if (kvc_history_compare(&h, &expected, &got, detail, sizeof detail)) {
            v->outcome = KVC_FUZZ_FAIL;
            snprintf(v->kind, sizeof v->kind, "chunking");
            snprintf(v->detail, sizeof v->detail,
                     "V%s R=%d D=%d history of %lld tokens, one prefill (reference) vs %s in %lld steps (candidate): %s",
                     h.version == 4 ? "4" : "4.1", h.compress_ratio, h.head_dim, (long long)h.length, kvc_feed_mode_name(mode),
                     (long long)got.steps, detail);
        }
        kvc_history_result_free(&expected);
        kvc_history_result_free(&got);
    }
    kvc_history_free(&h);
    return v->outcome;
}

/* The worker whose case runs now, for the Python worker's phases: the
 * parent allows a start-up and a first call of a geometry their own time. */
static worker *phase_worker;
static int64_t phase_index;

static void send_phase(int phase) {
    if (!phase_worker) return;
    message m = {.type = MSG_PHASE, .index = phase_index, .phase = phase};
    send_message(phase_worker, &m);
}

/* Runs case `index`; 1 when the worker must retire (memory). */
static int run_one(worker *w, int64_t index) {
    message m = {.type = MSG_START, .index = index};
    send_message(w, &m);
    phase_worker = w;
    phase_index = index;
    double case_started = now_seconds();
    kvc_gen_case g;
    kvc_gen_make(&w->gen, index, &g);
    uint64_t salt = case_salt(w->o, index);
    kvc_fuzz_verdict v;
    w->target.geometry_slot = g.geometry_slot;
    kvc_geometry_record(1);   /* the geometries of the case's candidate calls (not of its shrinking) */
    if (g.history) check_history(w, &g, index, salt, &v);
    else kvc_fuzz_check_case(&w->target, &g.c, salt, &v);
    kvc_geometry_record(0);
    int calls[4];
    m.num_geometries = kvc_geometry_recorded(calls, m.geometries, 4);
    for (int i = 0; i < m.num_geometries; i++) m.geometry_calls[i] = (uint8_t)calls[i];
    m.variant = g.variant;
    m.family = g.family;
    m.invalid = g.invalid[0] != 0;
    phase_worker = NULL;
    if (outgrew_memory_limit(w, &g, index, &m)) { kvc_gen_free(&g); return 1; }
    m.type = MSG_RESULT;
    m.outcome = v.outcome;
    m.case_seconds = now_seconds() - case_started;
    snprintf(m.kind, sizeof m.kind, "%s", v.kind);
    snprintf(m.detail, sizeof m.detail, "%.560s%s%s", v.detail, g.invalid[0] ? "; input corrupted on purpose: " : "", g.invalid);
    kvc_case_coverage_of(&g, &m.coverage);
    snprintf(m.rule, sizeof m.rule, "%s", m.coverage.rule ? m.coverage.rule : "");
    m.coverage.rule = NULL;
    m.coverage.threads = g.history ? w->target.threads : v.conditions.threads;
    m.coverage.other_threads = v.conditions.other_threads;
    m.coverage.team_rule = g.history || !v.conditions.threads ? 0 : v.conditions.spinning_team ? 1 : 2;
    m.coverage.page_padding = g.history ? 0 : v.conditions.page_padding;
    m.coverage.wait_policy = strcmp(kvc_wait_policy_at_load(), "passive") == 0 ? 1 : strcmp(kvc_wait_policy_at_load(), "active") == 0 ? 2 : 3;
    m.coverage.aliased = v.conditions.aliased;
    m.coverage.alias_unavailable = v.conditions.alias_unavailable;
    m.coverage.rejected = !g.history && v.outcome != KVC_FUZZ_SKIP && v.reference_status != KVC_OK;
    if (v.outcome == KVC_FUZZ_FAIL) {
        kvc_fuzz_signature_of(&g.c, &v, &m.signature);
        if (g.history) {   /* no single case: the history variant is the stage */
            snprintf(m.signature.stage, sizeof m.signature.stage, "%s", kvc_variant(g.variant)->name);
            snprintf(m.signature.key, sizeof m.signature.key, "%s %s: -", m.signature.stage, m.signature.check);
        }
        /* Only the first few failures of a signature are shrunk and saved: the parent counts. */
        m.will_save = !g.history && w->o->save_dir[0];
    }
    send_message(w, &m);
    if (m.will_save && parent_allows_save(w)) {
        phase_worker = w;
        shrink_and_save(w, &g, index, salt, &v, &m);
        phase_worker = NULL;
        m.type = MSG_SAVED;
        send_message(w, &m);
    }
    kvc_gen_free(&g);
    return 0;
}

/* Job `job` runs its k-th, (k+1)-th ... case; a respawned job starts
 * after the case that crashed its predecessor. */
void worker_main(worker *w, int job, int64_t first_k) {
    /* Case buffers of a few MiB come and go every case; glibc would map and
     * unmap each one, and every fresh page faults (a quarter of a case's
     * time).  Kept in the heap up to 64 MiB of free space, they
     * are reused: ~1.25x the cases/s of the fixed-seed campaign here. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    omp_set_num_threads(w->target.threads);
    kvc_pyworker_set_phase_hook(send_phase);
    if (w->target.candidate != &kvc_reference_backend) kvc_pyworker_warm_up();
    w->target.candidate = kvc_geometry_recorder(w->target.candidate);
    const fuzz_options *o = w->o;
    if (o->only >= 0) {
        if (job == 0 && run_one(w, o->only)) return;
        message done = {.type = MSG_DONE};
        send_message(w, &done);
        return;
    }
    double deadline = o->cases < 0 ? w->started + o->seconds : 0;
    /* Case numbers: shard s of N, job j of J takes s + N*(j + J*k). */
    for (int64_t k = first_k;; k++) {
        int64_t index = o->shard_index + (int64_t)o->shard_count * (job + (int64_t)o->jobs * k);
        if (parent_says_stop(w) || (o->cases >= 0 && index >= o->cases) || (deadline && now_seconds() > deadline)) break;
        kvc_child_standard_fds();
        if (run_one(w, index)) return;
    }
    message done = {.type = MSG_DONE};
    send_message(w, &done);
}

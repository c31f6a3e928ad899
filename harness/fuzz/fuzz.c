/* The fuzzing campaign (include/kvcmp/campaign.h): its worker
 * processes, their supervision and its reports.  `kvcmp fuzz` parses its
 * command line in fuzz_command.c and calls kvc_campaign_run.
 *
 * Cases are numbered; case i is generated from stream i of the seed
 * (harness/fuzz/gen.c), so `--only I` regenerates exactly one case and
 * `--shard I/N` splits a campaign without overlap.  Worker processes (one
 * per core) run cases and report through pipes: a candidate that crashes
 * takes down only its worker, and the case it was running is still
 * reported, saved and given a reproduction line. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "kvcmp/backends.h"
#include "optimized/optimized.h"
#include "harness/backends/pyworker.h"
#include "kvcmp/campaign.h"
#include "harness/fuzz/coverage.h"
#include "kvcmp/generate.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/gpus.h"
#include "harness/fuzz/history.h"
#include "harness/fuzz/supervise.h"
#include "harness/options/options.h"
#include "harness/report/junit.h"
#include "harness/report/run_info.h"
#include "harness/fuzz/signature.h"
#include "harness/fuzz/signature_list.h"
#include "harness/replay/replay.h"
#include "harness/fuzz/dimensions.h"

#define MAX_JOBS 16
#define MAX_REPORTED_FAILURES 64
#define DEFAULT_INVALID_PER_MILLE KVC_GEN_DEFAULT_INVALID_PER_MILLE
#define DEFAULT_METAMORPHIC_PER_MILLE 60
#define DEFAULT_MAX_PER_SIGNATURE 3
/* What a minimal case's diagnosis may spend on pairs of deviations (the
 * single ones always run: a few dozen reference calls). */
#define DIAGNOSIS_PAIR_SECONDS 2.0

typedef struct {
    uint64_t seed;
    int64_t cases;            /* -1: run for `seconds` */
    double seconds;
    int64_t only;             /* >= 0: just this case */
    int shard_index, shard_count;
    int jobs, threads;
    int max_failures;         /* distinct signatures that end the campaign */
    int max_per_signature;    /* failures of one signature printed and saved */
    int threads_given;        /* --threads: else each case draws its own */
    int invalid_per_mille;
    int metamorphic_per_mille;
    int geometry_pool;        /* > 0: page paddings drawn from this many values */
    double shrink_seconds;
    kvc_child_limits limits;  /* --timeout, --rss-limit-mb */
    const char *save_dir;
    char default_save_dir[600];  /* OUT/failures/CAMPAIGN, when no save_dir is given */
    char default_json_path[600]; /* OUT/fuzz-summary.json */
    const char *candidate_name;
    const char *json_path;
    const char *out_dir;
    char command[700];           /* how __REPRO lines run kvcmp, with KVCMP_PYTHON=... for a py: candidate */
    const char *junit_path;
    const char *stage_list;
    const char *family_list;
    uint64_t variant_mask;
    uint32_t family_mask;
    kvc_policy policy;
    int quiet;
} fuzz_options;

/* What a worker tells the parent.  MSG_DONE: no more cases (the exit
 * that follows is the end of the job, not a death); MSG_RETIRE: the
 * worker outgrew --rss-limit-mb and ends so that a fresh one replaces it. */
enum { MSG_START = KVC_MSG_START, MSG_RESULT = KVC_MSG_RESULT, MSG_SAVED = KVC_MSG_SAVED, MSG_DONE = KVC_MSG_DONE, MSG_RETIRE = KVC_MSG_RETIRE };
typedef struct {
    int type;
    int64_t index;
    int variant, family, invalid, outcome;
    int will_save;            /* MSG_RESULT: the worker asks to shrink and save it (the parent answers) */
    int save_failed;          /* MSG_SAVED: saved holds the error */
    double at_seconds;        /* since the campaign started */
    double case_seconds;      /* MSG_RESULT: the worker's time on the case (generation and check) */
    char kind[32];
    char detail[700];
    char saved[400];
    int64_t tokens_before, tokens_after;
    int64_t page_padding;     /* MSG_SAVED: of the saved case's replay */
    kvc_fuzz_signature signature;  /* MSG_RESULT of a failure, MSG_SAVED */
    kvc_case_coverage coverage;    /* MSG_RESULT: what the case exercised (rule NULL: see rule) */
    char rule[32];                 /* MSG_RESULT: coverage.rule by value, not a pointer */
} message;
/* One write each, never interleaved with another writer's (a candidate
 * that forked): the parent sees whole messages or a broken protocol. */
_Static_assert(sizeof(message) <= PIPE_BUF, "a message must fit one atomic pipe write");

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *policy_name(kvc_policy p) { return p == KVC_POLICY_VLLM ? "vllm" : "exact"; }
static cJSON *options_json(const fuzz_options *o);

/* ---- one case, inside a worker --------------------------------------- */

typedef struct {
    const fuzz_options *o;
    kvc_fuzz_target target;
    kvc_gen_config gen;
    double started;
    int write_fd;
    int control_fd;           /* from the parent: 'Y'/'N' answers whether to save a failure, 'S' stops */
    int stopped;              /* the parent said 'S' (or went away) */
} worker;

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
static cJSON *replay_object(const kvc_fuzz_conditions *k) {
    cJSON *replay = cJSON_CreateObject();
    cJSON_AddNumberToObject(replay, "page_padding", (double)k->page_padding);
    cJSON_AddNumberToObject(replay, "canary", k->canary);
    int threads[2] = {k->threads, k->other_threads};
    cJSON_AddItemToObject(replay, "threads", cJSON_CreateIntArray(threads, k->other_threads > 0 ? 2 : 1));
    cJSON_AddStringToObject(replay, "team_rule", k->spinning_team ? "spinning" : "sleeping");
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
static uint64_t case_salt(const fuzz_options *o, int64_t index) { return o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)index; }

/* Saves a failing case under --save, never over an existing one; the
 * path, or the error, goes to m. */
static void save_case(const fuzz_options *o, const kvc_gen_case *g, int64_t index, message *m) {
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
    kvc_history_generate(&r, kvc_variant(g->variant)->head_dim ? 41 : 4, 0, 0, g->family == KVC_FAM_ROUNDING_PROBE ? 0 : g->family, &h);
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

/* Runs case `index`; 1 when the worker must retire (memory). */
static int run_one(worker *w, int64_t index) {
    message m = {.type = MSG_START, .index = index};
    send_message(w, &m);
    double case_started = now_seconds();
    kvc_gen_case g;
    kvc_gen_make(&w->gen, index, &g);
    uint64_t salt = case_salt(w->o, index);
    kvc_fuzz_verdict v;
    if (g.history) check_history(w, &g, index, salt, &v);
    else kvc_fuzz_check_case(&w->target, &g.c, salt, &v);
    m.variant = g.variant;
    m.family = g.family;
    m.invalid = g.invalid[0] != 0;
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
        shrink_and_save(w, &g, index, salt, &v, &m);
        m.type = MSG_SAVED;
        send_message(w, &m);
    }
    kvc_gen_free(&g);
    return 0;
}

/* Job `job` runs its k-th, (k+1)-th ... case; a respawned job starts
 * after the case that crashed its predecessor. */
static void worker_main(worker *w, int job, int64_t first_k) {
    /* Case buffers of a few MiB come and go every case; glibc would map and
     * unmap each one, and every fresh page faults (a quarter of a case's
     * time).  Kept in the heap up to 64 MiB of free space, they
     * are reused: ~1.25x the cases/s of the fixed-seed campaign here. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    omp_set_num_threads(w->target.threads);
    if (w->target.candidate != &kvc_reference_backend) kvc_pyworker_warm_up();
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

/* ---- the parent: tallies, progress, summary -------------------------- */

typedef struct {
    int64_t cases, failures, skipped, invalid;
    double worker_seconds;    /* the workers' time on these cases, summed */
} tally;

typedef struct {
    message result;
    char saved[400];
    int64_t tokens_before, tokens_after;
    int64_t page_padding;     /* of the saved case's replay */
    int crash_signal;
} failure;

typedef struct {
    const fuzz_options *o;
    int64_t cases, failures, skipped;
    tally by_variant[64];
    tally by_family[KVC_FAM_COUNT];
    failure failures_list[MAX_REPORTED_FAILURES];
    int num_failures_listed;
    double started, first_failure_at;
    int progress_shown;
    const char *candidate_label;
    int workers_lost;         /* died or were killed outside a case */
    int write_failed;         /* a case or the summary could not be written */
    int interrupted;          /* the signal that stopped the campaign */
    char broken[600];         /* why the cases cannot be counted as run once each ("": they can) */
    char no_verdict[600];     /* why the campaign proves nothing either way ("": it does) */
    double first_start_at;    /* since started: when the first case began (the parent's clock); < 0: none began */
    int max_failures_reached; /* --max-failures distinct signatures stopped it */
    int jobs_abandoned;       /* jobs whose workers kept dying and were not replaced */
    const char *stopped_by;   /* kvc_campaign_summary.stopped_by */
    kvc_signature_list signatures;
    kvc_coverage_tally coverage;
} campaign;

static int stages_seen(const campaign *c) {
    int seen = 0;
    for (int v = 0; v < kvc_variant_count(); v++) seen += c->by_variant[v].cases > 0;
    return seen;
}

static void show_progress(campaign *c, int final) {
    if (!isatty(STDERR_FILENO) || c->o->quiet) return;
    double elapsed = now_seconds() - c->started;
    fprintf(stderr, "\r%lld cases, %.0f cases/s, %d/%d variants seen, %lld failures%s", (long long)c->cases,
            elapsed > 0 ? (double)c->cases / elapsed : 0.0, stages_seen(c), kvc_variant_count(), (long long)c->failures,
            final ? "\n" : "   ");
    c->progress_shown = 1;
}

static void clear_progress(campaign *c) {
    if (c->progress_shown && isatty(STDERR_FILENO)) fprintf(stderr, "\r%100s\r", "");
}

/* A command line built word by word: options as they are, values
 * shell-quoted (kvc_shell_quote), so that a path with spaces, quotes or
 * $(...) reproduces and runs nothing else. */
typedef struct {
    char *out;
    size_t size, n;
    int overflow;
} command_line;

static void add_text(command_line *l, const char *text) {
    size_t k = strlen(text);
    if (l->n + k >= l->size) { l->overflow = 1; return; }
    memcpy(l->out + l->n, text, k + 1);
    l->n += k;
}

static void add_word(command_line *l, const char *word) {
    char quoted[4 * PATH_MAX + 8];
    if (kvc_shell_quote(word, quoted, sizeof quoted) >= sizeof quoted) { l->overflow = 1; return; }
    add_text(l, " ");
    add_text(l, quoted);
}

static void add_option(command_line *l, const char *option, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void add_option(command_line *l, const char *option, const char *format, ...) {
    char value[4 * PATH_MAX];
    va_list ap;
    va_start(ap, format);
    int k = vsnprintf(value, sizeof value, format, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof value) { l->overflow = 1; return; }
    add_text(l, " ");
    add_text(l, option);
    add_word(l, value);
}

/* Ends a command line: one that did not fit is a shell comment that says
 * so (still valid shell, running nothing). */
static void finish_command(command_line *l, const char *what) {
    if (l->overflow) snprintf(l->out, l->size, "# the %s command is longer than %zu bytes: see the options of the summary's \"campaign\"",
                              what, l->size);
}

/* The command that regenerates and re-checks exactly one case (index
 * >= 0; its summary goes to a file of its own, --json
 * OUT/fuzz-only-N.json by default, never over the campaign's), or the
 * whole campaign (index < 0). */
static void repro_fuzz(const campaign *c, int64_t index, char *out, size_t size) {
    const fuzz_options *o = c->o;
    command_line l = {.out = out, .size = size};
    out[0] = 0;
    add_text(&l, o->command);
    add_text(&l, " fuzz");
    add_option(&l, "--seed", "%llu", (unsigned long long)o->seed);
    if (index >= 0 || o->only >= 0) add_option(&l, "--only", "%lld", (long long)(index >= 0 ? index : o->only));
    else if (o->cases >= 0) add_option(&l, "--cases", "%lld", (long long)o->cases);
    else add_option(&l, "--seconds", "%g", o->seconds);
    if (index < 0 && o->shard_count > 1) add_option(&l, "--shard", "%d/%d", o->shard_index, o->shard_count);
    add_option(&l, "--candidate", "%s", o->candidate_name);
    add_option(&l, "--policy", "%s", policy_name(o->policy));
    if (o->threads_given) add_option(&l, "--threads", "%d", o->threads);
    if (o->invalid_per_mille != DEFAULT_INVALID_PER_MILLE) add_option(&l, "--invalid-rate", "%d", o->invalid_per_mille);
    if (o->metamorphic_per_mille != DEFAULT_METAMORPHIC_PER_MILLE) add_option(&l, "--metamorphic-rate", "%d", o->metamorphic_per_mille);
    if (o->geometry_pool) add_option(&l, "--geometry-pool", "%d", o->geometry_pool);
    if (strcmp(o->out_dir, "kvcmp-out") != 0) add_option(&l, "--out", "%s", o->out_dir);
    if (o->stage_list) add_option(&l, "--stage", "%s", o->stage_list);
    if (o->family_list) add_option(&l, "--family", "%s", o->family_list);
    if (o->limits.timeout_seconds != KVC_DEFAULT_TIMEOUT_SECONDS) add_option(&l, "--timeout", "%g", o->limits.timeout_seconds);
    if (o->limits.rss_limit_mb != KVC_DEFAULT_RSS_LIMIT_MB) add_option(&l, "--rss-limit-mb", "%lld", (long long)o->limits.rss_limit_mb);
    finish_command(&l, "fuzz");
}

/* The command that replays a saved case through the candidate. */
static void repro_replay(const campaign *c, int64_t page_padding, const char *saved, char *out, size_t size) {
    const fuzz_options *o = c->o;
    command_line l = {.out = out, .size = size};
    out[0] = 0;
    add_text(&l, o->command);
    add_text(&l, " replay");
    add_option(&l, "--impl", "%s", o->candidate_name);
    add_option(&l, "--policy", "%s", policy_name(o->policy));
    add_option(&l, "--page-padding", "%lld", (long long)page_padding);
    add_text(&l, " --");
    add_word(&l, saved);
    finish_command(&l, "replay");
}

static failure *find_failure(campaign *c, int64_t index) {
    for (int i = 0; i < c->num_failures_listed; i++)
        if (c->failures_list[i].result.index == index) return &c->failures_list[i];
    return NULL;
}

/* Counts a case's result; 1 when it is a failure among the first few of
 * its signature (those are shrunk and saved). */
static int on_result(campaign *c, const message *m) {
    c->cases++;
    kvc_case_coverage coverage = m->coverage;
    coverage.rule = m->rule[0] ? m->rule : NULL;
    kvc_coverage_add(&c->coverage, &coverage);
    tally *tv = &c->by_variant[m->variant], *tf = &c->by_family[m->family];
    tv->cases++; tf->cases++;
    tv->worker_seconds += m->case_seconds; tf->worker_seconds += m->case_seconds;
    tv->invalid += m->invalid; tf->invalid += m->invalid;
    if (m->outcome == KVC_FUZZ_SKIP) { c->skipped++; tv->skipped++; tf->skipped++; return 0; }
    /* Passing cases: a sample that a diagnosis must leave as they are. */
    if (m->outcome == KVC_FUZZ_PASS) kvc_signature_list_passed(&c->signatures, m->variant, m->index);
    if (m->outcome != KVC_FUZZ_FAIL) return 0;
    c->failures++; tv->failures++; tf->failures++;
    if (c->failures == 1) c->first_failure_at = m->at_seconds;
    char repro[800];
    repro_fuzz(c, m->index, repro, sizeof repro);
    kvc_signature_entry *e = kvc_signature_list_get(&c->signatures, &m->signature, m->index);
    if (e && e->count++ == 0) snprintf(e->first_repro, sizeof e->first_repro, "%s", repro);
    /* Beyond the first few of a signature, failures are only counted. */
    if (e && e->count > c->o->max_per_signature) return 0;
    clear_progress(c);
    /* kind, detail and key carry a candidate's words (an exception's message). */
    char kind[4 * sizeof m->kind], detail[4 * sizeof m->detail], key[4 * sizeof m->signature.key];
    printf("FAIL case %lld [%s, family %s] %s: %s\n  signature: %s\n  __REPRO: %s\n", (long long)m->index,
           kvc_variant(m->variant)->name, kvc_family_name(m->family), kvc_escape_text(m->kind, kind, sizeof kind),
           kvc_escape_text(m->detail, detail, sizeof detail), kvc_escape_text(m->signature.key, key, sizeof key), repro);
    fflush(stdout);
    if (c->num_failures_listed < MAX_REPORTED_FAILURES) c->failures_list[c->num_failures_listed++] = (failure){.result = *m};
    return e != NULL;
}

static void on_saved(campaign *c, const message *m) {
    failure *f = find_failure(c, m->index);
    if (m->save_failed) {
        /* On stderr as well as in the summary: the run's result is incomplete. */
        clear_progress(c);
        fprintf(stderr, "kvcmp fuzz: case %lld was not saved: %s (check that --save %s is a writable directory with free space)\n",
                (long long)m->index, m->saved, c->o->save_dir);
        c->write_failed = 1;
        if (f) snprintf(f->saved, sizeof f->saved, "(not saved: %.380s)", m->saved);
        printf("  case %lld (not saved: %s)\n", (long long)m->index, m->saved);
        fflush(stdout);
        return;
    }
    if (f) {
        snprintf(f->saved, sizeof f->saved, "%s", m->saved);
        f->tokens_before = m->tokens_before;
        f->tokens_after = m->tokens_after;
        f->page_padding = m->page_padding;
    }
    char repro[900];
    repro_replay(c, m->page_padding, m->saved, repro, sizeof repro);
    kvc_signature_entry *e = kvc_signature_list_find(&c->signatures, f ? f->result.signature.key : m->signature.key);
    if (e) kvc_signature_list_saved(e, m->index, m->tokens_after, m->saved, repro);
    kvc_signature_list_explain(&c->signatures, f ? f->result.signature.key : m->signature.key, &m->signature);
    clear_progress(c);
    printf("  shrunk case %lld from %lld to %lld tokens, saved to %s\n  __REPRO: %s\n", (long long)m->index, (long long)m->tokens_before,
           (long long)m->tokens_after, m->saved, repro);
    fflush(stdout);
}

/* Case `index` saved unshrunk with the reference's outputs, by the
 * parent: its worker died or was killed before it could. */
static void save_unshrunk(campaign *c, int64_t index, message *m) {
    kvc_gen_config gen = {.seed = c->o->seed, .variant_mask = c->o->variant_mask,
                          .invalid_per_mille = c->o->invalid_per_mille, .family_mask = c->o->family_mask,
                          .geometry_pool = c->o->geometry_pool};
    kvc_gen_case g;
    kvc_gen_make(&gen, index, &g);
    const failure *f = find_failure(c, index);
    const char *key = f ? f->result.signature.key : m->signature.key;
    kvc_signature_entry *e = key[0] ? kvc_signature_list_find(&c->signatures, key) : NULL;
    if (!g.history && c->o->save_dir[0] && (!e || e->count <= c->o->max_per_signature)) {
        kvc_fuzz_add_expected(&kvc_reference_backend, &g.c);
        /* The conditions the lost check ran under, as the worker drew them. */
        kvc_fuzz_target target = {.threads = c->o->threads, .vary_threads = !c->o->threads_given,
                                  .geometry_pool = c->o->geometry_pool, .geometry_salt = c->o->seed};
        kvc_fuzz_conditions k;
        kvc_fuzz_draw_conditions(&target, case_salt(c->o, index), &k);
        cJSON *meta = cJSON_CreateObject();
        cJSON_AddStringToObject(meta, "failure", f ? f->result.kind : m->kind[0] ? m->kind : "lost");
        if (key[0]) cJSON_AddStringToObject(meta, "signature", key);
        cJSON_AddItemToObject(meta, "replay", replay_object(&k));
        free(g.c.meta_json);
        g.c.meta_json = cJSON_PrintUnformatted(meta);
        cJSON_Delete(meta);
        m->page_padding = k.page_padding;
        m->tokens_before = m->tokens_after = kvc_case_tokens(&g.c);
        save_case(c->o, &g, index, m);
        on_saved(c, m);
    }
    kvc_gen_free(&g);
}

/* The worker running `index` died (kind "crash") or was killed for
 * --timeout or --rss-limit-mb: the case fails with that kind. */
static void on_lost_case(campaign *c, int64_t index, const char *kind, const char *detail) {
    kvc_gen_config gen = {.seed = c->o->seed, .variant_mask = c->o->variant_mask,
                          .invalid_per_mille = c->o->invalid_per_mille, .family_mask = c->o->family_mask,
                          .geometry_pool = c->o->geometry_pool};
    kvc_gen_case g;
    kvc_gen_make(&gen, index, &g);
    message m = {.type = MSG_RESULT, .index = index, .variant = g.variant, .family = g.family, .outcome = KVC_FUZZ_FAIL,
                 .at_seconds = now_seconds() - c->started};
    snprintf(m.kind, sizeof m.kind, "%s", kind);
    snprintf(m.detail, sizeof m.detail, "%s", detail);
    /* "died (signal 9): Killed" -> "signal 9"; a timeout or memory has no more to say. */
    const char *how = strstr(detail, "died (");
    char cause[64] = "";
    if (how) snprintf(cause, sizeof cause, "%.*s", (int)strcspn(how + 6, "):"), how + 6);
    kvc_fuzz_signature_of_lost(&g.c, kind, cause, &m.signature);
    if (g.history) snprintf(m.signature.key, sizeof m.signature.key, "%s %s: %s", kvc_variant(g.variant)->name, kind, cause[0] ? cause : "-");
    kvc_gen_free(&g);
    on_result(c, &m);
    save_unshrunk(c, index, &m);
}

/* ---- reports ---------------------------------------------------------- */

/* Cases per second of one worker: what a stage's cases cost, whatever
 * the number of jobs. */
static double worker_rate(const tally *t) { return t->worker_seconds > 0 ? (double)t->cases / t->worker_seconds : 0.0; }

static const char *signal_name(int signo) {
    switch (signo) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
    }
}

/* The cases the campaign must run, each once; -1 when it runs for a time. */
static int64_t cases_asked(const fuzz_options *o) {
    if (o->only >= 0) return 1;
    if (o->cases < 0) return -1;
    return o->cases > o->shard_index ? (o->cases - o->shard_index + o->shard_count - 1) / o->shard_count : 0;
}

/* The campaign's verdict rests on the cases it compared: it has none
 * when it compared no case, fewer than it was asked for, or none of the
 * variants of a --stage item (the candidate lacks them), whatever the
 * reason (an empty shard, a start-up that took all of --seconds, lost
 * workers).  c->no_verdict says why and what to do; a campaign that was
 * interrupted or whose cases cannot be counted says so elsewhere. */
static void judge_evidence(campaign *c, int stopped_early) {
    const fuzz_options *o = c->o;
    if (c->interrupted || c->broken[0]) return;
    int64_t asked = cases_asked(o), compared = c->cases - c->skipped;
    size_t size = sizeof c->no_verdict;
    if (!stopped_early && asked >= 0 && c->cases != asked) {
        snprintf(c->no_verdict, size, "the campaign ran %lld of the %lld cases asked (WORKER LOST lines above say why); rerun it, "
                 "and if cases go missing again, run the first missing case alone with --only", (long long)c->cases, (long long)asked);
    } else if (compared == 0 && asked == 0 && o->shard_count > 1) {
        snprintf(c->no_verdict, size, "shard %d/%d of a %lld-case campaign gets no case (case i runs in shard i mod %d): give --cases "
                 "more than %d, or fewer shards", o->shard_index, o->shard_count, (long long)o->cases, o->shard_count, o->shard_index);
    } else if (compared == 0 && asked == 0) {
        snprintf(c->no_verdict, size, "--cases 0 asks for no case: give --cases 1 or more");
    } else if (compared == 0 && c->cases == 0 && asked < 0) {
        snprintf(c->no_verdict, size, "no case ran within --seconds %g: the candidate's start-up took all of it (it counts against "
                 "--seconds); raise --seconds, or make the candidate start faster", o->seconds);
    } else if (compared == 0 && c->cases > 0) {
        snprintf(c->no_verdict, size, "all %lld cases were skipped: candidate %.200s offers none of their stages; give --stage "
                 "variants it offers (kvcmp fuzz --list names them), or a candidate that offers these", (long long)c->cases,
                 o->candidate_name);
    } else if (compared == 0) {
        snprintf(c->no_verdict, size, "no case was compared; rerun the campaign");
    }
    if (c->no_verdict[0] || !o->stage_list) return;
    /* Each --stage item the user named must have been compared, not skipped. */
    char list[600];
    snprintf(list, sizeof list, "%s", o->stage_list);
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char bad[128];
        uint64_t mask = kvc_variant_mask(item, bad, sizeof bad);
        int64_t cases = 0, skipped = 0;
        for (int v = 0; v < kvc_variant_count() && v < 64; v++)
            if (mask >> v & 1) { cases += c->by_variant[v].cases; skipped += c->by_variant[v].skipped; }
        if (cases > 0 && skipped == cases) {
            snprintf(c->no_verdict, size, "--stage item '%.100s': candidate %.200s offers none of its variants (its %lld cases were all "
                     "skipped); drop the item, or fuzz a candidate that offers it", item, o->candidate_name, (long long)cases);
            return;
        }
    }
}

/* Why the campaign ended, in words, for the summary. */
static void stop_text(const campaign *c, char *out, size_t size) {
    const fuzz_options *o = c->o;
    const char *why = c->stopped_by;
    if (strcmp(why, "interrupted") == 0) snprintf(out, size, "interrupted by %s", signal_name(c->interrupted));
    else if (strcmp(why, "protocol") == 0) snprintf(out, size, "the candidate broke the case protocol (above)");
    else if (strcmp(why, "max-failures") == 0) snprintf(out, size, "--max-failures %d distinct failure signatures reached", o->max_failures);
    else if (strcmp(why, "workers-lost") == 0) snprintf(out, size, "workers kept dying and were not replaced (WORKER LOST lines above)");
    else if (strcmp(why, "time") == 0) snprintf(out, size, "--seconds %g ran out", o->seconds);
    else if (o->only >= 0) snprintf(out, size, "case %lld (--only) ran", (long long)o->only);
    else snprintf(out, size, "every case asked ran (--cases %lld, shard %d/%d)", (long long)o->cases, o->shard_index, o->shard_count);
}

static void print_summary(campaign *c, double elapsed) {
    printf("\nper variant            cases  invalid  skipped  failures  cases/s (one worker)\n");
    for (int v = 0; v < kvc_variant_count(); v++) {
        tally *t = &c->by_variant[v];
        if (t->cases) printf("  %-34s %7lld %7lld %7lld %7lld %8.0f\n", kvc_variant(v)->name, (long long)t->cases, (long long)t->invalid,
                             (long long)t->skipped, (long long)t->failures, worker_rate(t));
    }
    printf("per family\n");
    for (int f = 0; f < KVC_FAM_COUNT; f++) {
        tally *t = &c->by_family[f];
        if (t->cases) printf("  %-34s %7lld %7lld %7lld %7lld %8.0f\n", kvc_family_name(f), (long long)t->cases, (long long)t->invalid,
                             (long long)t->skipped, (long long)t->failures, worker_rate(t));
    }
    kvc_coverage_print(stdout, &c->coverage);
    printf("fuzz: %lld cases in %.1f s (%.0f cases/s), candidate %s, policy %s, seed %llu: %lld failure%s",
           (long long)c->cases, elapsed, elapsed > 0 ? (double)c->cases / elapsed : 0.0, c->candidate_label, policy_name(c->o->policy),
           (unsigned long long)c->o->seed, (long long)c->failures, c->failures == 1 ? "" : "s");
    if (c->failures) printf(" (first after %.2f s)", c->first_failure_at);
    if (c->skipped) printf(", %lld cases skipped (stages the candidate lacks)", (long long)c->skipped);
    printf("\n");
    if (c->workers_lost)
        printf("fuzz: %d worker%s died or were killed outside a case (WORKER LOST and 'saving it unshrunk' lines above) and "
               "were replaced\n", c->workers_lost, c->workers_lost == 1 ? "" : "s");
    if (c->interrupted) printf("fuzz: INTERRUPTED by %s after %.1f s: the cases above are all that ran\n", strsignal(c->interrupted), elapsed);
    if (c->broken[0]) printf("fuzz: FAILED, cases not accounted for: %s\n", c->broken);
    char stopped[300];
    stop_text(c, stopped, sizeof stopped);
    if (c->first_start_at >= 0)
        printf("fuzz: stopped: %s; %lld cases compared, the first started %.2f s after the start (the candidate's start-up%s)\n", stopped,
               (long long)(c->cases - c->skipped), c->first_start_at, c->o->cases < 0 && c->o->only < 0 ? ", counted against --seconds" : "");
    else printf("fuzz: stopped: %s; no case started in %.2f s\n", stopped, elapsed);
    if (c->no_verdict[0]) printf("fuzz: NO VERDICT (exit status 4): %s\n", c->no_verdict);
    kvc_signature_list_print(stdout, &c->signatures);
    if (!c->failures) return;
    printf("fuzz: %d distinct failure%s, each listed above with the command that regenerates its first case and the one that "
           "replays its smallest saved case; shrunk cases are under %s (each replayed by the __REPRO line of its signature)\n",
           kvc_signature_list_distinct(&c->signatures), kvc_signature_list_distinct(&c->signatures) == 1 ? "" : "s", c->o->save_dir[0] ? c->o->save_dir : "(not saved: --save was empty)");
    /* A folder the user named is already where they keep cases. */
    if (!c->o->save_dir[0] || c->o->save_dir != c->o->default_save_dir) return;
    const char *example = NULL;
    for (int i = 0; i < c->num_failures_listed && !example; i++)
        if (c->failures_list[i].saved[0] && c->failures_list[i].saved[0] != '(') example = c->failures_list[i].saved;
    char quoted_example[4 * PATH_MAX + 8], quoted_candidate[4 * PATH_MAX + 8];
    if (example && kvc_shell_quote(example, quoted_example, sizeof quoted_example) < sizeof quoted_example &&
        kvc_shell_quote(c->o->candidate_name, quoted_candidate, sizeof quoted_candidate) < sizeof quoted_candidate)
        printf("fuzz: to keep a case as a regression, copy it into your repository's regressions folder (cp -r %s REGRESSIONS/) "
               "and gate on %s replay --impl %s REGRESSIONS\n", quoted_example, c->o->command, quoted_candidate);
}

static cJSON *tally_json(const tally *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "cases", (double)t->cases);
    cJSON_AddNumberToObject(o, "invalid", (double)t->invalid);
    cJSON_AddNumberToObject(o, "skipped", (double)t->skipped);
    cJSON_AddNumberToObject(o, "failures", (double)t->failures);
    cJSON_AddNumberToObject(o, "worker_seconds", t->worker_seconds);
    cJSON_AddNumberToObject(o, "cases_per_second", worker_rate(t));
    return o;
}

/* The options that decide which cases ran and how: with the seed, what
 * the run metadata needs to reproduce the campaign. */
static cJSON *options_json(const fuzz_options *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "candidate", o->candidate_name);
    cJSON_AddStringToObject(j, "policy", policy_name(o->policy));
    if (o->only >= 0) cJSON_AddNumberToObject(j, "only", (double)o->only);
    else if (o->cases >= 0) cJSON_AddNumberToObject(j, "cases", (double)o->cases);
    else cJSON_AddNumberToObject(j, "seconds", o->seconds);
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", o->shard_index, o->shard_count);
    cJSON_AddStringToObject(j, "shard", shard);
    cJSON_AddNumberToObject(j, "jobs", o->jobs);
    cJSON_AddNumberToObject(j, "threads", o->threads);
    cJSON_AddNumberToObject(j, "max_failures", o->max_failures);
    cJSON_AddNumberToObject(j, "max_failures_per_signature", o->max_per_signature);
    cJSON_AddNumberToObject(j, "invalid_per_mille", o->invalid_per_mille);
    cJSON_AddNumberToObject(j, "metamorphic_per_mille", o->metamorphic_per_mille);
    if (o->stage_list) cJSON_AddStringToObject(j, "stage", o->stage_list);
    if (o->family_list) cJSON_AddStringToObject(j, "family", o->family_list);
    cJSON_AddStringToObject(j, "save", o->save_dir);
    cJSON_AddStringToObject(j, "out", o->out_dir);
    cJSON_AddNumberToObject(j, "geometry_pool", o->geometry_pool);
    cJSON_AddNumberToObject(j, "timeout_seconds", o->limits.timeout_seconds);
    cJSON_AddNumberToObject(j, "rss_limit_mb", (double)o->limits.rss_limit_mb);
    return j;
}

/* The campaign's identity: what decides which cases it draws and how
 * they are checked, and which kvcmp ran it.  kvcmp merge takes shards
 * as parts of one campaign only when these agree. */
static cJSON *identity_json(const fuzz_options *o) {
    cJSON *j = cJSON_CreateObject();
    char seed[32];   /* a string: JSON numbers lose 64-bit integers */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(j, "seed", seed);
    if (o->only >= 0) cJSON_AddNumberToObject(j, "only", (double)o->only);
    else if (o->cases >= 0) cJSON_AddNumberToObject(j, "cases", (double)o->cases);
    else cJSON_AddNumberToObject(j, "seconds", o->seconds);
    cJSON_AddNumberToObject(j, "shard_index", o->shard_index);
    cJSON_AddNumberToObject(j, "shard_count", o->shard_count);
    cJSON_AddStringToObject(j, "candidate", o->candidate_name);
    cJSON_AddStringToObject(j, "policy", policy_name(o->policy));
    cJSON_AddStringToObject(j, "stage", o->stage_list ? o->stage_list : "");
    cJSON_AddStringToObject(j, "family", o->family_list ? o->family_list : "");
    cJSON_AddNumberToObject(j, "threads", o->threads_given ? o->threads : 0);
    cJSON_AddNumberToObject(j, "invalid_per_mille", o->invalid_per_mille);
    cJSON_AddNumberToObject(j, "metamorphic_per_mille", o->metamorphic_per_mille);
    cJSON_AddNumberToObject(j, "geometry_pool", o->geometry_pool);
    cJSON_AddStringToObject(j, "kvcmp_version", kvc_version_string());
    return j;
}

/* "pass", "fail", "no-verdict", "interrupted" or "write-failed": the exit status in a word. */
static const char *verdict_word(int exit_code) {
    switch (exit_code) {
    case KVC_CAMPAIGN_PASS: return "pass";
    case KVC_CAMPAIGN_FAILURES: return "fail";
    case KVC_CAMPAIGN_NO_VERDICT: return "no-verdict";
    case KVC_CAMPAIGN_WRITE_FAILED: return "write-failed";
    default: return exit_code > KVC_CAMPAIGN_INTERRUPTED ? "interrupted" : "error";
    }
}

static cJSON *summary_json(campaign *c, double elapsed, int exit_code) {
    const fuzz_options *o = c->o;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "kvcmp-fuzz-summary/1");
    cJSON_AddItemToObject(root, "run", kvc_run_info(o->seed, 1, options_json(o)));
    cJSON_AddItemToObject(root, "campaign", identity_json(o));
    cJSON_AddStringToObject(root, "verdict", verdict_word(exit_code));
    cJSON_AddNumberToObject(root, "exit_status", exit_code);
    cJSON_AddStringToObject(root, "stopped_by", c->stopped_by);
    if (c->no_verdict[0]) cJSON_AddStringToObject(root, "no_verdict", c->no_verdict);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    cJSON_AddStringToObject(root, "candidate", c->candidate_label);
    cJSON_AddStringToObject(root, "policy", policy_name(o->policy));
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", o->shard_index, o->shard_count);
    cJSON_AddStringToObject(root, "shard", shard);
    cJSON_AddNumberToObject(root, "jobs", o->jobs);
    /* The GPU each job's workers saw, when they were spread (gpus.h). */
    char device[64];
    if (kvc_gpu_for_job(0, device, sizeof device)) {
        cJSON *devices = cJSON_AddArrayToObject(root, "worker_devices");
        for (int j = 0; j < o->jobs && kvc_gpu_for_job(j, device, sizeof device); j++) cJSON_AddItemToArray(devices, cJSON_CreateString(device));
    }
    cJSON_AddNumberToObject(root, "threads", o->threads);
    cJSON_AddNumberToObject(root, "cases", (double)c->cases);
    cJSON_AddNumberToObject(root, "seconds", elapsed);
    cJSON_AddNumberToObject(root, "cases_per_second", elapsed > 0 ? (double)c->cases / elapsed : 0.0);
    cJSON_AddNumberToObject(root, "failures", (double)c->failures);
    cJSON_AddNumberToObject(root, "skipped", (double)c->skipped);
    cJSON_AddNumberToObject(root, "compared", (double)(c->cases - c->skipped));
    if (c->first_start_at >= 0) cJSON_AddNumberToObject(root, "startup_seconds", c->first_start_at);
    else cJSON_AddNullToObject(root, "startup_seconds");
    if (c->failures) cJSON_AddNumberToObject(root, "first_failure_seconds", c->first_failure_at);
    cJSON_AddBoolToObject(root, "interrupted", c->interrupted != 0);
    if (c->interrupted) cJSON_AddStringToObject(root, "signal", signal_name(c->interrupted));
    cJSON_AddNumberToObject(root, "workers_lost", c->workers_lost);
    if (c->broken[0]) cJSON_AddStringToObject(root, "unaccounted", c->broken);
    cJSON_AddNumberToObject(root, "distinct_failures", kvc_signature_list_distinct(&c->signatures));
    cJSON_AddNumberToObject(root, "max_failures_per_signature", o->max_per_signature);
    cJSON_AddItemToObject(root, "signatures", kvc_signature_list_json(&c->signatures));
    cJSON_AddItemToObject(root, "coverage", kvc_coverage_json(&c->coverage));
    cJSON *per_variant = cJSON_AddObjectToObject(root, "per_variant");
    for (int v = 0; v < kvc_variant_count(); v++)
        if (c->by_variant[v].cases) cJSON_AddItemToObject(per_variant, kvc_variant(v)->name, tally_json(&c->by_variant[v]));
    cJSON *per_family = cJSON_AddObjectToObject(root, "per_family");
    for (int f = 0; f < KVC_FAM_COUNT; f++)
        if (c->by_family[f].cases) cJSON_AddItemToObject(per_family, kvc_family_name(f), tally_json(&c->by_family[f]));
    cJSON *list = cJSON_AddArrayToObject(root, "failure_list");
    for (int i = 0; i < c->num_failures_listed; i++) {
        failure *x = &c->failures_list[i];
        char repro[800];
        repro_fuzz(c, x->result.index, repro, sizeof repro);
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "case", (double)x->result.index);
        cJSON_AddStringToObject(item, "variant", kvc_variant(x->result.variant)->name);
        cJSON_AddStringToObject(item, "family", kvc_family_name(x->result.family));
        cJSON_AddStringToObject(item, "kind", x->result.kind);
        cJSON_AddStringToObject(item, "signature", x->result.signature.key);
        cJSON_AddNumberToObject(item, "seconds", x->result.at_seconds);
        cJSON_AddStringToObject(item, "detail", x->result.detail);
        cJSON_AddStringToObject(item, "saved", x->saved);
        cJSON_AddStringToObject(item, "repro", repro);
        cJSON_AddItemToArray(list, item);
    }
    return root;
}

static void write_json(campaign *c, double elapsed, int exit_code) {
    const fuzz_options *o = c->o;
    if (!o->json_path || !o->json_path[0]) return;
    char error[1200];
    if (kvc_write_json_file(o->json_path, summary_json(c, elapsed, exit_code), error, sizeof error)) {
        fprintf(stderr, "kvcmp fuzz: %s\n", error);
        c->write_failed = 1;
    }
}

/* The first listed failure of a signature, or NULL (beyond the list). */
static const failure *first_listed(campaign *c, const kvc_signature_entry *e) {
    for (int i = 0; i < c->num_failures_listed; i++)
        if (kvc_signature_list_find(&c->signatures, c->failures_list[i].result.signature.key) == e) return &c->failures_list[i];
    return NULL;
}

/* A JUnit failure message: the diagnosis first, then the difference. */
static void diagnosed_message(const kvc_signature_entry *e, const char *detail, char *out, size_t size) {
    char explanation[600];
    kvc_explanation_text(e->signature.explained_by, explanation, sizeof explanation);
    if (explanation[0]) snprintf(out, size, "explained by: %s; %s", explanation, detail);
    else if (e->signature.diagnosed) snprintf(out, size, "unexplained by the deviation catalogue; %s", detail);
    else snprintf(out, size, "%s", detail);
}

/* The verdict for CI: a failed testcase per failure signature, with its
 * count and both __REPRO lines; a passed one per variant that ran
 * without failure; a skipped one per variant the candidate lacks. */
static int write_junit(campaign *c, double elapsed, int exit_code) {
    const fuzz_options *o = c->o;
    if (!o->junit_path) return 0;
    kvc_junit *j = kvc_junit_new("kvcmp fuzz");
    if (!j) return -1;
    cJSON *info = kvc_run_info(o->seed, 1, options_json(o));
    cJSON_AddStringToObject(info, "verdict", verdict_word(exit_code));
    cJSON_AddNumberToObject(info, "exit_status", exit_code);
    cJSON_AddStringToObject(info, "stopped_by", c->stopped_by);
    cJSON_AddNumberToObject(info, "compared", (double)(c->cases - c->skipped));
    kvc_junit_properties(j, info);
    cJSON_Delete(info);
    /* A campaign that proves nothing, or was cut short, is a failed
     * testcase of its own, with the command that runs it again. */
    char again[900], text[sizeof c->no_verdict + sizeof again + 32];
    repro_fuzz(c, -1, again, sizeof again);
    if (c->no_verdict[0]) {
        snprintf(text, sizeof text, "%s\n  __REPRO: %s\n", c->no_verdict, again);
        kvc_junit_fail(j, "fuzz.campaign", "cases compared", 0, "no-verdict", c->no_verdict, text);
    }
    if (c->interrupted) {
        char why[300];
        snprintf(why, sizeof why, "interrupted by %s after %.1f s: the cases listed are all that ran", signal_name(c->interrupted), elapsed);
        snprintf(text, sizeof text, "%s\n  __REPRO: %s\n", why, again);
        kvc_junit_fail(j, "fuzz.campaign", "campaign finished", 0, "interrupted", why, text);
    }
    /* One failed testcase per signature, not per failing case: one bug
     * is one red line however many cases show it.  Its message is the
     * difference its first listed case showed. */
    for (int i = 0, number = 0; i < c->signatures.count; i++) {
        const kvc_signature_entry *e = &c->signatures.entries[i];
        if (e->group != i) continue;   /* listed with the entry it was merged into */
        const failure *x = first_listed(c, e);
        char classname[96], text[KVC_SIGNATURE_TEXT + 1200], message[1400];
        snprintf(classname, sizeof classname, "fuzz.%s", x ? kvc_variant(x->result.variant)->name : e->signature.stage);
        kvc_signature_entry_text(++number, e, text, sizeof text);
        size_t n = strlen(text);
        if (x && x->saved[0] == '(') snprintf(text + n, sizeof text - n, "  case %lld saved: %s\n", (long long)x->result.index, x->saved);
        diagnosed_message(e, x ? x->result.detail : e->signature.key, message, sizeof message);
        kvc_junit_fail(j, classname, e->signature.key, 0, e->signature.check, message, text);
    }
    if (c->broken[0]) {
        snprintf(text, sizeof text, "%.600s\n  __REPRO: %s\n", c->broken, again);
        kvc_junit_fail(j, "fuzz.campaign", "every case run once", 0, "accounting", c->broken, text);
    }
    for (int v = 0; v < kvc_variant_count(); v++) {
        const tally *t = &c->by_variant[v];
        char classname[96], name[96];
        snprintf(classname, sizeof classname, "fuzz.%s", kvc_variant(v)->name);
        snprintf(name, sizeof name, "%lld cases", (long long)t->cases);
        if (!t->cases || t->failures) continue;
        if (t->skipped == t->cases) kvc_junit_skip(j, classname, name, "the candidate does not offer this stage");
        else kvc_junit_pass(j, classname, name, c->cases ? elapsed * (double)t->cases / (double)c->cases : 0);
    }
    char error[1200];
    int rc = kvc_junit_write(j, o->junit_path, error, sizeof error);
    if (rc) fprintf(stderr, "kvcmp fuzz: %s\n", error);
    kvc_junit_free(j);
    return rc;
}

/* The candidate: the one named, else opt, else the reference itself. */
static const kvc_backend *pick_candidate(fuzz_options *o, const char **label, int *self_check) {
    char error[512];
    *self_check = 0;
    if (o->candidate_name) {
        const kvc_backend *b = kvc_backend_by_name(o->candidate_name, error, sizeof error);
        if (!b && !kvc_interrupted()) fprintf(stderr, "kvcmp fuzz: %s (--candidate)\n", error);
        /* An optimized path is named by the ISA that runs: "opt (avx2)". */
        *label = kvc_optimized_backend_is(b) ? b->name : o->candidate_name;
        return b;
    }
    if (kvc_optimized_cap_invalid(error, sizeof error)) {
        fprintf(stderr, "kvcmp fuzz: %s\n", error);
        return NULL;
    }
    const kvc_backend *b = kvc_backend_by_name("opt", error, sizeof error);
    if (b) { o->candidate_name = "opt"; *label = b->name; return b; }
    fprintf(stderr, "kvcmp fuzz: the optimized backend is unavailable (%s); fuzzing the reference against itself "
                    "with 2 threads and page padding instead\n", error);
    o->candidate_name = "ref";
    if (o->threads < 2) o->threads = 2;
    o->threads_given = 1;
    *label = "ref (self-check: optimized backend unavailable)";
    *self_check = 1;
    return &kvc_reference_backend;
}

/* ---- the campaign ----------------------------------------------------- */

/* ---- supervision of the workers ---------------------------------------- */

typedef enum { JOB_IDLE = KVC_JOB_IDLE, JOB_RUNNING = KVC_JOB_RUNNING, JOB_SHRINKING = KVC_JOB_SHRINKING } job_phase;

/* One job's worker as the parent sees it. */
typedef struct {
    pid_t pid;                /* 0: no worker */
    job_phase phase;
    int64_t index;            /* the case running or being shrunk */
    int64_t next_k;           /* the k of its next case (see worker_main); where a replacement starts */
    double since;             /* when the phase began */
    double pipe_closed_at;    /* > 0: its result pipe closed then (the worker ends or is killed) */
    int finished, retired;    /* sent MSG_DONE / MSG_RETIRE */
    int broken;               /* killed for breaking the protocol: nothing more to account */
    int lost_in_a_row;        /* replacements that died before a case */
} job_slot;

/* fds[j]: job j's result pipe; fds[MAX_JOBS + j]: its exit (a pidfd), so
 * that one poll wakes for a message or a worker's end. */
typedef struct {
    fuzz_options *o;
    campaign *c;
    const kvc_backend *candidate;
    int stopping;             /* no more cases: max failures, a signal, a broken protocol */
    job_slot jobs[MAX_JOBS];
    int control[MAX_JOBS];    /* write ends of the workers' control pipes (non-blocking), -1 */
    struct pollfd fds[2 * MAX_JOBS];
} supervisor;

/* A worker that dies this many times in a row without finishing a case
 * is not replaced again: something outside the candidate kills it. */
#define MAX_LOST_IN_A_ROW 3

/* A worker whose result pipe closed between cases has this long to exit
 * before its group is killed (one whose case runs has its --timeout). */
#define EXIT_GRACE_SECONDS 5.0

static int spawn_worker(supervisor *s, int job) {
    const fuzz_options *o = s->o;
    job_slot *slot = &s->jobs[job];
    int p[2], control[2];
    /* Close-on-exec: a helper the candidate starts keeps no pipe open. */
    if (pipe2(p, O_CLOEXEC)) { perror("kvcmp fuzz: pipe"); return -1; }
    if (pipe2(control, O_CLOEXEC)) { perror("kvcmp fuzz: pipe"); close(p[0]); close(p[1]); return -1; }
    fcntl(control[1], F_SETFL, O_NONBLOCK);   /* the parent never waits on a worker */
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        perror("kvcmp fuzz: fork");
        close(p[0]); close(p[1]); close(control[0]); close(control[1]);
        return -1;
    }
    if (pid == 0) {
        kvc_close_inherited_fds(p[1], control[0]);   /* the other workers' pipes among them */
        kvc_child_setup(parent);
        worker w = {.o = o, .started = s->c->started, .write_fd = p[1], .control_fd = control[0]};
        kvc_spread_over_gpus(job);
        w.target = (kvc_fuzz_target){.reference = &kvc_reference_backend, .candidate = s->candidate, .policy = o->policy,
                                     .threads = o->threads, .metamorphic_per_mille = o->metamorphic_per_mille,
                                     .vary_threads = !o->threads_given, .geometry_pool = o->geometry_pool,
                                     .geometry_salt = o->seed};
        w.gen = (kvc_gen_config){.seed = o->seed, .variant_mask = o->variant_mask, .invalid_per_mille = o->invalid_per_mille,
                                  .family_mask = o->family_mask, .geometry_pool = o->geometry_pool};
        worker_main(&w, job, slot->next_k);
        close(p[1]);
        kvc_exit_worker(0);
    }
    close(p[1]);
    close(control[0]);
    setpgid(pid, pid);
    kvc_interrupt_track(pid);
    s->fds[job] = (struct pollfd){.fd = p[0], .events = POLLIN};
    s->fds[MAX_JOBS + job] = (struct pollfd){.fd = kvc_exit_fd(pid), .events = POLLIN};
    s->control[job] = control[1];
    slot->pid = pid;
    slot->phase = JOB_IDLE;
    slot->since = now_seconds();
    slot->pipe_closed_at = 0;
    slot->finished = slot->retired = slot->broken = 0;
    return 0;
}

/* The k of case `index` in job j (the inverse of worker_main's numbering). */
static int64_t case_k(const fuzz_options *o, int job, int64_t index) {
    return ((index - o->shard_index) / o->shard_count - job) / o->jobs;
}

/* The case job j runs k-th (worker_main's numbering). */
static int64_t case_index(const fuzz_options *o, int job, int64_t k) {
    return o->only >= 0 ? o->only : o->shard_index + (int64_t)o->shard_count * (job + (int64_t)o->jobs * k);
}

/* Asks every worker to stop after its case (the control pipe; the flag
 * is the parent's, a candidate cannot set or clear it). */
static void request_stop(supervisor *s) {
    s->stopping = 1;
    for (int j = 0; j < s->o->jobs; j++)
        if (s->control[j] >= 0) { ssize_t done = write(s->control[j], "S", 1); (void)done; }
}

/* Has job j's worker run all its cases when it says it is done? */
static int job_complete(const supervisor *s, int job) {
    const fuzz_options *o = s->o;
    const job_slot *slot = &s->jobs[job];
    if (s->stopping) return 1;
    if (o->only >= 0) return s->c->cases > 0;
    if (o->cases >= 0) return case_index(o, job, slot->next_k) >= o->cases;
    return now_seconds() >= s->c->started + o->seconds;
}

/* Why message m cannot come from job j's worker now, or NULL: a case
 * started out of turn or twice, a result for a case it is not running, a
 * value out of range.  The candidate runs in the worker: a fork that
 * goes on running cases, or a write into kvcmp's pipe, shows up here. */
static const char *protocol_error(const supervisor *s, int job, const message *m, char *why, size_t size) {
    const job_slot *slot = &s->jobs[job];
    kvc_worker_view view = {.phase = (int)slot->phase, .index = slot->index, .next_index = case_index(s->o, job, slot->next_k),
                            .complete = job_complete(s, job), .variants = kvc_variant_count(), .families = KVC_FAM_COUNT};
    kvc_worker_message said = {.type = m->type, .index = m->index, .variant = m->variant, .family = m->family,
                               .threads = m->coverage.threads, .other_threads = m->coverage.other_threads};
    return kvc_protocol_error(&said, &view, why, size);
}

/* The campaign fails: its cases cannot be counted as run once each. */
static void campaign_broken(supervisor *s, const char *why) {
    campaign *c = s->c;
    if (!c->broken[0]) snprintf(c->broken, sizeof c->broken, "%s", why);
    clear_progress(c);
    fprintf(stderr, "kvcmp fuzz: %s\n", why);
    request_stop(s);
}

static void on_message(supervisor *s, int job, const message *m);
static void reap_worker(supervisor *s, int job, const char *kind, const char *why);

/* Reads one message of job j's worker; its pipe's end is noted (the
 * worker's exit, seen through its pidfd or the watch, is reaped). */
static void read_message(supervisor *s, int job) {
    message m;
    ssize_t got = read(s->fds[job].fd, &m, sizeof m);
    if (got < 0 && errno == EINTR) return;
    if (got != (ssize_t)sizeof m) {
        close(s->fds[job].fd);
        s->fds[job].fd = -1;
        s->jobs[job].pipe_closed_at = now_seconds();
        if (got <= 0) return;
        snprintf(m.detail, sizeof m.detail, "it sent %zd bytes, not a message", got);
    } else {
        /* Strings from a worker end inside their arrays. */
        m.kind[sizeof m.kind - 1] = m.detail[sizeof m.detail - 1] = m.saved[sizeof m.saved - 1] = m.rule[sizeof m.rule - 1] = 0;
        m.signature.key[sizeof m.signature.key - 1] = m.signature.stage[sizeof m.signature.stage - 1] = 0;
        m.signature.check[sizeof m.signature.check - 1] = m.signature.cause[sizeof m.signature.cause - 1] = 0;
        m.signature.regions[sizeof m.signature.regions - 1] = m.signature.explained_by[sizeof m.signature.explained_by - 1] = 0;
        m.signature.refuted[sizeof m.signature.refuted - 1] = 0;
        m.coverage.rule = NULL;
        char why[300];
        if (!protocol_error(s, job, &m, why, sizeof why)) { on_message(s, job, &m); return; }
        snprintf(m.detail, sizeof m.detail, "%s", why);
    }
    char text[sizeof s->c->broken];
    snprintf(text, sizeof text,
             "job %d's worker (pid %ld) broke the case protocol: %.300s. The candidate forked a process that runs cases "
             "too, or wrote into kvcmp's pipes; the campaign's cases cannot be counted, so it fails (run it again with "
             "--jobs 1 and look for fork() or writes to descriptors the candidate did not open)",
             job, (long)s->jobs[job].pid, m.detail);
    s->jobs[job].broken = 1;
    campaign_broken(s, text);
    reap_worker(s, job, NULL, NULL);
}

static void on_message(supervisor *s, int job, const message *m) {
    job_slot *slot = &s->jobs[job];
    campaign *c = s->c;
    if (m->type == MSG_START) {
        if (c->first_start_at < 0) c->first_start_at = now_seconds() - c->started;
        slot->phase = JOB_RUNNING;
        slot->index = m->index;
        slot->since = now_seconds();
    } else if (m->type == MSG_RESULT) {
        int listed = on_result(c, m);
        slot->next_k = case_k(s->o, job, m->index) + 1;
        slot->lost_in_a_row = 0;
        slot->phase = JOB_IDLE;
        if (m->will_save) {
            /* The parent decides which failures are saved: it counts each signature. */
            ssize_t done = write(s->control[job], listed ? "Y" : "N", 1);
            (void)done;   /* a worker that closed its end is stopped by its --timeout */
            if (listed) slot->phase = JOB_SHRINKING;
        }
        slot->since = now_seconds();
    } else if (m->type == MSG_SAVED) {
        on_saved(c, m);
        slot->phase = JOB_IDLE;
    } else if (m->type == MSG_DONE) {
        slot->finished = 1;
    } else {
        slot->retired = 1;
    }
    if (c->signatures.count >= s->o->max_failures && !s->stopping) { c->max_failures_reached = 1; request_stop(s); }
}

/* How a worker that was not stopped on purpose ended. */
static void describe_death(int status, char *how, size_t size) {
    if (WIFSIGNALED(status)) snprintf(how, size, "died (signal %d): %s", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(how, size, "died (exit status %d%s)", WEXITSTATUS(status), WEXITSTATUS(status) == 0 ? ": the candidate ended the process" : "");
}

/* A worker lost outside a case: while shrinking one (saved unshrunk by
 * the parent) or between cases.  0 when the job may be replaced. */
static int on_lost_worker(supervisor *s, int job, pid_t pid, const char *how) {
    job_slot *slot = &s->jobs[job];
    campaign *c = s->c;
    c->workers_lost++;
    clear_progress(c);
    if (slot->phase == JOB_SHRINKING) printf("  case %lld: the worker shrinking it %s; saving it unshrunk\n", (long long)slot->index, how);
    else printf("WORKER LOST: job %d (pid %ld) %s between cases; a new worker takes its next case\n", job, (long)pid, how);
    fflush(stdout);
    if (slot->phase == JOB_SHRINKING) {
        message m = {.index = slot->index};
        save_unshrunk(c, slot->index, &m);
    }
    if (++slot->lost_in_a_row < MAX_LOST_IN_A_ROW) return 0;
    fprintf(stderr, "kvcmp fuzz: job %d lost %d workers in a row without finishing a case; not replacing it\n", job, MAX_LOST_IN_A_ROW);
    c->jobs_abandoned++;
    return -1;
}

/* Ends job j's worker: its process group is killed (a worker that exited
 * leaves no helper behind), it is reaped, what was lost is reported and
 * a replacement takes the job's next case.  why: NULL when the worker
 * ended by itself; else the limit it broke, and kind the case's failure
 * kind ("timeout", "memory"). */
static void reap_worker(supervisor *s, int job, const char *kind, const char *why) {
    job_slot *slot = &s->jobs[job];
    campaign *c = s->c;
    const fuzz_options *o = s->o;
    kvc_kill_group(slot->pid);
    for (int f = 0; f < 2; f++) {
        struct pollfd *fd = &s->fds[f * MAX_JOBS + job];
        if (fd->fd >= 0) close(fd->fd);
        fd->fd = -1;
    }
    if (s->control[job] >= 0) close(s->control[job]);
    s->control[job] = -1;
    int status = 0;
    while (waitpid(slot->pid, &status, 0) < 0 && errno == EINTR) {}
    kvc_interrupt_untrack(slot->pid);
    if (o->save_dir[0]) kvc_case_remove_partial_saves(o->save_dir, slot->pid);
    pid_t pid = slot->pid;
    slot->pid = 0;
    if (slot->broken) return;   /* its cases no longer count */
    int clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!why && clean_exit && slot->finished) return;   /* the job's cases are done */
    if (c->interrupted) {
        /* Stopped on purpose: only a case already found is kept. */
        if (slot->phase == JOB_SHRINKING) { message m = {.index = slot->index}; save_unshrunk(c, slot->index, &m); }
        return;
    }
    if (why || !clean_exit || !slot->retired) {
        char how[200];
        if (why) snprintf(how, sizeof how, "%s", why);
        else describe_death(status, how, sizeof how);
        if (slot->phase == JOB_RUNNING) {
            char detail[300];
            snprintf(detail, sizeof detail, "the worker running this case %s", how);
            on_lost_case(c, slot->index, why ? kind : "crash", detail);
            slot->next_k = case_k(o, job, slot->index) + 1;
        } else if (on_lost_worker(s, job, pid, how)) {
            return;
        }
        if (c->signatures.count >= o->max_failures && !s->stopping) { c->max_failures_reached = 1; request_stop(s); }
    }
    /* Carry on with the rest of this job's cases. */
    if (!s->stopping && o->only < 0) spawn_worker(s, job);
}

/* The worker checks --rss-limit-mb itself after every case (a slow leak
 * fails the case that crossed it, see outgrew_memory_limit); the parent
 * kills a worker whose memory runs away inside one case at this multiple
 * of the limit, before it takes the machine down. */
#define HARD_RSS_FACTOR 2

/* Kills a worker past --timeout (a case; shrinking one has
 * --shrink-seconds + 2 x --timeout), past --rss-limit-mb, or alive
 * EXIT_GRACE_SECONDS after its result pipe closed between cases; 1 if it did. */
static int enforce_limits(supervisor *s, int job) {
    job_slot *slot = &s->jobs[job];
    const kvc_child_limits *limits = &s->o->limits;
    double now = now_seconds(), elapsed = now - slot->since, shrink_budget = s->o->shrink_seconds + 2 * limits->timeout_seconds;
    char why[200] = "";
    const char *kind = "timeout";
    if (limits->timeout_seconds > 0 && slot->phase == JOB_RUNNING && elapsed > limits->timeout_seconds)
        snprintf(why, sizeof why, "took longer than %g s (--timeout) and was killed", limits->timeout_seconds);
    else if (limits->timeout_seconds > 0 && slot->phase == JOB_SHRINKING && elapsed > shrink_budget)
        snprintf(why, sizeof why, "took longer than %g s (--shrink-seconds + 2 x --timeout) and was killed", shrink_budget);
    else if (slot->phase == JOB_IDLE && slot->pipe_closed_at > 0 && now - slot->pipe_closed_at > EXIT_GRACE_SECONDS)
        snprintf(why, sizeof why, "closed kvcmp's result pipe and was still running %g s later; it was killed", EXIT_GRACE_SECONDS);
    else if (limits->rss_limit_mb > 0 && slot->phase != JOB_IDLE &&
             kvc_process_tree_rss_bytes(slot->pid) > HARD_RSS_FACTOR * limits->rss_limit_mb * 1024 * 1024) {
        snprintf(why, sizeof why, "grew past %lld MB of resident memory (%d x --rss-limit-mb) and was killed",
                 (long long)(HARD_RSS_FACTOR * limits->rss_limit_mb), HARD_RSS_FACTOR);
        kind = "memory";
    }
    if (!why[0]) return 0;
    reap_worker(s, job, kind, why);
    return 1;
}

static int workers_alive(const supervisor *s) {
    for (int j = 0; j < s->o->jobs; j++)
        if (s->jobs[j].pid) return 1;
    return 0;
}

/* SIGINT/SIGTERM: the workers stop now; cases already found are kept. */
static void stop_for_signal(supervisor *s) {
    s->c->interrupted = kvc_interrupted();
    s->stopping = 1;
    clear_progress(s->c);
    fprintf(stderr, "kvcmp fuzz: %s: stopping the workers and keeping the failures found so far (a second signal stops at once)\n",
            strsignal(s->c->interrupted));
    for (int j = 0; j < s->o->jobs; j++)
        if (s->jobs[j].pid) kvc_kill_group(s->jobs[j].pid);
    for (int j = 0; j < s->o->jobs; j++)
        if (s->jobs[j].pid) reap_worker(s, j, "stopped", "stopped");
}

/* A worker that exited: the messages still in its pipe first, then its
 * end (the pipe may stay open: a helper it forked holds it). */
static void collect_exit(supervisor *s, int job) {
    for (int more = 1; more && s->fds[job].fd >= 0 && s->jobs[job].pid;) {
        struct pollfd p = {.fd = s->fds[job].fd, .events = POLLIN};
        more = poll(&p, 1, 0) > 0;
        if (more) read_message(s, job);
    }
    if (s->jobs[job].pid) reap_worker(s, job, NULL, NULL);
}

/* How often the parent looks at its workers' clocks and memory. */
#define WATCH_INTERVAL_MS 50
/* After reading, the parent lets messages gather this long: a worker
 * sends two a case, thousands a second, and a parent woken for each one
 * took a twentieth of the campaign's time from the workers' cores.  A
 * pipe holds some 30 messages, a worker sends at most 3 a millisecond. */
#define GATHER_NANOSECONDS 3000000L

/* Every message job j's pipe holds now. */
static void read_messages(supervisor *s, int job) {
    struct pollfd p = {.fd = s->fds[job].fd, .events = POLLIN};
    do read_message(s, job);
    while (s->fds[job].fd >= 0 && s->jobs[job].pid && poll(&p, 1, 0) > 0);
}

static void supervise_jobs(supervisor *s) {
    double last_progress = 0, last_watch = 0;
    while (workers_alive(s)) {
        int n = poll(s->fds, 2 * MAX_JOBS, WATCH_INTERVAL_MS);
        if (kvc_interrupted()) { stop_for_signal(s); break; }
        for (int j = 0; j < s->o->jobs && n > 0; j++) {
            if (s->fds[j].fd >= 0 && (s->fds[j].revents & (POLLIN | POLLHUP | POLLERR))) read_messages(s, j);
            if (s->jobs[j].pid && s->fds[MAX_JOBS + j].fd >= 0 && s->fds[MAX_JOBS + j].revents) collect_exit(s, j);
        }
        /* Clocks and memory at most every WATCH_INTERVAL_MS, not per message:
         * thousands of cases a second would otherwise read /proc as often. */
        if (now_seconds() - last_watch >= WATCH_INTERVAL_MS * 1e-3) {
            last_watch = now_seconds();
            for (int j = 0; j < s->o->jobs; j++) {
                /* Without a pidfd (an old kernel), a closed pipe is the sign to look. */
                if (s->jobs[j].pid && s->fds[j].fd < 0 && kvc_exited(s->jobs[j].pid)) collect_exit(s, j);
                if (s->jobs[j].pid) enforce_limits(s, j);
            }
        }
        if (now_seconds() - last_progress > 0.25) { show_progress(s->c, 0); last_progress = now_seconds(); }
        if (n > 0) nanosleep(&(struct timespec){.tv_nsec = GATHER_NANOSECONDS}, NULL);   /* a signal ends it early */
    }
}


/* ---- the library call ----------------------------------------------- */

void kvc_campaign_options_init(kvc_campaign_options *o) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (kvc_campaign_options){.seed = 1, .cases = -1, .seconds = 60, .only = -1, .shard_count = 1, .jobs = cores > 0 ? (int)cores : 1,
                                .max_failures = 10, .max_per_signature = DEFAULT_MAX_PER_SIGNATURE,
                                .invalid_per_mille = DEFAULT_INVALID_PER_MILLE, .metamorphic_per_mille = DEFAULT_METAMORPHIC_PER_MILLE,
                                .geometry_pool = -1, .shrink_seconds = 5, .timeout_seconds = KVC_DEFAULT_TIMEOUT_SECONDS,
                                .rss_limit_mb = KVC_DEFAULT_RSS_LIMIT_MB};
    if (o->jobs > MAX_JOBS) o->jobs = MAX_JOBS;
}

static int make_directories(const char *path) {
    char buffer[700];
    snprintf(buffer, sizeof buffer, "%s", path);
    for (char *p = buffer + 1; *p; p++)
        if (*p == '/') { *p = 0; if (mkdir(buffer, 0777) && errno != EEXIST) return -1; *p = '/'; }
    return mkdir(buffer, 0777) && errno != EEXIST ? -1 : 0;
}

/* The options as the campaign uses them: defaults filled in, lists
 * turned into masks, output paths under the output directory. */
static int resolve_options(const kvc_campaign_options *in, fuzz_options *o) {
    *o = (fuzz_options){.seed = in->seed, .cases = in->cases, .seconds = in->seconds, .only = in->only,
                        .shard_index = in->shard_index, .shard_count = in->shard_count > 0 ? in->shard_count : 1,
                        .jobs = in->jobs < 1 ? 1 : in->jobs > MAX_JOBS ? MAX_JOBS : in->jobs,
                        .threads = in->threads > 0 ? in->threads : 1, .threads_given = in->threads > 0,
                        .max_failures = in->max_failures, .max_per_signature = in->max_per_signature,
                        .invalid_per_mille = in->invalid_per_mille, .metamorphic_per_mille = in->metamorphic_per_mille,
                        .shrink_seconds = in->shrink_seconds, .limits = {.timeout_seconds = in->timeout_seconds, .rss_limit_mb = in->rss_limit_mb},
                        .save_dir = in->save_dir, .candidate_name = in->candidate, .json_path = in->json_path, .junit_path = in->junit_path,
                        .stage_list = in->stages, .family_list = in->families, .policy = in->policy, .quiet = in->quiet,
                        .out_dir = in->out_dir ? in->out_dir : "kvcmp-out"};
    if (o->shard_index < 0 || o->shard_index >= o->shard_count) {
        fprintf(stderr, "kvcmp fuzz: shard %d/%d: the index must lie in 0..%d\n", o->shard_index, o->shard_count, o->shard_count - 1);
        return 2;
    }
    if (o->max_failures < 1 || o->max_per_signature < 1) {
        fprintf(stderr, "kvcmp fuzz: max_failures and max_per_signature must be at least 1\n");
        return 2;
    }
    if (o->stage_list && strcmp(o->stage_list, "offered") != 0) {   /* "offered": set once the candidate is loaded */
        char bad[128];
        o->variant_mask = kvc_variant_mask(o->stage_list, bad, sizeof bad);
        if (!o->variant_mask) { fprintf(stderr, "kvcmp fuzz: --stage item '%s' matches no variant (kvcmp fuzz --list names them)\n", bad); return 2; }
    }
    if (o->family_list) {
        char bad[128];
        o->family_mask = kvc_family_mask(o->family_list, bad, sizeof bad);
        if (!o->family_mask) { fprintf(stderr, "kvcmp fuzz: --family item '%s' matches no value family (kvcmp fuzz --list names them)\n", bad); return 2; }
    }
    if (in->python) kvc_pyworker_set_python(in->python);
    int python_candidate = in->candidate && strncmp(in->candidate, "py:", 3) == 0;
    o->geometry_pool = in->geometry_pool >= 0 ? in->geometry_pool : python_candidate ? 4 : 0;
    if (python_candidate) {
        char python[300];
        kvc_shell_quote(kvc_pyworker_python(), python, sizeof python);
        snprintf(o->command, sizeof o->command, "KVCMP_PYTHON=%s %s", python, in->command ? in->command : kvc_invocation());
    } else {
        snprintf(o->command, sizeof o->command, "%s", in->command ? in->command : kvc_invocation());
    }
    if (!o->save_dir) {
        time_t now = time(NULL);
        struct tm utc;
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &utc));
        snprintf(o->default_save_dir, sizeof o->default_save_dir, "%s/failures/seed%llu-%s-%d", o->out_dir, (unsigned long long)o->seed,
                 stamp, (int)getpid());
        o->save_dir = o->default_save_dir;
    }
    if (!o->json_path) {
        /* A single case (a __REPRO line run in the campaign's --out) writes
         * a summary of its own, never over the campaign's. */
        if (o->only >= 0) snprintf(o->default_json_path, sizeof o->default_json_path, "%s/fuzz-only-%lld.json", o->out_dir, (long long)o->only);
        else snprintf(o->default_json_path, sizeof o->default_json_path, "%s/fuzz-summary.json", o->out_dir);
        o->json_path = o->default_json_path;
    }
    if ((o->save_dir == o->default_save_dir || o->json_path == o->default_json_path) && make_directories(o->out_dir)) {
        fprintf(stderr, "kvcmp fuzz: cannot create the output directory %s (--out): %s\n", o->out_dir, strerror(errno));
        return 2;
    }
    return 0;
}

static void fill_summary(const campaign *c, double elapsed, kvc_campaign_summary *s) {
    s->cases = c->cases;
    s->compared = c->cases - c->skipped;
    snprintf(s->stopped_by, sizeof s->stopped_by, "%s", c->stopped_by);
    snprintf(s->no_verdict, sizeof s->no_verdict, "%s", c->no_verdict);
    s->startup_seconds = c->first_start_at;
    s->failures = c->failures;
    s->skipped = c->skipped;
    s->seconds = elapsed;
    s->cases_per_second = elapsed > 0 ? (double)c->cases / elapsed : 0;
    s->workers_lost = c->workers_lost;
    s->interrupted = c->interrupted;
    s->write_failed = c->write_failed;
    snprintf(s->save_dir, sizeof s->save_dir, "%s", c->o->save_dir);
    s->signatures = calloc((size_t)(c->signatures.count ? c->signatures.count : 1), sizeof *s->signatures);
    if (!s->signatures) return;
    for (int i = 0; i < c->signatures.count; i++) {
        const kvc_signature_entry *e = &c->signatures.entries[i];
        if (e->group != i) continue;
        kvc_campaign_signature *out = &s->signatures[s->num_signatures++];
        snprintf(out->explained_by, sizeof out->explained_by, "%s", e->signature.explained_by);
        snprintf(out->refuted, sizeof out->refuted, "%s", e->signature.refuted);
        out->cases_checked = e->proof_failing + e->proof_passing;
        out->cases_held = e->signature.explained_by[0] ? out->cases_checked : 0;
        out->rejected_input = e->signature.rejected_input;
        out->diagnosed = e->signature.diagnosed;
        snprintf(out->key, sizeof out->key, "%s", e->signature.key);
        snprintf(out->stage, sizeof out->stage, "%s", e->signature.stage);
        snprintf(out->check, sizeof out->check, "%s", e->signature.check);
        snprintf(out->cause, sizeof out->cause, "%s", e->signature.cause);
        out->count = e->count;
        out->first_case = e->first_case;
        snprintf(out->first_repro, sizeof out->first_repro, "%s", e->first_repro);
        out->minimal_case = e->minimal_case;
        out->minimal_tokens = e->minimal_tokens;
        snprintf(out->minimal_saved, sizeof out->minimal_saved, "%s", e->minimal_saved);
        snprintf(out->minimal_repro, sizeof out->minimal_repro, "%s", e->minimal_repro);
    }
}

void kvc_campaign_summary_free(kvc_campaign_summary *s) {
    free(s->signatures);
    s->signatures = NULL;
    s->num_signatures = 0;
}

/* Stops the workers started so far (a campaign never runs without all of them). */
static void kill_started(supervisor *sup, int started) {
    for (int k = 0; k < started; k++) kvc_kill_group(sup->jobs[k].pid);
    for (int k = 0; k < started; k++) while (waitpid(sup->jobs[k].pid, NULL, 0) < 0 && errno == EINTR) {}
}

/* Why the campaign ended (kvc_campaign_summary.stopped_by). */
static const char *stop_reason(const supervisor *s) {
    const campaign *c = s->c;
    if (c->interrupted) return "interrupted";
    if (c->broken[0]) return "protocol";
    if (c->max_failures_reached) return "max-failures";
    if (c->jobs_abandoned) return "workers-lost";
    return s->o->cases >= 0 || s->o->only >= 0 ? "cases" : "time";
}

/* The campaign from `started` (when kvc_campaign_run began: loading the
 * candidate counts against --seconds).  candidate NULL: a signal came
 * before it loaded, and only the summary is written. */
static int run_campaign(fuzz_options *o, const kvc_backend *candidate, const char *label, double started, kvc_campaign_summary *summary) {
    campaign c = {.o = o, .started = started, .candidate_label = label, .first_start_at = -1};
    if (!o->quiet) {
        fprintf(stderr, "kvcmp fuzz: seed %llu, candidate %s, policy %s, %d jobs x %d threads, shard %d/%d, out %s\n",
                (unsigned long long)o->seed, label, policy_name(o->policy), o->jobs, o->threads, o->shard_index, o->shard_count,
                o->out_dir);
        char device[64];
        if (kvc_gpu_for_job(0, device, sizeof device)) {
            fprintf(stderr, "kvcmp fuzz: workers spread over the visible GPUs (CUDA_VISIBLE_DEVICES):");
            for (int j = 0; j < o->jobs && kvc_gpu_for_job(j, device, sizeof device); j++) fprintf(stderr, " job %d: %s", j, device);
            fprintf(stderr, "\n");
        }
        if (o->only >= 0) fprintf(stderr, "kvcmp fuzz: running case %lld only\n", (long long)o->only);
        else if (o->cases >= 0) fprintf(stderr, "kvcmp fuzz: running %lld cases\n", (long long)o->cases);
        else fprintf(stderr, "kvcmp fuzz: running for %.0f s\n", o->seconds);
    }
    fflush(stdout);
    fflush(stderr);
    /* Nothing of the campaign's state is shared with the workers: what a
     * candidate does to its worker's memory stays there. */
    supervisor sup = {.o = o, .c = &c, .candidate = candidate};
    for (int j = 0; j < 2 * MAX_JOBS; j++) sup.fds[j].fd = -1;
    for (int j = 0; j < MAX_JOBS; j++) sup.control[j] = -1;
    /* Past a file-size limit a write then fails with EFBIG, reported like a full disk. */
    signal(SIGXFSZ, SIG_IGN);
    /* A worker that died with its control pipe unread: EPIPE, not the end of the campaign. */
    struct sigaction ignore = {.sa_handler = SIG_IGN}, old_pipe;
    sigaction(SIGPIPE, &ignore, &old_pipe);
    int rc = 0;
    if (!candidate || kvc_interrupted()) {
        /* Interrupted while the candidate loaded: no worker ever starts. */
        c.interrupted = kvc_interrupted();
        sup.stopping = 1;
    }
    /* On a terminal the progress line is there from the start, start-up included. */
    if (!sup.stopping) show_progress(&c, 0);
    for (int j = 0; j < o->jobs && !rc && !sup.stopping; j++)
        if (spawn_worker(&sup, j)) { kill_started(&sup, j); rc = 2; }
    if (!rc) {
        supervise_jobs(&sup);
        if (!c.interrupted && kvc_interrupted()) stop_for_signal(&sup);
        c.stopped_by = stop_reason(&sup);
        judge_evidence(&c, sup.stopping);
        double elapsed = now_seconds() - c.started;
        show_progress(&c, 1);
        kvc_gen_config gen = {.seed = o->seed, .variant_mask = o->variant_mask, .invalid_per_mille = o->invalid_per_mille,
                              .family_mask = o->family_mask, .geometry_pool = o->geometry_pool};
        kvc_signature_list_prove(&c.signatures, &gen, o->policy == KVC_POLICY_EXACT, o->max_per_signature);
        print_summary(&c, elapsed);
        /* The exit status before the reports are written; the JSON, written
         * last, carries the final one. */
        rc = c.interrupted ? KVC_CAMPAIGN_INTERRUPTED + c.interrupted : c.write_failed ? KVC_CAMPAIGN_WRITE_FAILED
             : c.failures || c.broken[0] ? KVC_CAMPAIGN_FAILURES : c.no_verdict[0] ? KVC_CAMPAIGN_NO_VERDICT : KVC_CAMPAIGN_PASS;
        if (write_junit(&c, elapsed, rc) != 0 && !c.interrupted) rc = KVC_CAMPAIGN_WRITE_FAILED;
        write_json(&c, elapsed, rc);
        if (c.write_failed && !c.interrupted) rc = KVC_CAMPAIGN_WRITE_FAILED;
        fill_summary(&c, elapsed, summary);
    }
    sigaction(SIGPIPE, &old_pipe, NULL);
    kvc_signature_list_free(&c.signatures);
    return rc;
}

int kvc_campaign_run(const kvc_campaign_options *options, kvc_campaign_summary *summary) {
    memset(summary, 0, sizeof *summary);
    summary->startup_seconds = -1;
    double started = now_seconds();
    fuzz_options o;
    int rc = resolve_options(options, &o);
    if (rc) { summary->exit_code = rc; return rc; }
    /* From here on SIGHUP, SIGINT and SIGTERM leave a summary marked
     * interrupted, loading the candidate (a Python import) included. */
    kvc_interrupt_install();
    const char *label = NULL;
    int self_check = 0;
    const kvc_backend *candidate = pick_candidate(&o, &label, &self_check);
    if (kvc_interrupted()) {
        candidate = NULL;
        if (!label) label = o.candidate_name ? o.candidate_name : "opt";
    } else if (!candidate) {
        rc = 2;
    } else if (!kvc_backend_offers_any(candidate)) {
        fprintf(stderr, "kvcmp fuzz: candidate %s offers no stage: nothing to fuzz (a Python candidate lists its stages in "
                        "FUNCTION.stages; a plug-in fills its kvcmp_plugin table)\n", label);
        rc = 2;
    }
    if (!rc && o.stage_list && strcmp(o.stage_list, "offered") == 0) o.variant_mask = kvc_backend_variant_mask(candidate);
    if (!rc) {
        if (o.only >= 0) { o.jobs = 1; o.max_failures = 1; }
        rc = run_campaign(&o, candidate, label, started, summary);
    }
    kvc_interrupt_uninstall();
    summary->exit_code = rc;
    return rc;
}

/* The fuzzing campaign (include/kvcmp/campaign.h): its options, the
 * candidate and the library call here; its worker processes in worker.c,
 * their supervision in supervisor.c and its reports in summary.c.
 * `kvcmp fuzz` parses its command line in fuzz_command.c and calls
 * kvc_campaign_run.
 *
 * Cases are numbered; case i is generated from stream i of the seed
 * (harness/fuzz/gen.c), so `--only I` regenerates exactly one case and
 * `--shard I/N` splits a campaign without overlap.  Worker processes (one
 * per core) run cases and report through pipes: a candidate that crashes
 * takes down only its worker, and the case it was running is still
 * reported, saved and given a reproduction line. */

#include "harness/fuzz/campaign_internal.h"

/* The candidate: the one named, else opt, else the reference itself. */
static const kvc_backend *pick_candidate(fuzz_options *o, const char **label, int *self_check) {
    char error[512];
    *self_check = 0;
    if (o->candidate_name) {
        const kvc_backend *b = kvc_backend_by_name(o->candidate_name, error, sizeof error);
        char shown[4 * sizeof error];   /* a Python candidate's exception text among it */
        if (!b && !kvc_interrupted()) fprintf(stderr, "kvcmp fuzz: %s (--candidate)\n", kvc_escape_text(error, shown, sizeof shown));
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

/* ---- the library call ----------------------------------------------- */

void kvc_campaign_options_init(kvc_campaign_options *o) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (kvc_campaign_options){.seed = 1, .cases = -1, .seconds = 60, .only = -1, .shard_count = 1, .jobs = cores > 0 ? (int)cores : 1,
                                .max_failures = 10, .max_per_signature = DEFAULT_MAX_PER_SIGNATURE,
                                .invalid_per_mille = DEFAULT_INVALID_PER_MILLE, .metamorphic_per_mille = DEFAULT_METAMORPHIC_PER_MILLE,
                                .geometry_pool = -1, .shrink_seconds = 5, .timeout_seconds = KVC_DEFAULT_TIMEOUT_SECONDS,
                                .rss_limit_mb = KVC_DEFAULT_RSS_LIMIT_MB, .startup_timeout_seconds = KVC_DEFAULT_STARTUP_TIMEOUT_SECONDS,
                                .compile_timeout_seconds = KVC_DEFAULT_COMPILE_TIMEOUT_SECONDS};
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
                        .shrink_seconds = in->shrink_seconds, .limits = {.timeout_seconds = in->timeout_seconds, .rss_limit_mb = in->rss_limit_mb,
                                   .startup_seconds = in->startup_timeout_seconds > 0 ? in->startup_timeout_seconds
                                                                                       : KVC_DEFAULT_STARTUP_TIMEOUT_SECONDS,
                                   .compile_seconds = in->compile_timeout_seconds > 0 ? in->compile_timeout_seconds : 0},
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
    kvc_pyworker_set_startup_timeout(o->limits.startup_seconds);
    int python_candidate = in->candidate && strncmp(in->candidate, "py:", 3) == 0;
    o->geometry_pool = in->geometry_pool >= 0 ? in->geometry_pool : python_candidate ? 4 : 0;
    if (python_candidate) {
        /* JIT-compiled kernels (Triton) are kept under --out unless the
         * user chose a cache: the workers compile into it (kvc_campaign_run
         * sets it before they start) and REPRO lines reuse it. */
        const char *triton = getenv("TRITON_CACHE_DIR");
        if (triton && triton[0]) snprintf(o->triton_cache, sizeof o->triton_cache, "%s", triton);
        else snprintf(o->triton_cache, sizeof o->triton_cache, "%s/triton-cache", o->out_dir);
        o->triton_cache_set = !(triton && triton[0]);
        char python[300], cache[4 * sizeof o->triton_cache + 8];
        kvc_shell_quote(kvc_pyworker_python(), python, sizeof python);
        kvc_shell_quote(o->triton_cache, cache, sizeof cache);
        int n = snprintf(o->command, sizeof o->command, "TRITON_CACHE_DIR=%s ", cache);
        if (n < 0 || (size_t)n >= sizeof o->command) n = 0;   /* a path too long to quote here: REPRO lines without it */
        snprintf(o->command + n, sizeof o->command - (size_t)n, "KVCMP_PYTHON=%s %s", python, in->command ? in->command : kvc_invocation());
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
        fprintf(stderr, "kvcmp fuzz: cannot create the output directory %s (--out): %s (give a folder you can write into)\n", o->out_dir,
                strerror(errno));
        return 2;
    }
    /* A folder that exists but cannot be written into fails now, not at
     * the first failure to save (or at the summary, after the campaign). */
    if ((o->save_dir == o->default_save_dir || o->json_path == o->default_json_path) && access(o->out_dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "kvcmp fuzz: cannot write into the output directory %s (--out): %s (give a folder you can write into)\n",
                o->out_dir, strerror(errno));
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
        if (o->triton_cache[0])
            fprintf(stderr, "kvcmp fuzz: compiled Triton kernels are kept in %s (TRITON_CACHE_DIR%s); REPRO lines reuse them\n",
                    o->triton_cache, o->triton_cache_set ? ", under --out" : ", as set");
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
    for (int k = 0; k < KVC_CALL_COUNT; k++) kvc_geometry_set_free(&c.geometries[k]);
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
        /* In the campaign's environment before any worker starts, and only
         * for the campaign: a library caller's environment is left as it was. */
        if (o.triton_cache_set) setenv("TRITON_CACHE_DIR", o.triton_cache, 1);
        rc = run_campaign(&o, candidate, label, started, summary);
        if (o.triton_cache_set) unsetenv("TRITON_CACHE_DIR");
    }
    kvc_interrupt_uninstall();
    summary->exit_code = rc;
    return rc;
}

/* The campaign's supervision (harness/fuzz/fuzz.c): the parent's tallies
 * of each message, workers spawned, reaped and held to their limits. */

#include "harness/fuzz/campaign_internal.h"

/* ---- the parent: tallies ---------------------------------------------- */

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
    for (int i = 0; i < m->num_geometries && i < 4; i++)
        if (m->geometry_calls[i] < KVC_CALL_COUNT) kvc_geometry_set_add(&c->geometries[m->geometry_calls[i]], m->geometries[i]);
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
    repro_fuzz(c, m->index, m->kind, repro, sizeof repro);
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
                                  .geometry_pool = c->o->geometry_pool, .geometry_salt = c->o->seed,
                                  .geometry_slot = g.geometry_slot};
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

/* ---- supervision of the workers ---------------------------------------- */

/* A worker that dies this many times in a row without finishing a case
 * is not replaced again: something outside the candidate kills it. */
#define MAX_LOST_IN_A_ROW 3

/* A worker whose result pipe closed between cases has this long to exit
 * before its group is killed (one whose case runs has its --timeout). */
#define EXIT_GRACE_SECONDS 5.0

int spawn_worker(supervisor *s, int job) {
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
    slot->window = KVC_PYWORKER_CALL;
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
                               .threads = m->coverage.threads, .other_threads = m->coverage.other_threads, .phase = m->phase};
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

/* The time a Python worker's start-up or first call of a geometry may
 * take before the case's --timeout runs on (0: none). */
static double window_allowance(const supervisor *s, int window) {
    const kvc_child_limits *limits = &s->o->limits;
    /* The worker's own wait for the hello ends at --startup-timeout: a
     * little more here, so that its message is the one reported. */
    if (window == KVC_PYWORKER_STARTUP) return limits->startup_seconds + 2.0;
    if (window == KVC_PYWORKER_FIRST_CALL) return limits->compile_seconds;
    return 0;
}

/* A phase with an allowance ends: up to the allowance of its time is
 * taken off the case's clock. */
static void close_window(supervisor *s, int job) {
    job_slot *slot = &s->jobs[job];
    if (slot->window == KVC_PYWORKER_CALL) return;
    double spent = now_seconds() - slot->window_since, allowed = window_allowance(s, slot->window);
    slot->since += spent < allowed ? spent : allowed;
    slot->window = KVC_PYWORKER_CALL;
}

static void on_message(supervisor *s, int job, const message *m) {
    job_slot *slot = &s->jobs[job];
    campaign *c = s->c;
    if (m->type == MSG_PHASE) {
        close_window(s, job);
        if (m->phase != KVC_PYWORKER_CALL) { slot->window = m->phase; slot->window_since = now_seconds(); }
        return;
    }
    slot->window = KVC_PYWORKER_CALL;
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
    if (!s->stopping && c->signatures.count >= s->o->max_failures && kvc_signature_list_root_causes(&c->signatures, NULL) >= s->o->max_failures) {
        c->max_failures_reached = 1;
        request_stop(s);
    }
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
    /* What the worker's candidate left behind outside its group (setsid,
     * a double fork) was handed to this process: it goes too. */
    pid_t live[MAX_JOBS];
    int num_live = 0;
    for (int j = 0; j < o->jobs; j++)
        if (j != job && s->jobs[j].pid) live[num_live++] = s->jobs[j].pid;
    kvc_reap_descendants(live, num_live);
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
        char how[320];
        if (why) snprintf(how, sizeof how, "%s", why);
        else describe_death(status, how, sizeof how);
        if (slot->phase == JOB_RUNNING) {
            char detail[400];
            snprintf(detail, sizeof detail, "the worker running this case %s", how);
            on_lost_case(c, slot->index, why ? kind : "crash", detail);
            slot->next_k = case_k(o, job, slot->index) + 1;
        } else if (on_lost_worker(s, job, pid, how)) {
            return;
        }
        if (!s->stopping && c->signatures.count >= o->max_failures && kvc_signature_list_root_causes(&c->signatures, NULL) >= o->max_failures) {
            c->max_failures_reached = 1;
            request_stop(s);
        }
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
    /* A start-up or a first call of a geometry running: up to its allowance is not the case's time. */
    double window = slot->window != KVC_PYWORKER_CALL ? now - slot->window_since : 0, allowed = window_allowance(s, slot->window);
    elapsed -= window < allowed ? window : allowed;
    char why[300] = "";
    const char *kind = "timeout";
    if (limits->timeout_seconds > 0 && slot->phase == JOB_RUNNING && elapsed > limits->timeout_seconds && allowed > 0 &&
        slot->window == KVC_PYWORKER_FIRST_CALL) {
        snprintf(why, sizeof why, "was in its first call of this geometry (a JIT compiling) for longer than %g s (--compile-timeout) "
                 "+ %g s (--timeout) and was killed: raise --compile-timeout if compiling takes that long", limits->compile_seconds,
                 limits->timeout_seconds);
        kind = "compile-timeout";
    } else if (limits->timeout_seconds > 0 && slot->phase == JOB_RUNNING && elapsed > limits->timeout_seconds &&
               slot->window == KVC_PYWORKER_STARTUP) {
        snprintf(why, sizeof why, "was starting its Python worker (the candidate's import) for longer than %g s (--startup-timeout) "
                 "+ %g s (--timeout) and was killed: raise --startup-timeout", limits->startup_seconds, limits->timeout_seconds);
        kind = "startup-timeout";
    } else if (limits->timeout_seconds > 0 && slot->phase == JOB_RUNNING && elapsed > limits->timeout_seconds)
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
void stop_for_signal(supervisor *s) {
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

void supervise_jobs(supervisor *s) {
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

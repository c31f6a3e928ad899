/* The campaign's parent side in words (harness/fuzz/fuzz.c): progress,
 * REPRO command lines, the summary text, JSON and JUnit reports. */

#include "harness/fuzz/campaign_internal.h"

/* ---- the parent: progress and REPRO lines ----------------------------- */

static int stages_seen(const campaign *c) {
    int seen = 0;
    for (int v = 0; v < kvc_variant_count(); v++) seen += c->by_variant[v].cases > 0;
    return seen;
}

void show_progress(campaign *c, int final) {
    if (!isatty(STDERR_FILENO) || c->o->quiet) return;
    double elapsed = now_seconds() - c->started;
    fprintf(stderr, "\r%lld cases, %.0f cases/s, %d/%d variants seen, %lld failures%s", (long long)c->cases,
            elapsed > 0 ? (double)c->cases / elapsed : 0.0, stages_seen(c), kvc_variant_count(), (long long)c->failures,
            final ? "\n" : "   ");
    c->progress_shown = 1;
}

void clear_progress(campaign *c) {
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

/* libgomp reads OMP_WAIT_POLICY once per process and kvcmp fuzz runs
 * under passive unless told otherwise: a campaign under the active
 * policy reproduces under it. */
static void add_wait_policy(command_line *l) {
    if (strcmp(kvc_wait_policy_at_load(), "active") == 0) add_text(l, "OMP_WAIT_POLICY=active ");
}

/* The command that regenerates and re-checks exactly one case (index
 * >= 0; its summary goes to a file of its own, --json
 * OUT/fuzz-only-N.json by default, never over the campaign's), or the
 * whole campaign (index < 0).
 * kind: the case's failure; a compile-timeout or startup-timeout names
 * its limit on the line whatever its value, so that the line says why. */
void repro_fuzz(const campaign *c, int64_t index, const char *kind, char *out, size_t size) {
    const fuzz_options *o = c->o;
    command_line l = {.out = out, .size = size};
    out[0] = 0;
    add_wait_policy(&l);
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
    int startup = kind && strcmp(kind, "startup-timeout") == 0, compile = kind && strcmp(kind, "compile-timeout") == 0;
    if (startup || o->limits.startup_seconds != KVC_DEFAULT_STARTUP_TIMEOUT_SECONDS)
        add_option(&l, "--startup-timeout", "%g", o->limits.startup_seconds);
    if (compile || o->limits.compile_seconds != KVC_DEFAULT_COMPILE_TIMEOUT_SECONDS)
        add_option(&l, "--compile-timeout", "%g", o->limits.compile_seconds);
    finish_command(&l, "fuzz");
}

/* The command that replays a saved case through the candidate. */
void repro_replay(const campaign *c, int64_t page_padding, const char *saved, char *out, size_t size) {
    const fuzz_options *o = c->o;
    command_line l = {.out = out, .size = size};
    out[0] = 0;
    add_wait_policy(&l);
    add_text(&l, o->command);
    add_text(&l, " replay");
    add_option(&l, "--impl", "%s", o->candidate_name);
    add_option(&l, "--policy", "%s", policy_name(o->policy));
    add_option(&l, "--page-padding", "%lld", (long long)page_padding);
    add_text(&l, " --");
    add_word(&l, saved);
    finish_command(&l, "replay");
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
void judge_evidence(campaign *c, int stopped_early) {
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

/* Why the campaign ended, in words, for the summary, the JSON and the JUnit. */
static void stop_text(const campaign *c, char *out, size_t size) {
    const fuzz_options *o = c->o;
    const char *why = c->stopped_by;
    if (strcmp(why, "interrupted") == 0) snprintf(out, size, "interrupted by %s", signal_name(c->interrupted));
    else if (strcmp(why, "protocol") == 0) snprintf(out, size, "the candidate broke the case protocol (above)");
    else if (strcmp(why, "max-failures") == 0) snprintf(out, size, "--max-failures %d root causes reached", o->max_failures);
    else if (strcmp(why, "workers-lost") == 0) snprintf(out, size, "workers kept dying and were not replaced (WORKER LOST lines above)");
    else if (strcmp(why, "time") == 0) snprintf(out, size, "--seconds %g ran out", o->seconds);
    else if (o->only >= 0) snprintf(out, size, "case %lld (--only) ran", (long long)o->only);
    else snprintf(out, size, "every case asked ran (--cases %lld, shard %d/%d)", (long long)o->cases, o->shard_index, o->shard_count);
}

/* The distinct geometry keys of the candidate's calls, per stage call:
 * about how many times a specialising JIT compiles each kernel. */
static void print_geometries(const campaign *c) {
    int any = 0;
    for (int k = 0; k < KVC_CALL_COUNT; k++)
        if (c->geometries[k].count) {
            printf("%s %s %lld", any ? "," : "geometries per stage (harness/fuzz/geometry.h):", kvc_call_name(k),
                   (long long)c->geometries[k].count);
            any = 1;
        }
    if (!any) return;
    if (c->o->geometry_pool) printf(" (--geometry-pool %d)\n", c->o->geometry_pool);
    else printf(" (--geometry-pool 0: sizes drawn freely)\n");
}

void print_summary(campaign *c, double elapsed) {
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
    print_geometries(c);
    printf("fuzz: %lld cases in %.1f s (%.0f cases/s), candidate %s, policy %s, seed %llu: %lld failure%s",
           (long long)c->cases, elapsed, elapsed > 0 ? (double)c->cases / elapsed : 0.0, c->candidate_label, policy_name(c->o->policy),
           (unsigned long long)c->o->seed, (long long)c->failures, c->failures == 1 ? "" : "s");
    if (c->failures) printf(" (first after %.2f s)", c->first_failure_at);
    if (c->skipped) printf(", %lld cases skipped (stages the candidate lacks)", (long long)c->skipped);
    printf("\n");
    if (c->o->candidate_name && strncmp(c->o->candidate_name, "py:", 3) == 0)
        printf("fuzz: limits of the Python worker: --startup-timeout %g s (its start-up, the candidate's import), --compile-timeout "
               "%g s (its first call of each geometry, on top of --timeout %g s)\n",
               c->o->limits.startup_seconds, c->o->limits.compile_seconds, c->o->limits.timeout_seconds);
    if (c->workers_lost)
        printf("fuzz: %d worker%s died or were killed outside a case (WORKER LOST and 'saving it unshrunk' lines above) and "
               "were replaced\n", c->workers_lost, c->workers_lost == 1 ? "" : "s");
    if (c->interrupted) printf("fuzz: INTERRUPTED by %s after %.1f s: the cases above are all that ran\n", strsignal(c->interrupted), elapsed);
    char shown[4 * sizeof c->broken];
    if (c->broken[0]) printf("fuzz: FAILED, cases not accounted for: %s\n", kvc_escape_text(c->broken, shown, sizeof shown));
    char stopped[300];
    stop_text(c, stopped, sizeof stopped);
    if (c->first_start_at >= 0)
        printf("fuzz: stopped: %s; %lld cases compared, the first started %.2f s after the start (the candidate's start-up%s)\n", stopped,
               (long long)(c->cases - c->skipped), c->first_start_at, c->o->cases < 0 && c->o->only < 0 ? ", counted against --seconds" : "");
    else printf("fuzz: stopped: %s; no case started in %.2f s\n", stopped, elapsed);
    if (c->no_verdict[0]) printf("fuzz: NO VERDICT (exit status 4): %s\n", c->no_verdict);
    kvc_signature_list_print(stdout, &c->signatures);
    if (c->signatures.count) {
        int roots = kvc_signature_list_root_causes(&c->signatures, NULL);
        printf("fuzz: %d root cause%s (%s; --max-failures %d counts these)\n", roots, roots == 1 ? "" : "s", kvc_root_cause_rule,
               c->o->max_failures);
    }
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
cJSON *options_json(const fuzz_options *o) {
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
    cJSON_AddNumberToObject(j, "startup_timeout_seconds", o->limits.startup_seconds);
    cJSON_AddNumberToObject(j, "compile_timeout_seconds", o->limits.compile_seconds);
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
    char stopped[300];
    stop_text(c, stopped, sizeof stopped);
    cJSON_AddStringToObject(root, "stopped_because", stopped);
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
    cJSON_AddNumberToObject(root, "root_causes", kvc_signature_list_root_causes(&c->signatures, NULL));
    cJSON_AddStringToObject(root, "root_cause_rule", kvc_root_cause_rule);
    cJSON_AddNumberToObject(root, "max_failures_per_signature", o->max_per_signature);
    cJSON_AddItemToObject(root, "signatures", kvc_signature_list_json(&c->signatures));
    cJSON_AddItemToObject(root, "coverage", kvc_coverage_json(&c->coverage));
    cJSON *geometries = cJSON_AddObjectToObject(root, "geometries");
    cJSON_AddNumberToObject(geometries, "geometry_pool", o->geometry_pool);
    cJSON *per_stage = cJSON_AddObjectToObject(geometries, "per_stage");
    for (int k = 0; k < KVC_CALL_COUNT; k++)
        if (c->geometries[k].count) cJSON_AddNumberToObject(per_stage, kvc_call_name(k), (double)c->geometries[k].count);
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
        repro_fuzz(c, x->result.index, x->result.kind, repro, sizeof repro);
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

void write_json(campaign *c, double elapsed, int exit_code) {
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
int write_junit(campaign *c, double elapsed, int exit_code) {
    const fuzz_options *o = c->o;
    if (!o->junit_path) return 0;
    kvc_junit *j = kvc_junit_new("kvcmp fuzz");
    if (!j) return -1;
    cJSON *info = kvc_run_info(o->seed, 1, options_json(o));
    cJSON_AddStringToObject(info, "verdict", verdict_word(exit_code));
    cJSON_AddNumberToObject(info, "exit_status", exit_code);
    cJSON_AddStringToObject(info, "stopped_by", c->stopped_by);
    char stopped[300];
    stop_text(c, stopped, sizeof stopped);
    cJSON_AddStringToObject(info, "stopped_because", stopped);
    cJSON_AddNumberToObject(info, "compared", (double)(c->cases - c->skipped));
    kvc_junit_properties(j, info);
    cJSON_Delete(info);
    /* A campaign that proves nothing, or was cut short, is a failed
     * testcase of its own, with the command that runs it again. */
    char again[900], text[sizeof c->no_verdict + sizeof again + 32];
    repro_fuzz(c, -1, NULL, again, sizeof again);
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

/* kvcmp replay: see replay.h. */
#include "harness/replay/replay.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <omp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/fuzz/supervise.h"
#include "kvcmp/validate.h"
#include "kvcmp/backends.h"
#include "kvcmp/deviations.h"
#include "harness/options/options.h"
#include "harness/backends/pyworker.h"
#include "harness/fuzz/run.h"
#include "harness/replay/known.h"
#include "kvcmp/generate.h"
#include "harness/compare/causes.h"
#include "harness/report/junit.h"
#include "harness/report/run_info.h"
#include "harness/replay/conditions.h"
#include "optimized/optimized.h"

void kvc_case_source_label(const kvc_case *c, char *out, size_t size) {
    size_t n = strcspn(c->source, " :(");
    if (n == 0) { snprintf(out, size, "unknown"); return; }
    if (n >= size) n = size - 1;
    memcpy(out, c->source, n);
    out[n] = 0;
}

static kvc_source_tally *tally_for(kvc_replay_totals *totals, const char *source) {
    for (int i = 0; i < totals->num_sources; i++)
        if (strcmp(totals->sources[i].source, source) == 0) return &totals->sources[i];
    if (totals->num_sources == KVC_REPLAY_MAX_SOURCES) return &totals->sources[KVC_REPLAY_MAX_SOURCES - 1];
    kvc_source_tally *t = &totals->sources[totals->num_sources++];
    snprintf(t->source, sizeof t->source, "%s", source);
    return t;
}

/* Every NAME.out tensor must be an output of the case's stage: an
 * expected output the stage does not write would otherwise be ignored
 * and the case pass without checking it. */
static int unexpected_expected_output(const kvc_case *c, char *detail, size_t size) {
    const char *names[KVC_MAX_OUTPUTS];
    int n = kvc_stage_outputs(c, names);
    for (int i = 0; i < c->num_tensors; i++) {
        const char *name = c->tensors[i].name;
        size_t len = strlen(name);
        if (len <= 4 || strcmp(name + len - 4, ".out") != 0) continue;
        int known = 0;
        for (int k = 0; k < n; k++) known |= strlen(names[k]) == len - 4 && strncmp(names[k], name, len - 4) == 0;
        if (known) continue;
        int w = snprintf(detail, size, "unexpected expected-output tensor %s: %s (R=%d) writes only", name, kvc_stage_name(c->stage),
                         c->compress_ratio);
        for (int k = 0; k < n && w > 0 && (size_t)w < size; k++) w += snprintf(detail + w, size - (size_t)w, " %s.out", names[k]);
        if (w > 0 && (size_t)w < size) snprintf(detail + w, size - (size_t)w, " (remove %s.npy or fix \"stage\")", name);
        return 1;
    }
    return 0;
}

static int case_has_expected_outputs(const kvc_case *c) {
    for (int i = 0; i < c->num_tensors; i++) {
        size_t n = strlen(c->tensors[i].name);
        if (n > 4 && strcmp(c->tensors[i].name + n - 4, ".out") == 0) return 1;
    }
    return 0;
}

/* 0 when the stage rejected the case and left every output byte as it was.
 * A candidate that raised, crashed or lost its device did not reject the
 * case: it failed, whatever the reference does with it. */
static int expected_rejection(const kvc_case *c, const kvc_run_result *result, char *detail, size_t size) {
    if (result->status == KVC_OK) {
        snprintf(detail, size, "the case has no expected outputs (an input to reject), but the stage accepted it");
        return 1;
    }
    if (result->status < KVC_ERR_PARAM || result->status > KVC_ERR_METADATA) {
        snprintf(detail, size, "%s instead of a rejection (the case has no expected outputs: an input to reject): %s",
                 kvc_status_name(result->status), result->error.message);
        return 1;
    }
    for (int i = 0; i < result->num_outputs; i++) {
        const kvc_array *input = kvc_case_get(c, result->outputs[i].name);
        size_t bytes = input ? (size_t)input->count * (size_t)kvc_dtype_size(input->dtype) : 0;
        if (!input || memcmp(input->data, result->outputs[i].array.data, bytes) != 0) {
            snprintf(detail, size, "rejected (%s) but wrote %s", kvc_status_name(result->status), result->outputs[i].name);
            return 1;
        }
    }
    if (result->padding_touched) { snprintf(detail, size, "rejected, but %s", result->padding_message); return 1; }
    snprintf(detail, size, "rejected as expected, nothing written: %s: %s", kvc_status_name(result->status), result->error.message);
    return 0;
}

static const char *policy_name(kvc_policy policy) { return policy == KVC_POLICY_VLLM ? "vllm" : "exact"; }

/* The causes of a failing case's differences (harness/compare/causes.c).
 * The contract's side is the reference's run when replaying with it (the
 * case's outputs are then an upstream's), else the case's own outputs. */
static void difference_counts(const kvc_case *c, const kvc_replay_options *options, const kvc_run_result *result,
                              int64_t counts[KVC_CAUSE_COUNT]) {
    kvc_run_result expected;
    if (options->backend == &kvc_reference_backend) kvc_cause_counts(c, result, NULL, counts);
    else {
        kvc_case_expected_view(c, result, &expected);
        kvc_cause_counts(c, &expected, result, counts);
    }
}

/* A failed comparison that the case's corpus documents (classes.json,
 * harness/replay/known.h): 1, with the class and the causes found in
 * detail, when every cause in the bytes is one the class names. */
static int known_difference(const char *dir, const kvc_case *c, const kvc_replay_options *options, const kvc_run_result *result,
                            const char *summary, char *detail, size_t size) {
    char label[256];
    unsigned known = kvc_known_causes(dir, label, sizeof label);
    if (!known) return 0;
    int64_t counts[KVC_CAUSE_COUNT];
    difference_counts(c, options, result, counts);
    if (!kvc_differences_known(counts, known, options->policy == KVC_POLICY_VLLM)) return 0;
    char causes[300];
    kvc_cause_summary(counts, causes, sizeof causes);
    snprintf(detail, size, "expected upstream difference (classes.json: %s): %s; %s", label, causes, summary);
    return 1;
}

/* What a failing case's diagnosis may spend on pairs and compositions of deviations. */
#define REPLAY_DIAGNOSIS_SECONDS 2.0

/* Runs a loaded case and judges it: the verdict, with why in detail. */
static int judge_case(const char *dir, const kvc_case *c, const kvc_replay_options *options, char *detail, size_t size,
                      kvc_compare_report *report) {
    kvc_replay_conditions k;
    char error[512];
    if (kvc_replay_conditions_read(c, &k, error, sizeof error)) {
        snprintf(detail, size, "%s (fix or remove the \"replay\" object of the case's case.json)", error);
        return 1;
    }
    /* A fuzz failure's case.json says how it was found (padding, canary,
     * thread counts, a page permutation); --page-padding on the command
     * line wins over its recorded padding. */
    kvc_run_options run = {.page_padding = options->page_padding || k.page_padding < 0 ? options->page_padding : k.page_padding,
                           .canary = k.canary >= 0 ? (uint8_t)k.canary : 0xA5, .keep_outputs_on_error = 1};
    int threads_before = omp_get_max_threads();
    if (k.num_threads) omp_set_num_threads(k.threads[0]);
    /* A case the fuzzer found on the optimized backend ran with every
     * allowed thread under a team rule: the same here. */
    double thread_work = kvc_optimized_thread_work();
    int team_rule = kvc_optimized_team_rule();
    if (k.team_rule) {
        kvc_optimized_set_thread_work(0);
        kvc_optimized_set_team_rule(k.team_rule == 1);
    }
    kvc_run_result result;
    int rc = kvc_run_case(options->backend, c, &run, &result), verdict = 1;
    if (!case_has_expected_outputs(c)) {
        /* A case with no NAME.out tensors records an input every
         * implementation must reject without writing (SPEC.md 8). */
        verdict = expected_rejection(c, &result, detail, size);
    } else if (rc) {
        snprintf(detail, size, "stage returned %s: %s", kvc_status_name(rc), result.error.message);
    } else if (result.padding_touched) {
        snprintf(detail, size, "%s", result.padding_message);
    } else {
        kvc_compare_outputs(c, &result, options->policy, report);
        verdict = kvc_report_failed(report);
        char summary[700], causes[300] = "";
        kvc_report_summary(report, summary, sizeof summary);
        if (verdict && known_difference(dir, c, options, &result, summary, detail, size)) verdict = KVC_REPLAY_KNOWN;
        else if (verdict) {
            int64_t counts[KVC_CAUSE_COUNT];
            difference_counts(c, options, &result, counts);
            kvc_cause_summary(counts, causes, sizeof causes);
            snprintf(detail, size, "%s; first: %s%s%s; ", summary, report->has_first ? report->first : "-", causes[0] ? "; causes: " : "",
                     causes);
            size_t n = strlen(detail);
            kvc_diagnose_clause_proven(c, options->impl_name, &run, &result, REPLAY_DIAGNOSIS_SECONDS, detail + n, size - n);
        } else {
            snprintf(detail, size, "%s", summary[0] ? summary : "bit-exact");
            if (k.present) verdict = kvc_replay_check_conditions(options->backend, c, &run, &k, &result, options->policy, detail, size);
        }
    }
    omp_set_num_threads(threads_before);
    kvc_optimized_set_thread_work(thread_work);
    kvc_optimized_set_team_rule(team_rule);
    char note[96];
    kvc_replay_conditions_describe(&k, note, sizeof note);
    size_t n = strlen(detail);
    snprintf(detail + n, size - n, "%s", note);
    kvc_replay_note_unrun_alias(c, kvc_backend_takes_aliased_memory(options->backend), detail, size);
    kvc_run_result_free(&result);
    return verdict;
}

/* Whether the case is one of the fuzzer's variants in mask: the same
 * stage and, where the variant fixes them, ratio, head size and cache
 * format. */
static int case_selected(const kvc_case *c, uint64_t mask) {
    if (!mask) return 1;
    for (int v = 0; v < kvc_variant_count(); v++) {
        const kvc_variant_info *info = kvc_variant(v);
        if (!(mask >> v & 1) || info->stage != (int)c->stage) continue;
        if (info->compress_ratio && info->compress_ratio != c->compress_ratio) continue;
        if (c->stage <= KVC_STAGE_V4_FORWARD && info->head_dim != c->head_dim) continue;
        if (c->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT && info->cache_dtype != (int)c->cache_dtype) continue;
        return 1;
    }
    return 0;
}

static void label_of(const char *dir, char *label, size_t size);

/* The bytes of a case's tensor files (regular .npy files only; a link is
 * refused when the case loads), summed before anything is read: a case
 * runs in the process that replays it (the built-in backends run in
 * kvcmp itself), so its size is held to --rss-limit-mb like a worker's. */
static int64_t case_tensor_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        struct stat st;
        if (n < 5 || strcmp(e->d_name + n - 4, ".npy") != 0 || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISREG(st.st_mode)) total += st.st_size;
    }
    closedir(d);
    return total;
}

/* Loads, runs and judges one case: the verdict, with why in detail. */
static int replay_loaded_case(const char *dir, const kvc_replay_options *options, char *label, size_t label_size, char *detail,
                              size_t size, kvc_compare_report *report) {
    kvc_case c;
    char error[512];
    int64_t bytes = options->rss_limit_mb > 0 ? case_tensor_bytes(dir) : 0;
    if (bytes > options->rss_limit_mb * (INT64_C(1) << 20)) {
        label_of(dir, label, label_size);
        snprintf(detail, size, "memory: the case's tensors take %lld MB, more than --rss-limit-mb %lld (raise it to replay this case)",
                 (long long)(bytes >> 20), (long long)options->rss_limit_mb);
        return KVC_REPLAY_FAIL;
    }
    if (kvc_case_load(dir, &c, error, sizeof error)) {
        snprintf(detail, size, "cannot load case: %s", error);
        return KVC_REPLAY_FAIL;
    }
    kvc_case_source_label(&c, label, label_size);
    int verdict = KVC_REPLAY_FAIL;
    if (!case_selected(&c, options->variant_mask)) {
        verdict = KVC_REPLAY_UNSELECTED;
    } else if (unexpected_expected_output(&c, detail, size)) {
        verdict = KVC_REPLAY_FAIL;
    } else if (options->outputs_dir || options->outputs_in_case) {
        kvc_outside_status status;
        if (kvc_load_outside_outputs(&c, options->outputs_dir, dir, &status, error, sizeof error))
            snprintf(detail, size, "cannot read the outside outputs: %s", error);
        else verdict = kvc_compare_outside(&c, &status, options->policy, report, detail, size);
        kvc_replay_note_unrun_alias(&c, 0, detail, size);
    } else if (!kvc_backend_has_stage(options->backend, &c)) {
        /* A partial library: the fuzzer skips such stages too. */
        snprintf(detail, size, "%s offers no %s", options->impl_name, kvc_stage_name(c.stage));
        verdict = KVC_REPLAY_SKIP;
    } else {
        /* Outside outputs a case directory holds never stand in for the
         * candidate's run: a pull request could plant them. */
        verdict = judge_case(dir, &c, options, detail, size, report);
        size_t n = strlen(detail);
        if (kvc_has_outside_outputs(&c, dir))
            snprintf(detail + n, size - n, " (the case's NAME.got.npy / status.got.json were not read: --outputs-in-case judges them)");
    }
    kvc_case_free(&c);
    return verdict;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A case's strings as shown: its path, case.json's source and the
 * messages that quote the case's fields come from the case tree, so
 * every byte a terminal or a report reader could act on is escaped. */
typedef struct {
    char label[4 * 64], dir[4 * PATH_MAX], detail[4 * 1400], repro[4 * 2400];
} shown_case;

static const shown_case *show(shown_case *shown, const char *label, const char *dir, const char *detail, const char *repro) {
    kvc_escape_text(label, shown->label, sizeof shown->label);
    kvc_escape_text(dir, shown->dir, sizeof shown->dir);
    kvc_escape_text(detail, shown->detail, sizeof shown->detail);
    kvc_escape_text(repro, shown->repro, sizeof shown->repro);
    return shown;
}

/* "WORD [label] dir: detail", and the __REPRO line when there is one. */
static void print_case_line(const char *word, const shown_case *shown, int with_repro) {
    printf("%s [%s] %s: %s\n", word, shown->label, shown->dir, shown->detail);
    if (with_repro) printf("  __REPRO: %s\n", shown->repro);
    fflush(stdout);
}

/* One case as a JUnit testcase: the source is the class, the directory
 * the name; a failure's message is the classified difference. */
static void junit_case(struct kvc_junit *junit, int verdict, const shown_case *shown, double seconds) {
    char classname[sizeof shown->label + 8];
    snprintf(classname, sizeof classname, "replay.%s", shown->label);
    /* A documented upstream difference is not a failure of the contract. */
    if (verdict == KVC_REPLAY_PASS || verdict == KVC_REPLAY_KNOWN) { kvc_junit_pass(junit, classname, shown->dir, seconds); return; }
    if (verdict == KVC_REPLAY_SKIP) { kvc_junit_skip(junit, classname, shown->dir, shown->detail); return; }
    char text[sizeof shown->detail + sizeof shown->repro + 16];
    snprintf(text, sizeof text, "%s\n  __REPRO: %s\n", shown->detail, shown->repro);
    kvc_junit_fail(junit, classname, shown->dir, seconds, "difference", shown->detail, text);
}

static void count_verdict(kvc_replay_totals *totals, const char *label, int verdict) {
    totals->selected++;
    kvc_source_tally *tally = tally_for(totals, label);
    if (verdict == KVC_REPLAY_FAIL) { totals->failed++; tally->failed++; }
    else if (verdict == KVC_REPLAY_SKIP) { totals->skipped++; tally->skipped++; }
    else if (verdict == KVC_REPLAY_KNOWN) { totals->known++; tally->known++; }
    else { totals->passed++; tally->passed++; }
}

/* "KVCMP_PYTHON=... " before a command that runs a py: candidate, so the
 * line runs the interpreter this one did. */
/* The command that replays one case as this run did; every value
 * shell-quoted, the case after "--".  One that does not fit is a shell
 * comment saying so. */
static void replay_repro(const kvc_replay_options *options, const char *dir, char *repro, size_t size) {
    char python[600] = "", impl[1200], outputs[4 * PATH_MAX + 8], path[4 * PATH_MAX + 8], padding[48] = "";
    if (strncmp(options->impl_name, "py:", 3) == 0) {
        char quoted[560];
        if (kvc_shell_quote(kvc_pyworker_python(), quoted, sizeof quoted) < sizeof quoted)
            snprintf(python, sizeof python, "KVCMP_PYTHON=%s ", quoted);
    }
    int fits = kvc_shell_quote(options->impl_name, impl, sizeof impl) < sizeof impl && kvc_shell_quote(dir, path, sizeof path) < sizeof path &&
               (!options->outputs_dir || kvc_shell_quote(options->outputs_dir, outputs, sizeof outputs) < sizeof outputs);
    int n;
    if (!fits) n = -1;
    else if (options->outputs_dir)
        n = snprintf(repro, size, "%s replay --outputs %s --policy %s -- %s", kvc_invocation(), outputs, policy_name(options->policy), path);
    else if (options->outputs_in_case)
        n = snprintf(repro, size, "%s replay --outputs-in-case --policy %s -- %s", kvc_invocation(), policy_name(options->policy), path);
    else {
        if (options->page_padding) snprintf(padding, sizeof padding, " --page-padding %lld", (long long)options->page_padding);
        n = snprintf(repro, size, "%s%s replay --impl %s --policy %s%s -- %s", python, kvc_invocation(), impl,
                     policy_name(options->policy), padding, path);
    }
    if (n < 0 || (size_t)n >= size) snprintf(repro, size, "# the replay command is longer than %zu bytes: replay the case named above", size);
}

/* The verdict, label and detail of a case: what a child replaying it in
 * isolation hands back. */
typedef struct {
    int verdict;
    char label[64];
    char detail[1400];
} case_outcome;

static int replay_case_outcome(const char *dir, const kvc_replay_options *options, kvc_replay_totals *totals,
                               kvc_compare_report *report_out, case_outcome *out) {
    double started = now_seconds();
    char *label = out->label, *detail = out->detail;
    snprintf(label, sizeof out->label, "unreadable");
    kvc_compare_report report;
    memset(&report, 0, sizeof report);
    int verdict = out->verdict = replay_loaded_case(dir, options, label, sizeof out->label, detail, sizeof out->detail, &report);
    if (verdict == KVC_REPLAY_UNSELECTED) return verdict;
    count_verdict(totals, label, verdict);
    int failed = verdict == KVC_REPLAY_FAIL;
    if (report_out) *report_out = report;
    char repro[2400];
    replay_repro(options, dir, repro, sizeof repro);
    shown_case shown;
    show(&shown, label, dir, detail, repro);
    if (options->junit) junit_case(options->junit, verdict, &shown, now_seconds() - started);
    if (options->silent) return verdict;
    static const char *const words[] = {"PASS", "FAIL", "SKIP", "", "KNOWN"};
    if (failed || verdict == KVC_REPLAY_KNOWN || !options->quiet) print_case_line(words[verdict], &shown, failed);
    return verdict;
}

int kvc_replay_case(const char *dir, const kvc_replay_options *options, kvc_replay_totals *totals,
                    kvc_compare_report *report_out) {
    case_outcome out;
    return replay_case_outcome(dir, options, totals, report_out, &out);
}

/* ---- one case in a process of its own --------------------------------- */

typedef struct {
    const char *dir;
    kvc_replay_options options;   /* without JUnit: the parent records the testcase */
} isolated_case;

static void replay_in_child(void *arg, int fd) {
    isolated_case *job = arg;
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    case_outcome out;
    replay_case_outcome(job->dir, &job->options, &totals, NULL, &out);
    fflush(stdout);
    ssize_t done = write(fd, &out, sizeof out);
    (void)done;   /* a short write reads as a crash in the parent */
}

/* case.json beyond this is not read for a label. */
#define MAX_LABEL_JSON_BYTES (1 << 20)

/* The label of a case for a FAIL line its child could not print, from
 * case.json's "source" alone: the parent never loads a case's tensors,
 * whose sizes are the case's to choose (--rss-limit-mb bounds the child
 * that does). */
static void label_of(const char *dir, char *label, size_t size) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/case.json", dir);
    snprintf(label, size, "unreadable");
    FILE *f = fopen(path, "r");
    char *text = f ? calloc(1, MAX_LABEL_JSON_BYTES + 1) : NULL;
    size_t n = text ? fread(text, 1, MAX_LABEL_JSON_BYTES, f) : 0;
    if (f) fclose(f);
    cJSON *root = n ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *source = cJSON_GetObjectItemCaseSensitive(root, "source");
    kvc_case *c = root ? calloc(1, sizeof *c) : NULL;
    if (c && cJSON_IsString(source)) snprintf(c->source, sizeof c->source, "%s", source->valuestring);
    if (c) kvc_case_source_label(c, label, size);
    free(c);
    cJSON_Delete(root);
}

/* A plug-in's case in a child under --timeout and --rss-limit-mb: a
 * crash, hang or runaway allocation is this case's FAIL line, and the
 * tree goes on. */
static int replay_case_isolated(const char *dir, const kvc_replay_options *options, kvc_replay_totals *totals) {
    double started = now_seconds();
    isolated_case job = {.dir = dir, .options = *options};
    job.options.junit = NULL;
    case_outcome out;
    kvc_child_limits limits = {.timeout_seconds = options->timeout_seconds, .rss_limit_mb = options->rss_limit_mb};
    int status;
    kvc_child_outcome outcome = kvc_run_isolated(replay_in_child, &job, &limits, &out, sizeof out, &status);
    char repro[2400];
    replay_repro(options, dir, repro, sizeof repro);
    /* The child ran the candidate: its result is checked before it counts. */
    out.label[sizeof out.label - 1] = out.detail[sizeof out.detail - 1] = 0;
    int malformed = outcome == KVC_CHILD_DONE && (out.verdict < KVC_REPLAY_PASS || out.verdict > KVC_REPLAY_KNOWN);
    int verdict_sent = out.verdict;
    if (malformed) outcome = KVC_CHILD_DIED;
    if (outcome != KVC_CHILD_DONE) {
        out.verdict = KVC_REPLAY_FAIL;
        label_of(dir, out.label, sizeof out.label);
        char how[160];
        if (malformed) snprintf(how, sizeof how, "sent a verdict kvcmp does not know (%d): the candidate wrote into kvcmp's pipe", verdict_sent);
        else if (outcome == KVC_CHILD_DIED) kvc_describe_exit(status, how, sizeof how);
        else kvc_describe_limit(outcome, &limits, how, sizeof how);
        snprintf(out.detail, sizeof out.detail, "%s: the candidate's process %s",
                 outcome == KVC_CHILD_TIMEOUT ? "timeout" : outcome == KVC_CHILD_MEMORY ? "memory" : "crash", how);
        shown_case shown;
        if (!options->silent) print_case_line("FAIL", show(&shown, out.label, dir, out.detail, repro), 1);
    }
    if (out.verdict == KVC_REPLAY_UNSELECTED) return out.verdict;
    count_verdict(totals, out.label, out.verdict);
    shown_case shown;
    if (options->junit) junit_case(options->junit, out.verdict, show(&shown, out.label, dir, out.detail, repro), now_seconds() - started);
    return out.verdict;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp replay [--impl ref|opt|LIB.so|py:FILE.py:FUNCTION] [--policy exact|vllm] [--page-padding BYTES]\n"
            "                    [--stage LIST] [--timeout SECONDS] [--rss-limit-mb MB] [--junit FILE] [--skip LIST] [--quiet]\n"
            "                    [--python PATH] [--conformance] PATH...\n"
            "       kvcmp replay (--outputs DIR | --outputs-in-case) [--policy exact|vllm] [--junit FILE] [--quiet] PATH...\n"
            "  PATH is a case directory (with case.json) or a tree of them; options may also follow\n"
            "  the paths, and every argument after -- is a path.  --conformance adds the conformance\n"
            "  corpus (SPEC.md's cases: share/kvcmp/conformance of an install, fixtures/spec-cases of a\n"
            "  checkout).\n"
            "  --outputs DIR: the outputs of an implementation that ran elsewhere, output NAME of case\n"
            "  directory .../CASE in DIR/CASE/NAME.npy (--outputs-in-case: NAME.got.npy in the case\n"
            "  directory itself; without one of the two, .got files are never read); the reference runs\n"
            "  on the case's inputs and is the expected side. Beside its outputs the outside runner\n"
            "  writes DIR/CASE/status.json (status.got.json beside NAME.got.npy): {\"status\": \"ran\"|\n"
            "  \"rejected\"|\"crashed\", \"message\": \"...\"}. A case fails when that file is missing,\n"
            "  says crashed, says rejected where the reference runs, or says ran where the reference\n"
            "  rejects (SPEC.md section 10). Two case directories of one name under --outputs fail.\n"
            "  The walk never follows a symlink below PATH (each is a FAIL line) and never reads a case\n"
            "  file through one; an entry it cannot read is a FAIL line too, and so are a hidden\n"
            "  directory, a FIFO, socket or device, and (in a tree with cases) a directory with files but\n"
            "  no case.json and no case below it.  --skip NAME[,NAME...] skips such entries by name or\n"
            "  path instead (each a SKIP line).  Hidden files (.gitkeep) are passed over.\n"
            "  --stage LIST: only cases of these variants (name prefixes as in kvcmp fuzz --stage,\n"
            "  see kvcmp fuzz --list). Cases of a stage the implementation does not offer are skipped.\n"
            "  --junit FILE: JUnit XML for CI, one testcase per case (its source the class), a failure's\n"
            "  message the classified difference and its text the __REPRO line.\n"
            "  --impl LIB.so runs each case in a process of its own: a crash is that case's FAIL line\n"
            "  and the tree goes on; a case past --timeout (default %g s) or --rss-limit-mb (default\n"
            "  %d) is stopped and fails as timeout or memory.\n"
            "  --python PATH: the interpreter of a py: implementation's worker (else $KVCMP_PYTHON, else\n"
            "  python3); it needs numpy and the kvcmp package.\n"
            "  Exit status: 0 every case passed, 1 a failure (or an entry that is not a case), 2 bad\n"
            "  options or a JUnit file not written, 4 no case compared (all skipped).\n",
            KVC_DEFAULT_TIMEOUT_SECONDS, KVC_DEFAULT_RSS_LIMIT_MB);
}

/* --page-padding: any stride SPEC.md 8 allows for every cache (fp32
 * caches need 4-byte aligned strides); pages need not start on a cache line. */
static int parse_page_padding(const char *value, void *target, char *why, size_t size) {
    int64_t bytes;
    if (kvc_parse_int64_text(value, &bytes) || bytes < 0 || bytes % 4 || bytes > (1 << 30)) {
        snprintf(why, size, "--page-padding must be a non-negative multiple of 4 (at most 2^30), not '%s'", value);
        return -1;
    }
    *(int64_t *)target = bytes;
    return 0;
}

static int replay_paths(char **paths, int num_paths, kvc_replay_options *options_in);

/* The testcases collected while replaying, with the run metadata. */
static int write_junit(kvc_replay_options *options, char **paths, int num_paths) {
    cJSON *settings = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(settings, "paths");
    cJSON_AddStringToObject(settings, "impl", options->outputs_dir ? "(outside outputs)" : options->impl_name);
    cJSON_AddStringToObject(settings, "policy", policy_name(options->policy));
    cJSON_AddNumberToObject(settings, "page_padding", (double)options->page_padding);
    if (options->outputs_dir) cJSON_AddStringToObject(settings, "outputs", options->outputs_dir);
    for (int i = 0; i < num_paths; i++) cJSON_AddItemToArray(list, cJSON_CreateString(paths[i]));
    cJSON *info = kvc_run_info(0, 0, settings);
    kvc_junit_properties(options->junit, info);
    cJSON_Delete(info);
    char error[1200];
    int rc = kvc_junit_write(options->junit, options->junit_path, error, sizeof error);
    if (rc) fprintf(stderr, "kvcmp replay: %s\n", error);
    kvc_junit_free(options->junit);
    options->junit = NULL;
    return rc;
}

/* The conformance corpus (SPEC.md's cases): PREFIX/share/kvcmp/conformance
 * beside an installed kvcmp, fixtures/spec-cases beside a checkout's
 * build/kvcmp. */
static int conformance_dir(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    const char *candidates[] = {"%s/../share/kvcmp/conformance", "%s/../fixtures/spec-cases"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, size, candidates[i], exe);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

int kvc_cmd_replay(int argc, char **argv) {
    kvc_replay_options options = {.impl_name = "ref", .policy = KVC_POLICY_EXACT, .timeout_seconds = KVC_DEFAULT_TIMEOUT_SECONDS,
                                  .rss_limit_mb = KVC_DEFAULT_RSS_LIMIT_MB};
    const char *stage_list = NULL, *python = NULL;
    int conformance = 0;
    const kvc_option table[] = {
        {"impl", KVC_OPT_STRING, .target = &options.impl_name},
        {"conformance", KVC_OPT_FLAG, .target = &conformance},
        {"outputs", KVC_OPT_STRING, .target = &options.outputs_dir},
        {"outputs-in-case", KVC_OPT_FLAG, .target = &options.outputs_in_case},
        {"policy", KVC_OPT_CUSTOM, .target = &options.policy, .parse = kvc_option_policy},
        {"page-padding", KVC_OPT_CUSTOM, .target = &options.page_padding, .parse = parse_page_padding},
        {"quiet", KVC_OPT_FLAG, .target = &options.quiet},
        {"stage", KVC_OPT_STRING, .target = &stage_list},
        {"junit", KVC_OPT_STRING, .target = &options.junit_path},
        {"timeout", KVC_OPT_DOUBLE, .target = &options.timeout_seconds, .low = 0.001, .high = 1e7},
        {"rss-limit-mb", KVC_OPT_INT64, .target = &options.rss_limit_mb, .min = 1, .max = INT64_C(1) << 30},
        {"skip", KVC_OPT_STRING, .target = &options.skip_list},
        {"python", KVC_OPT_STRING, .target = &python},
        {NULL},
    };
    const kvc_command_line line = {"replay", table, usage, -1};
    /* Options may come before or after the paths (`replay DIR --impl opt`
     * must not replay with the reference); after "--" everything is a
     * path. */
    char *paths[argc + 1];
    int num_paths = 0, status = kvc_parse_command_line(&line, argc, argv, paths, &num_paths);
    if (status) return status == KVC_OPTIONS_HELP ? 0 : status;
    if (python) kvc_pyworker_set_python(python);
    char conformance_path[PATH_MAX + 64];
    if (conformance) {
        if (conformance_dir(conformance_path, sizeof conformance_path))
            return kvc_usage_error(&line, "--conformance: no conformance corpus beside this kvcmp (share/kvcmp/conformance of an "
                                          "install, fixtures/spec-cases of a checkout)");
        paths[num_paths++] = conformance_path;
    }
    if (num_paths == 0) return kvc_usage_error(&line, "no PATH to replay");
    if (options.outputs_dir && options.outputs_in_case)
        return kvc_usage_error(&line, "--outputs DIR and --outputs-in-case name two places for the outside outputs: give one");
    if (stage_list) {
        char bad[128];
        options.variant_mask = kvc_variant_mask(stage_list, bad, sizeof bad);
        if (!options.variant_mask) return kvc_usage_error(&line, "--stage item '%s' matches no variant (kvcmp fuzz --list names them)", bad);
    }
    /* Candidates' helpers that left their process group are found and killed too. */
    kvc_become_subreaper();
    int rc = replay_paths(paths, num_paths, &options);
    kvc_reap_descendants(NULL, 0);
    return rc;
}

/* "N passed, M failed, K skipped", and the known differences when there are any. */
static void print_counts(const char *prefix, const char *source, int passed, int failed, int skipped, int known) {
    char shown[4 * 64];
    if (source) printf("%s%-24s ", prefix, kvc_escape_text(source, shown, sizeof shown));
    printf("%d passed, %d failed, %d skipped", passed, failed, skipped);
    if (known) printf(", %d expected upstream difference%s", known, known == 1 ? "" : "s");
    printf("\n");
}

/* What is not a case's verdict but must fail the run (an entry the walk
 * refused, two cases that would read one outputs folder): a FAIL line
 * and a failed JUnit testcase of its own, so nothing goes uncounted. */
static void report_problem(const kvc_replay_options *options, kvc_replay_totals *totals, const char *label, const char *path,
                           const char *why) {
    shown_case shown;
    show(&shown, label, path, why, "");
    count_verdict(totals, label, KVC_REPLAY_FAIL);
    print_case_line("FAIL", &shown, 0);   /* the command line's replay: never silent */
    if (!options->junit) return;
    char classname[sizeof shown.label + 8];
    snprintf(classname, sizeof classname, "replay.%s", shown.label);
    kvc_junit_fail(options->junit, classname, shown.dir, 0, label, shown.detail, shown.detail);
}

/* Whether --skip names the entry at path: an item equal to the path, or
 * to its last component. */
static int skip_named(const char *skip_list, const char *path) {
    if (!skip_list) return 0;
    char name[256];
    kvc_case_dir_name(path, name, sizeof name);
    for (const char *item = skip_list; *item;) {
        size_t n = strcspn(item, ",");
        if (n && ((strlen(path) == n && strncmp(path, item, n) == 0) || (strlen(name) == n && strncmp(name, item, n) == 0))) return 1;
        item += n + (item[n] == ',');
    }
    return 0;
}

/* An entry the walk reported, named by --skip: a SKIP line and a skipped
 * testcase, counted as skipped. */
static void report_skipped(const kvc_replay_options *options, kvc_replay_totals *totals, const char *label, const char *path,
                           const char *why) {
    char detail[600];
    snprintf(detail, sizeof detail, "%.450s; skipped: --skip names it", why);
    shown_case shown;
    show(&shown, label, path, detail, "");
    count_verdict(totals, label, KVC_REPLAY_SKIP);
    if (!options->quiet) print_case_line("SKIP", &shown, 0);
    if (options->junit) junit_case(options->junit, KVC_REPLAY_SKIP, &shown, 0);
}

/* Under --outputs the outputs of case directory .../CASE are OUTPUTS/CASE:
 * two directories named CASE would be judged by one runner's outputs. */
static void report_name_clashes(const kvc_replay_options *options, kvc_replay_totals *totals, const kvc_case_walk *walks,
                                int num_walks) {
    const char **pairs;
    int clashes = kvc_case_name_clashes(walks, num_walks, &pairs);
    if (clashes < 0) report_problem(options, totals, "outputs", options->outputs_dir, "out of memory checking the case names");
    for (int i = 0; i < clashes; i++) {
        char name[256], why[PATH_MAX + 1200];
        kvc_case_dir_name(pairs[2 * i], name, sizeof name);
        snprintf(why, sizeof why, "the case directory %s has the same name, so both would be judged by %.500s/%s (rename one, or "
                 "replay them with separate --outputs folders)", pairs[2 * i + 1], options->outputs_dir, name);
        report_problem(options, totals, "outputs", pairs[2 * i], why);
    }
    free(pairs);
}

/* Replays every case under the paths; 0 when all passed, 1 when one
 * failed or an entry was not a case, 2 when the backend cannot be loaded
 * (or the JUnit file not written), 4 when no case was compared. */
static int replay_paths(char **paths, int num_paths, kvc_replay_options *options_in) {
    kvc_replay_options options = *options_in;
    char error[512];
    options.backend = kvc_backend_by_name(options.impl_name, error, sizeof error);
    char shown[4 * sizeof error];   /* a Python candidate's exception text among it */
    if (!options.backend) { fprintf(stderr, "kvcmp replay: %s\n", kvc_escape_text(error, shown, sizeof shown)); return 2; }
    /* The built-in backends are trusted; a plug-in runs each case in a
     * process of its own, so one crash or hang is one FAIL line. */
    int isolate = !options.outputs_dir && !options.outputs_in_case && strcmp(options.impl_name, "ref") != 0 &&
                  strcmp(options.impl_name, "opt") != 0 && strncmp(options.impl_name, "opt-", 4) != 0;
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    if (options.junit_path && !(options.junit = kvc_junit_new("kvcmp replay"))) { fprintf(stderr, "kvcmp replay: out of memory\n"); return 2; }
    kvc_case_walk walks[num_paths > 0 ? num_paths : 1];
    for (int i = 0; i < num_paths; i++) {
        kvc_walk_cases(paths[i], &walks[i]);
        for (int k = 0; k < walks[i].num_refused; k++) {
            const kvc_refusal *r = &walks[i].refused[k];
            if (skip_named(options.skip_list, r->path)) report_skipped(&options, &totals, r->kind, r->path, r->why);
            else report_problem(&options, &totals, r->kind, r->path, r->why);
        }
        if (walks[i].count == 0 && walks[i].num_refused == 0) {
            fprintf(stderr, "kvcmp replay: no case directory (with case.json) under %s\n", paths[i]);
            totals.failed++;
        }
    }
    if (options.outputs_dir) report_name_clashes(&options, &totals, walks, num_paths);
    for (int i = 0; i < num_paths; i++) {
        for (int k = 0; k < walks[i].count; k++) {
            if (isolate) replay_case_isolated(walks[i].dirs[k], &options, &totals);
            else kvc_replay_case(walks[i].dirs[k], &options, &totals, NULL);
        }
        kvc_case_walk_free(&walks[i]);
    }
    if (options.variant_mask && totals.selected == 0) {
        fprintf(stderr, "kvcmp replay: no case of the --stage variants under the paths given\n");
        totals.failed++;
    }
    if (totals.num_sources > 1)
        for (int i = 0; i < totals.num_sources; i++)
            print_counts("source ", totals.sources[i].source, totals.sources[i].passed, totals.sources[i].failed,
                         totals.sources[i].skipped, totals.sources[i].known);
    /* Skipped cases are no evidence: a replay that compared none has no verdict. */
    int none_compared = !totals.failed && totals.passed + totals.known == 0;
    if (none_compared && options.junit) {
        /* The command that runs this replay again, paths quoted after "--". */
        char text[4096], quoted[4 * PATH_MAX + 8];
        int n = snprintf(text, sizeof text, "no case was compared: every case was skipped\n  __REPRO: %s replay", kvc_invocation());
        const char *words[] = {"--impl", options.impl_name, "--"};
        for (int i = 0; i < 3 + num_paths && n > 0 && (size_t)n < sizeof text; i++) {
            const char *word = i < 3 ? words[i] : paths[i - 3];
            if (kvc_shell_quote(word, quoted, sizeof quoted) < sizeof quoted) n += snprintf(text + n, sizeof text - (size_t)n, " %s", quoted);
        }
        if (n > 0 && (size_t)n < sizeof text) snprintf(text + n, sizeof text - (size_t)n, "\n");
        kvc_junit_fail(options.junit, "replay.run", "cases compared", 0, "no-verdict", "no case was compared: every case was skipped", text);
    }
    print_counts("", NULL, totals.passed, totals.failed, totals.skipped, totals.known);
    if (none_compared)
        printf("replay: NO VERDICT (exit status 4): no case was compared (%d skipped); replay with an implementation that offers "
               "their stages, or name a tree that has cases\n", totals.skipped);
    int junit_failed = options.junit && write_junit(&options, paths, num_paths);
    return totals.failed ? 1 : junit_failed ? 2 : none_compared ? 4 : 0;
}

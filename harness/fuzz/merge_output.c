/* kvcmp merge's command and its merged result (harness/fuzz/merge.c reads
 * and checks the shard summaries): the signature list printed, the
 * merged summary written as JSON and JUnit, the exit status. */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "harness/fuzz/signature_list.h"
#include "harness/options/options.h"
#include "harness/report/junit.h"
#include "harness/report/run_info.h"
#include "harness/replay/replay.h"

#include "harness/fuzz/merge_internal.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp merge SUMMARY.json... [--json OUT] [--junit OUT]\n"
            "  Combines the JSON summaries (kvcmp fuzz --json) of one campaign's shards (kvcmp fuzz\n"
            "  --shard I/N of one --seed, --cases, --candidate, --policy, --stage, --family, --threads,\n"
            "  --invalid-rate, --metamorphic-rate, --geometry-pool and kvcmp version) into one signature\n"
            "  list: per signature the summed count, the first case (the lowest index) and the smallest\n"
            "  saved case with their __REPRO lines, printed like the fuzz summary.\n"
            "  --json OUT: the merged summary (format kvcmp-fuzz-summary/1, it merges again).\n"
            "  --junit OUT: JUnit XML, a failed testcase per signature and a passed one per variant\n"
            "  without failures, as kvcmp fuzz --junit writes them.\n"
            "  Only regular files of at most %zu MB are read.\n"
            "  Exit status: 0 every shard merged, no failure; 1 failures; 2 bad input (a file that is\n"
            "  not a summary, summaries of different campaigns, one shard twice, counts that are not\n"
            "  whole non-negative numbers or do not add up); 3 an output not written; 4 no verdict (a\n"
            "  shard missing, or one that was interrupted, gave no verdict or could not write its\n"
            "  outputs), unless failures were found.\n",
            MAX_SUMMARY_BYTES >> 20);
}

static int compare_entries(const void *a, const void *b) {
    const kvc_signature_entry *x = a, *y = b;
    if (x->first_case != y->first_case) return x->first_case < y->first_case ? -1 : 1;
    return strcmp(x->signature.key, y->signature.key);
}

static int compare_ints(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void shards_text(const merged *m, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < m->num_shards && n < size; i++) {
        if (i == 8 && m->num_shards > 10) {
            snprintf(out + n, size - n, ", ... %d in all", m->num_shards);
            return;
        }
        int w = snprintf(out + n, size - n, "%s%d/%d", i ? ", " : "", m->shards[i], m->shard_count);
        if (w < 0) return;
        n += (size_t)w;
    }
}

/* The missing shards (the first few) as a problem of the merge. */
static void note_missing_shards(merged *m) {
    if (m->num_shards >= m->shard_count) return;
    char list[300];
    size_t n = 0;
    list[0] = 0;
    int listed = 0;
    for (int i = 0, k = 0; i < m->shard_count && listed < 8; i++) {
        while (k < m->num_shards && m->shards[k] < i) k++;
        if (k < m->num_shards && m->shards[k] == i) continue;
        int w = snprintf(list + n, sizeof list - n, "%s%d/%d", listed ? ", " : "", i, m->shard_count);
        if (w < 0 || (size_t)w >= sizeof list - n) break;
        n += (size_t)w;
        listed++;
    }
    add_problem(m, "%d of %d shards missing (%s%s): the campaign is incomplete; run the missing shards with the campaign's options and "
                "merge every summary", m->shard_count - m->num_shards, m->shard_count, list, m->shard_count - m->num_shards > listed ? ", ..." : "");
}

/* Why the merged campaign gives no verdict ("" when it does). */
static void no_verdict_text(const merged *m, char *out, size_t size) {
    out[0] = 0;
    if (!m->num_problems) return;
    if (m->num_problems == 1) snprintf(out, size, "%s", m->problems[0]);
    else snprintf(out, size, "%d shard problems, the first: %s", m->num_problems, m->problems[0]);
}

static int merged_exit(const merged *m) { return m->failures > 0 || m->list.count || m->broken[0] ? 1 : m->num_problems ? 4 : 0; }

static const char *exit_word(int status) { return status == 0 ? "pass" : status == 1 ? "fail" : status == 3 ? "write-failed" : "no-verdict"; }

static cJSON *options_json(const merged *m, char **paths, int num_paths) {
    cJSON *o = cJSON_Duplicate(m->campaign, 1);
    cJSON *list = cJSON_AddArrayToObject(o, "merged");
    for (int i = 0; i < num_paths; i++) cJSON_AddItemToArray(list, cJSON_CreateString(paths[i]));
    return o;
}

static uint64_t seed_of(const merged *m) { return (uint64_t)strtoull(string_of(m->campaign, "seed"), NULL, 10); }

static cJSON *merged_json(const merged *m, char **paths, int num_paths, int status) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", SUMMARY_FORMAT);
    cJSON_AddItemToObject(root, "run", kvc_run_info(seed_of(m), 1, options_json(m, paths, num_paths)));
    cJSON_AddItemToObject(root, "campaign", cJSON_Duplicate(m->campaign, 1));
    cJSON_AddStringToObject(root, "verdict", exit_word(status));
    cJSON_AddNumberToObject(root, "exit_status", status);
    cJSON_AddStringToObject(root, "stopped_by", m->interrupted ? "interrupted" : m->max_failures_reached ? "max-failures"
                                                 : m->cases_campaign ? "cases" : "time");
    char why[900];
    no_verdict_text(m, why, sizeof why);
    if (why[0]) cJSON_AddStringToObject(root, "no_verdict", why);
    if (m->broken[0]) cJSON_AddStringToObject(root, "unaccounted", m->broken);
    cJSON_AddNumberToObject(root, "seed", strtod(string_of(m->campaign, "seed"), NULL));
    cJSON_AddStringToObject(root, "candidate", string_of(m->campaign, "candidate") ? string_of(m->campaign, "candidate") : "");
    cJSON_AddStringToObject(root, "policy", string_of(m->campaign, "policy") ? string_of(m->campaign, "policy") : "");
    cJSON *shards = cJSON_AddArrayToObject(root, "shards");
    for (int i = 0; i < m->num_shards; i++) {
        char text[32];
        snprintf(text, sizeof text, "%d/%d", m->shards[i], m->shard_count);
        cJSON_AddItemToArray(shards, cJSON_CreateString(text));
    }
    /* Every shard: the whole campaign, as an unsharded run would say it. */
    cJSON_AddStringToObject(root, "shard", m->num_shards == m->shard_count ? "0/1" : "merged");
    cJSON_AddNumberToObject(root, "cases", m->cases);
    cJSON_AddNumberToObject(root, "seconds", m->seconds);
    cJSON_AddNumberToObject(root, "failures", m->failures);
    cJSON_AddNumberToObject(root, "skipped", m->skipped);
    cJSON_AddNumberToObject(root, "compared", m->cases - m->skipped);
    cJSON_AddBoolToObject(root, "interrupted", m->interrupted);
    cJSON_AddNumberToObject(root, "workers_lost", m->workers_lost);
    cJSON_AddNumberToObject(root, "distinct_failures", m->list.count);
    cJSON_AddItemToObject(root, "signatures", kvc_signature_list_json(&m->list));
    cJSON *per_variant = cJSON_AddObjectToObject(root, "per_variant");
    for (int i = 0; i < m->num_variants; i++) {
        cJSON *t = cJSON_AddObjectToObject(per_variant, m->variants[i].name);
        cJSON_AddNumberToObject(t, "cases", (double)m->variants[i].t.cases);
        cJSON_AddNumberToObject(t, "invalid", (double)m->variants[i].t.invalid);
        cJSON_AddNumberToObject(t, "skipped", (double)m->variants[i].t.skipped);
        cJSON_AddNumberToObject(t, "failures", (double)m->variants[i].t.failures);
    }
    cJSON_AddItemToObject(root, "failure_list", cJSON_Duplicate(m->failure_list, 1));
    return root;
}

/* The detail of the first listed failure of a signature (the lowest case). */
static const char *first_detail(const merged *m, const char *key, char *variant, size_t size) {
    const cJSON *item, *best = NULL;
    cJSON_ArrayForEach(item, m->failure_list) {
        const char *s = string_of(item, "signature");
        if (!s || strcmp(s, key) != 0) continue;
        if (!best || number_of(item, "case", 0) < number_of(best, "case", 0)) best = item;
    }
    if (!best) return NULL;
    if (string_of(best, "variant")) snprintf(variant, size, "%s", string_of(best, "variant"));
    return string_of(best, "detail");
}

/* As kvcmp fuzz --junit: a failed testcase per signature, a passed one
 * per variant without failures (skipped when the candidate lacks it),
 * and a failed one when the merge gives no verdict. */
static int write_junit(const merged *m, const char *path, char **paths, int num_paths, int status) {
    kvc_junit *j = kvc_junit_new("kvcmp fuzz");
    if (!j) return -1;
    cJSON *info = kvc_run_info(seed_of(m), 1, options_json(m, paths, num_paths));
    cJSON_AddStringToObject(info, "verdict", exit_word(status));
    cJSON_AddNumberToObject(info, "exit_status", status);
    kvc_junit_properties(j, info);
    cJSON_Delete(info);
    char why[900];
    no_verdict_text(m, why, sizeof why);
    if (why[0]) kvc_junit_fail(j, "fuzz.campaign", "every shard merged", 0, "no-verdict", why, why);
    if (m->broken[0]) kvc_junit_fail(j, "fuzz.campaign", "every case run once", 0, "accounting", m->broken, m->broken);
    for (int i = 0; i < m->list.count; i++) {
        const kvc_signature_entry *e = &m->list.entries[i];
        char classname[96], variant[64] = "", text[KVC_SIGNATURE_TEXT];
        const char *detail = first_detail(m, e->signature.key, variant, sizeof variant);
        snprintf(classname, sizeof classname, "fuzz.%s", variant[0] ? variant : e->signature.stage);
        kvc_signature_entry_text(i + 1, e, text, sizeof text);
        kvc_junit_fail(j, classname, e->signature.key, 0, e->signature.check, detail ? detail : e->signature.key, text);
    }
    for (int i = 0; i < m->num_variants; i++) {
        const variant_row *v = &m->variants[i];
        char classname[96], name[96];
        if (!v->t.cases || v->t.failures) continue;
        snprintf(classname, sizeof classname, "fuzz.%s", v->name);
        snprintf(name, sizeof name, "%lld cases", (long long)v->t.cases);
        if (v->t.skipped == v->t.cases) kvc_junit_skip(j, classname, name, "the candidate does not offer this stage");
        else kvc_junit_pass(j, classname, name, m->cases > 0 ? m->seconds * (double)v->t.cases / m->cases : 0);
    }
    char error[1200];
    int rc = kvc_junit_write(j, path, error, sizeof error);
    if (rc) fprintf(stderr, "kvcmp merge: %s\n", error);
    kvc_junit_free(j);
    return rc;
}

int kvc_cmd_merge(int argc, char **argv) {
    const char *json_path = NULL, *junit_path = NULL;
    const kvc_option table[] = {
        {"json", KVC_OPT_STRING, .target = &json_path},
        {"junit", KVC_OPT_STRING, .target = &junit_path},
        {NULL},
    };
    const kvc_command_line line = {"merge", table, usage, -1};
    char *paths[argc + 1];
    int num_paths = 0, status = kvc_parse_command_line(&line, argc, argv, paths, &num_paths);
    if (status) return status == KVC_OPTIONS_HELP ? 0 : status;
    if (num_paths == 0) return kvc_usage_error(&line, "no SUMMARY.json to merge (the files kvcmp fuzz --json wrote)");
    if (json_path && !json_path[0]) return kvc_usage_error(&line, "--json needs a file name");
    if (junit_path && !junit_path[0]) return kvc_usage_error(&line, "--junit needs a file name");
    merged m;
    memset(&m, 0, sizeof m);
    m.failure_list = cJSON_CreateArray();
    char error[1600];
    int rc = 0;
    for (int i = 0; i < num_paths && rc == 0; i++)
        if (add_summary(&m, paths[i], i == 0, error, sizeof error)) {
            char shown[4 * sizeof error];
            fprintf(stderr, "kvcmp merge: %s\n", kvc_escape_text(error, shown, sizeof shown));
            rc = 2;
        }
    if (rc == 0) {
        kvc_signature_list_settle(&m.list);
        kvc_signature_list_compact(&m.list);
        if (m.list.count) qsort(m.list.entries, (size_t)m.list.count, sizeof *m.list.entries, compare_entries);
        for (int i = 0; i < m.list.count; i++) m.list.entries[i].group = i;   /* each listed where it now is */
        if (m.num_shards) qsort(m.shards, (size_t)m.num_shards, sizeof *m.shards, compare_ints);
        note_missing_shards(&m);
        char shards[600], shown[4 * 700];
        shards_text(&m, shards, sizeof shards);
        const char *seed = string_of(m.campaign, "seed"), *candidate = string_of(m.campaign, "candidate"), *policy = string_of(m.campaign, "policy");
        printf("merge: %d summar%s (shards %s), seed %s, candidate %s, policy %s: %.0f cases, %.0f failure%s\n", num_paths,
               num_paths == 1 ? "y" : "ies", shards, seed, kvc_escape_text(candidate ? candidate : "", shown, sizeof shown),
               policy ? policy : "", m.cases, m.failures, m.failures == 1 ? "" : "s");
        for (int i = 0; i < m.num_problems && i < MAX_PROBLEMS_LISTED; i++)
            printf("merge: %s\n", kvc_escape_text(m.problems[i], shown, sizeof shown));
        if (m.num_problems > MAX_PROBLEMS_LISTED) printf("merge: ... and %d more shard problems\n", m.num_problems - MAX_PROBLEMS_LISTED);
        if (m.broken[0]) printf("merge: FAILED, cases not accounted for in %s\n", kvc_escape_text(m.broken, shown, sizeof shown));
        kvc_signature_list_print(stdout, &m.list);
        if (m.list.count)
            printf("merge: %d distinct failure%s, each listed above with the command that regenerates its first case and the one "
                   "that replays its smallest saved case\n", m.list.count, m.list.count == 1 ? "" : "s");
        int verdict = merged_exit(&m);
        if (verdict == 4) printf("merge: NO VERDICT (exit status 4): the shards merged do not make the whole campaign (above)\n");
        if (junit_path && write_junit(&m, junit_path, paths, num_paths, verdict)) rc = 3;
        if (json_path && kvc_write_json_file(json_path, merged_json(&m, paths, num_paths, rc ? 3 : verdict), error, sizeof error)) {
            fprintf(stderr, "kvcmp merge: %s\n", error);
            rc = 3;
        }
        if (rc == 0) rc = verdict;
    }
    kvc_signature_list_free(&m.list);
    free(m.variants);
    free(m.shards);
    cJSON_Delete(m.campaign);
    cJSON_Delete(m.failure_list);
    return rc;
}

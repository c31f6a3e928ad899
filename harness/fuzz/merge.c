/* kvcmp merge: the JSON summaries of one campaign's --shard I/N runs
 * (format "kvcmp-fuzz-summary/1", written by kvcmp fuzz --json) as one
 * signature list, printed like the fuzz summary and written as JSON (a
 * summary of the same format, which merges again) and JUnit.
 *
 * Case i of a campaign depends only on the seed and i, so shards of one
 * seed, candidate and policy are parts of one campaign: per signature the
 * counts add up, the first case is the one of the lowest index, and the
 * smallest saved case is the one with the fewest tokens (the lowest index
 * on a tie). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "harness/fuzz/signature_list.h"
#include "harness/options/options.h"
#include "harness/report/junit.h"
#include "harness/report/run_info.h"

#define SUMMARY_FORMAT "kvcmp-fuzz-summary/1"

typedef struct {
    int64_t cases, invalid, skipped, failures;
} variant_tally;

typedef struct {
    char name[64];
    variant_tally t;
} variant_row;

typedef struct {
    char seed_text[32];
    char candidate[300], policy[32], stage[200], family[200];
    int shard_count;
    int num_shards;
    int shards[256];                  /* shard indices seen */
    double cases, failures, skipped, workers_lost, seconds;
    int interrupted;
    kvc_signature_list list;
    variant_row *variants;
    int num_variants, variant_capacity;
    cJSON *failure_list;              /* every summary's entries, for the JUnit messages */
} merged;

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp merge SUMMARY.json... [--json OUT] [--junit OUT]\n"
            "  Combines the JSON summaries (kvcmp fuzz --json) of one campaign's shards (kvcmp fuzz\n"
            "  --shard I/N with one --seed, --candidate and --policy) into one signature list: per\n"
            "  signature the summed count, the first case (the lowest index) and the smallest saved\n"
            "  case with their __REPRO lines, printed like the fuzz summary.\n"
            "  --json OUT: the merged summary (format kvcmp-fuzz-summary/1, it merges again).\n"
            "  --junit OUT: JUnit XML, a failed testcase per signature and a passed one per variant\n"
            "  without failures, as kvcmp fuzz --junit writes them.\n"
            "  Exit status: 0 no failure, 1 failures, 2 bad input (a file that is not a summary,\n"
            "  summaries of different campaigns, one shard twice), 3 an output not written.\n");
}

static const char *string_of(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* The run options' string `key` ("" when absent), where stage and family lists live. */
static const char *option_of(const cJSON *summary, const char *key) {
    const char *s = string_of(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(summary, "run"), "options"), key);
    return s ? s : "";
}

static double number_of(const cJSON *object, const char *key, double otherwise) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : otherwise;
}

/* "I/N" into index and count; -1 when it is not that. */
static int parse_shard(const char *text, int *index, int *count) {
    char tail;
    if (!text || sscanf(text, "%d/%d%c", index, count, &tail) != 2 || *count < 1 || *index < 0 || *index >= *count) return -1;
    return 0;
}

static variant_row *variant_for(merged *m, const char *name) {
    for (int i = 0; i < m->num_variants; i++)
        if (strcmp(m->variants[i].name, name) == 0) return &m->variants[i];
    if (m->num_variants == m->variant_capacity) {
        int capacity = m->variant_capacity ? 2 * m->variant_capacity : 32;
        variant_row *grown = realloc(m->variants, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        m->variants = grown;
        m->variant_capacity = capacity;
    }
    variant_row *v = &m->variants[m->num_variants++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    return v;
}

/* One summary's signature entry into the merged list. */
static int add_signature(merged *m, const cJSON *item, const char *path, char *error, size_t size) {
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    const char *key = string_of(item, "signature");
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(item, "count"), *first = cJSON_GetObjectItemCaseSensitive(item, "first_case");
    if (!key || !cJSON_IsNumber(count) || !cJSON_IsNumber(first)) {
        snprintf(error, size, "%s: a \"signatures\" entry lacks \"signature\", \"count\" or \"first_case\"", path);
        return -1;
    }
    snprintf(s.key, sizeof s.key, "%s", key);
    snprintf(s.stage, sizeof s.stage, "%s", string_of(item, "stage") ? string_of(item, "stage") : "");
    snprintf(s.check, sizeof s.check, "%s", string_of(item, "check") ? string_of(item, "check") : "");
    snprintf(s.regions, sizeof s.regions, "%s", string_of(item, "regions") ? string_of(item, "regions") : "");
    snprintf(s.cause, sizeof s.cause, "%s", string_of(item, "cause") ? string_of(item, "cause") : "");
    int64_t first_case = (int64_t)first->valuedouble;
    kvc_signature_entry *e = kvc_signature_list_get(&m->list, &s, first_case);
    if (!e) { snprintf(error, size, "out of memory"); return -1; }
    e->count += (int64_t)count->valuedouble;
    const char *first_repro = string_of(item, "first_repro");
    if (first_case < e->first_case || !e->first_repro[0]) {
        /* The regions are those the first case showed. */
        snprintf(e->signature.regions, sizeof e->signature.regions, "%s", s.regions);
        e->first_case = first_case;
        snprintf(e->first_repro, sizeof e->first_repro, "%s", first_repro ? first_repro : "");
    }
    const cJSON *minimal = cJSON_GetObjectItemCaseSensitive(item, "minimal_case");
    if (cJSON_IsNumber(minimal)) {
        int64_t index = (int64_t)minimal->valuedouble, tokens = (int64_t)number_of(item, "minimal_tokens", 0);
        /* Fewest tokens wins; on a tie, the lowest case index. */
        if (e->minimal_case < 0 || tokens < e->minimal_tokens || (tokens == e->minimal_tokens && index < e->minimal_case)) {
            e->minimal_case = -1;
            kvc_signature_list_saved(e, index, tokens, string_of(item, "minimal_saved") ? string_of(item, "minimal_saved") : "",
                                     string_of(item, "minimal_repro") ? string_of(item, "minimal_repro") : "");
        }
    }
    /* The shards' diagnoses: entries that share a deviation are one signature here too. */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "diagnosed"))) {
        kvc_fuzz_signature diagnosis = {.diagnosed = 1};
        const cJSON *name;
        size_t n = 0;
        cJSON_ArrayForEach(name, cJSON_GetObjectItemCaseSensitive(item, "explained_by"))
            if (cJSON_IsString(name) && n < sizeof diagnosis.explained_by)
                n += (size_t)snprintf(diagnosis.explained_by + n, sizeof diagnosis.explained_by - n, "%s%s", n ? "," : "", name->valuestring);
        kvc_signature_list_explain(&m->list, key, &diagnosis);
    }
    return 0;
}

/* Reads one summary into m: 0, or -1 with why in error. */
static int add_summary(merged *m, const char *path, int first, char *error, size_t size) {
    cJSON *root = kvc_read_json_file(path);
    if (!root) {
        snprintf(error, size, "%s: cannot be read as JSON (give the files kvcmp fuzz --json wrote)", path);
        return -1;
    }
    int rc = -1;
    const char *format = string_of(root, "format");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(root, "seed"), *signatures = cJSON_GetObjectItemCaseSensitive(root, "signatures");
    const char *candidate = string_of(root, "candidate"), *policy = string_of(root, "policy");
    char seed_text[32] = "";
    if (cJSON_IsNumber(seed)) snprintf(seed_text, sizeof seed_text, "%.0f", seed->valuedouble);
    if (!cJSON_IsObject(root) || !format || strcmp(format, SUMMARY_FORMAT) != 0) {
        snprintf(error, size, "%s: not a kvcmp fuzz summary (\"format\" is %s%s%s, expected \"" SUMMARY_FORMAT "\": the file kvcmp fuzz --json writes)",
                 path, format ? "\"" : "", format ? format : "missing", format ? "\"" : "");
        goto done;
    }
    if (!seed_text[0] || !candidate || !policy || !cJSON_IsArray(signatures)) {
        snprintf(error, size, "%s: a kvcmp fuzz summary without %s", path,
                 !seed_text[0] ? "\"seed\"" : !candidate ? "\"candidate\"" : !policy ? "\"policy\"" : "a \"signatures\" array");
        goto done;
    }
    /* The shards this file covers: its "shards" (a merged summary) or its "shard". */
    int indices[256], num = 0, count = 0;
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(root, "shards"), *one;
    if (cJSON_IsArray(shards)) {
        cJSON_ArrayForEach(one, shards) {
            int index, n;
            if (!cJSON_IsString(one) || parse_shard(one->valuestring, &index, &n) || (count && n != count) || num == 256) {
                snprintf(error, size, "%s: \"shards\" must list \"I/N\" strings of one N", path);
                goto done;
            }
            count = n;
            indices[num++] = index;
        }
    } else if (parse_shard(string_of(root, "shard"), &indices[0], &count) == 0) {
        num = 1;
    } else {
        snprintf(error, size, "%s: \"shard\" must be \"I/N\" (found %s)", path, string_of(root, "shard") ? string_of(root, "shard") : "nothing");
        goto done;
    }
    const char *stage = option_of(root, "stage"), *family = option_of(root, "family");
    if (first) {
        snprintf(m->seed_text, sizeof m->seed_text, "%s", seed_text);
        snprintf(m->candidate, sizeof m->candidate, "%s", candidate);
        snprintf(m->policy, sizeof m->policy, "%s", policy);
        snprintf(m->stage, sizeof m->stage, "%s", stage);
        snprintf(m->family, sizeof m->family, "%s", family);
        m->shard_count = count;
    } else {
        /* Shards of one campaign: one seed, candidate, policy, case selection and split. */
        const char *what = NULL, *mine = NULL, *theirs = NULL;
        char mine_count[16], theirs_count[16];
        snprintf(mine_count, sizeof mine_count, "%d", m->shard_count);
        snprintf(theirs_count, sizeof theirs_count, "%d", count);
        if (strcmp(seed_text, m->seed_text) != 0) what = "seed", mine = m->seed_text, theirs = seed_text;
        else if (strcmp(candidate, m->candidate) != 0) what = "candidate", mine = m->candidate, theirs = candidate;
        else if (strcmp(policy, m->policy) != 0) what = "policy", mine = m->policy, theirs = policy;
        else if (strcmp(stage, m->stage) != 0) what = "--stage", mine = m->stage, theirs = stage;
        else if (strcmp(family, m->family) != 0) what = "--family", mine = m->family, theirs = family;
        else if (count != m->shard_count) what = "shard count N of --shard I/N", mine = mine_count, theirs = theirs_count;
        if (what) {
            snprintf(error, size, "%s: %s %s differs from the first summary's %s: only shards of one campaign merge", path, what,
                     theirs[0] ? theirs : "(none)", mine[0] ? mine : "(none)");
            goto done;
        }
    }
    for (int i = 0; i < num; i++) {
        for (int k = 0; k < m->num_shards; k++)
            if (m->shards[k] == indices[i]) {
                snprintf(error, size, "%s: shard %d/%d is already in an earlier summary (each shard once)", path, indices[i], count);
                goto done;
            }
        if (m->num_shards < 256) m->shards[m->num_shards++] = indices[i];
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, signatures)
        if (add_signature(m, item, path, error, size)) goto done;
    m->cases += number_of(root, "cases", 0);
    m->failures += number_of(root, "failures", 0);
    m->skipped += number_of(root, "skipped", 0);
    m->workers_lost += number_of(root, "workers_lost", 0);
    m->seconds += number_of(root, "seconds", 0);
    m->interrupted |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted"));
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "per_variant")) {
        variant_row *v = variant_for(m, item->string);
        if (!v) { snprintf(error, size, "out of memory"); goto done; }
        v->t.cases += (int64_t)number_of(item, "cases", 0);
        v->t.invalid += (int64_t)number_of(item, "invalid", 0);
        v->t.skipped += (int64_t)number_of(item, "skipped", 0);
        v->t.failures += (int64_t)number_of(item, "failures", 0);
    }
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "failure_list"))
        cJSON_AddItemToArray(m->failure_list, cJSON_Duplicate(item, 1));
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

static int compare_entries(const void *a, const void *b) {
    const kvc_signature_entry *x = a, *y = b;
    if (x->first_case != y->first_case) return x->first_case < y->first_case ? -1 : 1;
    return strcmp(x->signature.key, y->signature.key);
}

static int compare_ints(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void shards_text(const merged *m, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < m->num_shards && n < size; i++) {
        int w = snprintf(out + n, size - n, "%s%d/%d", i ? ", " : "", m->shards[i], m->shard_count);
        if (w < 0) return;
        n += (size_t)w;
    }
}

static cJSON *options_json(const merged *m, char **paths, int num_paths) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "candidate", m->candidate);
    cJSON_AddStringToObject(o, "policy", m->policy);
    if (m->stage[0]) cJSON_AddStringToObject(o, "stage", m->stage);
    if (m->family[0]) cJSON_AddStringToObject(o, "family", m->family);
    cJSON *list = cJSON_AddArrayToObject(o, "merged");
    for (int i = 0; i < num_paths; i++) cJSON_AddItemToArray(list, cJSON_CreateString(paths[i]));
    return o;
}

static cJSON *merged_json(const merged *m, char **paths, int num_paths) {
    cJSON *root = cJSON_CreateObject();
    double seed = strtod(m->seed_text, NULL);
    cJSON_AddStringToObject(root, "format", SUMMARY_FORMAT);
    cJSON_AddItemToObject(root, "run", kvc_run_info((uint64_t)strtoull(m->seed_text, NULL, 10), 1, options_json(m, paths, num_paths)));
    cJSON_AddNumberToObject(root, "seed", seed);
    cJSON_AddStringToObject(root, "candidate", m->candidate);
    cJSON_AddStringToObject(root, "policy", m->policy);
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
 * per variant without failures (skipped when the candidate lacks it). */
static int write_junit(const merged *m, const char *path, char **paths, int num_paths) {
    kvc_junit *j = kvc_junit_new("kvcmp fuzz");
    if (!j) return -1;
    cJSON *info = kvc_run_info((uint64_t)strtoull(m->seed_text, NULL, 10), 1, options_json(m, paths, num_paths));
    kvc_junit_properties(j, info);
    cJSON_Delete(info);
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
            fprintf(stderr, "kvcmp merge: %s\n", error);
            rc = 2;
        }
    if (rc == 0) {
        kvc_signature_list_compact(&m.list);
        qsort(m.list.entries, (size_t)m.list.count, sizeof *m.list.entries, compare_entries);
        for (int i = 0; i < m.list.count; i++) m.list.entries[i].group = i;   /* each listed where it now is */
        qsort(m.shards, (size_t)m.num_shards, sizeof *m.shards, compare_ints);
        char shards[600];
        shards_text(&m, shards, sizeof shards);
        printf("merge: %d summar%s (shards %s), seed %s, candidate %s, policy %s: %.0f cases, %.0f failure%s\n", num_paths,
               num_paths == 1 ? "y" : "ies", shards, m.seed_text, m.candidate, m.policy, m.cases, m.failures, m.failures == 1 ? "" : "s");
        if (m.num_shards < m.shard_count)
            printf("merge: %d of %d shards: the campaign is incomplete (the shards missing were not merged)\n", m.num_shards,
                   m.shard_count);
        if (m.interrupted) printf("merge: at least one shard was INTERRUPTED: its cases are all that ran\n");
        kvc_signature_list_print(stdout, &m.list);
        if (m.list.count)
            printf("merge: %d distinct failure%s, each listed above with the command that regenerates its first case and the one "
                   "that replays its smallest saved case\n", m.list.count, m.list.count == 1 ? "" : "s");
        if (json_path && kvc_write_json_file(json_path, merged_json(&m, paths, num_paths), error, sizeof error)) {
            fprintf(stderr, "kvcmp merge: %s\n", error);
            rc = 3;
        }
        if (junit_path && write_junit(&m, junit_path, paths, num_paths)) rc = 3;
        if (rc == 0 && (m.failures > 0 || m.list.count)) rc = 1;
    }
    kvc_signature_list_free(&m.list);
    free(m.variants);
    cJSON_Delete(m.failure_list);
    return rc;
}

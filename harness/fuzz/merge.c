/* kvcmp merge: the JSON summaries of one campaign's --shard I/N runs
 * (format "kvcmp-fuzz-summary/1", written by kvcmp fuzz --json) as one
 * signature list, printed like the fuzz summary and written as JSON (a
 * summary of the same format, which merges again) and JUnit.
 *
 * Case i of a campaign depends only on the seed and i, so shards of one
 * campaign (the "campaign" object of each summary: seed, cases, shard
 * count, candidate, policy, every option that changes what is drawn, the
 * kvcmp version) are parts of one campaign: per signature the counts add
 * up, the first case is the one of the lowest index, and the smallest
 * saved case is the one with the fewest tokens (the lowest index on a
 * tie).
 *
 * A merge proves completeness or fails: summaries of other campaigns, one
 * shard twice, counts that are not whole non-negative numbers or do not
 * add up (an edited file) are refused (exit status 2, nothing written);
 * a missing shard, or a shard whose run gave no verdict (interrupted,
 * an output not written, no case compared) leaves the merged campaign
 * without a verdict (exit status 4, said in the summary, the JSON and a
 * failed JUnit testcase) unless failures were found (exit status 1). */
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

const char *string_of(const cJSON *object, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

double number_of(const cJSON *object, const char *key, double otherwise) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    return cJSON_IsNumber(item) ? item->valuedouble : otherwise;
}

/* A whole number in [low, MAX_COUNT] at object.key into *out; else -1
 * with the field named in error. */
static int whole_number(const cJSON *object, const char *key, double low, const char *path, const char *where, double *out, char *error,
                        size_t size) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
    double v = cJSON_IsNumber(item) ? item->valuedouble : -1;
    if (!cJSON_IsNumber(item) || !(v >= low) || v > MAX_COUNT || v != (double)(int64_t)v) {
        snprintf(error, size, "%s: %s\"%s\" must be a whole number of at least %.0f, found %s: not a summary kvcmp fuzz wrote (give the "
                 "file itself, unedited)", path, where, key, low, !item ? "nothing" : cJSON_IsNumber(item) ? "another number" : "another type");
        return -1;
    }
    *out = v;
    return 0;
}

/* "I/N" into index and count; -1 when it is not that. */
static int parse_shard(const char *text, int *index, int *count) {
    char tail;
    if (!text || sscanf(text, "%d/%d%c", index, count, &tail) != 2 || *count < 1 || *index < 0 || *index >= *count) return -1;
    return 0;
}

/* The cases shard `index` of `count` runs in a campaign of `total` cases. */
static double shard_cases(double total, int index, int count) {
    return total > index ? (double)(((int64_t)total - index + count - 1) / count) : 0;
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

/* One summary's signature entry into the merged list; *count gets its count. */
static int add_signature(merged *m, const cJSON *item, const char *path, double *count, char *error, size_t size) {
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    const char *key = string_of(item, "signature");
    double first_case, minimal_case = -1, tokens = 0;
    if (!cJSON_IsObject(item) || !key) {
        snprintf(error, size, "%s: a \"signatures\" entry lacks its \"signature\" string: not a summary kvcmp fuzz wrote (give the file "
                 "itself, unedited)", path);
        return -1;
    }
    if (whole_number(item, "count", 1, path, "a signature's ", count, error, size) ||
        whole_number(item, "first_case", 0, path, "a signature's ", &first_case, error, size))
        return -1;
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(item, "minimal_case")) && cJSON_GetObjectItemCaseSensitive(item, "minimal_case") &&
        (whole_number(item, "minimal_case", 0, path, "a signature's ", &minimal_case, error, size) ||
         whole_number(item, "minimal_tokens", 0, path, "a signature's ", &tokens, error, size)))
        return -1;
    /* Matched by byte class: a signature explained in one shard and not
     * in another is one entry, whose explanation must hold in both. */
    const char *byte_class = string_of(item, "byte_class");
    snprintf(s.key, sizeof s.key, "%s", byte_class && byte_class[0] ? byte_class : key);
    snprintf(s.stage, sizeof s.stage, "%s", string_of(item, "stage") ? string_of(item, "stage") : "");
    snprintf(s.check, sizeof s.check, "%s", string_of(item, "check") ? string_of(item, "check") : "");
    snprintf(s.regions, sizeof s.regions, "%s", string_of(item, "regions") ? string_of(item, "regions") : "");
    snprintf(s.cause, sizeof s.cause, "%s", string_of(item, "cause") ? string_of(item, "cause") : "");
    kvc_signature_entry *e = kvc_signature_list_get(&m->list, &s, (int64_t)first_case);
    if (!e) { snprintf(error, size, "out of memory"); return -1; }
    e->count += (int64_t)*count;
    const char *first_repro = string_of(item, "first_repro");
    if ((int64_t)first_case < e->first_case || !e->first_repro[0]) {
        /* The regions are those the first case showed. */
        snprintf(e->signature.regions, sizeof e->signature.regions, "%s", s.regions);
        e->first_case = (int64_t)first_case;
        snprintf(e->first_repro, sizeof e->first_repro, "%s", first_repro ? first_repro : "");
    }
    if (minimal_case >= 0) {
        int64_t index = (int64_t)minimal_case;
        /* Fewest tokens wins; on a tie, the lowest case index. */
        if (e->minimal_case < 0 || (int64_t)tokens < e->minimal_tokens || ((int64_t)tokens == e->minimal_tokens && index < e->minimal_case)) {
            e->minimal_case = -1;
            kvc_signature_list_saved(e, index, (int64_t)tokens, string_of(item, "minimal_saved") ? string_of(item, "minimal_saved") : "",
                                     string_of(item, "minimal_repro") ? string_of(item, "minimal_repro") : "");
        }
    }
    /* The shards' diagnoses with their proofs (explanation_proof): a name
     * refuted in one shard, or an explanation that did not hold on every
     * case a shard checked, explains nothing in the merge; entries that
     * share a deviation are one signature here too. */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "diagnosed"))) {
        kvc_fuzz_signature diagnosis = {.diagnosed = 1};
        const cJSON *name, *proof = cJSON_GetObjectItemCaseSensitive(item, "explanation_proof");
        size_t n = 0;
        cJSON_ArrayForEach(name, cJSON_GetObjectItemCaseSensitive(item, "explained_by"))
            if (cJSON_IsString(name) && n < sizeof diagnosis.explained_by)
                n += (size_t)snprintf(diagnosis.explained_by + n, sizeof diagnosis.explained_by - n, "%s%s", n ? "," : "", name->valuestring);
        n = 0;
        cJSON_ArrayForEach(name, cJSON_GetObjectItemCaseSensitive(proof, "refuted"))
            if (cJSON_IsString(name) && n < sizeof diagnosis.refuted)
                n += (size_t)snprintf(diagnosis.refuted + n, sizeof diagnosis.refuted - n, "%s%s", n ? "," : "", name->valuestring);
        double failing = 0, passing = 0, checked = 0, held = 0, not_diagnosed = 0;
        if (cJSON_IsObject(proof) &&
            (whole_number(proof, "failing_cases_checked", 0, path, "a signature's explanation_proof ", &failing, error, size) ||
             whole_number(proof, "passing_cases_checked", 0, path, "a signature's explanation_proof ", &passing, error, size) ||
             whole_number(proof, "cases_checked", 0, path, "a signature's explanation_proof ", &checked, error, size) ||
             whole_number(proof, "cases_held", 0, path, "a signature's explanation_proof ", &held, error, size) ||
             whole_number(proof, "failures_not_diagnosed", 0, path, "a signature's explanation_proof ", &not_diagnosed, error, size)))
            return -1;
        if (checked != failing + passing || held > checked) {
            snprintf(error, size, "%s: a signature's explanation_proof counts disagree (checked %.0f, failing %.0f + passing %.0f, held %.0f): "
                     "not a summary kvcmp fuzz wrote (give the file itself, unedited)", path, checked, failing, passing, held);
            return -1;
        }
        /* An explanation the shard kept holds on every case it checked. */
        if (diagnosis.explained_by[0] && held < checked) {
            n = strlen(diagnosis.refuted);
            snprintf(diagnosis.refuted + n, sizeof diagnosis.refuted - n, "%s%s", n ? "," : "", diagnosis.explained_by);
            diagnosis.explained_by[0] = 0;
        }
        diagnosis.proof_cases = (int)failing;
        kvc_signature_list_add_proof(&m->list, s.key, &diagnosis, (int64_t)passing, (int64_t)held, (int64_t)not_diagnosed);
    }
    return 0;
}

/* The identity fields of the "campaign" object, with the option each
 * comes from: shards merge only when every one of them agrees. */
static const struct {
    const char *key, *option;
} identity_fields[] = {
    {"seed", "--seed"}, {"cases", "--cases"}, {"seconds", "--seconds"}, {"shard_count", "shard count N of --shard I/N"},
    {"candidate", "--candidate"}, {"policy", "--policy"}, {"stage", "--stage"}, {"family", "--family"}, {"threads", "--threads"},
    {"invalid_per_mille", "--invalid-rate"}, {"metamorphic_per_mille", "--metamorphic-rate"}, {"geometry_pool", "--geometry-pool"},
    {"kvcmp_version", "kvcmp version"},
};

static void value_text(const cJSON *item, char *out, size_t size) {
    if (cJSON_IsString(item)) snprintf(out, size, "%.300s", item->valuestring[0] ? item->valuestring : "(none)");
    else if (cJSON_IsNumber(item)) snprintf(out, size, "%.17g", item->valuedouble);
    else snprintf(out, size, "(none)");
}

/* Why two identities are not one campaign's, or NULL. */
static const char *identity_differs(const cJSON *mine, const cJSON *theirs, const char *path, char *error, size_t size) {
    for (size_t i = 0; i < sizeof identity_fields / sizeof *identity_fields; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(mine, identity_fields[i].key);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(theirs, identity_fields[i].key);
        if (!a && !b) continue;
        if (a && b && cJSON_Compare(a, b, 1)) continue;
        char first[320], here[320];
        value_text(a, first, sizeof first);
        value_text(b, here, sizeof here);
        snprintf(error, size, "%s: %s %s differs from the first summary's %s: only shards of one campaign merge (merge the summaries of "
                 "one campaign, or rerun this shard with the campaign's options)", path, identity_fields[i].option, here, first);
        return error;
    }
    return NULL;
}

/* The campaign object of a summary, checked: -1 with why in error. */
static int check_identity(const cJSON *campaign, const char *path, int *shard_index, int *shard_count, char *error, size_t size) {
    const char *seed = string_of(campaign, "seed");
    double index = -1, count;
    if (!cJSON_IsObject(campaign)) {
        snprintf(error, size, "%s: no \"campaign\" object (seed, cases, shard, options, kvcmp version): written by an older kvcmp or edited; "
                 "rerun the shard with this kvcmp", path);
        return -1;
    }
    if (!seed || !seed[0] || strspn(seed, "0123456789") != strlen(seed)) {
        snprintf(error, size, "%s: the campaign's \"seed\" must be a decimal string: not a summary kvcmp fuzz wrote (give the file itself, "
                 "unedited)", path);
        return -1;
    }
    if (cJSON_GetObjectItemCaseSensitive(campaign, "only")) {
        snprintf(error, size, "%s: the summary of a single case (--only), not of a shard: merge the summaries of --shard I/N runs", path);
        return -1;
    }
    double amount;
    if (cJSON_GetObjectItemCaseSensitive(campaign, "cases") ? whole_number(campaign, "cases", 0, path, "the campaign's ", &amount, error, size)
                                                            : !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(campaign, "seconds"))) {
        if (!cJSON_GetObjectItemCaseSensitive(campaign, "cases"))
            snprintf(error, size, "%s: the campaign has neither \"cases\" nor \"seconds\": not a summary kvcmp fuzz wrote (give the file "
                     "itself, unedited)", path);
        return -1;
    }
    if (whole_number(campaign, "shard_count", 1, path, "the campaign's ", &count, error, size)) return -1;
    if (count > 1 << 30) {
        snprintf(error, size, "%s: the campaign's \"shard_count\" %.0f is out of range (at most 2^30)", path, count);
        return -1;
    }
    if (cJSON_GetObjectItemCaseSensitive(campaign, "shard_index") &&
        (whole_number(campaign, "shard_index", 0, path, "the campaign's ", &index, error, size) || index >= count)) {
        if (index >= count) snprintf(error, size, "%s: the campaign's \"shard_index\" %.0f is not below its shard count %.0f", path, index, count);
        return -1;
    }
    *shard_index = (int)index;
    *shard_count = (int)count;
    return 0;
}

/* A shard whose run is no evidence: noted (the merge then gives no
 * verdict), not refused. */
void add_problem(merged *m, const char *format, ...) {
    if (m->num_problems < MAX_PROBLEMS_LISTED) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(m->problems[m->num_problems], sizeof m->problems[m->num_problems], format, ap);
        va_end(ap);
    }
    m->num_problems++;
}

/* The run behind a summary: its exit status and verdict must agree with
 * each other and with its counts (else the file was edited: -1); a run
 * that is no evidence (interrupted, an output not written, no verdict) is
 * a problem of the merge. */
static int check_run(merged *m, const cJSON *root, const char *path, const char *shards, double failures, char *error, size_t size) {
    double status;
    if (whole_number(root, "exit_status", 0, path, "", &status, error, size)) return -1;
    const char *verdict = string_of(root, "verdict"), *no_verdict = string_of(root, "no_verdict"), *unaccounted = string_of(root, "unaccounted");
    int interrupted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted"));
    const char *expected = status == 0 ? "pass" : status == 1 ? "fail" : status == 3 ? "write-failed" : status == 4 ? "no-verdict"
                           : status > 128 ? "interrupted" : "error";
    int consistent = verdict && strcmp(verdict, expected) == 0 && (status > 128) == (interrupted != 0) &&
                     (status != 0 || (failures == 0 && !unaccounted && !no_verdict)) && (status != 1 || failures > 0 || unaccounted) &&
                     (status != 4 || (no_verdict && failures == 0 && !unaccounted));
    if (!consistent) {
        snprintf(error, size, "%s: its \"exit_status\" %.0f, \"verdict\" %s and counts disagree: not a summary kvcmp fuzz wrote (give the "
                 "file itself, unedited)", path, status, verdict ? verdict : "(absent)");
        return -1;
    }
    if (unaccounted && !m->broken[0]) snprintf(m->broken, sizeof m->broken, "%.60s (%.200s): %.400s", shards, path, unaccounted);
    m->interrupted |= interrupted;
    if (interrupted)
        add_problem(m, "%s (%.400s) was interrupted (exit status %.0f): its cases are not all there; rerun the shard", shards, path, status);
    else if (status == 3)
        add_problem(m, "%s (%.400s) could not write a case, its summary or its JUnit (exit status 3); rerun the shard where it can write",
                    shards, path);
    else if (no_verdict)
        add_problem(m, "%s (%.400s) gave no verdict: %.500s", shards, path, no_verdict);
    else if (status != 0 && status != 1)
        add_problem(m, "%s (%.400s) failed to run (exit status %.0f); rerun the shard", shards, path, status);
    return 0;
}

/* Reads one summary into m: 0, or -1 with why in error. */
int add_summary(merged *m, const char *path, int first, char *error, size_t size) {
    cJSON *root = kvc_read_json_file_checked(path, MAX_SUMMARY_BYTES, error, size);
    if (!root) return -1;
    int rc = -1;
    const char *format = string_of(root, "format");
    const cJSON *signatures = cJSON_GetObjectItemCaseSensitive(root, "signatures");
    const cJSON *campaign = cJSON_GetObjectItemCaseSensitive(root, "campaign");
    if (!cJSON_IsObject(root) || !format || strcmp(format, SUMMARY_FORMAT) != 0) {
        snprintf(error, size, "%s: not a kvcmp fuzz summary (\"format\" is %s%s%s, expected \"" SUMMARY_FORMAT "\": the file kvcmp fuzz --json writes)",
                 path, format ? "\"" : "", format ? format : "missing", format ? "\"" : "");
        goto done;
    }
    if (!cJSON_IsArray(signatures)) {
        snprintf(error, size, "%s: a kvcmp fuzz summary without a \"signatures\" array (give the file itself, unedited)", path);
        goto done;
    }
    int shard_index, count;
    if (check_identity(campaign, path, &shard_index, &count, error, size)) goto done;
    /* The shards this file covers: its "shards" (a merged summary) or its campaign's shard_index. */
    int *indices = NULL, num = 0;
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(root, "shards"), *one;
    if (cJSON_IsArray(shards)) {
        indices = calloc((size_t)cJSON_GetArraySize(shards) + 1, sizeof *indices);
        if (!indices) { snprintf(error, size, "out of memory"); goto done; }
        cJSON_ArrayForEach(one, shards) {
            int index, n;
            if (!cJSON_IsString(one) || parse_shard(one->valuestring, &index, &n) || n != count) {
                snprintf(error, size, "%s: \"shards\" must list \"I/N\" strings of the campaign's shard count %d", path, count);
                free(indices);
                goto done;
            }
            indices[num++] = index;
        }
    } else if (shard_index >= 0) {
        indices = calloc(1, sizeof *indices);
        if (!indices) { snprintf(error, size, "out of memory"); goto done; }
        indices[num++] = shard_index;
    } else {
        snprintf(error, size, "%s: the campaign names no \"shard_index\" and the summary lists no \"shards\"", path);
        goto done;
    }
    /* The top-level fields repeat the identity: an edit of one shows. */
    char shard_text[32];
    snprintf(shard_text, sizeof shard_text, "%d/%d", shard_index, count);
    const char *top_shard = string_of(root, "shard"), *top_candidate = string_of(root, "candidate"), *top_policy = string_of(root, "policy");
    const char *edited = !top_candidate || !string_of(campaign, "candidate") || strcmp(top_candidate, string_of(campaign, "candidate")) ? "candidate"
                         : !top_policy || !string_of(campaign, "policy") || strcmp(top_policy, string_of(campaign, "policy")) ? "policy"
                         : number_of(root, "seed", -1) != strtod(string_of(campaign, "seed"), NULL) ? "seed"
                         : shard_index >= 0 && (!top_shard || strcmp(top_shard, shard_text)) ? "shard" : NULL;
    if (edited) {
        snprintf(error, size, "%s: its \"%s\" disagrees with its \"campaign\" object: not a summary kvcmp fuzz wrote (give the file itself, "
                 "unedited)", path, edited);
        free(indices);
        goto done;
    }
    if (first) {
        m->campaign = cJSON_Duplicate(campaign, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(m->campaign, "shard_index");
        m->shard_count = count;
        m->cases_campaign = cJSON_GetObjectItemCaseSensitive(campaign, "cases") != NULL;
    } else if (identity_differs(m->campaign, campaign, path, error, size)) {
        free(indices);
        goto done;
    }
    char covered[120];
    snprintf(covered, sizeof covered, num == 1 ? "shard %d/%d" : "shards %d/%d...", indices[0], count);
    for (int i = 0; i < num; i++) {
        for (int k = 0; k < m->num_shards; k++)
            if (m->shards[k] == indices[i]) {
                snprintf(error, size, "%s: shard %d/%d is already in an earlier summary (give each shard once)", path, indices[i], count);
                free(indices);
                goto done;
            }
        if (m->num_shards == m->shard_capacity) {
            int capacity = m->shard_capacity ? 2 * m->shard_capacity : 64;
            int *grown = realloc(m->shards, (size_t)capacity * sizeof *grown);
            if (!grown) { snprintf(error, size, "out of memory"); free(indices); goto done; }
            m->shards = grown;
            m->shard_capacity = capacity;
        }
        m->shards[m->num_shards++] = indices[i];
    }
    /* The counts: whole, non-negative, and adding up. */
    double cases, failures, skipped, compared, lost, counted = 0;
    if (whole_number(root, "cases", 0, path, "", &cases, error, size) || whole_number(root, "failures", 0, path, "", &failures, error, size) ||
        whole_number(root, "skipped", 0, path, "", &skipped, error, size) || whole_number(root, "compared", 0, path, "", &compared, error, size) ||
        whole_number(root, "workers_lost", 0, path, "", &lost, error, size)) {
        free(indices);
        goto done;
    }
    const char *stopped = string_of(root, "stopped_by");
    double expected = 0;
    if (m->cases_campaign)
        for (int i = 0; i < num; i++) expected += shard_cases(number_of(campaign, "cases", 0), indices[i], count);
    free(indices);
    const char *wrong = skipped > cases ? "\"skipped\" exceeds \"cases\"" : failures > cases - skipped ? "\"failures\" exceed the cases compared"
                        : compared != cases - skipped ? "\"compared\" is not \"cases\" - \"skipped\""
                        : !stopped ? "\"stopped_by\" is missing"
                        : m->cases_campaign && strcmp(stopped, "cases") == 0 && cases != expected ? "\"cases\" differs from the cases of its shards"
                        : m->cases_campaign && cases > expected ? "\"cases\" exceeds the cases of its shards" : NULL;
    if (wrong) {
        snprintf(error, size, "%s: %s: not a summary kvcmp fuzz wrote (give the file itself, unedited)", path, wrong);
        goto done;
    }
    if (check_run(m, root, path, covered, failures, error, size)) goto done;
    if (strcmp(stopped, "max-failures") == 0) m->max_failures_reached = 1;
    const cJSON *item;
    cJSON_ArrayForEach(item, signatures) {
        double n;
        if (add_signature(m, item, path, &n, error, size)) goto done;
        counted += n;
    }
    if (counted != failures) {
        snprintf(error, size, "%s: its signatures count %.0f failures, its \"failures\" %.0f: not a summary kvcmp fuzz wrote (give the file "
                 "itself, unedited)", path, counted, failures);
        goto done;
    }
    double variant_cases = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "per_variant")) {
        double t[4];
        const char *keys[] = {"cases", "invalid", "skipped", "failures"};
        for (int k = 0; k < 4; k++)
            if (whole_number(item, keys[k], 0, path, "a variant's ", &t[k], error, size)) goto done;
        variant_row *v = item->string ? variant_for(m, item->string) : NULL;
        if (!v) { snprintf(error, size, "%s: a \"per_variant\" entry without a name, or out of memory", path); goto done; }
        v->t.cases += (int64_t)t[0];
        v->t.invalid += (int64_t)t[1];
        v->t.skipped += (int64_t)t[2];
        v->t.failures += (int64_t)t[3];
        variant_cases += t[0];
    }
    if (variant_cases != cases) {
        snprintf(error, size, "%s: its \"per_variant\" cases add up to %.0f, its \"cases\" is %.0f: not a summary kvcmp fuzz wrote (give the "
                 "file itself, unedited)", path, variant_cases, cases);
        goto done;
    }
    m->cases += cases;
    m->failures += failures;
    m->skipped += skipped;
    m->workers_lost += lost;
    m->expected_cases += expected;
    double seconds = number_of(root, "seconds", 0);
    m->seconds += seconds > 0 && seconds < 1e12 ? seconds : 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "failure_list"))
        cJSON_AddItemToArray(m->failure_list, cJSON_Duplicate(item, 1));
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

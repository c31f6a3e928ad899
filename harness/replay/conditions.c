/* Replay conditions from case.json: see conditions.h. */
#include "harness/replay/conditions.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/permute.h"
#include "harness/fuzz/run.h"
#include "kvcmp/validate.h"

static int bad(char *error, size_t size, const char *what) {
    snprintf(error, size, "case.json meta.replay: %s", what);
    return -1;
}

static int read_threads(const cJSON *threads, kvc_replay_conditions *k, char *error, size_t size) {
    if (!cJSON_IsArray(threads)) return bad(error, size, "\"threads\" must be an array of thread counts, e.g. [1, 3]");
    const cJSON *item;
    cJSON_ArrayForEach(item, threads) {
        if (!cJSON_IsNumber(item) || item->valuedouble < 1 || item->valuedouble > 256 || k->num_threads == KVC_REPLAY_MAX_THREADS)
            return bad(error, size, "\"threads\" holds 1 to 4 counts, each 1..256");
        k->threads[k->num_threads++] = item->valueint;
    }
    return 0;
}

int kvc_replay_conditions_read(const kvc_case *c, kvc_replay_conditions *k, char *error, size_t size) {
    memset(k, 0, sizeof *k);
    k->page_padding = k->canary = -1;
    cJSON *meta = c->meta_json ? cJSON_Parse(c->meta_json) : NULL;
    const cJSON *replay = cJSON_GetObjectItemCaseSensitive(meta, "replay");
    int rc = 0;
    if (replay) {
        k->present = 1;
        const cJSON *padding = cJSON_GetObjectItemCaseSensitive(replay, "page_padding");
        const cJSON *canary = cJSON_GetObjectItemCaseSensitive(replay, "canary");
        const cJSON *threads = cJSON_GetObjectItemCaseSensitive(replay, "threads");
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(replay, "permutation_seed");
        const cJSON *alias = cJSON_GetObjectItemCaseSensitive(replay, "alias_seed");
        const cJSON *rule = cJSON_GetObjectItemCaseSensitive(replay, "team_rule");
        const char *rule_name = cJSON_GetStringValue(rule);
        const cJSON *policy = cJSON_GetObjectItemCaseSensitive(replay, "omp_wait_policy");
        const char *policy_name = cJSON_GetStringValue(policy);
        if (!cJSON_IsObject(replay)) rc = bad(error, size, "must be an object");
        else if (padding && (!cJSON_IsNumber(padding) || padding->valuedouble < 0 || (int64_t)padding->valuedouble % 4))
            rc = bad(error, size, "\"page_padding\" must be a non-negative multiple of 4 (SPEC.md 8: fp32 caches need 4-byte aligned page strides)");
        else if (canary && (!cJSON_IsNumber(canary) || canary->valuedouble < 0 || canary->valuedouble > 255))
            rc = bad(error, size, "\"canary\" must be a byte value 0..255");
        else if (seed && (!cJSON_IsString(seed) || sscanf(seed->valuestring, "%lli", (long long *)&k->permutation_seed) != 1))
            rc = bad(error, size, "\"permutation_seed\" must be a string holding a number, e.g. \"0x1f\"");
        else if (alias && (!cJSON_IsString(alias) || sscanf(alias->valuestring, "%lli", (long long *)&k->alias_seed) != 1 || !k->alias_seed))
            rc = bad(error, size, "\"alias_seed\" must be a string holding a non-zero number, e.g. \"0x1f\"");
        else if (rule && (!rule_name || (strcmp(rule_name, "spinning") != 0 && strcmp(rule_name, "sleeping") != 0)))
            rc = bad(error, size, "\"team_rule\" must be \"spinning\" or \"sleeping\"");
        else if (policy && (!policy_name || (strcmp(policy_name, "active") != 0 && strcmp(policy_name, "passive") != 0 &&
                                             strcmp(policy_name, "default") != 0)))
            rc = bad(error, size, "\"omp_wait_policy\" must be \"active\", \"passive\" or \"default\"");
        else if (threads) rc = read_threads(threads, k, error, size);
        if (rc == 0) {
            if (padding) k->page_padding = (int64_t)padding->valuedouble;
            if (canary) k->canary = canary->valueint;
            k->permuted = seed != NULL;
            k->aliased = alias != NULL;
            if (rule_name) k->team_rule = strcmp(rule_name, "spinning") == 0 ? 1 : 2;
            if (policy_name) snprintf(k->wait_policy, sizeof k->wait_policy, "%s", policy_name);
        }
    }
    cJSON_Delete(meta);
    return rc;
}

/* One more run: compared with the expected outputs and with the first run. */
static int check_run(const kvc_case *c, const kvc_run_result *r, const kvc_run_result *first, kvc_policy policy, const char *label,
                     char *detail, size_t size) {
    if (r->status != first->status) {
        snprintf(detail, size, "%s: the stage returned %s (%s), the first run %s", label, kvc_status_name(r->status), r->error.message,
                 kvc_status_name(first->status));
        return 1;
    }
    if (r->padding_touched) { snprintf(detail, size, "%s: %s", label, r->padding_message); return 1; }
    kvc_compare_report report;
    char summary[600];
    kvc_compare_outputs(c, r, policy, &report);
    if (!kvc_report_failed(&report)) kvc_compare_results(c, first, r, KVC_POLICY_EXACT, &report);
    if (!kvc_report_failed(&report)) return 0;
    kvc_report_summary(&report, summary, sizeof summary);
    snprintf(detail, size, "%s: %.500s; first: %.300s", label, summary, report.has_first ? report.first : "-");
    return 1;
}

int kvc_replay_check_conditions(const kvc_backend *backend, const kvc_case *c, const kvc_run_options *run,
                                const kvc_replay_conditions *k, const kvc_run_result *first, kvc_policy policy, char *detail,
                                size_t size) {
    int failed = 0, first_threads = k->num_threads ? k->threads[0] : omp_get_max_threads();
    char label[96];
    for (int i = 1; i < k->num_threads && !failed; i++) {
        kvc_run_result r;
        omp_set_num_threads(k->threads[i]);
        kvc_run_case(backend, c, run, &r);
        snprintf(label, sizeof label, "at %d threads (against %d)", k->threads[i], first_threads);
        failed = check_run(c, &r, first, policy, label, detail, size);
        kvc_run_result_free(&r);
    }
    omp_set_num_threads(first_threads);
    kvc_case permuted;
    if (!failed && k->permuted && kvc_case_copy(&permuted, c) == 0) {
        kvc_page_permutation perm;
        kvc_permute_case_pages(&permuted, k->permutation_seed, &perm);
        kvc_run_result r;
        kvc_run_case(backend, &permuted, run, &r);
        if (r.status == KVC_OK) kvc_unpermute_outputs(&r, &perm);
        failed = check_run(c, &r, first, policy, "with permuted physical pages", detail, size);
        kvc_run_result_free(&r);
        kvc_page_permutation_free(&perm);
        kvc_case_free(&permuted);
    }
    if (!failed && k->aliased && first->status == KVC_OK && kvc_backend_takes_aliased_memory(backend) &&
        kvc_fuzz_check_aliased(backend, c, run, k->alias_seed, detail, size) == 1)
        failed = 1;
    return failed;
}

void kvc_replay_note_unrun_alias(const kvc_case *c, int in_process, char *detail, size_t size) {
    kvc_replay_conditions k;
    char error[256];
    if (in_process || kvc_replay_conditions_read(c, &k, error, sizeof error) || !k.aliased) return;
    size_t n = strlen(detail);
    snprintf(detail + n, size - n, " (case.json's aliased-buffers check did not run: these outputs came from copies of the tensors, "
                                   "which cannot overlap; replay with an in-process --impl to run it)");
}

void kvc_replay_conditions_describe(const kvc_replay_conditions *k, char *out, size_t size) {
    out[0] = 0;
    const char *now = kvc_wait_policy_at_load();
    /* Spinning and sleeping idle threads differ in timing; passive and
     * the default both end up sleeping.  libgomp read this process's
     * policy at load: only a new process can have the recorded one. */
    if (k->present && k->wait_policy[0] && (strcmp(k->wait_policy, "active") == 0) != (strcmp(now, "active") == 0)) {
        int n = snprintf(out, size, " (found under OMP_WAIT_POLICY=%s, replayed under %s: run again with OMP_WAIT_POLICY=%s)",
                         k->wait_policy, now, strcmp(k->wait_policy, "default") == 0 ? "unset" : k->wait_policy);
        if (n < 0 || (size_t)n >= size) return;
        out += n, size -= (size_t)n;
    }
    if (!k->present || (k->num_threads < 2 && !k->permuted && !k->aliased)) return;
    size_t n = (size_t)snprintf(out, size, " (case.json replay:");
    for (int i = 0; i < k->num_threads && n < size; i++) n += (size_t)snprintf(out + n, size - n, "%s%d", i ? "," : " threads ", k->threads[i]);
    if (k->permuted && n < size) n += (size_t)snprintf(out + n, size - n, "%spermuted pages", k->num_threads ? "; " : " ");
    if (k->aliased && n < size) n += (size_t)snprintf(out + n, size - n, "%saliased buffers", k->num_threads || k->permuted ? "; " : " ");
    if (n < size) snprintf(out + n, size - n, ")");
}

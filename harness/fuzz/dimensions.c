/* Campaign coverage per generator dimension: see dimensions.h. */
#include "harness/fuzz/dimensions.h"

#include <string.h>

#include "kvcmp/validate.h"

static const char *const closing_names[KVC_CLOSING_BUCKETS] = {"0", "1", "2-3", "4-7", "8-15", "16+"};
static const char *const position_names[KVC_POSITION_BUCKETS] = {"none", "< 2^8", "< 2^16", "< 2^31", "< 2^32", ">= 2^32"};
static const char *const padding_names[2] = {"64-byte lines", "odd stride"};
static const char *const team_rule_keys[2] = {"spinning", "sleeping"};
static const char *const wait_policy_names[3] = {"passive", "active", "default"};

static int closing_bucket(int64_t n) { return n <= 0 ? 0 : n == 1 ? 1 : n < 4 ? 2 : n < 8 ? 3 : n < 16 ? 4 : 5; }
static int position_bucket(int64_t p) {
    if (p < 0) return 0;
    if (p < 256) return 1;
    if (p < 65536) return 2;
    return p < ((int64_t)1 << 31) ? 3 : p < ((int64_t)1 << 32) ? 4 : 5;
}

/* A V4.1 ring case (a ring, query_start_loc): 1, 2 when a request's
 * chunk is longer than CAP (the ring store wraps: SPEC.md 5.1), 3 when
 * such a chunk holds a padding row among its last CAP rows; else 0. */
static int ring_wrap_of(const kvc_case *c) {
    const kvc_array *qsl = kvc_case_get(c, "query_start_loc"), *ring = kvc_case_get(c, "state_cache"),
                    *slots = kvc_case_get(c, "slot_mapping");
    if (c->compress_ratio != 2 || !qsl || !ring || !slots || ring->ndim != 3 || qsl->dtype != KVC_DT_I4 ||
        slots->dtype != KVC_DT_I8)
        return 0;
    const int32_t *loc = qsl->data;
    const int64_t *slot = slots->data;
    int64_t cap = ring->shape[1];
    int wrap = 1;
    for (int64_t r = 0; r + 1 < qsl->count; r++) {
        int64_t begin = loc[r], end = loc[r + 1];
        if (end - begin <= cap || begin < 0 || end > slots->count) continue;
        if (wrap < 2) wrap = 2;
        for (int64_t t = end - cap; t < end; t++)
            if (slot[t] < 0) wrap = 3;
    }
    return wrap;
}

void kvc_case_coverage_of(const kvc_gen_case *g, kvc_case_coverage *k) {
    memset(k, 0, sizeof *k);
    k->max_position = -1;
    k->dimensions = g->dimensions;
    k->edges = g->edges;
    k->rule = g->rule;
    k->ring_wrap = ring_wrap_of(&g->c);
    kvc_array *positions = kvc_case_get(&g->c, "positions"), *slots = kvc_case_get(&g->c, "slot_mapping");
    int32_t ratio = g->c.compress_ratio > 0 ? g->c.compress_ratio : 1;
    for (int64_t t = 0; positions && slots && t < positions->count && t < slots->count; t++) {
        int64_t p = ((int64_t *)positions->data)[t];
        if (((int64_t *)slots->data)[t] < 0) continue;
        if (p > k->max_position) k->max_position = p;
        k->closing_tokens += p >= 0 && kvc_is_closing(p, ratio);
    }
}

static int64_t *thread_slot(int64_t *counts, int threads) {
    return &counts[threads > KVC_MAX_COUNTED_THREADS ? KVC_MAX_COUNTED_THREADS : threads];
}

void kvc_coverage_add(kvc_coverage_tally *t, const kvc_case_coverage *k) {
    t->cases++;
    if (k->threads > 0) (*thread_slot(t->threads, k->threads))++;
    if (k->other_threads > 0) (*thread_slot(t->other_threads, k->other_threads))++;
    t->closing[closing_bucket(k->closing_tokens)]++;
    t->positions[position_bucket(k->max_position)]++;
    for (int d = 0; d < KVC_DIM_COUNT; d++) t->dimensions[d] += (k->dimensions >> d) & 1u;
    for (int e = 0; e < KVC_EDGE_COUNT; e++) t->edges[e] += (k->edges >> e) & 1u;
    if (k->page_padding > 0) t->padding[k->page_padding % 64 != 0]++;
    t->aliased += k->aliased != 0;
    t->alias_unavailable += k->alias_unavailable != 0;
    if (k->team_rule > 0) t->team_rule[k->team_rule - 1]++;
    if (k->wait_policy > 0 && k->wait_policy <= 3) t->wait_policy[k->wait_policy - 1]++;
    for (int i = 0; i < 3; i++) t->ring_wrap[i] += k->ring_wrap > i;
    if (!k->rule) return;
    int i = 0;
    while (i < t->num_rules && strcmp(t->rules[i].name, k->rule) != 0) i++;
    if (i == t->num_rules) {
        if (t->num_rules == KVC_MAX_RULES) return;
        snprintf(t->rules[t->num_rules++].name, sizeof t->rules[0].name, "%s", k->rule);
    }
    t->rules[i].cases++;
    t->rules[i].rejected += k->rejected != 0;
}

static double share(int64_t part, int64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 0.0; }

static void print_counts(FILE *f, const char *title, const char *const *names, const int64_t *counts, int n, int64_t whole) {
    fprintf(f, "  %-22s", title);
    for (int i = 0; i < n; i++)
        if (counts[i]) fprintf(f, " %s: %lld (%.1f%%)", names[i], (long long)counts[i], share(counts[i], whole));
    fprintf(f, "\n");
}

static void print_threads(FILE *f, const char *title, const int64_t *counts, int64_t whole) {
    fprintf(f, "  %-22s", title);
    int any = 0;
    for (int i = 1; i <= KVC_MAX_COUNTED_THREADS; i++)
        if (counts[i]) { fprintf(f, " %d%s: %lld (%.1f%%)", i, i == KVC_MAX_COUNTED_THREADS ? "+" : "", (long long)counts[i], share(counts[i], whole)); any = 1; }
    fprintf(f, "%s\n", any ? "" : " -");
}

void kvc_coverage_print(FILE *f, const kvc_coverage_tally *t) {
    if (!t->cases) return;
    fprintf(f, "coverage (%lld cases)\n", (long long)t->cases);
    print_threads(f, "candidate threads", t->threads, t->cases);
    print_threads(f, "thread-check threads", t->other_threads, t->cases);
    print_counts(f, "closing tokens/call", closing_names, t->closing, KVC_CLOSING_BUCKETS, t->cases);
    print_counts(f, "largest position", position_names, t->positions, KVC_POSITION_BUCKETS, t->cases);
    print_counts(f, "page padding", padding_names, t->padding, 2, t->cases);
    static const char *const team_rule_names[] = {"spinning (static splits)", "sleeping (dynamic)"};
    print_counts(f, "opt team rule", team_rule_names, t->team_rule, 2, t->cases);
    print_counts(f, "omp wait policy", wait_policy_names, t->wait_policy, 3, t->cases);
    fprintf(f, "  %-22s %lld of %lld V4.1 ring cases (%.1f%%) feed a chunk past CAP, %lld (%.1f%%) with padding in its last CAP rows\n",
            "v4.1 ring wrap", (long long)t->ring_wrap[1], (long long)t->ring_wrap[0], share(t->ring_wrap[1], t->ring_wrap[0]),
            (long long)t->ring_wrap[2], share(t->ring_wrap[2], t->ring_wrap[0]));
    fprintf(f, "  %-22s %lld (%.1f%%): an output placed over another tensor of the call, conflict expected\n", "aliased buffers",
            (long long)t->aliased, share(t->aliased, t->cases));
    if (t->alias_unavailable)
        fprintf(f, "  %-22s skipped in %lld cases: the candidate gets copies of its tensors (a py: candidate's shared memory), "
                   "so no two can overlap\n", "", (long long)t->alias_unavailable);
    fprintf(f, "  %-22s", "dimensions");
    for (int d = 0; d < KVC_DIM_COUNT; d++)
        fprintf(f, " %s: %lld (%.1f%%)", kvc_dimension_name(d), (long long)t->dimensions[d], share(t->dimensions[d], t->cases));
    /* Both sides of each bound of SPEC.md 8 a case can hold. */
    for (int refused = 0; refused < 2; refused++) {
        fprintf(f, "\n  %-22s", refused ? "bounds, refused side" : "bounds, accepted side");
        for (int e = 0; e < KVC_EDGE_COUNT; e++)
            if (kvc_edge_refused(e) == refused)
                fprintf(f, " %s: %lld (%.1f%%)", kvc_edge_name(e), (long long)t->edges[e], share(t->edges[e], t->cases));
    }
    fprintf(f, "\n  %-22s", "rules (rejected/cases)");
    for (int i = 0; i < t->num_rules; i++)
        fprintf(f, " %s: %lld/%lld", t->rules[i].name, (long long)t->rules[i].rejected, (long long)t->rules[i].cases);
    fprintf(f, "%s\n", t->num_rules ? "" : " -");
}

static cJSON *named_counts(const char *const *names, const int64_t *counts, int n) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < n; i++) cJSON_AddNumberToObject(o, names[i], (double)counts[i]);
    return o;
}

static cJSON *thread_counts(const int64_t *counts) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 1; i <= KVC_MAX_COUNTED_THREADS; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d%s", i, i == KVC_MAX_COUNTED_THREADS ? "+" : "");
        if (counts[i]) cJSON_AddNumberToObject(o, name, (double)counts[i]);
    }
    return o;
}

cJSON *kvc_coverage_json(const kvc_coverage_tally *t) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "cases", (double)t->cases);
    cJSON_AddItemToObject(root, "candidate_threads", thread_counts(t->threads));
    cJSON_AddItemToObject(root, "thread_check_threads", thread_counts(t->other_threads));
    cJSON_AddItemToObject(root, "closing_tokens_per_call", named_counts(closing_names, t->closing, KVC_CLOSING_BUCKETS));
    cJSON_AddItemToObject(root, "largest_position", named_counts(position_names, t->positions, KVC_POSITION_BUCKETS));
    cJSON_AddItemToObject(root, "page_padding", named_counts(padding_names, t->padding, 2));
    cJSON_AddItemToObject(root, "opt_team_rule", named_counts(team_rule_keys, t->team_rule, 2));
    cJSON_AddItemToObject(root, "omp_wait_policy", named_counts(wait_policy_names, t->wait_policy, 3));
    cJSON *wrap = cJSON_AddObjectToObject(root, "v41_ring_wrap");
    cJSON_AddNumberToObject(wrap, "ring_cases", (double)t->ring_wrap[0]);
    cJSON_AddNumberToObject(wrap, "chunk_past_cap", (double)t->ring_wrap[1]);
    cJSON_AddNumberToObject(wrap, "padding_in_last_cap_rows", (double)t->ring_wrap[2]);
    cJSON *aliased = cJSON_AddObjectToObject(root, "aliased_buffers");
    cJSON_AddNumberToObject(aliased, "checked", (double)t->aliased);
    cJSON_AddNumberToObject(aliased, "skipped", (double)t->alias_unavailable);
    cJSON *dims = cJSON_AddObjectToObject(root, "dimensions");
    for (int d = 0; d < KVC_DIM_COUNT; d++) cJSON_AddNumberToObject(dims, kvc_dimension_name(d), (double)t->dimensions[d]);
    cJSON *bounds = cJSON_AddObjectToObject(root, "bounds");
    for (int e = 0; e < KVC_EDGE_COUNT; e++) {
        cJSON *b = cJSON_AddObjectToObject(bounds, kvc_edge_name(e));
        cJSON_AddNumberToObject(b, "cases", (double)t->edges[e]);
        cJSON_AddBoolToObject(b, "refused", kvc_edge_refused(e));
    }
    cJSON *rules = cJSON_AddObjectToObject(root, "rules");
    for (int i = 0; i < t->num_rules; i++) {
        cJSON *r = cJSON_AddObjectToObject(rules, t->rules[i].name);
        cJSON_AddNumberToObject(r, "cases", (double)t->rules[i].cases);
        cJSON_AddNumberToObject(r, "rejected", (double)t->rules[i].rejected);
    }
    return root;
}

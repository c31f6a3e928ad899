/* Greedy shrinking: see fuzz_shrink.h.  Each reduction is tried on a
 * copy; it is kept when the predicate still reports the failure. */
#include "kvcmp/shrink.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvcmp/formats.h"

static const char *const per_token[] = {"positions", "slot_mapping", "kv_slot_mapping", "token_to_req",
                                        "kv", "score", "kv_score", "latent"};
#define NUM_PER_TOKEN ((int)(sizeof per_token / sizeof per_token[0]))

int64_t kvc_case_tokens(const kvc_case *c) {
    kvc_array *p = kvc_case_get(c, "positions");
    return p ? p->shape[0] : 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Remove packed row t from every per-token tensor. */
static void remove_row(kvc_case *c, int64_t t) {
    int64_t T = kvc_case_tokens(c);
    for (int i = 0; i < NUM_PER_TOKEN; i++) {
        kvc_array *a = kvc_case_get(c, per_token[i]);
        if (!a || a->shape[0] != T) continue;
        int64_t row = a->count / T * kvc_dtype_size(a->dtype);
        uint8_t *d = a->data;
        memmove(d + t * row, d + (t + 1) * row, (size_t)((T - t - 1) * row));
        a->shape[0]--;
        a->count = a->shape[0] * (row / kvc_dtype_size(a->dtype));
    }
    kvc_array *qsl = kvc_case_get(c, "query_start_loc");
    if (qsl) {
        int32_t *q = qsl->data;
        int64_t nr = qsl->count - 1;
        for (int64_t r = 0; r < nr; r++)
            if (t >= q[r] && t < q[r + 1]) {
                for (int64_t k = r + 1; k <= nr; k++) q[k]--;
                break;
            }
    }
}

/* Remove request r and its tokens (V4 block-table rows, V4.1 R=2
 * query_start_loc entries); later requests are renumbered. */
static int remove_request(kvc_case *c, int64_t r) {
    kvc_array *table = kvc_case_get(c, "block_table"), *qsl = kvc_case_get(c, "query_start_loc");
    kvc_array *t2r = kvc_case_get(c, "token_to_req");
    if (!t2r || (!table && !qsl)) return -1;
    int64_t requests = table ? table->shape[0] : qsl->count - 1;
    if (requests < 2 || r >= requests) return -1;
    int64_t live_end = qsl ? ((int32_t *)qsl->data)[requests] : kvc_case_tokens(c);
    for (int64_t t = live_end - 1; t >= 0; t--)
        if (((int32_t *)t2r->data)[t] == r) { remove_row(c, t); live_end--; }
    int32_t *owner = t2r->data;
    for (int64_t t = 0; t < live_end; t++)
        if (owner[t] > r) owner[t]--;
    if (table) {
        int64_t cols = table->shape[1];
        int32_t *d = table->data;
        memmove(d + r * cols, d + (r + 1) * cols, (size_t)((requests - r - 1) * cols) * 4);
        table->shape[0]--;
        table->count -= cols;
    } else {
        int32_t *q = qsl->data;
        memmove(q + r + 1, q + r + 2, (size_t)(requests - r - 1) * 4);
        qsl->shape[0]--;
        qsl->count--;
    }
    return 0;
}

static void make_padding(kvc_case *c, int64_t t) {
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *kv_slots = kvc_case_get(c, "kv_slot_mapping");
    ((int64_t *)slots->data)[t] = -1;
    if (kv_slots) ((int64_t *)kv_slots->data)[t] = -1;
}

typedef struct {
    kvc_case *c;
    kvc_still_fails_fn still_fails;
    void *context;
    double deadline;
    kvc_shrink_stats *stats;
} shrinker;

/* Try an edit on a copy; keep it if the failure survives. */
typedef int (*edit_fn)(kvc_case *c, int64_t arg, const void *extra);

static int attempt(shrinker *s, edit_fn edit, int64_t arg, const void *extra) {
    if (now_seconds() > s->deadline) return 0;
    kvc_case trial;
    if (kvc_case_copy(&trial, s->c)) return 0;
    int kept = 0;
    if (edit(&trial, arg, extra) == 0) {
        s->stats->attempts++;
        if (s->still_fails(&trial, s->context)) {
            kvc_case_free(s->c);
            *s->c = trial;
            s->stats->accepted++;
            kept = 1;
        }
    }
    if (!kept) kvc_case_free(&trial);
    return kept;
}

static int edit_remove_request(kvc_case *c, int64_t r, const void *extra) { (void)extra; return remove_request(c, r); }
static int edit_remove_token(kvc_case *c, int64_t t, const void *extra) {
    (void)extra;
    if (kvc_case_tokens(c) <= 1) return -1;
    remove_row(c, t);
    return 0;
}
static int edit_pad_token(kvc_case *c, int64_t t, const void *extra) {
    (void)extra;
    if (((int64_t *)kvc_case_get(c, "slot_mapping")->data)[t] < 0) return -1;
    make_padding(c, t);
    return 0;
}

/* Set elements [lo, hi) of a tensor to one simple value. */
typedef struct {
    const char *name;
    int64_t lo, hi;
    float value;
} fill_range;

static int edit_fill(kvc_case *c, int64_t unused, const void *extra) {
    (void)unused;
    const fill_range *f = extra;
    kvc_array *a = kvc_case_get(c, f->name);
    if (!a || f->hi > a->count) return -1;
    int changed = 0;
    for (int64_t i = f->lo; i < f->hi; i++) {
        if (a->dtype == KVC_DT_F4) {
            float *v = (float *)a->data + i;
            changed |= kvc_f32_bits(*v) != kvc_f32_bits(f->value);
            *v = f->value;
        } else if (a->dtype == KVC_DT_U2) {
            uint16_t *v = (uint16_t *)a->data + i, b = kvc_bf16_from_f32(f->value);
            changed |= *v != b;
            *v = b;
        } else if (a->dtype == KVC_DT_U1) {
            uint8_t *v = (uint8_t *)a->data + i;
            changed |= *v != 0;
            *v = 0;
        }
    }
    return changed ? 0 : -1;
}

/* Remove page k of a paged tensor when no slot names it; later pages
 * move down one, and slots and block-table entries follow. */
static int edit_remove_page(kvc_case *c, int64_t k, const void *extra) {
    const char *name = extra;
    kvc_array *cache = kvc_case_get(c, name);
    if (!cache || cache->shape[0] <= 1 || k >= cache->shape[0]) return -1;
    int64_t rows = cache->shape[1];
    const char *slot_names[2] = {"slot_mapping", "kv_slot_mapping"};
    int v4 = c->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    /* which slot tensors index this cache */
    int uses[2] = {strcmp(name, "state_cache") == 0 || (strcmp(name, "kv_cache") == 0 && !kvc_case_get(c, "kv_slot_mapping")),
                   strcmp(name, "kv_cache") == 0};
    for (int i = 0; i < 2; i++) {
        kvc_array *slots = uses[i] ? kvc_case_get(c, slot_names[i]) : NULL;
        for (int64_t t = 0; slots && t < slots->count; t++)
            if (((int64_t *)slots->data)[t] >= 0 && ((int64_t *)slots->data)[t] / rows == k) return -1;
    }
    for (int i = 0; i < 2; i++) {
        kvc_array *slots = uses[i] ? kvc_case_get(c, slot_names[i]) : NULL;
        for (int64_t t = 0; slots && t < slots->count; t++) {
            int64_t *v = (int64_t *)slots->data + t;
            if (*v >= 0 && *v / rows > k) *v -= rows;
        }
    }
    kvc_array *table = v4 && strcmp(name, "state_cache") == 0 ? kvc_case_get(c, "block_table") : NULL;
    for (int64_t i = 0; table && i < table->count; i++) {
        int32_t *b = (int32_t *)table->data + i;
        if (*b == k) *b = 0;
        else if (*b > k) (*b)--;
    }
    int64_t page_bytes = cache->count / cache->shape[0] * kvc_dtype_size(cache->dtype);
    uint8_t *d = cache->data;
    memmove(d + k * page_bytes, d + (k + 1) * page_bytes, (size_t)((cache->shape[0] - k - 1) * page_bytes));
    cache->shape[0]--;
    cache->count = cache->count / (cache->shape[0] + 1) * cache->shape[0];
    return 0;
}

/* Pages no slot names. */
static void shrink_tables(shrinker *s) {
    static const char *const paged[] = {"state_cache", "kv_cache"};
    for (int i = 0; i < 2; i++) {
        kvc_array *cache = kvc_case_get(s->c, paged[i]);
        for (int64_t k = cache ? cache->shape[0] - 1 : -1; k >= 0; k--) attempt(s, edit_remove_page, k, paged[i]);
    }
    /* Block-table columns and cos/sin rows stay: cutting them would turn a
     * candidate's wrong-but-in-bounds read into an out-of-bounds one,
     * whose result no replay can promise to reproduce. */
}

/* ---- lower positions: fewer window entries ------------------------------ */

typedef struct {
    int64_t request;   /* -1: every token */
    int64_t shift;
} position_shift;

static int64_t gcd64(int64_t a, int64_t b) { while (b) { int64_t t = a % b; a = b; b = t; } return a; }

/* The step positions of a request may move by: it must keep every
 * token's group phase (p mod R), its ring row (p mod CAP) and its
 * place in a state block (p mod BS), so that slots stay what they are. */
static int64_t position_unit(const kvc_case *c) {
    int64_t unit = c->compress_ratio;
    kvc_array *state = kvc_case_get(c, "state_cache");
    if (state) unit = unit / gcd64(unit, state->shape[1]) * state->shape[1];
    return unit;
}

/* Which request token t belongs to, -1 for none (V4.1 trailing padding). */
static int64_t request_of(const kvc_case *c, int64_t t) {
    kvc_array *t2r = kvc_case_get(c, "token_to_req"), *qsl = kvc_case_get(c, "query_start_loc");
    if (qsl) {
        int32_t *q = qsl->data;
        for (int64_t r = 0; r + 1 < qsl->count; r++)
            if (t >= q[r] && t < q[r + 1]) return r;
        return -1;
    }
    return t2r ? ((int32_t *)t2r->data)[t] : 0;
}

static int edit_lower_positions(kvc_case *c, int64_t unused, const void *extra) {
    (void)unused;
    const position_shift *ps = extra;
    kvc_array *positions = kvc_case_get(c, "positions"), *slots = kvc_case_get(c, "slot_mapping");
    int64_t *p = positions->data, T = positions->count, moved = 0;
    for (int64_t t = 0; t < T; t++) {
        if (ps->request >= 0 && request_of(c, t) != ps->request) continue;
        if (p[t] < ps->shift) {
            if (((int64_t *)slots->data)[t] >= 0) return -1;   /* a live token would go below 0 */
            continue;
        }
        p[t] -= ps->shift;
        moved++;
    }
    kvc_array *table = kvc_case_get(c, "block_table");
    if (table && ps->request >= 0) {   /* V4: the request's logical blocks move left */
        int64_t cols = table->shape[1], by = ps->shift / kvc_case_get(c, "state_cache")->shape[1];
        int32_t *row = (int32_t *)table->data + ps->request * cols;
        for (int64_t col = 0; col < cols; col++) row[col] = col + by < cols ? row[col + by] : row[cols - 1];
    }
    return moved ? 0 : -1;
}

static void shrink_positions(shrinker *s) {
    kvc_case *c = s->c;
    kvc_array *positions = kvc_case_get(c, "positions");
    if (!positions) return;
    int v4 = c->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    int per_request = v4 || kvc_case_get(c, "query_start_loc");
    int64_t requests = v4 && kvc_case_get(c, "block_table") ? kvc_case_get(c, "block_table")->shape[0]
                       : (kvc_case_get(c, "query_start_loc") ? kvc_case_get(c, "query_start_loc")->count - 1 : 1);
    if (v4 && !kvc_case_get(c, "block_table")) per_request = 0;   /* save only: slots do not follow positions */
    if (v4 && !per_request) return;
    int64_t unit = position_unit(c);
    for (int64_t r = per_request ? 0 : -1; r < (per_request ? requests : 0); r++) {
        int64_t lowest = INT64_MAX;
        for (int64_t t = 0; t < positions->count; t++)
            if ((r < 0 || request_of(c, t) == r) && ((int64_t *)kvc_case_get(c, "slot_mapping")->data)[t] >= 0)
                lowest = ((int64_t *)positions->data)[t] < lowest ? ((int64_t *)positions->data)[t] : lowest;
        if (lowest == INT64_MAX) continue;
        /* A kept shift is tried again (the positions may go lower still),
         * a refused one halved, down to one unit: the request ends where
         * one more unit down loses the failure. */
        for (int64_t shift = lowest / unit * unit; shift >= unit;) {
            position_shift ps = {r, shift};
            if (!attempt(s, edit_lower_positions, 0, &ps)) shift = shift / 2 / unit * unit;
            else if ((lowest -= shift) < shift) shift = lowest / unit * unit;
        }
    }
}

/* Halving ranges: whole tensor, halves, quarters ... down to 1/16. */
static void simplify_tensor(shrinker *s, const char *name, float value) {
    kvc_array *a = kvc_case_get(s->c, name);
    if (!a || a->count == 0) return;
    for (int64_t parts = 1; parts <= 16; parts *= 2) {
        int64_t n = kvc_case_get(s->c, name)->count, size = (n + parts - 1) / parts;
        for (int64_t lo = 0; lo < n; lo += size) {
            fill_range f = {name, lo, lo + size < n ? lo + size : n, value};
            attempt(s, edit_fill, 0, &f);
        }
    }
}

void kvc_shrink_case(kvc_case *c, kvc_still_fails_fn still_fails, void *context, double seconds, kvc_shrink_stats *stats) {
    memset(stats, 0, sizeof *stats);
    stats->tokens_before = kvc_case_tokens(c);
    shrinker s = {c, still_fails, context, now_seconds() + seconds, stats};
    for (int round = 0; round < 3; round++) {
        int before = stats->accepted;
        for (int64_t r = 7; r >= 0; r--) attempt(&s, edit_remove_request, r, NULL);
        for (int64_t t = kvc_case_tokens(c) - 1; t >= 0; t--) attempt(&s, edit_remove_token, t, NULL);
        for (int64_t t = kvc_case_tokens(c) - 1; t >= 0; t--) attempt(&s, edit_pad_token, t, NULL);
        if (stats->accepted == before && round > 0) break;
    }
    shrink_positions(&s);
    shrink_tables(&s);
    /* Simpler values: zeros for data, ones for weights, then caches. */
    static const char *const zero_first[] = {"kv", "score", "ape", "kv_score", "latent", "state_cache", "kv_cache"};
    for (size_t i = 0; i < sizeof zero_first / sizeof *zero_first; i++) simplify_tensor(&s, zero_first[i], 0.0f);
    simplify_tensor(&s, "norm_weight", 1.0f);
    stats->tokens_after = kvc_case_tokens(c);
}

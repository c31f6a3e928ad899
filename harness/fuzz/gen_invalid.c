/* The generator's invalid metadata: one field of a valid case broken so that SPEC.md 8 refuses it. */

#include "harness/fuzz/gen_invalid.h"

#include "harness/fuzz/edges.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- invalid metadata ------------------------------------------------ */

/* Index of a random token satisfying pred, or -1. */
static int64_t pick_token(gen *g, const int64_t *slots, int need_closing) {
    int64_t found[MAX_TOKENS], n = 0;
    for (int64_t t = 0; t < g->T; t++)
        if (slots[t] >= 0 && (!need_closing || (g->pos[t] + 1) % g->ratio == 0)) found[n++] = t;
    return n ? found[kvc_rng_below(g->r, n)] : -1;
}

/* Corrupt one piece of metadata so the stage must reject the case (or,
 * when the corrupted token is never read, must ignore it). */
/* The V4.1 ring and V4 window rules that need a whole request, one per
 * kind (10-15); 0 when this case has nothing the rule could break. */
static int corrupt_targeted(gen *g, int kind, char *what, size_t what_size) {
    kvc_case *c = g->c;
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *positions = kvc_case_get(c, "positions");
    kvc_array *qsl = kvc_case_get(c, "query_start_loc"), *ring = kvc_case_get(c, "state_cache");
    int64_t *s = slots->data, *p = positions->data;
    if (kind == 14) {   /* a closing token's window column past max_blocks */
        kvc_array *table = kvc_case_get(c, "block_table"), *kv_slots = kvc_case_get(c, "kv_slot_mapping");
        if (!table || !kv_slots || !ring || c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) return 0;
        int64_t t = pick_token(g, kv_slots->data, 1), bs = ring->shape[1];
        if (t < 0 || s[t] < 0 || p[t] / bs < 1 || p[t] / bs >= table->shape[1]) return 0;
        int64_t rows = table->shape[0], cols = p[t] / bs, old_cols = table->shape[1];
        int32_t *narrow = table->data;
        for (int64_t r = 0; r < rows; r++) memmove(narrow + r * cols, narrow + r * old_cols, (size_t)cols * 4);
        table->shape[1] = cols;
        table->count = rows * cols;
        g->rule = "window-column-past-table";
        snprintf(what, what_size, "block_table cut to %lld columns (token %lld reads column %lld)", (long long)cols,
                 (long long)t, (long long)(p[t] / bs));
        return 1;
    }
    if (!qsl || !ring || c->compress_ratio != 2) return 0;
    int32_t *q = qsl->data;
    int64_t requests = qsl->count - 1, cap = ring->shape[1];
    if (kind == 15) {   /* the same ring rows as pages of a CAP SPEC.md 8 refuses: 12 (no power of two) or 4 (< 8) */
        int64_t rows = ring->shape[0] * cap, bad_cap = rows % 12 == 0 ? 12 : 4;
        ring->shape[0] = rows / bad_cap;
        ring->shape[1] = bad_cap;
        g->rule = "ring-cap";
        snprintf(what, what_size, "state_cache reshaped to CAP %lld", (long long)bad_cap);
        return 1;
    }
    if (kind == 11) {   /* a valid slot after query_start_loc[NR] */
        if (q[requests] >= g->T) return 0;
        s[g->T - 1] = p[g->T - 1] % cap;
        g->rule = "slot-after-batch";
        snprintf(what, what_size, "padding token %lld given a valid slot", (long long)(g->T - 1));
        return 1;
    }
    int64_t req = kvc_rng_below(g->r, requests), first = q[req], last = q[req + 1] - 1;
    if (kind == 12) {   /* two requests naming one ring block */
        int64_t other = (req + 1) % requests;
        if (requests < 2 || s[first] < 0 || q[other + 1] <= q[other]) return 0;
        for (int64_t t = q[other]; t < q[other + 1]; t++)
            if (s[t] >= 0) s[t] = s[first] / cap * cap + p[t] % cap;
        g->rule = "ring-block-shared";
        snprintf(what, what_size, "requests %lld and %lld name one ring block", (long long)req, (long long)other);
        return 1;
    }
    if (last <= first || s[last] < 0 || s[first] < 0) return 0;
    if (kind == 10) {   /* positions not consecutive within the chunk (the ring row kept) */
        p[last] += cap;
        g->rule = "positions-not-consecutive";
        snprintf(what, what_size, "positions[%lld] jumps by CAP + 1 in request %lld", (long long)last, (long long)req);
        return 1;
    }
    /* kind 13: two ring blocks within one request */
    s[last] = (s[last] / cap + 1) % ring->shape[0] * cap + s[last] % cap;
    g->rule = "two-ring-blocks";
    snprintf(what, what_size, "slot_mapping[%lld] names another ring block than request %lld's", (long long)last, (long long)req);
    return 1;
}

void corrupt(gen *g, char *what, size_t what_size) {
    kvc_case *c = g->c;
    kvc_array *slots = kvc_case_get(c, "slot_mapping"), *kv_slots = kvc_case_get(c, "kv_slot_mapping");
    kvc_array *positions = kvc_case_get(c, "positions"), *table = kvc_case_get(c, "block_table");
    kvc_array *qsl = kvc_case_get(c, "query_start_loc"), *t2r = kvc_case_get(c, "token_to_req");
    kvc_array *cos_sin = kvc_case_get(c, "cos_sin"), *scale = kvc_case_get(c, "fp8_scale");
    int64_t *s = slots->data;
    /* One in two: an input just past one of section 8's bounds. */
    if (g->edge_rng && kvc_rng_chance(g->edge_rng, 1, 2)) {
        const char *rule = NULL;
        unsigned edge = kvc_edges_corrupt(g->edge_rng, c, &rule, what, what_size);
        if (edge) {
            g->rule = rule;
            g->edges |= edge;
            return;
        }
    }
    for (int attempt = 0; attempt < 8; attempt++) {
        int64_t t;
        int kind = (int)kvc_rng_below(g->r, 16);
        if (kind >= 10) {
            if (corrupt_targeted(g, kind, what, what_size)) return;
            continue;
        }
        switch (kind) {
        case 0:
            if ((t = pick_token(g, s, 0)) < 0) break;
            s[t] += 1000000;
            g->rule = "slot-out-of-range";
            snprintf(what, what_size, "slot_mapping[%lld] out of range", (long long)t);
            return;
        case 1:
            if (!kv_slots || (t = pick_token(g, kv_slots->data, 1)) < 0) break;
            ((int64_t *)kv_slots->data)[t] = 1 << 30;
            g->rule = "kv-slot-out-of-range";
            snprintf(what, what_size, "kv_slot_mapping[%lld] out of range", (long long)t);
            return;
        case 2: {
            int64_t *target = kv_slots ? kv_slots->data : s;
            int64_t a = pick_token(g, target, 1), b = pick_token(g, target, 1);
            if (a < 0 || a == b || b < 0 || c->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM) break;
            target[b] = target[a];
            g->rule = "two-writers";
            snprintf(what, what_size, "two writers of one row (%lld, %lld)", (long long)a, (long long)b);
            return;
        }
        case 3:
            if (!table || !table->count) break;
            if (g->geometry_pool > 0 && g->drawn_columns > 0 && table->ndim == 2) {
                /* The pool's spare columns no window reads: an entry of
                 * the columns drawn as without it, as likely read as then. */
                int64_t columns = g->drawn_columns < table->shape[1] ? g->drawn_columns : table->shape[1];
                t = kvc_rng_below(g->r, table->shape[0] * columns);
                t = t / columns * table->shape[1] + t % columns;
            } else {
                t = kvc_rng_below(g->r, table->count);
            }
            ((int32_t *)table->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 : 1 << 20;
            g->rule = "block-table-entry";
            snprintf(what, what_size, "block_table entry out of range");
            return;
        case 4:
            if (!t2r || (t = pick_token(g, s, 1)) < 0) break;
            ((int32_t *)t2r->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 : 7;
            g->rule = "token-to-req";
            snprintf(what, what_size, "token_to_req[%lld] wrong", (long long)t);
            return;
        case 5:
            if ((t = pick_token(g, s, 0)) < 0) break;
            ((int64_t *)positions->data)[t] = kvc_rng_chance(g->r, 1, 2) ? -1 - kvc_rng_below(g->r, 5) : ((int64_t)1 << 41);
            g->rule = "position-out-of-range";
            snprintf(what, what_size, "positions[%lld] out of range", (long long)t);
            return;
        case 6:
            if (!cos_sin || cos_sin->shape[0] < 2) break;
            /* (with the pool, half the rows drawn as without it: its spare rows aside) */
            cos_sin->shape[0] = kvc_rng_range(g->r, 0, 1) ? 1
                                : (g->geometry_pool > 0 && g->drawn_cos_rows > 0 && g->drawn_cos_rows < cos_sin->shape[0] ? g->drawn_cos_rows : cos_sin->shape[0]) / 2;
            cos_sin->count = cos_sin->shape[0] * 64;
            g->rule = "cos-sin-too-short";
            snprintf(what, what_size, "cos_sin table too short");
            return;
        case 7:
            if (!qsl || qsl->count < 2) break;
            t = kvc_rng_range(g->r, 0, qsl->count - 1);
            ((int32_t *)qsl->data)[t] += kvc_rng_chance(g->r, 1, 2) ? 3 : -2;
            g->rule = "query-start-loc";
            snprintf(what, what_size, "query_start_loc corrupted");
            return;
        case 8:
            if (!scale) break;
            ((float *)scale->data)[0] = kvc_rng_chance(g->r, 1, 2) ? 0.0f : kvc_f32_from_bits(0x7F800000u);
            g->rule = "fp8-scale";
            snprintf(what, what_size, "fp8_scale not finite and > 0");
            return;
        default:
            if (c->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM || c->compress_ratio != 2 || (t = pick_token(g, s, 0)) < 0) break;
            s[t] ^= 1;   /* ring row no longer p % CAP */
            g->rule = "ring-row";
            snprintf(what, what_size, "slot_mapping[%lld] not at ring row p %% CAP", (long long)t);
            return;
        }
    }
    c->eps = kvc_rng_chance(g->r, 1, 2) ? -1.0f : kvc_f32_from_bits(0x7FC00000u);
    g->rule = "eps";
    snprintf(what, what_size, "eps out of range");
}

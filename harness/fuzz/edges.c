/* The bounds of SPEC.md 8 in generated cases: see edges.h.  Everything
 * here works on the case's tensors as the generator left them. */
#include "harness/fuzz/edges.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kvcmp/generate.h"
#include "kvcmp/validate.h"

#define P40 ((int64_t)1 << 40)

static const char *const edge_names[KVC_EDGE_COUNT] = {
    "position 2^40-1", "position 2^40", "position 2^40+1", "unset token_to_req", "eps 1", "eps 1+2^-23",
    "slot rows-1", "slot rows", "token_to_req NR-1", "token_to_req NR", "cos_sin rows = last+1", "cos_sin rows = last",
    "block pages-1", "block pages", "column max_blocks-1", "column max_blocks", "query_start_loc[NR] = T",
    "query_start_loc[NR] = T+1", "fp8_scale 2^-149", "fp8_scale 0", "CAP 8",
};
const char *kvc_edge_name(int bit_index) { return bit_index >= 0 && bit_index < KVC_EDGE_COUNT ? edge_names[bit_index] : "?"; }
/* Which side of its bound each edge is on: 1 for the refused side. */
int kvc_edge_refused(int bit_index) {
    static const unsigned refused = KVC_EDGE_POSITION_PAST | KVC_EDGE_EPS_PAST | KVC_EDGE_SLOT_PAST | KVC_EDGE_REQUEST_PAST |
                                    KVC_EDGE_COS_SIN_SHORT | KVC_EDGE_BLOCK_PAST | KVC_EDGE_COLUMN_PAST | KVC_EDGE_QSL_PAST |
                                    KVC_EDGE_FP8_SCALE_ZERO;
    return bit_index >= 0 && bit_index < KVC_EDGE_COUNT && (refused >> bit_index & 1u);
}

/* ---- the case's tensors ------------------------------------------------ */

typedef struct {
    kvc_case *c;
    int64_t T;
    int64_t *positions, *slots, *kv_slots;   /* kv_slots NULL where the case has none */
    int32_t *token_to_req;
    int v4, norm, insert, forward;            /* which stage family */
    int32_t R;
} view;

static int64_t *i8(const kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    return a && a->dtype == KVC_DT_I8 ? a->data : NULL;
}
static int32_t *i4(const kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    return a && a->dtype == KVC_DT_I4 ? a->data : NULL;
}
static int64_t count_of(const kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    return a ? a->count : 0;
}

static int make_view(kvc_case *c, view *v) {
    memset(v, 0, sizeof *v);
    v->c = c;
    v->positions = i8(c, "positions");
    v->slots = i8(c, "slot_mapping");
    if (!v->positions || !v->slots) return 0;
    v->T = count_of(c, "positions");
    if (count_of(c, "slot_mapping") < v->T) return 0;
    v->kv_slots = i8(c, "kv_slot_mapping");
    if (v->kv_slots && count_of(c, "kv_slot_mapping") < v->T) v->kv_slots = NULL;
    v->token_to_req = i4(c, "token_to_req");
    if (v->token_to_req && count_of(c, "token_to_req") < v->T) v->token_to_req = NULL;
    v->v4 = c->stage <= KVC_STAGE_V4_FORWARD;
    v->norm = c->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM || c->stage == KVC_STAGE_V41_FORWARD;
    v->insert = c->stage >= KVC_STAGE_V41_ROPE_QUANT_INSERT;
    v->forward = c->stage == KVC_STAGE_V4_FORWARD || c->stage == KVC_STAGE_V41_FORWARD;
    v->R = c->compress_ratio > 0 ? c->compress_ratio : 1;
    return 1;
}

static int position_ok(int64_t p) { return p >= 0 && p <= KVC_MAX_POSITION; }
static int closes(const view *v, int64_t t) { return position_ok(v->positions[t]) && kvc_is_closing(v->positions[t], v->R); }

/* The kv_cache's slot tensor: kv_slot_mapping where the case has one
 * (V4 compress and forward, V4.1 forward at R = 2), else slot_mapping. */
static int64_t *kv_cache_slots(const view *v) { return v->kv_slots ? v->kv_slots : v->slots; }

/* Token t writes a kv_cache row: it closes, with its slots. */
static int writes_kv_row(const view *v, int64_t t) {
    if (!kvc_case_get(v->c, "kv_cache") || kv_cache_slots(v)[t] < 0 || !closes(v, t)) return 0;
    if (v->c->stage <= KVC_STAGE_V4_FORWARD) return v->slots[t] >= 0;   /* compress skips a negative state slot */
    return 1;
}

/* Token t writes a state or ring row: the V4 save, the V4.1 ring store. */
static int writes_state_row(const view *v, int64_t t) {
    if (v->slots[t] < 0 || !kvc_case_get(v->c, "state_cache")) return 0;
    if (v->c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES || v->c->stage == KVC_STAGE_V4_FORWARD) return 1;
    return v->norm && v->R == 2;
}

static int64_t rows_of(const kvc_case *c, const char *cache) {
    kvc_array *a = kvc_case_get(c, cache);
    return a && a->ndim == 3 ? a->shape[0] * a->shape[1] : 0;
}

/* The largest cos_sin row a writer of kv_cache rotates, plus one; 0 for none. */
static int64_t cos_rows_needed(const view *v) {
    int64_t needed = 0;
    for (int64_t t = 0; t < v->T; t++)
        if (writes_kv_row(v, t) && kvc_rope_row(v->positions[t], v->R) + 1 > needed) needed = kvc_rope_row(v->positions[t], v->R) + 1;
    return needed;
}

/* ---- moving positions ---------------------------------------------------- */

/* Save stages read a position only modulo R, the ring size or the state
 * block: move the valid tokens so that the largest valid position is
 * `target` (V4.1 R = 2: every token of the requests' chunks, which stay
 * consecutive, and their ring slots follow p mod CAP).  0 when the case
 * has no valid token to move. */
static int move_save_positions(view *v, int64_t target) {
    int ring = v->norm && v->R == 2;
    int64_t end = v->T;
    if (ring) {
        int32_t *qsl = i4(v->c, "query_start_loc");
        int64_t requests = count_of(v->c, "query_start_loc") - 1;
        if (!qsl || requests < 0 || qsl[requests] < 0 || qsl[requests] > v->T) return 0;
        end = qsl[requests];
    }
    int64_t highest = -1;
    for (int64_t t = 0; t < end; t++)
        if (v->slots[t] >= 0 && position_ok(v->positions[t]) && v->positions[t] > highest) highest = v->positions[t];
    if (highest < 0) return 0;
    int64_t offset = target - highest, lowest = INT64_MAX;
    for (int64_t t = 0; t < end; t++)
        if (ring || v->slots[t] >= 0) lowest = v->positions[t] < lowest ? v->positions[t] : lowest;
    if (lowest < 0 || lowest + offset < 0) return 0;
    kvc_array *state = kvc_case_get(v->c, "state_cache");
    int64_t cap = ring && state && state->ndim == 3 ? state->shape[1] : 0;
    for (int64_t t = 0; t < end; t++) {
        if (!ring && v->slots[t] < 0) continue;
        v->positions[t] += offset;
        if (cap > 0 && v->slots[t] >= 0) v->slots[t] = v->slots[t] / cap * cap + v->positions[t] % cap;
    }
    return 1;
}

/* A slotted token that does not close, moved to `target` (which must not
 * close either for V4; for V4.1 R = 2 an odd target closes and is
 * refused for its position all the same).  V4 compress checks the
 * position of a token with both slots: its kv slot is made valid. */
static int move_non_closing_token(view *v, kvc_rng *rng, int64_t target) {
    int64_t found[64], n = 0;
    for (int64_t t = 0; t < v->T && n < 64; t++)
        if (v->slots[t] >= 0 && position_ok(v->positions[t]) && !closes(v, t)) found[n++] = t;
    if (!n) return 0;
    int64_t t = found[kvc_rng_below(rng, n)];
    v->positions[t] = target;
    if (v->kv_slots && v->kv_slots[t] < 0 && rows_of(v->c, "kv_cache") > 0) v->kv_slots[t] = kvc_rng_below(rng, rows_of(v->c, "kv_cache"));
    return 1;
}

/* A position bound for any stage: the save stages move their batch, the
 * others one token that does not close (not at R = 1, where every token
 * closes and needs a cos_sin row past any table). */
static int put_position(view *v, kvc_rng *rng, int64_t target) {
    if (v->c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES || v->c->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM)
        return move_save_positions(v, target);
    if (v->c->stage == KVC_STAGE_V41_FORWARD || v->R == 1) return 0;
    if (target <= KVC_MAX_POSITION && kvc_is_closing(target, v->R)) return 0;   /* it would need a cos_sin row past any table */
    return move_non_closing_token(v, rng, target);
}

/* ---- drawn edges --------------------------------------------------------- */

unsigned kvc_edges_draw(kvc_rng *rng, kvc_case *c) {
    view v;
    if (!make_view(c, &v)) return 0;
    unsigned drawn = 0;
    if (kvc_rng_chance(rng, 1, 16)) {
        int64_t target = kvc_rng_chance(rng, 1, 2) ? P40 : P40 - 1;
        if (put_position(&v, rng, target)) drawn |= target == P40 ? KVC_EDGE_POSITION_AT : KVC_EDGE_POSITION_BELOW;
    }
    /* SPEC.md 8: upstream leaves the metadata of a token that does not
     * close unset; a slotted one's token_to_req is never read. */
    if (v.v4 && c->stage != KVC_STAGE_V4_SAVE_PARTIAL_STATES && v.token_to_req && kvc_rng_chance(rng, 1, 6)) {
        int64_t found[64], n = 0;
        for (int64_t t = 0; t < v.T && n < 64; t++)
            if (v.slots[t] >= 0 && position_ok(v.positions[t]) && !closes(&v, t)) found[n++] = t;
        if (n) {
            int64_t t = found[kvc_rng_below(rng, n)], requests = count_of(c, "block_table") ? kvc_case_get(c, "block_table")->shape[0] : 0;
            static const int32_t unset[] = {-1, INT32_MIN, INT32_MAX, -7};
            v.token_to_req[t] = kvc_rng_chance(rng, 1, 3) ? (int32_t)requests : unset[kvc_rng_below(rng, 4)];
            if (v.kv_slots && v.kv_slots[t] < 0 && kvc_rng_chance(rng, 1, 2) && rows_of(c, "kv_cache") > 0)
                v.kv_slots[t] = kvc_rng_below(rng, rows_of(c, "kv_cache"));
            drawn |= KVC_EDGE_UNSET_TOKEN_TO_REQ;
        }
    }
    int has_eps = c->stage == KVC_STAGE_V4_COMPRESS || c->stage == KVC_STAGE_V4_FORWARD || v.norm;
    if (has_eps && kvc_rng_chance(rng, 1, 32)) {
        c->eps = 1.0f;   /* the inclusive bound of [0, 1] */
        drawn |= KVC_EDGE_EPS_ONE;
    }
    kvc_array *scale = kvc_case_get(c, "fp8_scale");
    if (scale && scale->count == 1 && kvc_rng_chance(rng, 1, 8)) {
        ((float *)scale->data)[0] = 0x1p-149f;   /* the smallest positive scale: 1 / s rounds to +inf */
        drawn |= KVC_EDGE_FP8_SCALE_MIN;
    }
    return drawn;
}

/* ---- refused edges ------------------------------------------------------- */

/* A random writer of `cache` rows (state or kv), or -1. */
static int64_t pick_writer(const view *v, kvc_rng *rng, int kv) {
    int64_t found[64], n = 0;
    for (int64_t t = 0; t < v->T && n < 64; t++)
        if (kv ? writes_kv_row(v, t) : writes_state_row(v, t)) found[n++] = t;
    return n ? found[kvc_rng_below(rng, n)] : -1;
}

unsigned kvc_edges_corrupt(kvc_rng *rng, kvc_case *c, const char **rule, char *what, size_t what_size) {
    view v;
    if (!make_view(c, &v)) return 0;
    switch (kvc_rng_below(rng, 7)) {
    case 0:
        if (!put_position(&v, rng, P40 + 1)) return 0;
        *rule = "position-2^40+1";
        snprintf(what, what_size, "a valid token at position 2^40 + 1");
        return KVC_EDGE_POSITION_PAST;
    case 1: {
        int state_writers = c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES || c->stage == KVC_STAGE_V4_FORWARD || (v.norm && v.R == 2);
        int kv = kvc_case_get(c, "kv_cache") && (!state_writers || kvc_rng_chance(rng, 1, 2));
        int64_t t = pick_writer(&v, rng, kv);
        if (t < 0) { kv = !kv; t = pick_writer(&v, rng, kv); }
        if (t < 0) return 0;
        int64_t *slots = kv ? kv_cache_slots(&v) : v.slots;
        slots[t] = rows_of(c, kv ? "kv_cache" : "state_cache");
        *rule = "slot-one-past-cache";
        snprintf(what, what_size, "%s[%lld] one past %s", kv && v.kv_slots ? "kv_slot_mapping" : "slot_mapping", (long long)t,
                 kv ? "kv_cache" : "state_cache");
        return KVC_EDGE_SLOT_PAST;
    }
    case 2: {
        kvc_array *table = kvc_case_get(c, "block_table");
        int64_t t = pick_writer(&v, rng, 1);
        if (!table || !v.token_to_req || t < 0) return 0;
        v.token_to_req[t] = (int32_t)table->shape[0];
        *rule = "token-to-req-num-requests";
        snprintf(what, what_size, "token_to_req[%lld] = num_requests", (long long)t);
        return KVC_EDGE_REQUEST_PAST;
    }
    case 3: {
        kvc_array *cos_sin = kvc_case_get(c, "cos_sin");
        int64_t needed = cos_rows_needed(&v);
        if (!cos_sin || needed < 1 || cos_sin->shape[0] < needed) return 0;
        cos_sin->shape[0] = needed - 1;
        cos_sin->count = cos_sin->shape[0] * 64;
        *rule = "cos-sin-one-row-short";
        snprintf(what, what_size, "cos_sin cut to the last row it needs (%lld rows)", (long long)(needed - 1));
        return KVC_EDGE_COS_SIN_SHORT;
    }
    case 4: {
        kvc_array *table = kvc_case_get(c, "block_table"), *state = kvc_case_get(c, "state_cache");
        int64_t t = pick_writer(&v, rng, 1);
        if (!table || !state || !v.token_to_req || t < 0 || v.token_to_req[t] < 0 || v.token_to_req[t] >= table->shape[0]) return 0;
        int64_t column = v.positions[t] / state->shape[1];   /* the token's own position: always in the window */
        if (column >= table->shape[1]) return 0;
        ((int32_t *)table->data)[v.token_to_req[t] * table->shape[1] + column] = (int32_t)state->shape[0];
        *rule = "block-table-num-pages";
        snprintf(what, what_size, "block_table[%d][%lld] = num_pages", v.token_to_req[t], (long long)column);
        return KVC_EDGE_BLOCK_PAST;
    }
    case 5: {
        int32_t *qsl = i4(c, "query_start_loc");
        int64_t requests = count_of(c, "query_start_loc") - 1;
        if (!qsl || requests < 1) return 0;
        qsl[requests] = (int32_t)(v.T + 1);
        *rule = "query-start-loc-past-batch";
        snprintf(what, what_size, "query_start_loc[%lld] = T + 1", (long long)requests);
        return KVC_EDGE_QSL_PAST;
    }
    default:
        if (!(c->stage == KVC_STAGE_V4_COMPRESS || c->stage == KVC_STAGE_V4_FORWARD || v.norm)) return 0;
        c->eps = nextafterf(1.0f, 2.0f);
        *rule = "eps-above-1";
        snprintf(what, what_size, "eps one step above 1");
        return KVC_EDGE_EPS_PAST;
    }
}

/* ---- measured edges ------------------------------------------------------ */

/* The window of V4 closing writer t: its block-table columns and entries. */
static unsigned window_edges(const view *v, int64_t t) {
    kvc_array *table = kvc_case_get(v->c, "block_table"), *state = kvc_case_get(v->c, "state_cache");
    if (!table || table->ndim != 2 || !state || state->ndim != 3 || !v->token_to_req) return 0;
    int32_t r = v->token_to_req[t];
    int64_t columns = table->shape[1], pages = state->shape[0], bs = state->shape[1];
    if (r < 0 || r >= table->shape[0] || bs < 1) return 0;
    int64_t window = (int64_t)kvc_v4_coff(v->R) * v->R, p = v->positions[t];
    unsigned found = 0;
    for (int64_t w = 0; w < window; w++) {
        int64_t q = p - window + 1 + w;
        if (q < 0) continue;
        int64_t column = q / bs;
        if (column == columns - 1) found |= KVC_EDGE_COLUMN_LAST;
        if (column == columns) found |= KVC_EDGE_COLUMN_PAST;
        if (column >= columns) continue;
        int32_t block = ((const int32_t *)table->data)[r * columns + column];
        if (block == pages - 1) found |= KVC_EDGE_BLOCK_LAST;
        if (block == pages) found |= KVC_EDGE_BLOCK_PAST;
    }
    return found;
}

unsigned kvc_edges_measure(const kvc_case *c) {
    view v;
    if (!make_view((kvc_case *)c, &v)) return 0;
    unsigned found = 0;
    int64_t state_rows = rows_of(c, "state_cache"), kv_rows = rows_of(c, "kv_cache");
    kvc_array *table = kvc_case_get(c, "block_table");
    int64_t requests = table && table->ndim == 2 ? table->shape[0] : 0;
    for (int64_t t = 0; t < v.T; t++) {
        int64_t p = v.positions[t];
        if (v.slots[t] >= 0 && (!v.kv_slots || !v.v4 || v.kv_slots[t] >= 0 || c->stage == KVC_STAGE_V4_FORWARD)) {
            if (p == P40 - 1) found |= KVC_EDGE_POSITION_BELOW;
            if (p == P40) found |= KVC_EDGE_POSITION_AT;
            if (p == P40 + 1) found |= KVC_EDGE_POSITION_PAST;
        }
        if (v.v4 && v.token_to_req && requests > 0 && v.slots[t] >= 0 && position_ok(p) && !closes(&v, t) &&
            (v.token_to_req[t] < 0 || v.token_to_req[t] >= requests))
            found |= KVC_EDGE_UNSET_TOKEN_TO_REQ;
        if (writes_state_row(&v, t) && v.slots[t] == state_rows - 1) found |= KVC_EDGE_SLOT_LAST;
        if (writes_state_row(&v, t) && v.slots[t] == state_rows) found |= KVC_EDGE_SLOT_PAST;
        if (!writes_kv_row(&v, t)) continue;
        if (kv_cache_slots(&v)[t] == kv_rows - 1) found |= KVC_EDGE_SLOT_LAST;
        if (kv_cache_slots(&v)[t] == kv_rows) found |= KVC_EDGE_SLOT_PAST;
        if (v.v4 && v.token_to_req && requests > 0) {
            if (v.token_to_req[t] == requests - 1) found |= KVC_EDGE_REQUEST_LAST;
            if (v.token_to_req[t] == requests) found |= KVC_EDGE_REQUEST_PAST;
            found |= window_edges(&v, t);
        }
    }
    kvc_array *cos_sin = kvc_case_get(c, "cos_sin");
    int64_t needed = cos_rows_needed(&v);
    if (cos_sin && needed > 0 && cos_sin->shape[0] == needed) found |= KVC_EDGE_COS_SIN_EXACT;
    if (cos_sin && needed > 0 && cos_sin->shape[0] == needed - 1) found |= KVC_EDGE_COS_SIN_SHORT;
    int32_t *qsl = i4(c, "query_start_loc");
    int64_t nr = count_of(c, "query_start_loc") - 1;
    if (v.norm && v.R == 2 && qsl && nr >= 0) {
        if (qsl[nr] == v.T) found |= KVC_EDGE_QSL_BATCH;
        if (qsl[nr] == v.T + 1) found |= KVC_EDGE_QSL_PAST;
        kvc_array *ring = kvc_case_get(c, "state_cache");
        if (ring && ring->ndim == 3 && ring->shape[1] == 8) found |= KVC_EDGE_CAP_MIN;
    }
    if ((c->stage == KVC_STAGE_V4_COMPRESS || c->stage == KVC_STAGE_V4_FORWARD || v.norm)) {
        if (c->eps == 1.0f) found |= KVC_EDGE_EPS_ONE;
        if (c->eps == nextafterf(1.0f, 2.0f)) found |= KVC_EDGE_EPS_PAST;
    }
    kvc_array *scale = kvc_case_get(c, "fp8_scale");
    if (scale && scale->count == 1 && c->has_cache_dtype && c->cache_dtype == KVC_CACHE_FP8_E4M3) {
        float s = ((const float *)scale->data)[0];
        if (s == 0x1p-149f) found |= KVC_EDGE_FP8_SCALE_MIN;
        if (s == 0.0f) found |= KVC_EDGE_FP8_SCALE_ZERO;
    }
    return found;
}

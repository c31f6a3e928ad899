/* The generator's case assembly: page sizes, the geometry pool's sizes, tensors, fills, a batch's requests, positions, output rows and cos_sin. */
#include "harness/fuzz/gen_assembly.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- case assembly --------------------------------------------------- */

/* A page size from table[n].  With a geometry pool, the case's slot (one
 * of geometry_pool, kvc_gen_make_from) picks one of geometry_pool sizes
 * fixed by the seed; the stream advances the same either way, so every
 * other draw of the case is unchanged. */
int64_t pick_page_rows(gen *g, const int64_t *table, int n, uint64_t which) {
    int64_t i = kvc_rng_below(g->r, n);
    if (g->geometry_pool <= 0) return table[i];
    kvc_rng pool;
    kvc_rng_seed(&pool, g->seed, 0x9E0 + which * 64 + (uint64_t)g->geometry_slot);
    return table[kvc_rng_below(&pool, n)];
}

/* ---- the geometry pool's sizes ----------------------------------------
 * Each size a kernel could specialise on is rounded up to one of
 * geometry_pool tiers fixed by the seed (per size and R class): tiers 0 to
 * N - 3 lie in N - 1 octave bands between lo and mid, tier N - 2 is mid
 * (what all but the rare large draws need), tier N - 1 is top (what any
 * draw needs).  A case
 * takes one tier for all its sizes (pool_tier: the smallest that holds
 * every need), so the sizes add N combinations, not N per size.  The
 * rows past a need are spare: pages no window's table entry names,
 * columns no window reads, kv rows no token writes, cos_sin rows no token
 * rotates with.  Page counts and columns are tiers of rows (positions)
 * divided by the page rows. */
typedef struct {
    int64_t lo, mid, top;
} size_range;
/* By R class: V4.1 (R = 1, 2), V4 R = 4, V4 R = 128. */
static const size_range size_ranges[Q_COUNT][3] = {
    /* columns, as positions: below 108 (R = 4), 386 (R = 128) */
    {{1, 1, 1}, {2, 64, 128}, {2, 400, 400}},
    /* state rows: 16 requests of 75 rows (R = 4 large saves), 3 windows of 259 */
    {{1, 1, 1}, {2, 160, 1600}, {2, 900, 900}},
    /* kv rows: the closing tokens */
    {{2, 48, 176}, {2, 16, 64}, {2, 16, 16}},
    /* cos_sin rows: positions below 400, 108, 386 */
    {{8, 400, 400}, {8, 64, 128}, {8, 400, 400}},
    /* V4.1 ring blocks: 16 requests and 2 spare */
    {{1, 18, 18}, {1, 1, 1}, {1, 1, 1}},
};

static int r_class(const gen *g) { return g->ratio == 4 ? 1 : g->ratio == 128 ? 2 : 0; }

static int64_t tier_value(const gen *g, int which, int k) {
    const size_range *s = &size_ranges[which][r_class(g)];
    int n = g->geometry_pool;
    if (k >= n - 1) return s->top;
    if (k == n - 2 || s->lo >= s->mid) return s->mid;
    int octaves = 0;
    while ((s->lo << (octaves + 1)) <= s->mid) octaves++;
    kvc_rng t;
    kvc_rng_seed(&t, g->seed, 0x7100 + (uint64_t)(which * 3 + r_class(g)) * 64 + (uint64_t)k);
    int64_t v = kvc_rng_range(&t, s->lo << (k * octaves / (n - 1)), s->lo << ((k + 1) * octaves / (n - 1)));
    return v < s->top ? v : s->top;
}

static int fitting_tier(const gen *g, int which, int64_t needed, int from) {
    for (int k = from; k < g->geometry_pool; k++)
        if (tier_value(g, which, k) >= needed) return k;
    return g->geometry_pool - 1;
}

/* The case's tier: the smallest whose sizes hold every need (in rows). */
void pool_tier(gen *g, const int *which, const int64_t *needed, int n) {
    g->tier = 0;
    for (int i = 0; g->geometry_pool > 0 && i < n; i++) g->tier = fitting_tier(g, which[i], needed[i], g->tier);
}

/* `needed` units of `per` rows each (pages, columns; 1 for rows) as rows. */
int64_t rows_for(int64_t needed, int64_t per) { return needed > 0 ? (needed - 1) * per + 1 : 0; }

/* At least `needed` units of `per` rows: the case's tier's rows in units
 * (a higher tier's if a need was underestimated; `needed` itself past top). */
int64_t pooled(gen *g, int which, int64_t needed, int64_t per) {
    int64_t rows = tier_value(g, which, fitting_tier(g, which, rows_for(needed, per), g->tier)), v = (rows + per - 1) / per;
    return v >= needed ? v : needed;
}

void *tensor(gen *g, const char *name, kvc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    int64_t shape[3] = {d0, d1, d2};
    kvc_array a;
    if (kvc_array_alloc(&a, dtype, ndim, shape)) return NULL;
    if (kvc_case_put(g->c, name, &a)) { kvc_array_free(&a); return NULL; }
    return a.data;
}

void fill_values(gen *g, float *dst, int64_t n, int role) { kvc_gen_values(g->r, g->family, role, dst, n); }

/* Random bytes: untouched rows must keep them, bit for bit. */
void fill_bytes(gen *g, void *dst, int64_t n) {
    uint8_t *p = dst;
    kvc_rng r = *g->r;   /* the state in registers: a store per 8 bytes, not a call */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = kvc_rng_next(&r);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {   /* the last 1 to 7 bytes: the low bytes of one more draw */
        uint64_t v = kvc_rng_next(&r);
        memcpy(p + i, &v, (size_t)(n - i));
    }
    *g->r = r;
}

/* Values for cache rows no correct kernel reads (a page's other rows,
 * spare pages, ring rows away from a request's chunk): uniform in
 * [-1, 1), two from a draw, a fraction of a family value's cost.  Every
 * row gets its own, so a kernel that reads a wrong row still computes a
 * wrong result; only the rows a correct kernel reads need the family's
 * edges.  n is even (rows are multiples of 128 values). */
void fill_filler(gen *g, float *dst, int64_t n) {
    kvc_rng r = *g->r;
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t x = kvc_rng_next(&r);
        dst[i] = ((float)(x & 0xFFFFFF) - 0x1p23f) * 0x1p-23f;
        dst[i + 1] = ((float)((x >> 32) & 0xFFFFFF) - 0x1p23f) * 0x1p-23f;
    }
    *g->r = r;
}

/* A cache of `rows` rows of a kv half and a score half (width values
 * each): family values on the rows marked in `read`, filler on the rest. */
void fill_state_rows(gen *g, float *cache, int64_t rows, int64_t width, const uint8_t *read) {
    for (int64_t row = 0; row < rows; row++) {
        float *kv = cache + row * 2 * width;
        if (read[row]) {
            fill_values(g, kv, width, KVC_ROLE_KV);
            fill_values(g, kv + width, width, KVC_ROLE_SCORE);
        } else {
            fill_filler(g, kv, 2 * width);
        }
    }
}

void shuffle(kvc_rng *r, int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = kvc_rng_below(r, i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static int closing(const gen *g, int64_t t) { return g->slot[t] >= 0 && (g->pos[t] + 1) % g->ratio == 0; }

/* Upper bounds, from the planned tokens, of the kv rows and cos_sin rows
 * a case needs (slots only become padding later). */
int64_t closing_upper(const gen *g) {
    int64_t n = 0;
    for (int64_t t = 0; t < g->T; t++) n += closing(g, t);
    return n;
}

int64_t cos_rows_upper(const gen *g) {
    int64_t rows = 1;
    for (int64_t t = 0; t < g->T; t++)
        if ((g->pos[t] / g->ratio) * g->ratio + 1 > rows) rows = (g->pos[t] / g->ratio) * g->ratio + 1;
    return rows;
}

/* Request q's n tokens at positions history, history + 1 ...; their
 * slots are resolved later (negative = padding). */
static void add_request_tokens(gen *g, int q, int64_t history, int64_t n) {
    g->start[q] = history;
    g->count[q] = n;
    for (int64_t i = 0; i < n; i++, g->T++) {
        g->pos[g->T] = history + i;
        g->req[g->T] = q;
        g->slot[g->T] = 0;
    }
}

/* Requests with a history before this step and a chunk in it: chunked
 * prefill, decode, or a speculative step of a few tokens. */
/* Many requests of one or two tokens each, every request's last token a
 * closing one: enough closing tokens per call for the token-parallel
 * paths and uneven partitions (R = 4 and R = 2 only: R = 128 windows
 * are too costly for the reference). */
static void plan_wide_batch(gen *g, int max_history) {
    g->num_requests = (int)kvc_rng_range(g->r, 5, MAX_REQUESTS);
    g->T = 0;
    g->dimensions |= KVC_DIM_WIDE_BATCH;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t n = kvc_rng_range(g->r, 1, 2);
        int64_t history = kvc_rng_range(g->r, 0, max_history / g->ratio) * g->ratio + g->ratio - n;
        add_request_tokens(g, q, history, n);
    }
}

/* Past the size thresholds where a kernel may switch strategy (threads,
 * streaming stores, tiling): more than 96 tokens, and for the D = 512,
 * R = 4 save more than 8 MiB of state rows (1025+ rows of 8 KiB; the
 * save alone, as compressing that many windows is slow in the reference). */
static void plan_large_batch(gen *g) {
    int past_8_mib = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES && g->head_dim == 512;
    g->num_requests = past_8_mib ? MAX_REQUESTS : (int)kvc_rng_range(g->r, 4, 5);
    g->T = 0;
    g->dimensions |= KVC_DIM_LARGE_BATCH;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t n = past_8_mib ? kvc_rng_range(g->r, 65, 68) : kvc_rng_range(g->r, 25, 32);
        int64_t history = kvc_rng_range(g->r, 0, 40);
        add_request_tokens(g, q, history, n);
    }
}

void plan_requests(gen *g, int max_history, int max_chunk) {
    int large_odds = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES && g->head_dim == 512 ? 32 : 128;
    if (g->ratio != 128 && kvc_rng_chance(g->r, 1, large_odds)) { plan_large_batch(g); return; }
    if (g->ratio != 128 && kvc_rng_chance(g->r, 1, 16)) { plan_wide_batch(g, max_history); return; }
    g->num_requests = (int)kvc_rng_range(g->r, 1, 3);
    g->T = 0;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t history = 0, n;
        switch (kvc_rng_below(g->r, 4)) {
        case 0: n = kvc_rng_range(g->r, 1, max_chunk); break;                                   /* prefill */
        case 1: history = kvc_rng_range(g->r, 1, max_history); n = kvc_rng_range(g->r, 1, max_chunk); break;
        case 2: history = kvc_rng_range(g->r, 0, max_history); n = 1; break;                    /* decode */
        default: history = kvc_rng_range(g->r, 0, max_history); n = kvc_rng_range(g->r, 2, 4); break; /* spec */
        }
        if (g->ratio == 128 && kvc_rng_chance(g->r, 2, 3)) {
            /* land one closing token in the chunk, at most one */
            n = kvc_rng_range(g->r, 1, 3);
            int64_t group = kvc_rng_range(g->r, 0, 2);
            history = 128 * group + 127 - kvc_rng_below(g->r, n);
        }
        if (g->T + n > SMALL_TOKENS - 4) n = 1;
        add_request_tokens(g, q, history, n);
    }
}

/* Padding tokens after the batch (position 0, slot -1). */
void append_padding(gen *g) {
    int64_t extra = kvc_rng_chance(g->r, 1, 3) ? kvc_rng_range(g->r, 1, 3) : 0;
    for (int64_t i = 0; i < extra && g->T < MAX_TOKENS; i++, g->T++) {
        g->pos[g->T] = kvc_rng_chance(g->r, 1, 2) ? 0 : kvc_rng_below(g->r, 64);
        g->req[g->T] = 0;
        g->slot[g->T] = -1;
        g->kv_slot[g->T] = -1;
    }
}

/* Save stages read positions only modulo R, the ring size and the state
 * block: move them across the contract's range (SPEC.md 2: up to 2^40)
 * by a multiple of 4096, which keeps every slot what it is. */
static void move_positions_high(gen *g) {
    static const int64_t offsets[] = {((int64_t)1 << 31) - 4096, (int64_t)1 << 31, ((int64_t)1 << 32) - 4096, (int64_t)1 << 32,
                                      ((int64_t)1 << 40) - 65536};
    int saves = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES || g->stage == KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    if (!saves || !kvc_rng_chance(g->r, 1, 10)) return;
    int64_t offset = offsets[kvc_rng_below(g->r, (int64_t)(sizeof offsets / sizeof *offsets))];
    for (int64_t t = 0; t < g->T; t++) g->pos[t] += offset;
    g->dimensions |= KVC_DIM_HIGH_POSITIONS;
}

void put_positions(gen *g) {
    move_positions_high(g);
    int64_t *positions = tensor(g, "positions", KVC_DT_I8, 1, g->T, 0, 0);
    int64_t *slots = tensor(g, "slot_mapping", KVC_DT_I8, 1, g->T, 0, 0);
    memcpy(positions, g->pos, (size_t)g->T * 8);
    memcpy(slots, g->slot, (size_t)g->T * 8);
}

/* Distinct output rows for closing tokens, -1 (or a random row, which no
 * stage may write) for the others. */
int64_t assign_output_rows(gen *g, int64_t *rows_out, int64_t *page_rows) {
    int64_t closing_count = 0;
    for (int64_t t = 0; t < g->T; t++) closing_count += closing(g, t);
    static const int64_t block_sizes[] = {1, 2, 4, 8, 16, 64};
    int64_t kb = pick_page_rows(g, block_sizes, 6, 0);
    int64_t pages = (closing_count + kvc_rng_range(g->r, 0, 4) + kb - 1) / kb;
    if (g->geometry_pool > 0) pages = pooled(g, Q_KV_ROWS, (closing_count + kb - 1) / kb, kb);
    if (pages < 1) pages = 1;
    int64_t rows = pages * kb;
    int64_t *perm = malloc((size_t)rows * sizeof *perm);
    for (int64_t i = 0; i < rows; i++) perm[i] = i;
    shuffle(g->r, perm, rows);
    int64_t next = 0;
    for (int64_t t = 0; t < g->T; t++) {
        if (closing(g, t)) g->kv_slot[t] = perm[next++];
        else if (g->slot[t] >= 0 && kvc_rng_chance(g->r, 1, 4)) g->kv_slot[t] = kvc_rng_below(g->r, rows);
        else g->kv_slot[t] = -1;
    }
    /* A closing position whose state slot is negative but whose output
     * row is valid must be skipped (vLLM's CPU port compresses it): give
     * some of those a free row of their own. */
    for (int64_t t = 0; t < g->T && next < rows; t++)
        if (g->slot[t] < 0 && (g->pos[t] + 1) % g->ratio == 0 && g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM &&
            kvc_rng_chance(g->r, 1, 2))
            g->kv_slot[t] = perm[next++];
    free(perm);
    *rows_out = rows;
    *page_rows = kb;
    return pages;
}

/* A closing position with an output row but a negative state slot is
 * skipped by the contract, but a kernel that ignores the state slot
 * rotates it: its row is in the table too, so that such a kernel writes
 * a wrong row the catalogue's state-slot-ignored explains instead of
 * reading past the table. */
static int rotated_by_some_kernel(const gen *g, int64_t t) {
    return closing(g, t) || (g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM && g->kv_slot[t] >= 0 && (g->pos[t] + 1) % g->ratio == 0);
}

void put_cos_sin(gen *g) {
    int64_t rows = 1;
    for (int64_t t = 0; t < g->T; t++)
        if (rotated_by_some_kernel(g, t) && (g->pos[t] / g->ratio) * g->ratio + 1 > rows) rows = (g->pos[t] / g->ratio) * g->ratio + 1;
    int64_t needed = rows, drawn = rows + kvc_rng_range(g->r, 0, 2 * g->ratio);
    /* With the pool: the tier's rows, those past the drawn ones filler. */
    rows = g->geometry_pool > 0 ? pooled(g, Q_COS_ROWS, needed, 1) : drawn;
    g->drawn_cos_rows = drawn;
    float *cos_sin = tensor(g, "cos_sin", KVC_DT_F4, 2, rows, 64, 0);
    if (kvc_rng_chance(g->r, 1, 10)) {   /* the identity rotation */
        for (int64_t i = 0; i < rows; i++)
            for (int j = 0; j < 32; j++) { cos_sin[i * 64 + j] = 1.0f; cos_sin[i * 64 + 32 + j] = 0.0f; }
    } else {
        int64_t values = drawn < rows ? drawn : rows;
        fill_values(g, cos_sin, values * 64, KVC_ROLE_COS_SIN);
        if (rows > values) fill_filler(g, cos_sin + values * 64, (rows - values) * 64);
    }
}

/* The generator's V4 and V4.1 cases: each stage's tensors filled for a planned batch. */

#include "harness/fuzz/gen_variants.h"

#include "harness/fuzz/gen_values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- V4 -------------------------------------------------------------- */

void gen_v4(gen *g) {
    int coff = kvc_v4_coff(g->ratio);
    int64_t width = (int64_t)coff * g->head_dim, window = (int64_t)coff * g->ratio;
    plan_requests(g, g->ratio == 4 ? 40 : 300, g->ratio == 4 ? 10 : 4);
    static const int64_t state_block_sizes[] = {1, 2, 3, 4, 8, 16};
    int64_t bs = pick_page_rows(g, state_block_sizes, 6, 1);
    /* Physical pages only for the logical blocks a window or the chunk
     * touches, drawn from a shuffled, sparse pool. */
    int64_t lo_block[MAX_REQUESTS], hi_block[MAX_REQUESTS], needed = 0, max_blocks = 0;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t lo = g->start[q] - window + 1;
        lo_block[q] = (lo < 0 ? 0 : lo) / bs;
        hi_block[q] = (g->start[q] + g->count[q] - 1) / bs;
        needed += hi_block[q] - lo_block[q] + 1;
        if (hi_block[q] + 1 > max_blocks) max_blocks = hi_block[q] + 1;
    }
    int64_t columns_needed = max_blocks, pages_needed = needed;
    max_blocks += kvc_rng_range(g->r, 0, 2);
    int64_t num_pages = needed + kvc_rng_range(g->r, 0, 3);
    if (g->geometry_pool > 0) {
        /* The pool's sizes: spare columns (aliases no window reads) and
         * spare pages (no table entry of a window names them). */
        int which[] = {Q_STATE_PAGES, Q_COLUMNS, Q_KV_ROWS, Q_COS_ROWS};
        int64_t needs[] = {rows_for(pages_needed, bs), rows_for(columns_needed, bs), closing_upper(g), cos_rows_upper(g)};
        pool_tier(g, which, needs, g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES ? 1 : 4);
        num_pages = pooled(g, Q_STATE_PAGES, pages_needed, bs);
        g->drawn_columns = max_blocks;
        if (g->stage != KVC_STAGE_V4_SAVE_PARTIAL_STATES) max_blocks = pooled(g, Q_COLUMNS, columns_needed, bs);
    }
    int64_t *pool = malloc((size_t)num_pages * sizeof *pool);
    for (int64_t i = 0; i < num_pages; i++) pool[i] = i;
    shuffle(g->r, pool, num_pages);
    /* The save maps tokens through slot_mapping alone: its case carries no
     * block table (the stage-call table, docs/candidates.md), the slots
     * still come from one. */
    int save = g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES;
    int32_t *table = save ? malloc((size_t)(g->num_requests * max_blocks) * sizeof *table)
                          : tensor(g, "block_table", KVC_DT_I4, 2, g->num_requests, max_blocks, 0);
    int64_t next = 0;
    for (int q = 0; q < g->num_requests; q++)
        for (int64_t col = 0; col < max_blocks; col++)
            table[q * max_blocks + col] = col >= lo_block[q] && col <= hi_block[q]
                                              ? (int32_t)pool[next++]
                                              : (int32_t)kvc_rng_below(g->r, num_pages);   /* aliases, never read */
    free(pool);
    for (int64_t t = 0; t < g->T; t++) {
        int q = g->req[t];
        g->slot[t] = kvc_rng_chance(g->r, 1, 14) ? -1 : (int64_t)table[q * max_blocks + g->pos[t] / bs] * bs + g->pos[t] % bs;
    }
    if (save) free(table);
    append_padding(g);
    put_positions(g);
    float *state = tensor(g, "state_cache", KVC_DT_F4, 3, num_pages, bs, 2 * width);
    /* The save never reads the state cache: rows are overwritten or kept
     * bit for bit, so random bytes (NaN payloads included) serve, at a
     * fraction of the cost of values (batches past 8 MiB). */
    if (g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) {
        fill_bytes(g, state, num_pages * bs * 2 * width * 4);
    } else {
        /* A correct compress reads, through the table, the rows of the
         * positions of each request's windows before its chunk and of the
         * chunk (which a forward's save writes first); none else. */
        uint8_t *read = calloc((size_t)(num_pages * bs), 1);
        for (int q = 0; q < g->num_requests; q++)
            for (int64_t p = g->start[q] - window + 1 < 0 ? 0 : g->start[q] - window + 1; p < g->start[q] + g->count[q]; p++)
                read[(int64_t)table[q * max_blocks + p / bs] * bs + p % bs] = 1;
        fill_state_rows(g, state, num_pages * bs, width, read);
        free(read);
    }
    if (g->stage != KVC_STAGE_V4_COMPRESS) {
        fill_values(g, tensor(g, "kv", KVC_DT_F4, 2, g->T, width, 0), g->T * width, KVC_ROLE_KV);
        fill_values(g, tensor(g, "score", KVC_DT_F4, 2, g->T, width, 0), g->T * width, KVC_ROLE_SCORE);
        /* The save adds ape row p mod R to a token's score: of R = 128's
         * rows, only the chunk's few are read. */
        float *ape = tensor(g, "ape", KVC_DT_F4, 2, g->ratio, width, 0);
        uint8_t read[128] = {0};
        for (int64_t t = 0; t < g->T; t++) read[g->pos[t] % g->ratio] = 1;
        for (int32_t row = 0; row < g->ratio; row++)
            if (read[row]) fill_values(g, ape + row * width, width, KVC_ROLE_SCORE);
            else fill_filler(g, ape + row * width, width);
    }
    if (g->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) return;
    int64_t rows, kb;
    int64_t kv_pages = assign_output_rows(g, &rows, &kb);
    int32_t *token_to_req = tensor(g, "token_to_req", KVC_DT_I4, 1, g->T, 0, 0);
    memcpy(token_to_req, g->req, (size_t)g->T * 4);
    memcpy(tensor(g, "kv_slot_mapping", KVC_DT_I8, 1, g->T, 0, 0), g->kv_slot, (size_t)g->T * 8);
    fill_values(g, tensor(g, "norm_weight", KVC_DT_F4, 1, g->head_dim, 0, 0), g->head_dim, KVC_ROLE_WEIGHT);
    put_cos_sin(g);
    int64_t row_bytes = g->head_dim == 512 ? 584 : 132;
    fill_bytes(g, tensor(g, "kv_cache", KVC_DT_U1, 3, kv_pages, kb, row_bytes), kv_pages * kb * row_bytes);
    g->c->has_cache_dtype = 1;
    g->c->cache_dtype = g->head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
}

/* ---- V4.1 ------------------------------------------------------------ */

static void put_latent_values(gen *g, uint16_t *latent, int64_t tokens) {
    float row[512];
    for (int64_t t = 0; t < tokens; t++) {
        fill_values(g, row, 512, KVC_ROLE_LATENT);
        if (g->family == KVC_FAM_POW2_EDGE || g->family == KVC_FAM_FP8_TIES)
            for (int b = 0; b < 7; b++)
                if (kvc_rng_chance(g->r, 3, 4)) edge_block(g->r, row + b * 64, g->family);
        for (int d = 0; d < 512; d++) latent[t * 512 + d] = kvc_bf16_from_f32(row[d]);
    }
}

/* Three in four NoPE values +-x0 (adversarial_fp8_scale), each one whose
 * fp8 code x * RN(1/s) and x / s disagree on. */
static void put_scaled_midpoints(gen *g, uint16_t *latent) {
    for (int64_t t = 0; t < g->T; t++)
        for (int d = 0; d < 448; d++)
            if (kvc_rng_chance(g->r, 3, 4)) latent[t * 512 + d] = kvc_bf16_from_f32(random_sign(g->r, g->fp8_probe));
}

static void put_norm_weight_bf16(gen *g) {
    uint16_t *w = tensor(g, "norm_weight", KVC_DT_U2, 1, 512, 0, 0);
    for (int d = 0; d < 512; d++) w[d] = kvc_bf16_from_f32(kvc_gen_value(g->r, g->family, KVC_ROLE_WEIGHT));
}

/* A chunk longer than CAP (chunked prefill past the ring: only its last
 * CAP rows are stored, and they wrap around the ring), as the first of
 * one or two requests; the other, if any, a short chunk. */
static void plan_chunk_past_cap(gen *g, int64_t cap) {
    g->num_requests = (int)kvc_rng_range(g->r, 1, 2);
    g->T = 0;
    for (int q = 0; q < g->num_requests; q++) {
        int64_t n = q == 0 ? cap + kvc_rng_range(g->r, 1, cap < 16 ? cap + 3 : 16) : kvc_rng_range(g->r, 1, 4);
        g->start[q] = kvc_rng_range(g->r, 0, 60);
        g->count[q] = n;
        for (int64_t i = 0; i < n; i++, g->T++) {
            g->pos[g->T] = g->start[q] + i;
            g->req[g->T] = q;
        }
    }
}

/* R = 2: one ring block per request, chunks of consecutive positions. */
static void plan_v41_ring(gen *g) {
    static const int64_t caps[] = {8, 16, 32};
    int64_t cap = pick_page_rows(g, caps, 3, 2);
    if (kvc_rng_chance(g->r, 1, 12)) {   /* SPEC.md 3: any power of two >= 8 */
        cap = kvc_rng_chance(g->r, 1, 4) ? 128 : 64;
        g->dimensions |= KVC_DIM_LARGE_RING;
    }
    /* One ring case in four feeds a chunk past CAP (coverage: "v4.1 ring
     * wrap"), drawn from a stream of its own, seeded from the case's
     * without advancing it: the other ring cases are drawn as before. */
    kvc_rng own;
    kvc_rng_seed(&own, g->r->s[0] ^ kvc_rotl64(g->r->s[2], 29), 0xCA9);
    int past_cap = kvc_rng_chance(&own, 1, 4);
    if (past_cap) plan_chunk_past_cap(g, cap);
    else plan_requests(g, 60, kvc_rng_chance(g->r, 1, 8) ? (int)cap + 6 : 10);
    int64_t num_blocks = g->num_requests + kvc_rng_range(g->r, 0, 2);
    if (g->geometry_pool > 0) {
        int which[] = {Q_RING_BLOCKS, Q_KV_ROWS, Q_COS_ROWS};
        int64_t needs[] = {g->num_requests, closing_upper(g), cos_rows_upper(g)};
        pool_tier(g, which, needs, g->forward ? 3 : 1);
        num_blocks = pooled(g, Q_RING_BLOCKS, g->num_requests, 1);
    }
    int64_t blocks[MAX_REQUESTS + 3];
    for (int64_t i = 0; i < num_blocks; i++) blocks[i] = i;
    shuffle(g->r, blocks, num_blocks);
    for (int64_t t = 0; t < g->T; t++)
        g->slot[t] = kvc_rng_chance(g->r, 1, 16) ? -1 : blocks[g->req[t]] * cap + g->pos[t] % cap;
    /* Two in three of those chunks hold a padding row among their last
     * CAP rows: it counts towards the CAP rows stored and writes nothing
     * (SPEC.md 5.1 ring store). */
    if (past_cap && kvc_rng_chance(g->r, 2, 3)) g->slot[g->count[0] - 1 - kvc_rng_below(g->r, cap)] = -1;
    int64_t real_tokens = g->T;
    append_padding(g);
    for (int64_t t = real_tokens; t < g->T; t++) g->req[t] = (int32_t)kvc_rng_below(g->r, 5);   /* ignored */
    int32_t *qsl = tensor(g, "query_start_loc", KVC_DT_I4, 1, g->num_requests + 1, 0, 0);
    qsl[0] = 0;
    for (int q = 0; q < g->num_requests; q++) qsl[q + 1] = qsl[q] + (int32_t)g->count[q];
    memcpy(tensor(g, "token_to_req", KVC_DT_I4, 1, g->T, 0, 0), g->req, (size_t)g->T * 4);
    float *ring = tensor(g, "state_cache", KVC_DT_F4, 3, num_blocks, cap, 1024);
    /* A correct kernel reads the ring row of the position before a
     * request's chunk (a closing first token's partner) and writes those
     * of the chunk; none else of its block, nor the spare blocks. */
    uint8_t *read = calloc((size_t)(num_blocks * cap), 1);
    for (int q = 0; q < g->num_requests; q++)
        for (int64_t p = g->start[q] > 0 ? g->start[q] - 1 : 0; p < g->start[q] + g->count[q]; p++) read[blocks[q] * cap + p % cap] = 1;
    fill_state_rows(g, ring, num_blocks * cap, 512, read);
    free(read);
}

/* R = 1: independent tokens; slot_mapping only marks them valid. */
static void plan_v41_plain(gen *g) {
    g->T = kvc_rng_chance(g->r, 1, 16) ? kvc_rng_range(g->r, 17, 40) : kvc_rng_range(g->r, 1, 6);
    if (g->T > 6) g->dimensions |= KVC_DIM_WIDE_BATCH;
    if (kvc_rng_chance(g->r, 1, 128)) {
        g->T = kvc_rng_range(g->r, SMALL_TOKENS + 1, 160);
        g->dimensions |= KVC_DIM_LARGE_BATCH;
    }
    g->num_requests = 1;
    for (int64_t t = 0; t < g->T; t++) {
        g->pos[t] = kvc_rng_below(g->r, 300);
        g->req[t] = 0;
        g->slot[t] = kvc_rng_chance(g->r, 1, 8) ? -1 : t;
    }
}

/* A scale s = RN(x0 / m0), x0 a bf16 value, m0 an fp8 midpoint (an odd
 * 5-bit significand: 17..31 times 2^k), for which x0 * RN(1/s) and
 * RN(x0 / s) land on different sides of m0, or one on it: the fp8 code
 * of x0 then depends on which of the two a kernel computes (the contract
 * multiplies by RN(1/s), SPEC.md 5).  0 when 32 tries find none. */
static int adversarial_fp8_scale(gen *g) {
    for (int attempt = 0; attempt < 32; attempt++) {
        float x0 = ldexpf((float)kvc_rng_range(g->r, 128, 255), (int)kvc_rng_range(g->r, -12, 2));
        float m0 = ldexpf((float)(2 * kvc_rng_range(g->r, 8, 15) + 1), (int)kvc_rng_range(g->r, -10, 3));
        float s = x0 / m0, r = 1.0f / s;
        if (!(s > 0.0f) || !isfinite(s) || !isfinite(r)) continue;
        if (kvc_fp8_from_f32(x0 * r) != kvc_fp8_from_f32(x0 / s)) {
            g->fp8_scale = s;
            g->fp8_probe = x0;
            return 1;
        }
    }
    return 0;
}

static void put_kv_cache_v41(gen *g, kvc_cache_dtype dtype) {
    int64_t rows, kb;
    int64_t pages = assign_output_rows(g, &rows, &kb);
    int64_t width = dtype == KVC_CACHE_FP8_DS_MLA ? 584 : 512;
    kvc_dtype element = dtype == KVC_CACHE_BF16 ? KVC_DT_U2 : KVC_DT_U1;
    void *cache = tensor(g, "kv_cache", element, 3, pages, kb, width);
    fill_bytes(g, cache, pages * kb * width * kvc_dtype_size(element));
    g->c->has_cache_dtype = 1;
    g->c->cache_dtype = dtype;
    if (dtype == KVC_CACHE_FP8_E4M3) {
        float *scale = tensor(g, "fp8_scale", KVC_DT_F4, 1, 1, 0, 0);
        scale[0] = kvc_rng_chance(g->r, 1, 2) ? scaled(g->r, 1.0f, -12, 6) : scaled(g->r, 0.5f + kvc_rng_unit(g->r), -10, 4);
        if (kvc_rng_chance(g->r, 1, 3) && adversarial_fp8_scale(g)) {
            scale[0] = g->fp8_scale;
            g->dimensions |= KVC_DIM_FP8_SCALE;
        }
    }
}

void gen_v41_norm(gen *g, int forward) {
    g->forward = forward;
    if (g->ratio == 2) plan_v41_ring(g);
    else plan_v41_plain(g);
    if (g->ratio != 2 && forward && g->geometry_pool > 0) {
        int which[] = {Q_KV_ROWS, Q_COS_ROWS};
        int64_t needs[] = {closing_upper(g), cos_rows_upper(g)};
        pool_tier(g, which, needs, 2);
    }
    if (forward && g->ratio == 1) {
        /* R = 1 forward inserts at slot_mapping: rows must be distinct */
        int64_t rows, kb;
        int64_t pages = assign_output_rows(g, &rows, &kb);
        for (int64_t t = 0; t < g->T; t++) g->slot[t] = g->slot[t] >= 0 ? g->kv_slot[t] : -1;
        void *cache = tensor(g, "kv_cache", KVC_DT_U1, 3, pages, kb, 584);
        fill_bytes(g, cache, pages * kb * 584);
        g->c->has_cache_dtype = 1;
        g->c->cache_dtype = KVC_CACHE_FP8_DS_MLA;
    }
    put_positions(g);
    fill_values(g, tensor(g, "kv_score", KVC_DT_F4, 2, g->T, 512 * g->ratio, 0), g->T * 512 * g->ratio, KVC_ROLE_KV);
    if (g->ratio == 2) {   /* the score half of each row */
        float *rows = kvc_case_get(g->c, "kv_score")->data;
        for (int64_t t = 0; t < g->T; t++) fill_values(g, rows + t * 1024 + 512, 512, KVC_ROLE_SCORE);
    }
    put_norm_weight_bf16(g);
    fill_bytes(g, tensor(g, "latent", KVC_DT_U2, 2, g->T, 512, 0), g->T * 1024);
    if (!forward) return;
    if (g->ratio == 2) {
        put_kv_cache_v41(g, KVC_CACHE_FP8_DS_MLA);
        memcpy(tensor(g, "kv_slot_mapping", KVC_DT_I8, 1, g->T, 0, 0), g->kv_slot, (size_t)g->T * 8);
    }
    put_cos_sin(g);
}

void gen_v41_insert(gen *g, kvc_cache_dtype dtype) {
    g->ratio = (int32_t)kvc_rng_range(g->r, 1, 2);
    g->c->compress_ratio = g->ratio;
    g->T = kvc_rng_chance(g->r, 1, 16) ? kvc_rng_range(g->r, 17, 48) : kvc_rng_range(g->r, 1, 8);
    if (g->T > 8) g->dimensions |= KVC_DIM_WIDE_BATCH;
    if (kvc_rng_chance(g->r, 1, 128)) {
        g->T = kvc_rng_range(g->r, SMALL_TOKENS + 1, 160);
        g->dimensions |= KVC_DIM_LARGE_BATCH;
    }
    g->num_requests = 1;
    for (int64_t t = 0; t < g->T; t++) {
        g->pos[t] = kvc_rng_below(g->r, 400);
        g->slot[t] = kvc_rng_chance(g->r, 1, 8) ? -1 : 0;
    }
    if (g->geometry_pool > 0) {
        int which[] = {Q_KV_ROWS, Q_COS_ROWS};
        int64_t needs[] = {closing_upper(g), cos_rows_upper(g)};
        pool_tier(g, which, needs, 2);
    }
    put_kv_cache_v41(g, dtype);
    for (int64_t t = 0; t < g->T; t++) g->slot[t] = g->kv_slot[t];
    put_positions(g);
    uint16_t *latent = tensor(g, "latent", KVC_DT_U2, 2, g->T, 512, 0);
    put_latent_values(g, latent, g->T);
    if (g->fp8_scale != 0.0f) put_scaled_midpoints(g, latent);
    put_cos_sin(g);
}

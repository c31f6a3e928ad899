/* kvcmp bench's scenarios: the shapes of vLLM's CPU-port measurements
 * (issue 4) and of V4.1, with seeded random inputs.
 *
 * The byte counts are the compulsory traffic of one call: every input
 * byte it must read once plus every output byte it writes (a V4 state row
 * is read once per call: R = 128 windows do not overlap, and for R = 4 the
 * previous group reads a row's first half, its own group the second).
 * The exp counts are the exact exps a stage cannot do without. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "harness/bench/bench.h"

/* The window of a V4 closing token: coff * R entries. */
static int64_t coff_window(int32_t ratio) { return (int64_t)kvc_v4_coff(ratio) * ratio; }

/* ---- Random data ---------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t next_random(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
static double uniform01(void) { return ((double)(next_random() >> 11) + 0.5) * 0x1p-53; }
/* Box-Muller: standard normal samples. */
static float randn(void) { return (float)(sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01())); }
static void fill_randn(float *values, int64_t count) {
    for (int64_t i = 0; i < count; i++) values[i] = randn();
}
static void shuffle(int32_t *values, int64_t count) {
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = (int64_t)(next_random() % (uint64_t)(i + 1));
        int32_t swap = values[i]; values[i] = values[j]; values[j] = swap;
    }
}

/* ---- Scenarios ------------------------------------------------------------ */

static void *bench_alloc(scenario_data *s, size_t bytes) {
    void *p = bench_buffer_alloc(bytes, s->huge_pages);
    s->allocations[s->num_allocations++] = p;
    return p;
}

static void add_output(scenario_data *s, const char *name, void *data, size_t bytes) {
    s->outputs[s->num_outputs++] = (bench_region){name, data, bytes};
}

static size_t cache_bytes(const kvc_paged_cache *c) { return (size_t)(c->num_pages * c->page_stride); }

static kvc_paged_cache bench_cache(scenario_data *s, int64_t pages, int64_t rows, int64_t row_bytes) {
    kvc_paged_cache c = {0};
    c.num_pages = pages;
    c.page_rows = rows;
    c.page_bytes = rows * row_bytes;
    c.page_stride = c.page_bytes;
    c.data = bench_alloc(s, (size_t)(pages * c.page_stride));
    return c;
}

/* cos/sin rows of real angles, as a RoPE table holds. */
static float *bench_cos_sin(scenario_data *s, int64_t rows) {
    float *table = bench_alloc(s, (size_t)(rows * 64) * 4);
    for (int64_t p = 0; p < rows; p++)
        for (int i = 0; i < 32; i++) {
            double angle = (double)p * pow(10000.0, -(double)i / 32.0);
            table[p * 64 + i] = (float)cos(angle);
            table[p * 64 + 32 + i] = (float)sin(angle);
        }
    return table;
}

static float *bench_norm_weight(scenario_data *s, int64_t dims) {
    float *weight = bench_alloc(s, (size_t)dims * 4);
    for (int64_t d = 0; d < dims; d++) weight[d] = 1.0f + 0.1f * randn();
    return weight;
}

/* V4 compress, one request prefilling `tokens` positions from 0: shuffled
 * physical state blocks of block_size rows, KV block 64, state saved. */
static void setup_v4_prefill(scenario_data *s, int32_t ratio, int32_t head_dim, int64_t block_size, int64_t tokens) {
    kvc_v4_compress_args *a = &s->compress;
    int64_t width = (int64_t)kvc_v4_coff(ratio) * head_dim, pages = tokens / block_size;
    s->stage = STAGE_V4_COMPRESS;
    a->num_tokens = tokens;
    a->compress_ratio = ratio;
    a->head_dim = head_dim;
    a->eps = 1e-6f;
    a->state_cache = bench_cache(s, pages, block_size, 2 * width * 4);
    fill_randn(a->state_cache.data, pages * block_size * 2 * width);
    int32_t *block_table = bench_alloc(s, (size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) block_table[i] = (int32_t)i;
    shuffle(block_table, pages);
    a->block_table = block_table;
    a->num_requests = 1;
    a->max_blocks = pages;
    int32_t *token_to_req = bench_alloc(s, (size_t)tokens * 4);
    int64_t *positions = bench_alloc(s, (size_t)tokens * 8), *slots = bench_alloc(s, (size_t)tokens * 8);
    int64_t *kv_slots = bench_alloc(s, (size_t)tokens * 8);
    int64_t closing = 0;
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = t;
        slots[t] = kvc_v4_state_slot(a, 0, t);
        kv_slots[t] = kvc_is_closing(t, ratio) ? closing++ : -1;
    }
    a->token_to_req = token_to_req;
    a->positions = positions;
    a->slot_mapping = slots;
    a->kv_slot_mapping = kv_slots;
    a->norm_weight = bench_norm_weight(s, head_dim);
    a->cos_sin = bench_cos_sin(s, tokens);
    a->cos_sin_rows = tokens;
    kvc_cache_dtype dtype = head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    a->kv_cache = bench_cache(s, (closing + 63) / 64, 64, kvc_cache_row_bytes(dtype));
    s->tokens = tokens;
    /* Every state row once, one cos/sin row and one cache row per closing
     * token; one exp per channel and valid window entry. */
    s->read_bytes = (double)tokens * 2 * width * 4 + (double)closing * 64 * 4;
    s->written_bytes = (double)closing * kvc_cache_row_bytes(dtype);
    for (int64_t t = 0; t < tokens; t++)
        if (kvc_is_closing(t, ratio)) s->exps += (double)head_dim * (t + 1 < coff_window(ratio) ? t + 1 : coff_window(ratio));
    add_output(s, "kv_cache", a->kv_cache.data, cache_bytes(&a->kv_cache));
}

static void setup_r128_prefill(scenario_data *s) { setup_v4_prefill(s, 128, 512, 8, 8192); }
static void setup_r4_prefill(scenario_data *s) { setup_v4_prefill(s, 4, 512, 4, 8192); }
static void setup_d128_prefill(scenario_data *s) { setup_v4_prefill(s, 4, 128, 4, 8192); }

/* V4 forward at decode: 64 requests, one closing token each at ~4096
 * context, D = 512, R = 4, state block 4.  Only the blocks a window reads
 * get pages of their own; the earlier columns of every block table point
 * at one shared page that nothing reads. */
static void setup_r4_decode(scenario_data *s) {
    int64_t requests = 64, block_size = 4, ratio = 4, head_dim = 512, width = 2 * head_dim;
    int64_t max_blocks = (4096 + 8 * ratio) / block_size + 3, pages = 1 + 3 * requests;
    s->stage = STAGE_V4_FORWARD;
    kvc_v4_compress_args *c = &s->compress;
    kvc_v4_save_args *v = &s->save;
    c->num_tokens = v->num_tokens = requests;
    c->compress_ratio = v->compress_ratio = (int32_t)ratio;
    c->head_dim = v->head_dim = (int32_t)head_dim;
    c->eps = 1e-6f;
    c->state_cache = v->state_cache = bench_cache(s, pages, block_size, 2 * width * 4);
    fill_randn(c->state_cache.data, pages * block_size * 2 * width);
    int32_t *block_table = bench_alloc(s, (size_t)(requests * max_blocks) * 4);
    int32_t *token_to_req = bench_alloc(s, (size_t)requests * 4);
    int64_t *positions = bench_alloc(s, (size_t)requests * 8), *slots = bench_alloc(s, (size_t)requests * 8);
    int64_t *kv_slots = bench_alloc(s, (size_t)requests * 8);
    int32_t *own_pages = bench_alloc(s, (size_t)(3 * requests) * 4);
    for (int64_t i = 0; i < 3 * requests; i++) own_pages[i] = (int32_t)(1 + i);
    shuffle(own_pages, 3 * requests);
    c->block_table = block_table;
    c->num_requests = requests;
    c->max_blocks = max_blocks;
    for (int64_t r = 0; r < requests; r++) {
        int64_t p = 4095 + ratio * (r % 8);     /* closing positions around 4096 */
        for (int64_t column = 0; column < max_blocks; column++) block_table[r * max_blocks + column] = 0;
        for (int64_t k = 0; k < 3; k++) block_table[r * max_blocks + (p - 7) / block_size + k] = own_pages[3 * r + k];
        token_to_req[r] = (int32_t)r;
        positions[r] = p;
        slots[r] = kvc_v4_state_slot(c, r, p);
        kv_slots[r] = r;
    }
    c->token_to_req = token_to_req;
    c->positions = v->positions = positions;
    c->slot_mapping = v->slot_mapping = slots;
    c->kv_slot_mapping = kv_slots;
    c->norm_weight = bench_norm_weight(s, head_dim);
    c->cos_sin = bench_cos_sin(s, 4096 + 8 * ratio);
    c->cos_sin_rows = 4096 + 8 * ratio;
    c->kv_cache = bench_cache(s, 1, 64, kvc_cache_row_bytes(KVC_CACHE_FP8_DS_MLA));
    float *kv = bench_alloc(s, (size_t)(requests * width) * 4), *score = bench_alloc(s, (size_t)(requests * width) * 4);
    float *ape = bench_alloc(s, (size_t)(ratio * width) * 4);
    fill_randn(kv, requests * width);
    fill_randn(score, requests * width);
    fill_randn(ape, ratio * width);
    v->kv = kv;
    v->score = score;
    v->ape = ape;
    s->tokens = requests;
    /* save: read kv + score, write the state row; compress: 8 half rows of
     * kv and score, a cos/sin row, one 584-byte row written; 8 x 512 exps. */
    s->read_bytes = (double)requests * (2.0 * width * 4 + 8.0 * 2 * head_dim * 4 + 64 * 4);
    s->written_bytes = (double)requests * (2.0 * width * 4 + 584.0);
    s->exps = (double)requests * 8 * head_dim;
    add_output(s, "state_cache", c->state_cache.data, cache_bytes(&c->state_cache));
    add_output(s, "kv_cache", c->kv_cache.data, cache_bytes(&c->kv_cache));
}

/* save_partial_states: 8192 tokens, D = 512, R = 4, shuffled blocks of 4. */
static void setup_save(scenario_data *s) {
    int64_t tokens = 8192, block_size = 4, ratio = 4, width = 2 * 512, pages = tokens / block_size;
    kvc_v4_save_args *a = &s->save;
    s->stage = STAGE_V4_SAVE;
    a->num_tokens = tokens;
    a->compress_ratio = (int32_t)ratio;
    a->head_dim = 512;
    a->state_cache = bench_cache(s, pages, block_size, 2 * width * 4);
    float *kv = bench_alloc(s, (size_t)(tokens * width) * 4), *score = bench_alloc(s, (size_t)(tokens * width) * 4);
    float *ape = bench_alloc(s, (size_t)(ratio * width) * 4);
    fill_randn(kv, tokens * width);
    fill_randn(score, tokens * width);
    fill_randn(ape, ratio * width);
    int32_t *physical = bench_alloc(s, (size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) physical[i] = (int32_t)i;
    shuffle(physical, pages);
    int64_t *positions = bench_alloc(s, (size_t)tokens * 8), *slots = bench_alloc(s, (size_t)tokens * 8);
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = t;
        slots[t] = (int64_t)physical[t / block_size] * block_size + t % block_size;
    }
    a->kv = kv;
    a->score = score;
    a->ape = ape;
    a->positions = positions;
    a->slot_mapping = slots;
    s->tokens = tokens;
    s->read_bytes = (double)tokens * 2.0 * width * 4;      /* kv + score */
    s->written_bytes = (double)tokens * 2.0 * width * 4;   /* a state row of 2W */
    add_output(s, "state_cache", a->state_cache.data, cache_bytes(&a->state_cache));
}

/* V4.1 save_compress_norm, R = 2: `requests` requests of `chunk` tokens
 * each, starting at `start` (odd start: the first token reads the ring). */
static void setup_v41_norm(scenario_data *s, int64_t requests, int64_t chunk, int64_t start) {
    int64_t cap = 16, tokens = requests * chunk;
    kvc_v41_norm_args *a = &s->norm;
    s->stage = STAGE_V41_NORM;
    a->num_tokens = tokens;
    a->compress_ratio = 2;
    a->eps = 1e-6f;
    float *kv_score = bench_alloc(s, (size_t)(tokens * 1024) * 4);
    fill_randn(kv_score, tokens * 1024);
    a->kv_score = kv_score;
    uint16_t *weight = bench_alloc(s, 512 * 2);
    for (int d = 0; d < 512; d++) weight[d] = kvc_bf16_from_f32(1.0f + 0.1f * randn());
    a->norm_weight = weight;
    a->latent = bench_alloc(s, (size_t)(tokens * 512) * 2);
    a->state_cache = bench_cache(s, requests, cap, 1024 * 4);
    fill_randn(a->state_cache.data, requests * cap * 1024);
    int32_t *query_start_loc = bench_alloc(s, (size_t)(requests + 1) * 4), *token_to_req = bench_alloc(s, (size_t)tokens * 4);
    int64_t *positions = bench_alloc(s, (size_t)tokens * 8), *slots = bench_alloc(s, (size_t)tokens * 8);
    int64_t closing = 0;
    for (int64_t r = 0; r < requests; r++) {
        query_start_loc[r] = (int32_t)(r * chunk);
        for (int64_t i = 0; i < chunk; i++) {
            int64_t t = r * chunk + i, p = start + i;
            token_to_req[t] = (int32_t)r;
            positions[t] = p;
            slots[t] = r * cap + p % cap;
            closing += kvc_is_closing(p, 2);
        }
    }
    query_start_loc[requests] = (int32_t)tokens;
    a->query_start_loc = query_start_loc;
    a->num_requests = requests;
    a->token_to_req = token_to_req;
    a->positions = positions;
    a->slot_mapping = slots;
    s->tokens = tokens;
    int64_t ring_rows = requests * (chunk < cap ? chunk : cap);
    int64_t ring_reads = start % 2 ? requests : 0;
    /* kv_score read once, ring rows read and stored, latent rows written;
     * one exp per channel of a closing token (the maximum's own weight is
     * exp(0) = 1). */
    s->read_bytes = (double)tokens * 4096 + (double)ring_reads * 4096;
    s->written_bytes = (double)ring_rows * 4096 + (double)closing * 1024;
    s->exps = (double)closing * 512;
    add_output(s, "latent", a->latent, (size_t)(tokens * 512) * 2);
    add_output(s, "state_cache", a->state_cache.data, cache_bytes(&a->state_cache));
}

static void setup_v41_prefill(scenario_data *s) { setup_v41_norm(s, 1, 8192, 0); }
static void setup_v41_decode(scenario_data *s) { setup_v41_norm(s, 64, 1, 4095); }

/* V4.1 rope_quant_insert, R = 2: 8192 tokens, 4096 closing rows inserted
 * into fp8_ds_mla pages of 64. */
static void setup_quant_insert(scenario_data *s) {
    int64_t tokens = 8192, closing = tokens / 2;
    kvc_v41_insert_args *a = &s->insert;
    s->stage = STAGE_V41_QUANT_INSERT;
    a->num_tokens = tokens;
    a->compress_ratio = 2;
    a->cache_dtype = KVC_CACHE_FP8_DS_MLA;
    uint16_t *latent = bench_alloc(s, (size_t)(tokens * 512) * 2);
    for (int64_t i = 0; i < tokens * 512; i++) latent[i] = kvc_bf16_from_f32(randn());
    int64_t *positions = bench_alloc(s, (size_t)tokens * 8), *slots = bench_alloc(s, (size_t)tokens * 8);
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = t;
        slots[t] = kvc_is_closing(t, 2) ? t / 2 : -1;
    }
    a->latent = latent;
    a->positions = positions;
    a->slot_mapping = slots;
    a->cos_sin = bench_cos_sin(s, tokens);
    a->cos_sin_rows = tokens;
    a->kv_cache = bench_cache(s, closing / 64, 64, kvc_cache_row_bytes(KVC_CACHE_FP8_DS_MLA));
    s->tokens = tokens;
    /* A latent row and a cos/sin row read, a cache row written per closing token. */
    s->read_bytes = (double)closing * (1024 + 64 * 4);
    s->written_bytes = (double)closing * 584;
    add_output(s, "kv_cache", a->kv_cache.data, cache_bytes(&a->kv_cache));
}

const bench_scenario bench_scenarios[] = {
    {"v4-d512-r128-prefill", "V4 compress D=512 R=128, 1 request x 8192 tokens, state block 8", setup_r128_prefill},
    {"v4-d512-r4-prefill", "V4 compress D=512 R=4, 1 request x 8192 tokens, state block 4", setup_r4_prefill},
    {"v4-d128-r4-prefill", "V4 compress D=128 R=4, 1 request x 8192 tokens, state block 4", setup_d128_prefill},
    {"v4-d512-r4-decode", "V4 forward D=512 R=4, 64 requests x 1 closing token, ~4096 context", setup_r4_decode},
    {"v4-save-partial-states", "V4 save_partial_states D=512 R=4, 8192 tokens", setup_save},
    {"v41-r2-prefill", "V4.1 save_compress_norm R=2, 1 request x 8192 tokens", setup_v41_prefill},
    {"v41-r2-decode", "V4.1 save_compress_norm R=2, 64 requests x 1 token (ring read)", setup_v41_decode},
    {"v41-rope-quant-insert", "V4.1 rope_quant_insert R=2, 8192 tokens (4096 rows)", setup_quant_insert},
};
const int bench_num_scenarios = (int)(sizeof bench_scenarios / sizeof bench_scenarios[0]);

void bench_scenario_setup(const bench_scenario *sc, int huge_pages, scenario_data *s) {
    memset(s, 0, sizeof *s);
    s->huge_pages = huge_pages;
    rng_state = 0x9E3779B97F4A7C15ULL;   /* the same data every run of the bench */
    sc->setup(s);
}

void bench_scenario_free(scenario_data *s) {
    for (int i = 0; i < s->num_allocations; i++) free(s->allocations[i]);
    s->num_allocations = 0;
}

int bench_scenario_offered(const kvc_backend *b, const scenario_data *s) {
    switch (s->stage) {
    case STAGE_V4_SAVE: return b->v4_save_partial_states != NULL;
    case STAGE_V4_COMPRESS: return b->v4_compress != NULL;
    case STAGE_V4_FORWARD: return b->v4_save_partial_states != NULL && b->v4_compress != NULL;
    case STAGE_V41_NORM: return b->v41_save_compress_norm != NULL;
    case STAGE_V41_QUANT_INSERT: return b->v41_rope_quant_insert != NULL;
    }
    return 0;
}

int bench_scenario_run(const kvc_backend *backend, const scenario_data *s, kvc_error *err) {
    switch (s->stage) {
    case STAGE_V4_SAVE: return backend->v4_save_partial_states(&s->save, err);
    case STAGE_V4_COMPRESS: return backend->v4_compress(&s->compress, err);
    case STAGE_V4_FORWARD: {
        int rc = backend->v4_save_partial_states(&s->save, err);
        return rc ? rc : backend->v4_compress(&s->compress, err);
    }
    case STAGE_V41_NORM: return backend->v41_save_compress_norm(&s->norm, err);
    case STAGE_V41_QUANT_INSERT: return backend->v41_rope_quant_insert(&s->insert, err);
    }
    return KVC_ERR_PARAM;
}

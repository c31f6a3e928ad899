/* kvcmp bench's scenarios: the shapes of vLLM's CPU-port measurements
 * and of V4.1, with seeded random inputs.
 *
 * The byte counts are the compulsory traffic of one call: every input
 * byte it must read once plus every output byte it writes (a V4 state row
 * is read once per call: R = 128 windows do not overlap, and for R = 4 the
 * previous group reads a row's first half, its own group the second).
 * A scenario's work is counted in units (bench_scenario_units), so that
 * a copy of it small enough to stay in the caches can stand for its
 * compute: the same shape with fewer tokens, or fewer requests. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "harness/bench/bench.h"
#include "harness/options/options.h"

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

/* Pages of `rows` rows, `padding` bytes (that no stage may touch) after each. */
static kvc_paged_cache bench_cache(scenario_data *s, int64_t pages, int64_t rows, int64_t row_bytes, int64_t padding) {
    kvc_paged_cache c = {0};
    c.num_pages = pages;
    c.page_rows = rows;
    c.page_bytes = rows * row_bytes;
    c.page_stride = c.page_bytes + padding;
    c.data = bench_alloc(s, (size_t)(pages * c.page_stride));
    return c;
}

/* Every row of a cache of floats, page after page (the padding stays 0). */
static void fill_cache_randn(kvc_paged_cache *c) {
    for (int64_t page = 0; page < c->num_pages; page++)
        fill_randn((float *)((uint8_t *)c->data + page * c->page_stride), c->page_bytes / 4);
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

/* V4 compress, `requests` requests prefilling tokens / requests positions
 * each from 0: shuffled physical state blocks of block_size rows, KV
 * block 64, state saved. */
static void setup_v4_prefill(scenario_data *s, int32_t ratio, int32_t head_dim, int64_t block_size, int64_t tokens, int64_t requests,
                             int64_t padding) {
    kvc_v4_compress_args *a = &s->compress;
    int64_t width = (int64_t)kvc_v4_coff(ratio) * head_dim, chunk = tokens / requests;
    int64_t max_blocks = (chunk + block_size - 1) / block_size, pages = requests * max_blocks;
    s->stage = STAGE_V4_COMPRESS;
    a->num_tokens = tokens;
    a->compress_ratio = ratio;
    a->head_dim = head_dim;
    a->eps = 1e-6f;
    a->state_cache = bench_cache(s, pages, block_size, 2 * width * 4, padding);
    fill_cache_randn(&a->state_cache);
    int32_t *block_table = bench_alloc(s, (size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) block_table[i] = (int32_t)i;
    shuffle(block_table, pages);
    a->block_table = block_table;
    a->num_requests = requests;
    a->max_blocks = max_blocks;
    int32_t *token_to_req = bench_alloc(s, (size_t)tokens * 4);
    int64_t *positions = bench_alloc(s, (size_t)tokens * 8), *slots = bench_alloc(s, (size_t)tokens * 8);
    int64_t *kv_slots = bench_alloc(s, (size_t)tokens * 8);
    int64_t closing = 0;
    for (int64_t t = 0; t < tokens; t++) {
        int64_t req = t / chunk, p = t % chunk;
        token_to_req[t] = (int32_t)req;
        positions[t] = p;
        slots[t] = kvc_v4_state_slot(a, req, p);
        kv_slots[t] = kvc_is_closing(p, ratio) ? closing++ : -1;
    }
    a->token_to_req = token_to_req;
    a->positions = positions;
    a->slot_mapping = slots;
    a->kv_slot_mapping = kv_slots;
    a->norm_weight = bench_norm_weight(s, head_dim);
    a->cos_sin = bench_cos_sin(s, chunk);
    a->cos_sin_rows = chunk;
    kvc_cache_dtype dtype = head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    a->kv_cache = bench_cache(s, (closing + 63) / 64, 64, kvc_cache_row_bytes(dtype), padding);
    s->tokens = tokens;
    /* Every state row once, one cos/sin row and one cache row per closing
     * token. */
    s->read_bytes = (double)tokens * 2 * width * 4 + (double)closing * 64 * 4;
    s->written_bytes = (double)closing * kvc_cache_row_bytes(dtype);
    add_output(s, "kv_cache", a->kv_cache.data, cache_bytes(&a->kv_cache));
}


/* V4 forward at decode: `requests` requests, one closing token each at
 * about `context` positions (the first closing position from context - 1
 * on, plus 0..7 x R).  Only the blocks a window reads get pages of their
 * own; the earlier columns of every block table point at one shared page
 * that nothing reads. */
static void setup_v4_decode(scenario_data *s, int32_t ratio, int32_t head_dim, int64_t block_size, int64_t requests, int64_t context,
                            int64_t padding) {
    int64_t width = (int64_t)kvc_v4_coff(ratio) * head_dim, window = coff_window(ratio);
    int64_t max_blocks = (context + 8 * ratio) / block_size + 3, own = (window - 1) / block_size + 2, pages = 1 + own * requests;
    int64_t first_closing = (context + ratio - 1) / ratio * ratio - 1;
    s->stage = STAGE_V4_FORWARD;
    kvc_v4_compress_args *c = &s->compress;
    kvc_v4_save_args *v = &s->save;
    c->num_tokens = v->num_tokens = requests;
    c->compress_ratio = v->compress_ratio = ratio;
    c->head_dim = v->head_dim = head_dim;
    c->eps = 1e-6f;
    c->state_cache = v->state_cache = bench_cache(s, pages, block_size, 2 * width * 4, padding);
    fill_cache_randn(&c->state_cache);
    int32_t *block_table = bench_alloc(s, (size_t)(requests * max_blocks) * 4);
    int32_t *token_to_req = bench_alloc(s, (size_t)requests * 4);
    int64_t *positions = bench_alloc(s, (size_t)requests * 8), *slots = bench_alloc(s, (size_t)requests * 8);
    int64_t *kv_slots = bench_alloc(s, (size_t)requests * 8);
    int32_t *own_pages = bench_alloc(s, (size_t)(own * requests) * 4);
    for (int64_t i = 0; i < own * requests; i++) own_pages[i] = (int32_t)(1 + i);
    shuffle(own_pages, own * requests);
    c->block_table = block_table;
    c->num_requests = requests;
    c->max_blocks = max_blocks;
    for (int64_t r = 0; r < requests; r++) {
        int64_t p = first_closing + ratio * (r % 8), first = p - window + 1 > 0 ? p - window + 1 : 0;
        for (int64_t column = 0; column < max_blocks; column++) block_table[r * max_blocks + column] = 0;
        for (int64_t k = 0; k < own && first / block_size + k < max_blocks; k++)
            block_table[r * max_blocks + first / block_size + k] = own_pages[own * r + k];
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
    c->cos_sin = bench_cos_sin(s, context + 8 * ratio);
    c->cos_sin_rows = context + 8 * ratio;
    kvc_cache_dtype dtype = head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    c->kv_cache = bench_cache(s, (requests + 63) / 64, 64, kvc_cache_row_bytes(dtype), padding);
    float *kv = bench_alloc(s, (size_t)(requests * width) * 4), *score = bench_alloc(s, (size_t)(requests * width) * 4);
    float *ape = bench_alloc(s, (size_t)(ratio * width) * 4);
    fill_randn(kv, requests * width);
    fill_randn(score, requests * width);
    fill_randn(ape, ratio * width);
    v->kv = kv;
    v->score = score;
    v->ape = ape;
    s->tokens = requests;
    /* save: read kv + score, write the state row; compress: a window of
     * D-wide kv and score entries, a cos/sin row, one cache row written. */
    s->read_bytes = (double)requests * (2.0 * width * 4 + (double)window * 2 * head_dim * 4 + 64 * 4);
    s->written_bytes = (double)requests * (2.0 * width * 4 + (double)kvc_cache_row_bytes(dtype));
    add_output(s, "state_cache", c->state_cache.data, cache_bytes(&c->state_cache));
    add_output(s, "kv_cache", c->kv_cache.data, cache_bytes(&c->kv_cache));
}


/* save_partial_states: `requests` requests of tokens / requests positions
 * each from 0, shuffled blocks of block_size rows. */
static void setup_v4_save(scenario_data *s, int32_t ratio, int32_t head_dim, int64_t block_size, int64_t tokens, int64_t requests,
                          int64_t padding) {
    int64_t width = (int64_t)kvc_v4_coff(ratio) * head_dim, chunk = tokens / requests;
    int64_t per_request = (chunk + block_size - 1) / block_size, pages = requests * per_request;
    kvc_v4_save_args *a = &s->save;
    s->stage = STAGE_V4_SAVE;
    a->num_tokens = tokens;
    a->compress_ratio = ratio;
    a->head_dim = head_dim;
    a->state_cache = bench_cache(s, pages, block_size, 2 * width * 4, padding);
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
        int64_t req = t / chunk, p = t % chunk;
        positions[t] = p;
        slots[t] = (int64_t)physical[req * per_request + p / block_size] * block_size + p % block_size;
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
static void setup_v41_norm(scenario_data *s, int64_t requests, int64_t chunk, int64_t start, int64_t padding) {
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
    a->state_cache = bench_cache(s, requests, cap, 1024 * 4, padding);
    fill_cache_randn(&a->state_cache);
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
    /* kv_score read once, ring rows read and stored, latent rows written. */
    s->read_bytes = (double)tokens * 4096 + (double)ring_reads * 4096;
    s->written_bytes = (double)ring_rows * 4096 + (double)closing * 1024;
    add_output(s, "latent", a->latent, (size_t)(tokens * 512) * 2);
    add_output(s, "state_cache", a->state_cache.data, cache_bytes(&a->state_cache));
}


/* V4.1 rope_quant_insert, R = 2: `tokens` positions from 0, the closing
 * rows inserted into fp8_ds_mla pages of block_size rows. */
static void setup_v41_insert(scenario_data *s, int64_t tokens, int64_t block_size, int64_t padding) {
    int64_t closing = tokens / 2;
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
    a->kv_cache = bench_cache(s, (closing + block_size - 1) / block_size, block_size, kvc_cache_row_bytes(KVC_CACHE_FP8_DS_MLA), padding);
    s->tokens = tokens;
    /* A latent row and a cos/sin row read, a cache row written per closing token. */
    s->read_bytes = (double)closing * (1024 + 64 * 4);
    s->written_bytes = (double)closing * 584;
    add_output(s, "kv_cache", a->kv_cache.data, cache_bytes(&a->kv_cache));
}

/* The built-in scenarios, as --shape would give them. */
static const bench_shape r128_prefill = {SHAPE_V4_COMPRESS, .d = 512, .r = 128, .tokens = 8192, .requests = 1, .block = 8};
static const bench_shape r4_prefill = {SHAPE_V4_COMPRESS, .d = 512, .r = 4, .tokens = 8192, .requests = 1, .block = 4};
static const bench_shape d128_prefill = {SHAPE_V4_COMPRESS, .d = 128, .r = 4, .tokens = 8192, .requests = 1, .block = 4};
static const bench_shape r4_decode = {SHAPE_V4_DECODE, .d = 512, .r = 4, .requests = 64, .context = 4096, .block = 4};
static const bench_shape save = {SHAPE_V4_SAVE, .d = 512, .r = 4, .tokens = 8192, .requests = 1, .block = 4};
static const bench_shape v41_prefill = {SHAPE_V41_NORM, .tokens = 8192, .requests = 1};
static const bench_shape v41_decode = {SHAPE_V41_NORM, .tokens = 64, .requests = 64, .start = 4095};
static const bench_shape quant_insert = {SHAPE_V41_INSERT, .tokens = 8192, .block = 64};

const bench_scenario bench_scenarios[] = {
    {"v4-d512-r128-prefill", "V4 compress D=512 R=128, 1 request x 8192 tokens, state block 8", &r128_prefill},
    {"v4-d512-r4-prefill", "V4 compress D=512 R=4, 1 request x 8192 tokens, state block 4", &r4_prefill},
    {"v4-d128-r4-prefill", "V4 compress D=128 R=4, 1 request x 8192 tokens, state block 4", &d128_prefill},
    {"v4-d512-r4-decode", "V4 forward D=512 R=4, 64 requests x 1 closing token, ~4096 context", &r4_decode},
    {"v4-save-partial-states", "V4 save_partial_states D=512 R=4, 8192 tokens", &save},
    {"v41-r2-prefill", "V4.1 save_compress_norm R=2, 1 request x 8192 tokens", &v41_prefill},
    {"v41-r2-decode", "V4.1 save_compress_norm R=2, 64 requests x 1 token (ring read)", &v41_decode},
    {"v41-rope-quant-insert", "V4.1 rope_quant_insert R=2, 8192 tokens (4096 rows)", &quant_insert},
};
const int bench_num_scenarios = (int)(sizeof bench_scenarios / sizeof bench_scenarios[0]);

/* ---- Scenarios the user describes (--shape) ---------------------------------- */

typedef struct {
    const char *name;
    size_t offset;
    int64_t min, max, multiple;
} shape_key;

static const shape_key shape_keys[] = {
    {"d", offsetof(bench_shape, d), 128, 512, 0},   /* 128 or 512 */
    {"r", offsetof(bench_shape, r), 4, 128, 0},     /* 4 or 128 */
    {"tokens", offsetof(bench_shape, tokens), 1, (int64_t)1 << 18, 1},
    {"requests", offsetof(bench_shape, requests), 1, 4096, 1},
    {"block", offsetof(bench_shape, block), 1, 1024, 1},
    {"padding", offsetof(bench_shape, padding), 0, 65536, 64},
    {"context", offsetof(bench_shape, context), 1, (int64_t)1 << 18, 1},
    {"start", offsetof(bench_shape, start), 0, (int64_t)1 << 20, 1},
};

typedef struct {
    const char *name;
    bench_shape_stage stage;
    const char *keys;   /* the keys it takes, in order */
    bench_shape defaults;
} shape_stage;

static const shape_stage shape_stages[] = {
    {"v4-compress", SHAPE_V4_COMPRESS, "d,r,tokens,requests,block,padding", {.d = 512, .r = 4, .tokens = 8192, .requests = 1, .block = 4}},
    {"v4-save", SHAPE_V4_SAVE, "d,r,tokens,requests,block,padding", {.d = 512, .r = 4, .tokens = 8192, .requests = 1, .block = 4}},
    {"v4-decode", SHAPE_V4_DECODE, "d,r,requests,context,block,padding", {.d = 512, .r = 4, .requests = 64, .context = 4096, .block = 4}},
    {"v41-norm", SHAPE_V41_NORM, "tokens,requests,start,padding", {.tokens = 8192, .requests = 1}},
    {"v41-insert", SHAPE_V41_INSERT, "tokens,block,padding", {.tokens = 8192, .block = 64}},
};
#define NUM_SHAPE_STAGES ((int)(sizeof shape_stages / sizeof shape_stages[0]))

const char bench_shape_help[] =
    "shapes (--shape STAGE[:KEY=VALUE,...]; tokens is the batch, split evenly over requests; padding: bytes after each cache page):\n"
    "  v4-compress:d=512,r=4,tokens=8192,requests=1,block=4,padding=0    prefill from position 0, shuffled state blocks\n"
    "  v4-save:d=512,r=4,tokens=8192,requests=1,block=4,padding=0        save_partial_states from position 0\n"
    "  v4-decode:d=512,r=4,requests=64,context=4096,block=4,padding=0    save + compress, 1 closing token per request\n"
    "  v41-norm:tokens=8192,requests=1,start=0,padding=0                 V4.1 save_compress_norm R=2 from position start\n"
    "  v41-insert:tokens=8192,block=64,padding=0                         V4.1 rope_quant_insert R=2 into pages of block rows\n"
    "  d: 128 or 512; r: 4 or 128; tokens, context: 1..262144; requests: 1..4096; block: 1..1024;\n"
    "  padding: 0..65536, a multiple of 64; start: 0..1048576\n";

static int key_taken(const char *keys, const char *key) {
    size_t length = strlen(key);
    for (const char *k = keys; *k;) {
        size_t n = strcspn(k, ",");
        if (n == length && strncmp(k, key, n) == 0) return 1;
        k += n + (k[n] == ',');
    }
    return 0;
}

/* The bytes of the buffers a shape allocates, about. */
static double shape_bytes(const bench_shape *h) {
    double width = (h->r == 4 ? 2.0 : 1.0) * (double)h->d, row = 2 * width * 4;
    double requests = h->requests ? (double)h->requests : 1, block = h->block ? (double)h->block : 1;
    double chunk = (double)h->tokens / requests, blocks = requests * ceil(chunk / block);
    switch (h->stage) {
    case SHAPE_V4_COMPRESS: return blocks * ((double)h->block * row + (double)h->padding) + (double)h->tokens * 40;
    case SHAPE_V4_SAVE: return blocks * ((double)h->block * row + (double)h->padding) + (double)h->tokens * (2 * width * 4 + 16);
    case SHAPE_V4_DECODE: {
        double window = (h->r == 4 ? 2.0 : 1.0) * (double)h->r, own = floor((window - 1) / (double)h->block) + 2;
        return (1 + own * (double)h->requests) * ((double)h->block * row + (double)h->padding) +
               (double)h->requests * ((double)(h->context + 8 * h->r) / (double)h->block + 3) * 4 + (double)(h->context + 8 * h->r) * 256;
    }
    case SHAPE_V41_NORM: return (double)h->tokens * (4096 + 1024 + 32) + (double)h->requests * (16 * 4096 + (double)h->padding);
    case SHAPE_V41_INSERT: return (double)h->tokens * (1024 + 256 + 16) + (double)h->tokens / 2 * 584;
    }
    return 0;
}

#define SHAPE_MAX_BYTES ((double)((int64_t)16 << 30))

int bench_shape_parse(const char *spec, bench_shape *shape, char *description, size_t description_size, char *why, size_t size) {
    size_t stage_length = strcspn(spec, ":");
    const shape_stage *stage = NULL;
    for (int i = 0; i < NUM_SHAPE_STAGES; i++)
        if (strlen(shape_stages[i].name) == stage_length && strncmp(spec, shape_stages[i].name, stage_length) == 0) stage = &shape_stages[i];
    if (!stage) {
        snprintf(why, size, "--shape '%s': unknown stage '%.*s' (v4-compress, v4-save, v4-decode, v41-norm or v41-insert)", spec,
                 (int)stage_length, spec);
        return -1;
    }
    *shape = stage->defaults;
    shape->stage = stage->stage;
    char copy[512], given[256] = ",";
    if (strlen(spec) >= sizeof copy) { snprintf(why, size, "--shape '%.60s...': longer than %zu characters", spec, sizeof copy - 1); return -1; }
    snprintf(copy, sizeof copy, "%s", spec[stage_length] == ':' ? spec + stage_length + 1 : "");
    if (spec[stage_length] == ':' && copy[0] == 0) { snprintf(why, size, "--shape '%s': no KEY=VALUE after ':'", spec); return -1; }
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *equals = strchr(item, '=');
        if (!equals) { snprintf(why, size, "--shape %s: '%s' is not KEY=VALUE (keys: %s)", stage->name, item, stage->keys); return -1; }
        *equals = 0;
        const char *key = item, *value = equals + 1;
        const shape_key *k = NULL;
        for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0]; i++)
            if (strcmp(shape_keys[i].name, key) == 0) k = &shape_keys[i];
        if (!k || !key_taken(stage->keys, key)) {
            snprintf(why, size, "--shape %s: unknown key '%s' (keys: %s)", stage->name, key, stage->keys);
            return -1;
        }
        char marked[64];
        snprintf(marked, sizeof marked, ",%s,", key);
        if (strstr(given, marked)) { snprintf(why, size, "--shape %s: key '%s' given twice", stage->name, key); return -1; }
        snprintf(given + strlen(given), sizeof given - strlen(given), "%s,", key);
        int64_t number;
        int parsed = kvc_parse_int64_text(value, &number) == 0;
        if (k->multiple == 0) {   /* d, r: two values */
            if (!parsed || (number != k->min && number != k->max)) {
                snprintf(why, size, "--shape %s: %s takes %lld or %lld, not '%s'", stage->name, key, (long long)k->min, (long long)k->max, value);
                return -1;
            }
        } else if (!parsed || number < k->min || number > k->max || number % k->multiple != 0) {
            snprintf(why, size, "--shape %s: %s takes a whole number from %lld to %lld%s, not '%s'", stage->name, key, (long long)k->min,
                     (long long)k->max, k->multiple > 1 ? " (a multiple of 64)" : "", value);
            return -1;
        }
        *(int64_t *)((char *)shape + k->offset) = number;
    }
    if (key_taken(stage->keys, "requests") && key_taken(stage->keys, "tokens") && shape->tokens % shape->requests != 0) {
        snprintf(why, size, "--shape %s: tokens = %lld is not a multiple of requests = %lld", stage->name, (long long)shape->tokens,
                 (long long)shape->requests);
        return -1;
    }
    if (shape->stage == SHAPE_V41_INSERT && shape->tokens < 2) {
        snprintf(why, size, "--shape %s: tokens takes at least 2 (one closing row at R = 2), not %lld", stage->name, (long long)shape->tokens);
        return -1;
    }
    double bytes = shape_bytes(shape);
    if (bytes > SHAPE_MAX_BYTES) {
        snprintf(why, size, "--shape %s: needs about %.0f MiB of buffers, more than %.0f MiB; take fewer tokens, requests or a smaller block",
                 stage->name, bytes / (1 << 20), SHAPE_MAX_BYTES / (1 << 20));
        return -1;
    }
    int n = snprintf(description, description_size, "%s", stage->name);
    for (const char *k = stage->keys; *k && n >= 0 && (size_t)n < description_size;) {
        size_t length = strcspn(k, ",");
        for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0]; i++)
            if (strlen(shape_keys[i].name) == length && strncmp(shape_keys[i].name, k, length) == 0)
                n += snprintf(description + n, description_size - (size_t)n, " %s=%lld", shape_keys[i].name,
                              (long long)*(const int64_t *)((const char *)shape + shape_keys[i].offset));
        k += length + (k[length] == ',');
    }
    return 0;
}

static void setup_shape(scenario_data *s, const bench_shape *h) {
    switch (h->stage) {
    case SHAPE_V4_COMPRESS: setup_v4_prefill(s, (int32_t)h->r, (int32_t)h->d, h->block, h->tokens, h->requests, h->padding); break;
    case SHAPE_V4_SAVE: setup_v4_save(s, (int32_t)h->r, (int32_t)h->d, h->block, h->tokens, h->requests, h->padding); break;
    case SHAPE_V4_DECODE: setup_v4_decode(s, (int32_t)h->r, (int32_t)h->d, h->block, h->requests, h->context, h->padding); break;
    case SHAPE_V41_NORM: setup_v41_norm(s, h->requests, h->tokens / h->requests, h->start, h->padding); break;
    case SHAPE_V41_INSERT: setup_v41_insert(s, h->tokens, h->block, h->padding); break;
    }
}

/* Requests of at most this many tokens are counted whole: a copy with
 * fewer of them keeps each one's tokens.  Longer ones are counted in
 * tokens, as one request. */
#define UNIT_REQUEST_TOKENS 256

bench_units bench_scenario_units(const bench_scenario *sc) {
    const bench_shape *h = sc->params;
    /* Tokens go in steps that keep the closing tokens' share: R at V4, 2
     * at V4.1.  A V4 decode's requests differ only in their positions. */
    int64_t step = h->stage == SHAPE_V4_COMPRESS || h->stage == SHAPE_V4_SAVE ? h->r : 2;
    switch (h->stage) {
    case SHAPE_V4_DECODE: return (bench_units){h->requests, 1, "requests"};
    case SHAPE_V41_INSERT: return (bench_units){h->tokens, 2, "tokens"};
    case SHAPE_V4_COMPRESS:
    case SHAPE_V4_SAVE:
    case SHAPE_V41_NORM: break;
    }
    if (h->requests > 1 && h->tokens / h->requests <= UNIT_REQUEST_TOKENS) return (bench_units){h->requests, 1, "requests"};
    return (bench_units){h->tokens, step, "tokens"};
}

void bench_scenario_setup_units(const bench_scenario *sc, int64_t units, int huge_pages, scenario_data *s) {
    bench_shape h = *sc->params;
    if (strcmp(bench_scenario_units(sc).name, "requests") == 0) {
        h.tokens = h.tokens / h.requests * units;
        h.requests = units;
    } else {
        h.tokens = units;
        h.requests = 1;
    }
    memset(s, 0, sizeof *s);
    s->huge_pages = huge_pages;
    rng_state = 0x9E3779B97F4A7C15ULL;   /* the same data every run of the bench */
    setup_shape(s, &h);
}

void bench_scenario_setup(const bench_scenario *sc, int huge_pages, scenario_data *s) {
    bench_scenario_setup_units(sc, bench_scenario_units(sc).count, huge_pages, s);
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

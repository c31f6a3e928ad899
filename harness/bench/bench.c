/* kvcmp bench: throughput of the reference and the optimized backend on
 * the shapes of vLLM's CPU-port measurements (issue 4), beside this
 * machine's streaming read and copy bandwidth measured in the same run.
 *
 * "Bytes moved" is the compulsory traffic of a stage: every input byte it
 * must read once plus every output byte it writes (a V4 state row is read
 * once per call: R = 128 windows do not overlap, and for R = 4 the
 * previous group reads a row's first half, its own group the second).
 * The copy bandwidth counts read + written bytes the same way, so
 * "% copy" compares like with like.  Timings are min and median of runs
 * after one warm-up run; each run is the whole stage call, validation
 * included. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "optimized/optimized.h"
#include "optimized/vector_arrays.h"
#include "cli/commands.h"
#include "harness/options/options.h"

#define MAX_ALLOCATIONS 16
#define MAX_RUNS 1000
#define BANDWIDTH_BYTES ((size_t)64 << 20)   /* per buffer: source and destination */

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

typedef enum { STAGE_V4_SAVE, STAGE_V4_COMPRESS, STAGE_V4_FORWARD, STAGE_V41_NORM, STAGE_V41_QUANT_INSERT } bench_stage;

typedef struct {
    bench_stage stage;
    kvc_v4_save_args save;
    kvc_v4_compress_args compress;
    kvc_v41_norm_args norm;
    kvc_v41_insert_args insert;
    int64_t tokens;          /* tokens in the batch (tokens/s counts these) */
    double bytes_moved;      /* compulsory bytes read + written per call */
    void *allocations[MAX_ALLOCATIONS];
    int num_allocations;
} scenario_data;

typedef struct {
    const char *name;
    const char *shape;
    void (*setup)(scenario_data *);
    double vllm_ms_one_thread, vllm_ms_two_threads;   /* 0: not measured */
} scenario;

static void *bench_alloc(scenario_data *s, size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "kvcmp bench: out of memory (%zu bytes)\n", bytes); exit(2); }
    memset(p, 0, bytes);
    s->allocations[s->num_allocations++] = p;
    return p;
}

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
    s->bytes_moved = (double)tokens * 2 * width * 4 + (double)closing * kvc_cache_row_bytes(dtype);
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
     * kv and score per token, one 584-byte row written. */
    s->bytes_moved = (double)requests * (4.0 * width * 4 + 8.0 * 2 * head_dim * 4 + 584.0);
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
    s->bytes_moved = (double)tokens * 4.0 * width * 4;   /* read kv + score, write 2W */
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
    /* kv_score read once, ring rows read and stored, latent rows written. */
    s->bytes_moved = (double)tokens * 4096 + (double)(ring_reads + ring_rows) * 4096 + (double)closing * 1024;
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
    s->bytes_moved = (double)closing * (1024 + 584);
}

/* vLLM CPU-port reference times from issue 4 (ms; min of 15 runs). */
static const scenario scenarios[] = {
    {"v4-d512-r128-prefill", "V4 compress D=512 R=128, 1 request x 8192 tokens, state block 8", setup_r128_prefill, 4.28, 1.52},
    {"v4-d512-r4-prefill", "V4 compress D=512 R=4, 1 request x 8192 tokens, state block 4", setup_r4_prefill, 8.58, 4.57},
    {"v4-d128-r4-prefill", "V4 compress D=128 R=4, 1 request x 8192 tokens, state block 4", setup_d128_prefill, 1.83, 0.647},
    {"v4-d512-r4-decode", "V4 forward D=512 R=4, 64 requests x 1 closing token, ~4096 context", setup_r4_decode, 0, 0.086},
    {"v4-save-partial-states", "V4 save_partial_states D=512 R=4, 8192 tokens", setup_save, 4.22, 2.15},
    {"v41-r2-prefill", "V4.1 save_compress_norm R=2, 1 request x 8192 tokens", setup_v41_prefill, 0, 0},
    {"v41-r2-decode", "V4.1 save_compress_norm R=2, 64 requests x 1 token (ring read)", setup_v41_decode, 0, 0},
    {"v41-rope-quant-insert", "V4.1 rope_quant_insert R=2, 8192 tokens (4096 rows)", setup_quant_insert, 0, 0},
};
#define NUM_SCENARIOS ((int)(sizeof scenarios / sizeof scenarios[0]))

static int run_stage(const kvc_backend *backend, scenario_data *s, kvc_error *err) {
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

/* ---- Timing ----------------------------------------------------------------- */

typedef struct {
    int runs;
    double min_seconds, median_seconds;
} timing;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static timing summarize(double *seconds, int runs) {
    qsort(seconds, (size_t)runs, sizeof *seconds, compare_doubles);
    timing t = {runs, seconds[0], runs % 2 ? seconds[runs / 2] : 0.5 * (seconds[runs / 2 - 1] + seconds[runs / 2])};
    return t;
}

/* One warm-up call, then `runs` timed calls at `threads` threads. */
static int time_backend(const kvc_backend *backend, scenario_data *s, int threads, int runs, timing *out) {
    double seconds[MAX_RUNS];
    kvc_error err;
    omp_set_num_threads(threads);
    if (run_stage(backend, s, &err)) {
        fprintf(stderr, "kvcmp bench: %s failed: %s\n", backend->name, err.message);
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        double start = now_seconds();
        run_stage(backend, s, &err);
        seconds[r] = now_seconds() - start;
    }
    *out = summarize(seconds, runs);
    return 0;
}

/* ---- Memory bandwidth --------------------------------------------------------- */

typedef struct {
    double read_bytes_per_second, copy_bytes_per_second;
} bandwidth;

/* The part [first, first + length) of count words that thread `thread` of
 * `threads` owns. */
static void thread_share(size_t count, int thread, int threads, size_t *first, size_t *length) {
    size_t per_thread = (count + (size_t)threads - 1) / (size_t)threads;
    *first = per_thread * (size_t)thread;
    if (*first > count) *first = count;
    *length = *first + per_thread <= count ? per_thread : count - *first;
}

/* Streaming read (a sum over 64 MiB) and copy (64 MiB to 64 MiB, counted
 * as read + written bytes), split evenly over `threads`, with the
 * optimized backend's AVX-512 kernels (software prefetch, streaming
 * stores: on this machine they beat glibc's memcpy); best of runs after
 * one warm-up. */
static bandwidth measure_bandwidth(int threads, int runs) {
    size_t count = BANDWIDTH_BYTES / sizeof(uint64_t);
    uint64_t *source = aligned_alloc(64, BANDWIDTH_BYTES), *destination = aligned_alloc(64, BANDWIDTH_BYTES);
    bandwidth b = {0, 0};
    if (!source || !destination) { free(source); free(destination); return b; }
    for (size_t i = 0; i < count; i++) source[i] = i;
    memset(destination, 0, BANDWIDTH_BYTES);
    omp_set_num_threads(threads);
    double best_read = 1e30, best_copy = 1e30;
    for (int r = 0; r < runs + 1; r++) {
        uint64_t sum = 0;
        double start = now_seconds();
#pragma omp parallel reduction(+ : sum)
        {
            size_t first, length;
            thread_share(count, omp_get_thread_num(), omp_get_num_threads(), &first, &length);
            sum += opt_stream_read(source + first, length * sizeof *source);
        }
        double read_seconds = now_seconds() - start;
        /* Checking the sum keeps the read loop from being optimised away. */
        if (sum != (uint64_t)count * (count - 1) / 2) fprintf(stderr, "kvcmp bench: bandwidth read loop summed wrongly\n");
        start = now_seconds();
#pragma omp parallel
        {
            size_t first, length;
            thread_share(count, omp_get_thread_num(), omp_get_num_threads(), &first, &length);
            opt_stream_copy(destination + first, source + first, length * sizeof *source);
        }
        double copy_seconds = now_seconds() - start;
        if (r == 0) continue;   /* warm-up */
        if (read_seconds < best_read) best_read = read_seconds;
        if (copy_seconds < best_copy) best_copy = copy_seconds;
    }
    b.read_bytes_per_second = (double)BANDWIDTH_BYTES / best_read;
    b.copy_bytes_per_second = 2.0 * (double)BANDWIDTH_BYTES / best_copy;
    free(source);
    free(destination);
    return b;
}

/* ---- Report ---------------------------------------------------------------------- */

typedef struct {
    const scenario *sc;
    int64_t tokens;
    double bytes_moved;
    int have_reference;
    timing reference, one_thread, all_threads;
} scenario_result;

static double ms(double seconds) { return 1e3 * seconds; }
static double gbps(double bytes, double seconds) { return bytes / seconds * 1e-9; }

/* vLLM's time at the given thread count (0 when not measured there). */
static double vllm_ms(const scenario *sc, int threads) {
    if (threads == 1) return sc->vllm_ms_one_thread;
    if (threads == 2) return sc->vllm_ms_two_threads;
    return 0;
}

static void print_table(const scenario_result *results, int count, int threads, bandwidth bw_one, bandwidth bw_all) {
    printf("\nTimes in ms, min / median (runs).  opt-1: optimized at 1 thread, opt-%d: at %d threads.\n", threads, threads);
    printf("%-24s %8s %22s %22s %22s %8s %8s\n", "scenario", "tokens", "ref", "opt-1", "opt-all", "x ref/1", "x ref/N");
    for (int i = 0; i < count; i++) {
        const scenario_result *r = &results[i];
        char ref[64] = "-", one[64], all[64];
        if (r->have_reference)
            snprintf(ref, sizeof ref, "%.3f / %.3f (%d)", ms(r->reference.min_seconds), ms(r->reference.median_seconds), r->reference.runs);
        snprintf(one, sizeof one, "%.3f / %.3f (%d)", ms(r->one_thread.min_seconds), ms(r->one_thread.median_seconds), r->one_thread.runs);
        snprintf(all, sizeof all, "%.3f / %.3f (%d)", ms(r->all_threads.min_seconds), ms(r->all_threads.median_seconds), r->all_threads.runs);
        printf("%-24s %8lld %22s %22s %22s", r->sc->name, (long long)r->tokens, ref, one, all);
        if (r->have_reference)
            printf(" %8.1f %8.1f\n", r->reference.min_seconds / r->one_thread.min_seconds, r->reference.min_seconds / r->all_threads.min_seconds);
        else
            printf(" %8s %8s\n", "-", "-");
    }
    printf("\nThroughput of the optimized backend (min times); %% copy = bytes moved/s over the copy bandwidth\n");
    printf("measured above at the same thread count.  vLLM = its CPU port (issue 4), x = vLLM time / opt time.\n");
    printf("%-24s %9s %15s %10s %8s %7s %10s %8s %7s %16s %16s\n", "scenario", "MB moved", "ref Mtok/s GB/s", "Mtok/s-1",
           "GB/s-1", "%copy", "Mtok/s-N", "GB/s-N", "%copy", "vLLM-1 ms (x)", "vLLM-N ms (x)");
    for (int i = 0; i < count; i++) {
        const scenario_result *r = &results[i];
        double one = r->one_thread.min_seconds, all = r->all_threads.min_seconds;
        char vllm_one[32] = "-", vllm_all[32] = "-", reference[32] = "-";
        if (r->have_reference)
            snprintf(reference, sizeof reference, "%.3f %.2f", (double)r->tokens / r->reference.min_seconds * 1e-6,
                     gbps(r->bytes_moved, r->reference.min_seconds));
        if (vllm_ms(r->sc, 1) > 0) snprintf(vllm_one, sizeof vllm_one, "%.3f (%.2f)", vllm_ms(r->sc, 1), vllm_ms(r->sc, 1) / ms(one));
        if (vllm_ms(r->sc, threads) > 0)
            snprintf(vllm_all, sizeof vllm_all, "%.3f (%.2f)", vllm_ms(r->sc, threads), vllm_ms(r->sc, threads) / ms(all));
        printf("%-24s %9.1f %15s %10.2f %8.1f %6.0f%% %10.2f %8.1f %6.0f%% %16s %16s\n", r->sc->name, r->bytes_moved * 1e-6,
               reference, (double)r->tokens / one * 1e-6, gbps(r->bytes_moved, one), 100.0 * r->bytes_moved / one / bw_one.copy_bytes_per_second,
               (double)r->tokens / all * 1e-6, gbps(r->bytes_moved, all), 100.0 * r->bytes_moved / all / bw_all.copy_bytes_per_second,
               vllm_one, vllm_all);
    }
}

static void json_timing(FILE *f, const char *name, const timing *t, double tokens, double bytes) {
    fprintf(f, "\"%s\": {\"runs\": %d, \"min_ms\": %.6f, \"median_ms\": %.6f, \"tokens_per_s\": %.1f, \"bytes_per_s\": %.1f}", name,
            t->runs, ms(t->min_seconds), ms(t->median_seconds), tokens / t->min_seconds, bytes / t->min_seconds);
}

static int write_json(const char *path, const scenario_result *results, int count, int threads, double load,
                      bandwidth bw_one, bandwidth bw_all) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvcmp bench: cannot write %s: %s (the table above is complete; give --json a writable path)\n", path,
                strerror(errno));
        return 1;
    }
    const char *wait_policy = getenv("OMP_WAIT_POLICY");
    fprintf(f, "{\n  \"format\": \"kvcmp-bench/1\",\n  \"threads\": %d,\n  \"load_average_at_start\": %.2f,\n", threads, load);
    fprintf(f, "  \"omp_wait_policy\": \"%s\",\n", wait_policy ? wait_policy : "default");
    fprintf(f, "  \"bandwidth\": {\"buffer_bytes\": %zu, \"read_1_thread_bytes_per_s\": %.1f, \"copy_1_thread_bytes_per_s\": %.1f, "
               "\"read_all_threads_bytes_per_s\": %.1f, \"copy_all_threads_bytes_per_s\": %.1f},\n",
            BANDWIDTH_BYTES, bw_one.read_bytes_per_second, bw_one.copy_bytes_per_second, bw_all.read_bytes_per_second,
            bw_all.copy_bytes_per_second);
    fprintf(f, "  \"scenarios\": [\n");
    for (int i = 0; i < count; i++) {
        const scenario_result *r = &results[i];
        double tokens = (double)r->tokens;
        fprintf(f, "    {\"name\": \"%s\", \"shape\": \"%s\", \"tokens\": %lld, \"bytes_moved\": %.0f,\n      ", r->sc->name,
                r->sc->shape, (long long)r->tokens, r->bytes_moved);
        if (r->have_reference) {
            json_timing(f, "reference", &r->reference, tokens, r->bytes_moved);
            fprintf(f, ",\n      ");
        }
        json_timing(f, "optimized_1_thread", &r->one_thread, tokens, r->bytes_moved);
        fprintf(f, ",\n      ");
        json_timing(f, "optimized_all_threads", &r->all_threads, tokens, r->bytes_moved);
        fprintf(f, ",\n      \"copy_fraction_1_thread\": %.4f, \"copy_fraction_all_threads\": %.4f",
                r->bytes_moved / r->one_thread.min_seconds / bw_one.copy_bytes_per_second,
                r->bytes_moved / r->all_threads.min_seconds / bw_all.copy_bytes_per_second);
        if (r->have_reference)
            fprintf(f, ", \"speedup_1_thread\": %.3f, \"speedup_all_threads\": %.3f", r->reference.min_seconds / r->one_thread.min_seconds,
                    r->reference.min_seconds / r->all_threads.min_seconds);
        if (r->sc->vllm_ms_one_thread > 0)
            fprintf(f, ", \"vllm_cpu_1_thread_ms\": %.3f, \"vs_vllm_1_thread\": %.3f", r->sc->vllm_ms_one_thread,
                    r->sc->vllm_ms_one_thread / ms(r->one_thread.min_seconds));
        if (r->sc->vllm_ms_two_threads > 0)
            fprintf(f, ", \"vllm_cpu_2_threads_ms\": %.3f", r->sc->vllm_ms_two_threads);
        if (vllm_ms(r->sc, threads) > 0 && threads == 2)
            fprintf(f, ", \"vs_vllm_2_threads\": %.3f", r->sc->vllm_ms_two_threads / ms(r->all_threads.min_seconds));
        fprintf(f, "}%s\n", i + 1 < count ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
    return 0;
}

/* ---- Command ------------------------------------------------------------------------ */

static void usage(FILE *out) {
    fprintf(out, "usage: kvcmp bench [--json FILE] [--threads K] [--scenario NAME] [--runs N] [--reference-runs N]\n"
                    "  --threads K   the 'all threads' count (default: the number of processors)\n"
                    "  --runs N      timed runs of the optimized backend after one warm-up (default 15, >= 1)\n"
                    "  --reference-runs N   timed runs of the reference (default 7)\n"
                    "scenarios:\n");
    for (int i = 0; i < NUM_SCENARIOS; i++) fprintf(out, "  %-24s %s\n", scenarios[i].name, scenarios[i].shape);
}

static void free_scenario(scenario_data *s) {
    for (int i = 0; i < s->num_allocations; i++) free(s->allocations[i]);
}

static int bench_scenario(const scenario *sc, const kvc_backend *optimized, int threads, int runs, int reference_runs,
                          scenario_result *out) {
    scenario_data s;
    memset(&s, 0, sizeof s);
    rng_state = 0x9E3779B97F4A7C15ULL;   /* the same data every run of the bench */
    sc->setup(&s);
    memset(out, 0, sizeof *out);
    out->sc = sc;
    out->tokens = s.tokens;
    out->bytes_moved = s.bytes_moved;
    fprintf(stderr, "  %s ...\n", sc->name);
    int failed = 0;
    if (reference_runs > 0) {
        out->have_reference = 1;
        failed |= time_backend(&kvc_reference_backend, &s, 1, reference_runs, &out->reference);
    }
    failed |= time_backend(optimized, &s, 1, runs, &out->one_thread);
    failed |= time_backend(optimized, &s, threads, runs, &out->all_threads);
    free_scenario(&s);
    return failed;
}

int kvc_cmd_bench(int argc, char **argv) {
    const char *json_path = NULL, *only = NULL;
    int threads = omp_get_num_procs(), runs = 15, reference_runs = 7;
    const kvc_option options[] = {
        {"json", KVC_OPT_STRING, .target = &json_path},
        {"threads", KVC_OPT_INT, .target = &threads, .min = 1, .max = 1024},
        {"scenario", KVC_OPT_STRING, .target = &only},
        {"runs", KVC_OPT_INT, .target = &runs, .min = 1, .max = MAX_RUNS},
        {"reference-runs", KVC_OPT_INT, .target = &reference_runs, .min = 0, .max = MAX_RUNS},
        {NULL},
    };
    const kvc_command_line line = {"bench", options, usage, 0};
    int status = kvc_parse_command_line(&line, argc, argv, NULL, &(int){0});
    if (status) return status == KVC_OPTIONS_HELP ? 0 : status;
    int known = only == NULL;
    for (int i = 0; i < NUM_SCENARIOS; i++) known |= only && strcmp(only, scenarios[i].name) == 0;
    if (!known) return kvc_usage_error(&line, "unknown scenario '%s'", only);
    char error[256];
    const kvc_backend *optimized = kvc_optimized_backend_get(error, sizeof error);
    if (!optimized) {
        fprintf(stderr, "kvcmp bench: %s; only the reference could run, and the bench compares the two\n", error);
        return 2;
    }
    scenario_result results[NUM_SCENARIOS];
    int count = 0, failed = 0;
    /* The conditions of the run, printed with the numbers: other load on
     * the machine and the OpenMP wait policy change the timings a lot. */
    double load = 0;
    FILE *loadavg = fopen("/proc/loadavg", "r");
    if (loadavg) {
        if (fscanf(loadavg, "%lf", &load) != 1) load = 0;
        fclose(loadavg);
    }
    const char *wait_policy = getenv("OMP_WAIT_POLICY");
    printf("kvcmp bench: %d threads, load average %.2f at start, OMP_WAIT_POLICY=%s\n", threads, load,
           wait_policy ? wait_policy : "(default)");
    fprintf(stderr, "kvcmp bench: measuring memory bandwidth ...\n");
    bandwidth bw_one = measure_bandwidth(1, 5), bw_all = measure_bandwidth(threads, 5);
    printf("memory bandwidth (%zu MiB buffers, best of 5): read %.1f GB/s, copy %.1f GB/s at 1 thread; "
           "read %.1f GB/s, copy %.1f GB/s at %d threads\n",
           BANDWIDTH_BYTES >> 20, bw_one.read_bytes_per_second * 1e-9, bw_one.copy_bytes_per_second * 1e-9,
           bw_all.read_bytes_per_second * 1e-9, bw_all.copy_bytes_per_second * 1e-9, threads);
    for (int i = 0; i < NUM_SCENARIOS; i++) {
        if (only && strcmp(only, scenarios[i].name) != 0) continue;
        failed |= bench_scenario(&scenarios[i], optimized, threads, runs, reference_runs, &results[count++]);
    }
    print_table(results, count, threads, bw_one, bw_all);
    if (json_path && write_json(json_path, results, count, threads, load, bw_one, bw_all)) return 2;
    if (json_path) printf("\nwrote %s\n", json_path);
    return failed ? 1 : 0;
}

/* The precision report's seeded corpus: see report_corpus.h.  Shapes are
 * small (a handful of closing tokens per case) because the oracle spends
 * microseconds per element; the value families are what matter. */
#include "harness/report/corpus.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kvcmp/formats.h"

static const struct {
    const char *name, *slug;
} variants[KVC_VARIANT_COUNT] = {
    {"v4.save_partial_states D=512 R=4", "v4.save-d512-r4"},
    {"v4.save_partial_states D=128 R=128", "v4.save-d128-r128"},
    {"v4.compress D=512 R=4", "v4.compress-d512-r4"},
    {"v4.compress D=512 R=128", "v4.compress-d512-r128"},
    {"v4.compress D=128 R=4", "v4.compress-d128-r4"},
    {"v4.compress D=128 R=128", "v4.compress-d128-r128"},
    {"v41.save_compress_norm R=1", "v41.norm-r1"},
    {"v41.save_compress_norm R=2", "v41.norm-r2"},
    {"v41.rope_quant_insert", "v41.quant-insert"},
    {"v41.rope_plain_insert bf16", "v41.plain-bf16"},
    {"v41.rope_plain_insert fp8_e4m3", "v41.plain-fp8"},
};
static const char *const family_names[KVC_FAMILY_COUNT] = {
    "normal", "heavy-tails", "tiny", "small-weight", "exp-underflow",
    "equal-scores", "cancellation", "pow2-edge", "fp8-ties", "nonfinite",
};

const char *kvc_corpus_variant_name(kvc_corpus_variant v) { return variants[v].name; }
const char *kvc_corpus_variant_slug(kvc_corpus_variant v) { return variants[v].slug; }
const char *kvc_corpus_family_name(kvc_corpus_family f) { return family_names[f]; }

static int is_save(kvc_corpus_variant v) { return v <= KVC_VARIANT_SAVE_D128_R128; }
static int is_insert(kvc_corpus_variant v) { return v >= KVC_VARIANT_QUANT_INSERT; }

int kvc_corpus_family_applies(kvc_corpus_variant v, kvc_corpus_family f) {
    if (is_save(v))
        return f == KVC_FAMILY_NORMAL || f == KVC_FAMILY_HEAVY_TAILS || f == KVC_FAMILY_TINY ||
               f == KVC_FAMILY_CANCELLATION || f == KVC_FAMILY_NONFINITE;
    if (is_insert(v)) return f != KVC_FAMILY_EXP_UNDERFLOW && f != KVC_FAMILY_EQUAL_SCORES;
    /* Pooling stages: the block edges cannot be planted through a norm. */
    return f != KVC_FAMILY_POW2_EDGE && f != KVC_FAMILY_FP8_TIES;
}

/* ---- PRNG ---------------------------------------------------------- */

uint64_t kvc_corpus_next(kvc_corpus_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double kvc_corpus_uniform(kvc_corpus_rng *rng) { return (double)(kvc_corpus_next(rng) >> 11) * 0x1p-53; }

double kvc_corpus_normal(kvc_corpus_rng *rng) {
    /* Box-Muller; 1 - u keeps the logarithm finite. */
    double u = 1.0 - kvc_corpus_uniform(rng), v = kvc_corpus_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int64_t below(kvc_corpus_rng *rng, int64_t n) { return (int64_t)(kvc_corpus_next(rng) % (uint64_t)n); }

static void shuffle(kvc_corpus_rng *rng, int64_t *items, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = below(rng, i + 1), t = items[i];
        items[i] = items[j];
        items[j] = t;
    }
}

/* ---- values by family ---------------------------------------------- */

typedef struct {
    kvc_corpus_rng rng;
    kvc_corpus_family family;
    float equal_score;        /* EQUAL_SCORES: the one score of the case */
} generator;

static float special_value(generator *g) {
    static const float specials[3] = {NAN, INFINITY, -INFINITY};
    return specials[below(&g->rng, 3)];
}

static float kv_value(generator *g) {
    double n = kvc_corpus_normal(&g->rng);
    switch (g->family) {
    case KVC_FAMILY_HEAVY_TAILS: return (float)(n * exp(2.0 * kvc_corpus_normal(&g->rng)));
    case KVC_FAMILY_TINY: return (float)(n * 1e-8);
    case KVC_FAMILY_CANCELLATION: return (float)((kvc_corpus_uniform(&g->rng) < 0.5 ? -1 : 1) * (1.0 + 1e-3 * n));
    case KVC_FAMILY_NONFINITE: return below(&g->rng, 300) == 0 ? special_value(g) : (float)n;
    default: return (float)n;
    }
}

static float score_value(generator *g) {
    double n = kvc_corpus_normal(&g->rng);
    switch (g->family) {
    case KVC_FAMILY_HEAVY_TAILS: return (float)(4.0 * n);
    case KVC_FAMILY_TINY: return (float)n;
    case KVC_FAMILY_EXP_UNDERFLOW: return (float)(60.0 * n);
    case KVC_FAMILY_EQUAL_SCORES: return g->equal_score;
    case KVC_FAMILY_CANCELLATION: return (float)(0.01 * n);
    case KVC_FAMILY_NONFINITE: return below(&g->rng, 300) == 0 ? special_value(g) : (float)(2.0 * n);
    default: return (float)(2.0 * n);
    }
}

static float weight_value(generator *g) {
    if (g->family == KVC_FAMILY_SMALL_WEIGHT) return (float)(1e-4 + 4e-3 * kvc_corpus_uniform(&g->rng));
    if (g->family == KVC_FAMILY_HEAVY_TAILS) return (float)exp(kvc_corpus_normal(&g->rng));
    return (float)(1.0 + 0.1 * kvc_corpus_normal(&g->rng));
}

/* A latent value (insert stages) for the families without a block plan. */
static float latent_value(generator *g) {
    double n = kvc_corpus_normal(&g->rng);
    switch (g->family) {
    case KVC_FAMILY_HEAVY_TAILS: return (float)(n * exp(2.0 * kvc_corpus_normal(&g->rng)));
    case KVC_FAMILY_TINY: return (float)(n * 1e-5);
    case KVC_FAMILY_SMALL_WEIGHT: return (float)(n * 4e-3);
    case KVC_FAMILY_NONFINITE: return below(&g->rng, 100) == 0 ? special_value(g) : (float)n;
    default: return (float)n;
    }
}

static uint16_t bf16_of(double x) { return kvc_bf16_from_f32((float)x); }

/* ---- tensors ------------------------------------------------------- */

static void *put(kvc_case *c, const char *name, kvc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    int64_t shape[3] = {d0, d1, d2};
    kvc_array a;
    if (kvc_array_alloc(&a, dtype, ndim, shape)) return NULL;
    if (kvc_case_put(c, name, &a)) { kvc_array_free(&a); return NULL; }
    return a.data;
}

/* cos_sin rows of random angles: every rotation, not just a few positions. */
static float *put_cos_sin(kvc_case *c, generator *g, int64_t rows) {
    float *table = put(c, "cos_sin", KVC_DT_F4, 2, rows, 64, 0);
    if (!table) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int i = 0; i < 32; i++) {
            double angle = 2.0 * M_PI * kvc_corpus_uniform(&g->rng);
            table[r * 64 + i] = (float)cos(angle);
            table[r * 64 + 32 + i] = (float)sin(angle);
        }
    return table;
}

static void set_source(kvc_case *c, kvc_corpus_variant v, kvc_corpus_family f, uint64_t seed) {
    snprintf(c->source, sizeof c->source, "kvcmp-precision (%s, family %s, seed %llu)", variants[v].name, family_names[f],
             (unsigned long long)seed);
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "generator", "kvcmp report precision");
    cJSON_AddStringToObject(meta, "variant", variants[v].slug);
    cJSON_AddStringToObject(meta, "family", family_names[f]);
    cJSON_AddNumberToObject(meta, "seed", (double)seed);
    c->meta_json = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
}

/* ---- stages -------------------------------------------------------- */

static int make_save(kvc_case *c, generator *g, int32_t head_dim, int32_t ratio) {
    int64_t coff = kvc_v4_coff(ratio), width = coff * head_dim, tokens = 12, bs = ratio == 4 ? 4 : 8, pages = 8;
    c->stage = KVC_STAGE_V4_SAVE_PARTIAL_STATES;
    c->compress_ratio = ratio;
    c->head_dim = head_dim;
    c->eps = 1e-6f;
    float *kv = put(c, "kv", KVC_DT_F4, 2, tokens, width, 0), *score = put(c, "score", KVC_DT_F4, 2, tokens, width, 0);
    float *ape = put(c, "ape", KVC_DT_F4, 2, ratio, width, 0);
    int64_t *positions = put(c, "positions", KVC_DT_I8, 1, tokens, 0, 0), *slots = put(c, "slot_mapping", KVC_DT_I8, 1, tokens, 0, 0);
    if (!kv || !score || !ape || !positions || !slots || !put(c, "state_cache", KVC_DT_F4, 3, pages, bs, 2 * width)) return -1;
    for (int64_t i = 0; i < ratio * width; i++) ape[i] = score_value(g);
    int64_t rows[64];
    for (int64_t i = 0; i < pages * bs; i++) rows[i] = i;
    shuffle(&g->rng, rows, pages * bs);
    int64_t first = below(&g->rng, 64);
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = first + t;
        slots[t] = t == 0 ? -1 : rows[t];   /* one padding token */
        for (int64_t i = 0; i < width; i++) {
            kv[t * width + i] = kv_value(g);
            float s = score_value(g);
            /* Cancellation: score + ape nearly zero, the add's worst case. */
            if (g->family == KVC_FAMILY_CANCELLATION)
                s = (float)(-(double)ape[(positions[t] % ratio) * width + i] * (1.0 + 0x1p-20 * kvc_corpus_normal(&g->rng)));
            score[t * width + i] = s;
        }
    }
    return 0;
}

static int make_compress(kvc_case *c, generator *g, int32_t head_dim, int32_t ratio) {
    int64_t coff = kvc_v4_coff(ratio), width = coff * head_dim, bs = ratio == 4 ? 4 : 8;
    int64_t closing = ratio == 4 ? 5 : 2, history = closing * ratio, blocks = history / bs, pages = blocks + 2;
    int64_t tokens = closing + 1, kv_pages = 2, kv_rows = 4;
    c->stage = KVC_STAGE_V4_COMPRESS;
    c->compress_ratio = ratio;
    c->head_dim = head_dim;
    c->eps = 1e-6f;
    c->has_cache_dtype = 1;
    c->cache_dtype = head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    int64_t kv_row_bytes = head_dim == 512 ? 584 : 132;
    float *state = put(c, "state_cache", KVC_DT_F4, 3, pages, bs, 2 * width);
    int32_t *table = put(c, "block_table", KVC_DT_I4, 2, 1, blocks, 0);
    int32_t *token_to_req = put(c, "token_to_req", KVC_DT_I4, 1, tokens, 0, 0);
    int64_t *positions = put(c, "positions", KVC_DT_I8, 1, tokens, 0, 0), *slots = put(c, "slot_mapping", KVC_DT_I8, 1, tokens, 0, 0);
    int64_t *kv_slots = put(c, "kv_slot_mapping", KVC_DT_I8, 1, tokens, 0, 0);
    float *weight = put(c, "norm_weight", KVC_DT_F4, 1, head_dim, 0, 0);
    if (!state || !table || !token_to_req || !positions || !slots || !kv_slots || !weight ||
        !put(c, "kv_cache", KVC_DT_U1, 3, kv_pages, kv_rows, kv_row_bytes) || !put_cos_sin(c, g, history))
        return -1;
    int64_t physical[64], out_rows[8], order[8];
    for (int64_t i = 0; i < pages; i++) physical[i] = i;
    shuffle(&g->rng, physical, pages);
    for (int64_t i = 0; i < blocks; i++) table[i] = (int32_t)physical[i];
    /* The state of every position of the history, through the block table. */
    for (int64_t q = 0; q < history; q++) {
        float *row = state + (table[q / bs] * bs + q % bs) * 2 * width;
        for (int64_t i = 0; i < width; i++) { row[i] = kv_value(g); row[width + i] = score_value(g); }
    }
    for (int64_t d = 0; d < head_dim; d++) weight[d] = weight_value(g);
    for (int64_t i = 0; i < kv_pages * kv_rows; i++) out_rows[i] = i;
    shuffle(&g->rng, out_rows, kv_pages * kv_rows);
    for (int64_t i = 0; i < tokens; i++) order[i] = i;
    shuffle(&g->rng, order, tokens);
    /* Every closing token of the history, plus one token that does not close. */
    for (int64_t i = 0; i < tokens; i++) {
        int64_t t = order[i], p = i < closing ? (i + 1) * ratio - 1 : history - 2;
        positions[t] = p;
        slots[t] = table[p / bs] * bs + p % bs;
        kv_slots[t] = i < closing ? out_rows[i] : -1;
        token_to_req[t] = 0;
    }
    return 0;
}

static int make_norm(kvc_case *c, generator *g, int32_t ratio) {
    int64_t tokens = ratio == 1 ? 6 : 7, cap = 8, width = 512 * ratio;
    c->stage = KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    c->compress_ratio = ratio;
    c->head_dim = 512;
    c->eps = 1e-6f;
    float *kv_score = put(c, "kv_score", KVC_DT_F4, 2, tokens, width, 0);
    int64_t *positions = put(c, "positions", KVC_DT_I8, 1, tokens, 0, 0), *slots = put(c, "slot_mapping", KVC_DT_I8, 1, tokens, 0, 0);
    uint16_t *weight = put(c, "norm_weight", KVC_DT_U2, 1, 512, 0, 0);
    if (!kv_score || !positions || !slots || !weight || !put(c, "latent", KVC_DT_U2, 2, tokens, 512, 0)) return -1;
    for (int d = 0; d < 512; d++) weight[d] = bf16_of(weight_value(g));
    /* R = 2 starts on an odd (closing) position so the first pool reads the ring. */
    int64_t first = ratio == 1 ? below(&g->rng, 1000) : 2 * (1 + below(&g->rng, 20)) + 1;
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = first + t;
        for (int64_t i = 0; i < 512; i++) kv_score[t * width + i] = kv_value(g);
        for (int64_t i = 512; i < width; i++) kv_score[t * width + i] = score_value(g);
        slots[t] = ratio == 1 ? (t == 2 ? -1 : t) : cap + positions[t] % cap;
    }
    if (ratio == 1) return 0;
    float *ring = put(c, "state_cache", KVC_DT_F4, 3, 2, cap, 1024);
    int32_t *qsl = put(c, "query_start_loc", KVC_DT_I4, 1, 2, 0, 0);
    if (!ring || !qsl || !put(c, "token_to_req", KVC_DT_I4, 1, tokens, 0, 0)) return -1;
    qsl[1] = (int32_t)tokens;
    for (int64_t r = 0; r < cap; r++)   /* ring block 1 holds earlier rows */
        for (int64_t i = 0; i < 1024; i++) ring[(cap + r) * 1024 + i] = i < 512 ? kv_value(g) : score_value(g);
    return 0;
}

/* Midpoint between fp8 magnitude code k and k+1, times 2^e (exact in bf16:
 * 5 significant bits). */
static float fp8_tie(generator *g, int scale_exp) {
    uint8_t k = (uint8_t)below(&g->rng, 0x7E);
    double mid = 0.5 * ((double)kvc_f32_from_fp8(k) + (double)kvc_f32_from_fp8((uint8_t)(k + 1)));
    return (float)ldexp(kvc_corpus_uniform(&g->rng) < 0.5 ? -mid : mid, scale_exp);
}

/* NoPE blocks of one latent row for the block-edge families. */
static void plan_nope_blocks(generator *g, uint16_t *row) {
    for (int block = 0; block < 7; block++) {
        uint16_t *y = row + block * 64;
        int64_t k = below(&g->rng, 25) - 20;
        double top = ldexp(448.0, (int)k);
        for (int j = 0; j < 64; j++)
            y[j] = g->family == KVC_FAMILY_FP8_TIES ? bf16_of(fp8_tie(g, (int)k))
                                                    : bf16_of(top * (2.0 * kvc_corpus_uniform(&g->rng) - 1.0));
        /* The block's magnitude: exactly 448*2^k, or one bf16 step above. */
        uint16_t peak = bf16_of(top);
        if (g->family == KVC_FAMILY_POW2_EDGE && kvc_corpus_uniform(&g->rng) < 0.5) peak++;
        y[below(&g->rng, 64)] = (uint16_t)(peak | (kvc_corpus_uniform(&g->rng) < 0.5 ? 0x8000 : 0));
    }
}

/* RoPE pairs whose rotation nearly cancels: x_odd = x_even * cos / sin. */
static void cancelling_pairs(generator *g, uint16_t *rope, const float *cos_sin_row) {
    for (int i = 0; i < 32; i++) {
        double x_even = kvc_corpus_normal(&g->rng), c = cos_sin_row[i], s = cos_sin_row[32 + i];
        rope[2 * i] = bf16_of(x_even);
        rope[2 * i + 1] = bf16_of(fabs(s) > 1e-3 ? kvc_f32_from_bf16(rope[2 * i]) * c / s : x_even);
    }
}

static int make_insert(kvc_case *c, generator *g, kvc_corpus_variant v) {
    int64_t tokens = 8, pages = 2, page_rows = 8;
    int32_t ratio = (int32_t)(1 + below(&g->rng, 2));
    int64_t first = below(&g->rng, 40), table_rows = first + tokens;
    c->stage = v == KVC_VARIANT_QUANT_INSERT ? KVC_STAGE_V41_ROPE_QUANT_INSERT : KVC_STAGE_V41_ROPE_PLAIN_INSERT;
    c->compress_ratio = ratio;
    c->head_dim = 512;
    c->eps = 1e-6f;
    c->has_cache_dtype = 1;
    c->cache_dtype = v == KVC_VARIANT_QUANT_INSERT ? KVC_CACHE_FP8_DS_MLA : v == KVC_VARIANT_PLAIN_BF16 ? KVC_CACHE_BF16 : KVC_CACHE_FP8_E4M3;
    uint16_t *latent = put(c, "latent", KVC_DT_U2, 2, tokens, 512, 0);
    int64_t *positions = put(c, "positions", KVC_DT_I8, 1, tokens, 0, 0), *slots = put(c, "slot_mapping", KVC_DT_I8, 1, tokens, 0, 0);
    float *cos_sin = put_cos_sin(c, g, table_rows);
    void *cache = v == KVC_VARIANT_QUANT_INSERT ? put(c, "kv_cache", KVC_DT_U1, 3, pages, page_rows, 584)
                  : v == KVC_VARIANT_PLAIN_BF16 ? put(c, "kv_cache", KVC_DT_U2, 3, pages, page_rows, 512)
                                                : put(c, "kv_cache", KVC_DT_U1, 3, pages, page_rows, 512);
    if (!latent || !positions || !slots || !cos_sin || !cache) return -1;
    if (v == KVC_VARIANT_PLAIN_FP8) {
        float *scale = put(c, "fp8_scale", KVC_DT_F4, 1, 1, 0, 0);
        if (!scale) return -1;
        /* Ties stay ties only under a power-of-two scale. */
        scale[0] = g->family == KVC_FAMILY_FP8_TIES ? ldexpf(1.0f, (int)below(&g->rng, 9) - 4)
                                                     : (float)exp(kvc_corpus_normal(&g->rng));
    }
    int64_t rows[16];
    for (int64_t i = 0; i < pages * page_rows; i++) rows[i] = i;
    shuffle(&g->rng, rows, pages * page_rows);
    for (int64_t t = 0; t < tokens; t++) {
        positions[t] = first + t;
        slots[t] = t == 3 ? -1 : rows[t];
        uint16_t *row = latent + t * 512;
        for (int d = 0; d < 512; d++) row[d] = bf16_of(latent_value(g));
        if (g->family == KVC_FAMILY_POW2_EDGE || g->family == KVC_FAMILY_FP8_TIES) plan_nope_blocks(g, row);
        if (g->family == KVC_FAMILY_CANCELLATION)
            cancelling_pairs(g, row + 448, cos_sin + (positions[t] / ratio) * ratio * 64);
    }
    return 0;
}

int kvc_corpus_make_case(kvc_corpus_variant v, kvc_corpus_family f, uint64_t seed, kvc_case *c) {
    memset(c, 0, sizeof *c);
    generator g = {.rng = {seed * 0x100000001B3ull + (uint64_t)v * 131 + (uint64_t)f}, .family = f};
    g.equal_score = (float)(4.0 * kvc_corpus_normal(&g.rng));
    set_source(c, v, f, seed);
    int rc;
    switch (v) {
    case KVC_VARIANT_SAVE_D512_R4: rc = make_save(c, &g, 512, 4); break;
    case KVC_VARIANT_SAVE_D128_R128: rc = make_save(c, &g, 128, 128); break;
    case KVC_VARIANT_COMPRESS_D512_R4: rc = make_compress(c, &g, 512, 4); break;
    case KVC_VARIANT_COMPRESS_D512_R128: rc = make_compress(c, &g, 512, 128); break;
    case KVC_VARIANT_COMPRESS_D128_R4: rc = make_compress(c, &g, 128, 4); break;
    case KVC_VARIANT_COMPRESS_D128_R128: rc = make_compress(c, &g, 128, 128); break;
    case KVC_VARIANT_NORM_R1: rc = make_norm(c, &g, 1); break;
    case KVC_VARIANT_NORM_R2: rc = make_norm(c, &g, 2); break;
    default: rc = make_insert(c, &g, v); break;
    }
    if (rc) kvc_case_free(c);
    return rc;
}

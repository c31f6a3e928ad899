/* The multi-step driver: see history.h. */
#include "harness/fuzz/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/generate.h"

#define PAD_TOKENS_MAX 2

const char *kvc_feed_mode_name(kvc_feed_mode mode) {
    static const char *const names[] = {"one prefill", "random chunks", "token by token with speculative drafts"};
    return names[mode];
}

static void fill(kvc_rng *r, float *dst, int64_t n, int family, int role) { kvc_gen_values(r, family, role, dst, n); }

static void shuffle(kvc_rng *r, int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = kvc_rng_below(r, i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* The smallest power of two >= n. */
static int64_t power_of_two_at_least(int64_t n) {
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
}

static int64_t *random_pages(kvc_rng *r, int64_t needed, int pooled, int64_t *pages_out) {
    int64_t spare = kvc_rng_range(r, 0, 2), pages = pooled ? needed : needed + spare;
    int64_t *perm = malloc((size_t)pages * sizeof *perm);
    for (int64_t i = 0; i < pages; i++) perm[i] = i;
    shuffle(r, perm, pages);
    *pages_out = pages;
    return perm;
}

int kvc_history_generate(kvc_rng *r, int version, int32_t ratio, int32_t head_dim, int family, kvc_history *h) {
    return kvc_history_generate_pooled(r, version, ratio, head_dim, family, NULL, h);
}

/* Under a geometry pool the page rows and padding come from `pool` (a
 * stream fixed per campaign slot) instead of r. */
int kvc_history_generate_pooled(kvc_rng *r, int version, int32_t ratio, int32_t head_dim, int family, kvc_rng *pool, kvc_history *h) {
    memset(h, 0, sizeof *h);
    kvc_rng *sizes_from = pool ? pool : r;
    h->version = version;
    h->family = family;
    h->seed = kvc_rng_next(r);
    h->eps = 1e-6f;
    h->page_padding = 64 * kvc_rng_below(sizes_from, 3);
    int32_t R;
    if (version == 4) {
        R = ratio ? ratio : (kvc_rng_chance(r, 1, 5) ? 128 : 4);
        h->head_dim = head_dim ? head_dim : (kvc_rng_chance(r, 1, 2) ? 512 : 128);
        h->length = R == 4 ? kvc_rng_range(r, 1, 40) : kvc_rng_range(r, 120, 290);
        h->row_width = (int64_t)kvc_v4_coff(R) * h->head_dim;
        static const int64_t sizes[] = {1, 2, 4, 8, 16};
        h->state_block_size = sizes[kvc_rng_below(sizes_from, 5)];
    } else {
        R = ratio ? ratio : (int32_t)kvc_rng_range(r, 1, 2);
        h->head_dim = 512;
        h->length = R == 1 ? kvc_rng_range(r, 1, 12) : kvc_rng_range(r, 1, 40);
        h->row_width = 512 * (int64_t)R;
        static const int64_t caps[] = {8, 16, 32};
        h->state_block_size = caps[kvc_rng_below(sizes_from, 3)];
    }
    h->compress_ratio = R;
    /* Under a geometry pool the caches, block table and cos_sin are sized
     * for the next power of two of the length (Ls): a history's page
     * counts, columns and rows take a few sizes, not one per length, so a
     * kernel that compiles per size compiles a few times. */
    int64_t L = h->length, Ls = pool ? power_of_two_at_least(L) : L, W = h->row_width, groups = Ls / R + 1;
    if (version == 4) {
        h->kv = malloc((size_t)(L * W) * 4);
        h->score = malloc((size_t)(L * W) * 4);
        h->ape = malloc((size_t)(R * W) * 4);
        h->norm_weight = malloc((size_t)h->head_dim * 4);
        fill(r, h->kv, L * W, family, KVC_ROLE_KV);
        fill(r, h->score, L * W, family, KVC_ROLE_SCORE);
        fill(r, h->ape, R * W, family, KVC_ROLE_SCORE);
        fill(r, h->norm_weight, h->head_dim, family, KVC_ROLE_WEIGHT);
        int64_t logical = (Ls + h->state_block_size - 1) / h->state_block_size;
        int64_t *perm = random_pages(r, logical, pool != NULL, &h->state_pages);
        h->block_columns = logical;
        h->block_table = malloc((size_t)logical * 4);
        for (int64_t i = 0; i < logical; i++) h->block_table[i] = (int32_t)perm[i];
        free(perm);
    } else {
        h->kv_score = malloc((size_t)(L * W) * 4);
        for (int64_t t = 0; t < L; t++) {
            fill(r, h->kv_score + t * W, 512, family, KVC_ROLE_KV);
            if (R == 2) fill(r, h->kv_score + t * W + 512, 512, family, KVC_ROLE_SCORE);
        }
        h->norm_weight_bf16 = malloc(1024);
        for (int d = 0; d < 512; d++) h->norm_weight_bf16[d] = kvc_bf16_from_f32(kvc_gen_value(r, family, KVC_ROLE_WEIGHT));
        h->state_pages = kvc_rng_range(r, 1, 3);
        h->ring_block = kvc_rng_below(r, h->state_pages);
    }
    static const int64_t kv_sizes[] = {1, 2, 4, 16, 64};
    h->kv_block_size = kv_sizes[kvc_rng_below(sizes_from, 5)];
    h->kv_page_of_group = random_pages(r, (groups + h->kv_block_size - 1) / h->kv_block_size, pool != NULL, &h->kv_pages);
    h->cos_sin_rows = (Ls / R) * R + R + 1;
    h->cos_sin = malloc((size_t)(h->cos_sin_rows * 64) * 4);
    fill(r, h->cos_sin, h->cos_sin_rows * 64, family, KVC_ROLE_COS_SIN);
    return 0;
}

void kvc_history_free(kvc_history *h) {
    free(h->kv); free(h->score); free(h->ape); free(h->kv_score); free(h->norm_weight); free(h->norm_weight_bf16);
    free(h->cos_sin); free(h->block_table); free(h->kv_page_of_group);
    memset(h, 0, sizeof *h);
}

void kvc_history_result_free(kvc_history_result *r) {
    free(r->state); free(r->kv); free(r->latent);
    memset(r, 0, sizeof *r);
}

/* ---- caches ---------------------------------------------------------- */

static int64_t state_row_bytes(const kvc_history *h) { return h->version == 4 ? 2 * h->row_width * 4 : 1024 * 4; }
static int64_t kv_row_bytes(const kvc_history *h) {
    return h->version == 4 && h->head_dim == 128 ? 132 : 584;
}

/* Pages filled with a fixed pattern, so untouched bytes compare too. */
static kvc_paged_cache make_cache(int64_t pages, int64_t rows, int64_t row_bytes, int64_t padding, uint8_t **storage, int64_t *bytes) {
    kvc_paged_cache c = {.num_pages = pages, .page_rows = rows, .page_bytes = rows * row_bytes};
    c.page_stride = c.page_bytes + padding;
    *bytes = pages * c.page_stride;
    *storage = aligned_alloc(64, (size_t)((*bytes + 64) / 64 * 64));
    /* Byte i is i * 31 + 7 mod 256, which repeats every 256 bytes: the
     * first 256 are written, then copied on in doubling blocks. */
    for (int64_t i = 0; i < *bytes && i < 256; i++) (*storage)[i] = (uint8_t)(i * 31 + 7);
    for (int64_t done = 256; done < *bytes; done *= 2)
        memcpy(*storage + done, *storage, (size_t)(*bytes - done < done ? *bytes - done : done));
    c.data = *storage;
    return c;
}

static int64_t kv_row_of(const kvc_history *h, int64_t p) {
    int64_t group = p / h->compress_ratio;
    return h->kv_page_of_group[group / h->kv_block_size] * h->kv_block_size + group % h->kv_block_size;
}

/* ---- one step -------------------------------------------------------- */

typedef struct {
    int64_t start, count;   /* positions [start, start + count) */
    int64_t wrong_from;     /* positions >= this carry a rejected draft's wrong data */
    int64_t padding;        /* trailing padding tokens */
} step;

typedef struct {
    const kvc_history *h;
    const kvc_backend *b;
    kvc_paged_cache state, kv;
    kvc_history_result *out;
    kvc_rng wrong;          /* draws the rejected drafts' data */
    /* per-step buffers, sized for the whole history */
    int64_t *positions, *slots, *kv_slots;
    int32_t *token_to_req;
    float *rows, *rows2;
    uint16_t *latent;
} feeder;

static int closing(const kvc_history *h, int64_t p) { return (p + 1) % h->compress_ratio == 0; }

static void token_rows(feeder *f, const step *s, int64_t i, float *dst, const float *truth, int64_t width, int role_second_half) {
    int64_t p = s->start + i;
    if (p < s->wrong_from) { memcpy(dst, truth + p * width, (size_t)width * 4); return; }
    fill(&f->wrong, dst, width, f->h->family, role_second_half ? KVC_ROLE_SCORE : KVC_ROLE_KV);
}

static int run_v4_step(feeder *f, const step *s, kvc_error *err) {
    const kvc_history *h = f->h;
    int64_t n = s->count + s->padding, W = h->row_width, bs = h->state_block_size;
    for (int64_t i = 0; i < n; i++) {
        int real = i < s->count;
        int64_t p = real ? s->start + i : 0;
        f->positions[i] = p;
        f->token_to_req[i] = 0;
        f->slots[i] = real ? (int64_t)h->block_table[p / bs] * bs + p % bs : -1;
        f->kv_slots[i] = real && closing(h, p) ? kv_row_of(h, p) : -1;
        if (real) {
            token_rows(f, s, i, f->rows + i * W, h->kv, W, 0);
            token_rows(f, s, i, f->rows2 + i * W, h->score, W, 1);
        } else {
            memset(f->rows + i * W, 0, (size_t)W * 4);
            memset(f->rows2 + i * W, 0, (size_t)W * 4);
        }
    }
    kvc_v4_save_args save = {.num_tokens = n, .compress_ratio = h->compress_ratio, .head_dim = h->head_dim, .kv = f->rows,
                             .score = f->rows2, .ape = h->ape, .positions = f->positions, .slot_mapping = f->slots,
                             .state_cache = f->state};
    int rc = f->b->v4_save_partial_states(&save, err);
    if (rc) return rc;
    kvc_v4_compress_args compress = {.num_tokens = n, .compress_ratio = h->compress_ratio, .head_dim = h->head_dim, .eps = h->eps,
                                     .state_cache = f->state, .block_table = h->block_table, .num_requests = 1,
                                     .max_blocks = h->block_columns, .token_to_req = f->token_to_req,
                                     .positions = f->positions, .slot_mapping = f->slots, .kv_slot_mapping = f->kv_slots,
                                     .norm_weight = h->norm_weight, .cos_sin = h->cos_sin, .cos_sin_rows = h->cos_sin_rows,
                                     .kv_cache = f->kv};
    return f->b->v4_compress(&compress, err);
}

static int run_v41_step(feeder *f, const step *s, kvc_error *err) {
    const kvc_history *h = f->h;
    int64_t n = s->count + s->padding, W = h->row_width, cap = h->state_block_size;
    for (int64_t i = 0; i < n; i++) {
        int real = i < s->count;
        int64_t p = real ? s->start + i : 0;
        f->positions[i] = p;
        f->token_to_req[i] = 0;
        if (!real) f->slots[i] = -1;
        else if (h->compress_ratio == 2) f->slots[i] = h->ring_block * cap + p % cap;
        else f->slots[i] = kv_row_of(h, p);
        f->kv_slots[i] = real && closing(h, p) ? kv_row_of(h, p) : -1;
        if (real) {
            token_rows(f, s, i, f->rows + i * W, h->kv_score, W, 0);
            if (h->compress_ratio == 2 && p >= s->wrong_from) fill(&f->wrong, f->rows + i * W + 512, 512, h->family, KVC_ROLE_SCORE);
        } else {
            memset(f->rows + i * W, 0, (size_t)W * 4);
        }
    }
    for (int64_t i = 0; i < n * 512; i++) f->latent[i] = 0xDEAD;
    int32_t qsl[2] = {0, (int32_t)s->count};
    kvc_v41_norm_args norm = {.num_tokens = n, .compress_ratio = h->compress_ratio, .eps = h->eps, .kv_score = f->rows,
                              .positions = f->positions, .slot_mapping = f->slots, .norm_weight = h->norm_weight_bf16,
                              .latent = f->latent, .state_cache = f->state, .query_start_loc = qsl, .num_requests = 1,
                              .token_to_req = f->token_to_req};
    int rc = f->b->v41_save_compress_norm(&norm, err);
    if (rc) return rc;
    kvc_v41_insert_args insert = {.num_tokens = n, .compress_ratio = h->compress_ratio, .cache_dtype = KVC_CACHE_FP8_DS_MLA,
                                  .latent = f->latent, .positions = f->positions, .slot_mapping = f->kv_slots,
                                  .cos_sin = h->cos_sin, .cos_sin_rows = h->cos_sin_rows, .kv_cache = f->kv};
    rc = f->b->v41_rope_quant_insert(&insert, err);
    if (rc) return rc;
    for (int64_t i = 0; i < s->count; i++)
        if (closing(h, s->start + i))
            memcpy(f->out->latent + (s->start + i) * 512, f->latent + i * 512, 1024);
    return KVC_OK;
}

/* ---- feeding plans --------------------------------------------------- */

/* The next step of a feeding plan, starting at pos; *accepted is how far
 * the history advances (the rest of the step were rejected drafts). */
static step plan_step(const kvc_history *h, kvc_feed_mode mode, kvc_rng *plan, int64_t pos, int64_t *accepted) {
    int64_t left = h->length - pos;
    int prefill = 0;
    step s = {.start = pos, .padding = kvc_rng_chance(plan, 1, 4) ? kvc_rng_range(plan, 1, PAD_TOKENS_MAX) : 0};
    if (mode == KVC_FEED_PREFILL) {
        s.count = left;
    } else if (mode == KVC_FEED_CHUNKS) {
        int64_t max_chunk = kvc_rng_chance(plan, 1, 3) ? 2 * h->state_block_size + 3 : 6;
        s.count = kvc_rng_range(plan, 1, max_chunk < left ? max_chunk : left);
    } else if (pos == 0 && kvc_rng_chance(plan, 1, 3)) {
        s.count = kvc_rng_range(plan, 1, left);   /* a prefill before decoding: no drafts in it */
        prefill = 1;
    } else {
        int64_t drafts = kvc_rng_range(plan, 0, 3);
        s.count = 1 + drafts < left ? 1 + drafts : left;
    }
    s.wrong_from = h->length;
    *accepted = s.count;
    /* Drafts only in decode steps: a rejected draft must be re-sent
     * while the ring still holds its predecessor (drafts <= 3 < CAP). */
    if (mode == KVC_FEED_SPECULATIVE && s.count > 1 && !prefill) {
        *accepted = kvc_rng_range(plan, 1, s.count);   /* the token itself plus the accepted drafts */
        s.wrong_from = pos + *accepted;
    }
    return s;
}

static int run_step(feeder *f, const step *s, kvc_error *err) {
    int rc = f->h->version == 4 ? run_v4_step(f, s, err) : run_v41_step(f, s, err);
    if (rc == KVC_OK) {
        f->out->steps++;
        f->out->tokens_sent += s->count;
    }
    return rc;
}

static int lacks_stages(const kvc_backend *b, const kvc_history *h, kvc_error *err) {
    if (h->version == 4 ? b->v4_save_partial_states && b->v4_compress : b->v41_save_compress_norm && b->v41_rope_quant_insert) return 0;
    snprintf(err->message, sizeof err->message, "backend %s lacks the stages of a V%s forward", b->name, h->version == 4 ? "4" : "4.1");
    err->code = KVC_ERR_UNAVAILABLE;
    return KVC_ERR_UNAVAILABLE;
}

static void feeder_init(feeder *f, const kvc_backend *b, const kvc_history *h, uint64_t seed, kvc_history_result *out) {
    memset(out, 0, sizeof *out);
    *f = (feeder){.h = h, .b = b, .out = out};
    kvc_rng_seed(&f->wrong, h->seed ^ seed, 0xD4AF);
    int64_t state_pages = h->version == 4 || h->compress_ratio == 2 ? h->state_pages : 0;
    f->state = make_cache(state_pages, h->state_block_size, state_row_bytes(h), h->page_padding, &out->state, &out->state_bytes);
    f->kv = make_cache(h->kv_pages, h->kv_block_size, kv_row_bytes(h), h->page_padding, &out->kv, &out->kv_bytes);
    int64_t max_tokens = h->length + PAD_TOKENS_MAX;
    f->positions = malloc((size_t)max_tokens * 8);
    f->slots = malloc((size_t)max_tokens * 8);
    f->kv_slots = malloc((size_t)max_tokens * 8);
    f->token_to_req = malloc((size_t)max_tokens * 4);
    f->rows = malloc((size_t)(max_tokens * h->row_width) * 4);
    f->rows2 = malloc((size_t)(max_tokens * h->row_width) * 4);
    f->latent = malloc((size_t)max_tokens * 1024);
    if (h->version == 41) {
        out->latent = malloc((size_t)h->length * 1024);
        for (int64_t i = 0; i < h->length * 512; i++) out->latent[i] = 0xBEEF;
    }
}

static void feeder_free(feeder *f) {
    free(f->positions); free(f->slots); free(f->kv_slots); free(f->token_to_req); free(f->rows); free(f->rows2); free(f->latent);
}

int kvc_history_feed(const kvc_backend *b, const kvc_history *h, kvc_feed_mode mode, uint64_t seed, kvc_history_result *out,
                     kvc_error *err) {
    memset(out, 0, sizeof *out);
    int rc = lacks_stages(b, h, err);
    if (rc) return rc;
    feeder f;
    feeder_init(&f, b, h, seed, out);
    kvc_rng plan;
    kvc_rng_seed(&plan, seed, 0xC4C4);
    for (int64_t pos = 0, accepted; pos < h->length && rc == KVC_OK; pos += accepted) {
        step s = plan_step(h, mode, &plan, pos, &accepted);
        rc = run_step(&f, &s, err);
    }
    feeder_free(&f);
    return rc;
}

/* ---- one step as a single case --------------------------------------- */

static void *put(kvc_case *c, const char *name, kvc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, const void *src) {
    int64_t shape[3] = {d0, d1, d2};
    kvc_array a;
    if (kvc_array_alloc(&a, dtype, ndim, shape) || kvc_case_put(c, name, &a)) return NULL;
    if (src) memcpy(a.data, src, (size_t)a.count * (size_t)kvc_dtype_size(dtype));
    return a.data;
}

/* A paged buffer (pages page_stride apart) in the case's dense layout. */
static void put_paged(kvc_case *c, const char *name, kvc_dtype dtype, const uint8_t *pages, int64_t num_pages, int64_t rows,
                      int64_t row_elements, int64_t padding) {
    int64_t page_bytes = rows * row_elements * kvc_dtype_size(dtype);
    uint8_t *dense = put(c, name, dtype, 3, num_pages, rows, row_elements, NULL);
    for (int64_t p = 0; p < num_pages; p++) memcpy(dense + p * page_bytes, pages + p * (page_bytes + padding), (size_t)page_bytes);
}

/* The step just run by f, with the caches as they were before it. */
static void step_case(const feeder *f, const step *s, const uint8_t *state_before, const uint8_t *kv_before, kvc_case *c) {
    const kvc_history *h = f->h;
    int64_t n = s->count + s->padding, W = h->row_width, R = h->compress_ratio;
    memset(c, 0, sizeof *c);
    c->compress_ratio = h->compress_ratio;
    c->head_dim = h->head_dim;
    c->eps = h->eps;
    c->has_cache_dtype = 1;
    c->cache_dtype = h->version == 4 && h->head_dim == 128 ? KVC_CACHE_FP8_INDEXER : KVC_CACHE_FP8_DS_MLA;
    put(c, "positions", KVC_DT_I8, 1, n, 0, 0, f->positions);
    put(c, "slot_mapping", KVC_DT_I8, 1, n, 0, 0, f->slots);
    put(c, "cos_sin", KVC_DT_F4, 2, h->cos_sin_rows, 64, 0, h->cos_sin);
    put_paged(c, "kv_cache", KVC_DT_U1, kv_before, h->kv_pages, h->kv_block_size, kv_row_bytes(h), h->page_padding);
    if (h->version == 4) {
        c->stage = KVC_STAGE_V4_FORWARD;
        put(c, "kv", KVC_DT_F4, 2, n, W, 0, f->rows);
        put(c, "score", KVC_DT_F4, 2, n, W, 0, f->rows2);
        put(c, "ape", KVC_DT_F4, 2, R, W, 0, h->ape);
        put(c, "kv_slot_mapping", KVC_DT_I8, 1, n, 0, 0, f->kv_slots);
        put(c, "token_to_req", KVC_DT_I4, 1, n, 0, 0, f->token_to_req);
        put(c, "block_table", KVC_DT_I4, 2, 1, h->block_columns, 0, h->block_table);
        put(c, "norm_weight", KVC_DT_F4, 1, h->head_dim, 0, 0, h->norm_weight);
        put_paged(c, "state_cache", KVC_DT_F4, state_before, h->state_pages, h->state_block_size, 2 * W, h->page_padding);
    } else {
        c->stage = KVC_STAGE_V41_FORWARD;
        put(c, "kv_score", KVC_DT_F4, 2, n, W, 0, f->rows);
        put(c, "norm_weight", KVC_DT_U2, 1, 512, 0, 0, h->norm_weight_bf16);
        uint16_t *latent = put(c, "latent", KVC_DT_U2, 2, n, 512, 0, NULL);
        for (int64_t i = 0; i < n * 512; i++) latent[i] = 0xDEAD;
        if (R == 2) {
            int32_t qsl[2] = {0, (int32_t)s->count};
            put(c, "query_start_loc", KVC_DT_I4, 1, 2, 0, 0, qsl);
            put(c, "token_to_req", KVC_DT_I4, 1, n, 0, 0, f->token_to_req);
            put(c, "kv_slot_mapping", KVC_DT_I8, 1, n, 0, 0, f->kv_slots);
            put_paged(c, "state_cache", KVC_DT_F4, state_before, h->state_pages, h->state_block_size, 1024, h->page_padding);
        }
    }
    snprintf(c->source, sizeof c->source, "kvcmp-fuzz history step %lld..%lld of a %lld-token V%s history", (long long)s->start,
             (long long)(s->start + s->count - 1), (long long)h->length, h->version == 4 ? "4" : "4.1");
}

/* The caches `expected` holds after the first `steps` steps of the plan,
 * by running them again: only a divergence needs the caches as they
 * were before its step, and copying them before every step cost more
 * than the rare re-run. */
static void caches_after_steps(const kvc_backend *expected, const kvc_history *h, kvc_feed_mode mode, uint64_t seed, int64_t steps,
                               kvc_history_result *out) {
    feeder f;
    feeder_init(&f, expected, h, seed, out);
    kvc_rng plan;
    kvc_rng_seed(&plan, seed, 0xC4C4);
    kvc_error err = {0};
    for (int64_t pos = 0, accepted, k = 0; k < steps; k++, pos += accepted) {
        step s = plan_step(h, mode, &plan, pos, &accepted);
        run_step(&f, &s, &err);
    }
    feeder_free(&f);
}

int kvc_history_lockstep(const kvc_backend *expected, const kvc_backend *got, const kvc_history *h, kvc_feed_mode mode, uint64_t seed,
                         kvc_case *diverging_step, char *detail, size_t size) {
    kvc_error err = {0};
    if (lacks_stages(expected, h, &err) || lacks_stages(got, h, &err)) return -1;
    kvc_history_result out_a, out_b;
    feeder a, b;
    feeder_init(&a, expected, h, seed, &out_a);
    feeder_init(&b, got, h, seed, &out_b);
    kvc_rng plan;
    kvc_rng_seed(&plan, seed, 0xC4C4);
    int diverged = 0;
    for (int64_t pos = 0, accepted, steps_before = 0; pos < h->length && !diverged; pos += accepted, steps_before++) {
        step s = plan_step(h, mode, &plan, pos, &accepted);
        kvc_error err_a = {0}, err_b = {0};
        int rc_a = run_step(&a, &s, &err_a), rc_b = run_step(&b, &s, &err_b);
        char what[500] = "";
        if (rc_a != rc_b) snprintf(what, sizeof what, "status %d vs %d (%s)", rc_a, rc_b, rc_a ? err_a.message : err_b.message);
        else if (!rc_a) kvc_history_compare(h, &out_a, &out_b, what, sizeof what);
        if (rc_a && rc_a == rc_b) break;   /* both rejected the step: nothing more to compare */
        if (!what[0]) continue;
        diverged = 1;
        snprintf(detail, size, "step %lld..%lld (%s, step %lld): %s", (long long)s.start, (long long)(s.start + s.count - 1),
                 kvc_feed_mode_name(mode), (long long)out_a.steps, what);
        if (diverging_step) {
            kvc_history_result before;
            caches_after_steps(expected, h, mode, seed, steps_before, &before);
            step_case(&a, &s, before.state, before.kv, diverging_step);
            kvc_history_result_free(&before);
        }
    }
    feeder_free(&a);
    feeder_free(&b);
    kvc_history_result_free(&out_a);
    kvc_history_result_free(&out_b);
    return diverged;
}

static int first_difference(const uint8_t *a, const uint8_t *b, int64_t n) {
    /* Nearly every comparison finds no difference: memcmp says so at
     * memory speed (a byte loop here was 9% of a campaign's time). */
    if (n <= 0 || memcmp(a, b, (size_t)n) == 0) return -1;
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (int)i;
    return -1;
}

int kvc_history_compare(const kvc_history *h, const kvc_history_result *a, const kvc_history_result *b, char *detail, size_t size) {
    int at;
    if ((at = first_difference(a->state, b->state, a->state_bytes)) >= 0) {
        int64_t page_stride = h->state_block_size * state_row_bytes(h) + h->page_padding;
        snprintf(detail, size, "%s page %lld byte %lld differs (0x%02x vs 0x%02x)", h->version == 4 ? "state_cache" : "ring",
                 (long long)(at / page_stride), (long long)(at % page_stride), a->state[at], b->state[at]);
        return 1;
    }
    if ((at = first_difference(a->kv, b->kv, a->kv_bytes)) >= 0) {
        int64_t page_stride = h->kv_block_size * kv_row_bytes(h) + h->page_padding;
        snprintf(detail, size, "kv_cache page %lld byte %lld differs (0x%02x vs 0x%02x)", (long long)(at / page_stride),
                 (long long)(at % page_stride), a->kv[at], b->kv[at]);
        return 1;
    }
    if (a->latent && (at = first_difference((uint8_t *)a->latent, (uint8_t *)b->latent, h->length * 1024)) >= 0) {
        snprintf(detail, size, "latent of position %lld dim %lld differs (0x%04x vs 0x%04x)", (long long)(at / 1024),
                 (long long)(at % 1024 / 2), a->latent[at / 2], b->latent[at / 2]);
        return 1;
    }
    return 0;
}

/* The geometry key of a stage call: see geometry.h. */
#include "harness/fuzz/geometry.h"

#include <stdlib.h>
#include <string.h>

static const char *const call_names[KVC_CALL_COUNT] = {"v4.save_partial_states", "v4.compress", "v41.save_compress_norm",
                                                       "v41.rope_quant_insert", "v41.rope_plain_insert"};

const char *kvc_call_name(int call) { return call >= 0 && call < KVC_CALL_COUNT ? call_names[call] : "?"; }

int kvc_geometry_int_class(int64_t value) { return value == 1 ? 1 : value % 16 == 0 ? 16 : 0; }

typedef struct {
    int64_t v[32];
    int n;
} fields;

static void put(fields *f, int64_t x) {
    if (f->n < (int)(sizeof f->v / sizeof *f->v)) f->v[f->n++] = x;
}

static void put_cache(fields *f, const kvc_paged_cache *c) {
    put(f, c->num_pages);
    put(f, c->page_rows);
    put(f, c->page_bytes);
    put(f, c->page_stride);
    put(f, c->data != NULL);
}

/* FNV-1a over the fields. */
static uint64_t hash(const fields *f) {
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *p = (const uint8_t *)f->v;
    for (size_t i = 0; i < (size_t)f->n * sizeof *f->v; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

static int64_t present(const void *p, int bit) { return p ? (int64_t)1 << bit : 0; }

uint64_t kvc_geometry_v4_save(const kvc_v4_save_args *a) {
    fields f = {.n = 0};
    put(&f, KVC_CALL_V4_SAVE);
    put(&f, a->compress_ratio);
    put(&f, a->head_dim);
    put_cache(&f, &a->state_cache);
    put(&f, kvc_geometry_int_class(a->num_tokens));
    put(&f, present(a->kv, 0) | present(a->score, 1) | present(a->ape, 2) | present(a->positions, 3) | present(a->slot_mapping, 4));
    return hash(&f);
}

uint64_t kvc_geometry_v4_compress(const kvc_v4_compress_args *a) {
    fields f = {.n = 0};
    put(&f, KVC_CALL_V4_COMPRESS);
    put(&f, a->compress_ratio);
    put(&f, a->head_dim);
    put_cache(&f, &a->state_cache);
    put_cache(&f, &a->kv_cache);
    put(&f, a->max_blocks);
    put(&f, a->cos_sin_rows);
    put(&f, kvc_geometry_int_class(a->num_tokens));
    put(&f, kvc_geometry_int_class(a->num_requests));
    put(&f, present(a->block_table, 0) | present(a->token_to_req, 1) | present(a->positions, 2) | present(a->slot_mapping, 3) |
                present(a->kv_slot_mapping, 4) | present(a->norm_weight, 5) | present(a->cos_sin, 6));
    return hash(&f);
}

uint64_t kvc_geometry_v41_norm(const kvc_v41_norm_args *a) {
    fields f = {.n = 0};
    put(&f, KVC_CALL_V41_NORM);
    put(&f, a->compress_ratio);
    put(&f, kvc_geometry_int_class(a->num_tokens));
    put(&f, present(a->kv_score, 0) | present(a->positions, 1) | present(a->slot_mapping, 2) | present(a->norm_weight, 3) |
                present(a->latent, 4));
    if (a->compress_ratio == 2) {   /* the ring's arguments: ignored for R = 1 */
        put_cache(&f, &a->state_cache);
        put(&f, kvc_geometry_int_class(a->num_requests));
        put(&f, present(a->query_start_loc, 0) | present(a->token_to_req, 1));
    }
    return hash(&f);
}

uint64_t kvc_geometry_v41_insert(const kvc_v41_insert_args *a, int quant) {
    fields f = {.n = 0};
    put(&f, quant ? KVC_CALL_V41_QUANT_INSERT : KVC_CALL_V41_PLAIN_INSERT);
    put(&f, a->compress_ratio);
    put(&f, a->cache_dtype);
    put_cache(&f, &a->kv_cache);
    put(&f, a->cos_sin_rows);
    put(&f, kvc_geometry_int_class(a->num_tokens));
    put(&f, present(a->latent, 0) | present(a->positions, 1) | present(a->slot_mapping, 2) | present(a->cos_sin, 3));
    return hash(&f);
}

/* ---- the recorder ------------------------------------------------------ */

#define MAX_RECORDED 8

static struct {
    const kvc_backend *inner;
    kvc_backend backend;
    int on, n;
    int calls[MAX_RECORDED];
    uint64_t keys[MAX_RECORDED];
} recorder;

static void record(int call, uint64_t key) {
    if (!recorder.on) return;
    for (int i = 0; i < recorder.n; i++)
        if (recorder.calls[i] == call && recorder.keys[i] == key) return;
    if (recorder.n < MAX_RECORDED) {
        recorder.calls[recorder.n] = call;
        recorder.keys[recorder.n++] = key;
    }
}

static int rec_save(const kvc_v4_save_args *a, kvc_error *e) {
    record(KVC_CALL_V4_SAVE, kvc_geometry_v4_save(a));
    return recorder.inner->v4_save_partial_states(a, e);
}
static int rec_compress(const kvc_v4_compress_args *a, kvc_error *e) {
    record(KVC_CALL_V4_COMPRESS, kvc_geometry_v4_compress(a));
    return recorder.inner->v4_compress(a, e);
}
static int rec_norm(const kvc_v41_norm_args *a, kvc_error *e) {
    record(KVC_CALL_V41_NORM, kvc_geometry_v41_norm(a));
    return recorder.inner->v41_save_compress_norm(a, e);
}
static int rec_quant(const kvc_v41_insert_args *a, kvc_error *e) {
    record(KVC_CALL_V41_QUANT_INSERT, kvc_geometry_v41_insert(a, 1));
    return recorder.inner->v41_rope_quant_insert(a, e);
}
static int rec_plain(const kvc_v41_insert_args *a, kvc_error *e) {
    record(KVC_CALL_V41_PLAIN_INSERT, kvc_geometry_v41_insert(a, 0));
    return recorder.inner->v41_rope_plain_insert(a, e);
}

const kvc_backend *kvc_geometry_recorder(const kvc_backend *inner) {
    recorder.inner = inner;
    /* The same stages as inner (NULL where it has none), under its name. */
    recorder.backend = (kvc_backend){.name = inner->name,
                                     .v4_save_partial_states = inner->v4_save_partial_states ? rec_save : NULL,
                                     .v4_compress = inner->v4_compress ? rec_compress : NULL,
                                     .v41_save_compress_norm = inner->v41_save_compress_norm ? rec_norm : NULL,
                                     .v41_rope_quant_insert = inner->v41_rope_quant_insert ? rec_quant : NULL,
                                     .v41_rope_plain_insert = inner->v41_rope_plain_insert ? rec_plain : NULL};
    return &recorder.backend;
}

void kvc_geometry_record(int on) {
    recorder.on = on;
    if (on) recorder.n = 0;
}

int kvc_geometry_recorded(int *calls, uint64_t *keys, int max) {
    int n = recorder.n < max ? recorder.n : max;
    memcpy(calls, recorder.calls, (size_t)n * sizeof *calls);
    memcpy(keys, recorder.keys, (size_t)n * sizeof *keys);
    return n;
}

/* ---- distinct keys ----------------------------------------------------- */

static int insert(uint64_t *keys, int64_t capacity, uint64_t key) {
    for (int64_t k = (int64_t)(key % (uint64_t)capacity);; k = (k + 1) % capacity) {
        if (keys[k] == key) return 0;
        if (!keys[k]) { keys[k] = key; return 1; }
    }
}

void kvc_geometry_set_add(kvc_geometry_set *s, uint64_t key) {
    if (!key) return;
    if (2 * (s->count + 1) > s->capacity) {
        int64_t capacity = s->capacity ? 2 * s->capacity : 64;
        uint64_t *keys = calloc((size_t)capacity, sizeof *keys);
        if (!keys) return;
        for (int64_t i = 0; i < s->capacity; i++)
            if (s->keys[i]) insert(keys, capacity, s->keys[i]);
        free(s->keys);
        s->keys = keys;
        s->capacity = capacity;
    }
    s->count += insert(s->keys, s->capacity, key);
}

void kvc_geometry_set_free(kvc_geometry_set *s) {
    free(s->keys);
    *s = (kvc_geometry_set){0};
}

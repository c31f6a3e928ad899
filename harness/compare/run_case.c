/* Binding cases to stage arguments: see run_case.h. */
#include "kvcmp/run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/layout.h"
#include "kvcmp/rng.h"
#include "kvcmp/validate.h"

/* A paged working copy of one cache tensor. */
typedef struct {
    const char *name;
    kvc_array *source;       /* the case tensor */
    uint8_t *buffer;
    int kept;                /* buffer is kept_buffers[slot], not freed after the run */
    kvc_paged_cache cache;
} paged_copy;

/* Padded buffers kept from one run to the next, one per paged copy of a
 * call (a forward binds up to three), per thread: a campaign runs
 * thousands of cases a second, and allocating and filling a fresh padded
 * buffer for every run was a sixth of its time.  Larger
 * buffers are not kept, so that one huge case does not stay resident. */
#define KEPT_BUFFER_MAX_BYTES ((size_t)32 << 20)
static _Thread_local struct {
    uint8_t *data;
    size_t bytes;
} kept_buffers[3];

static uint8_t *buffer_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 64) / 64 * 64); }

/* The kept buffer of `slot` with room for `bytes`, grown when short; NULL
 * when out of memory (make_paged then forgets the slot's size). */
static uint8_t *kept_buffer(int slot, size_t bytes) {
    if (kept_buffers[slot].bytes < bytes) {
        free(kept_buffers[slot].data);
        kept_buffers[slot].data = buffer_alloc(bytes);
        kept_buffers[slot].bytes = bytes;
    }
    return kept_buffers[slot].data;
}

/* A pointer tensor of the call, for the aliased-buffers check: the
 * argument fields that hold it (a forward's two stages may share one),
 * its bytes, and whether the call writes it. */
#define MAX_CALL_TENSORS 16
typedef struct {
    const char *name;
    void *fields[2];         /* addresses of the pointer members */
    int num_fields;
    int64_t bytes;
    int output;
} call_tensor;

/* Two tensors of the call placed in one allocation (options->alias_seed). */
typedef struct {
    uint8_t *block, *before;  /* the allocation, and its bytes before the call (after it, in the same malloc) */
    size_t bytes;
} aliased_pair;

typedef struct {
    const kvc_case *c;
    const kvc_run_options *options;
    kvc_run_result *result;
    paged_copy pages[3];
    int num_pages;
    kvc_array latent;        /* working latent (v41 norm and forward) */
    call_tensor tensors[MAX_CALL_TENSORS];
    int num_tensors;
    aliased_pair alias;
} binding;

static int case_error(binding *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int case_error(binding *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(b->result->error.message, sizeof b->result->error.message, "case: ");
    vsnprintf(b->result->error.message + n, sizeof b->result->error.message - (size_t)n, fmt, ap);
    va_end(ap);
    b->result->error.code = KVC_ERR_PARAM;
    return KVC_ERR_PARAM;
}

/* A tensor the stage needs, with its dtype and rank checked; dims < 0 in
 * `shape` are free, others must match. */
static kvc_array *need(binding *b, const char *name, kvc_dtype dtype, int ndim, const int64_t *shape, int *rc) {
    kvc_array *a = kvc_case_get(b->c, name);
    if (*rc) return a;
    if (!a) { *rc = case_error(b, "tensor %s.npy is missing for stage %s", name, kvc_stage_name(b->c->stage)); return NULL; }
    if (a->dtype != dtype) {
        *rc = case_error(b, "%s.npy has dtype %s, expected %s", name, kvc_dtype_descr(a->dtype), kvc_dtype_descr(dtype));
        return a;
    }
    if (a->ndim != ndim) { *rc = case_error(b, "%s.npy has %d dimensions, expected %d", name, a->ndim, ndim); return a; }
    for (int i = 0; i < ndim; i++)
        if (shape && shape[i] >= 0 && a->shape[i] != shape[i]) {
            *rc = case_error(b, "%s.npy dimension %d is %lld, expected %lld", name, i, (long long)a->shape[i], (long long)shape[i]);
            return a;
        }
    return a;
}

/* Copy a [pages, rows, ...] case tensor into a padded paged buffer. */
static paged_copy *make_paged(binding *b, const char *name, kvc_dtype dtype, int64_t row_elements, int *rc) {
    int64_t shape[3] = {-1, -1, row_elements};
    kvc_array *a = need(b, name, dtype, 3, shape, rc);
    if (*rc) return NULL;
    paged_copy *p = &b->pages[b->num_pages++];
    p->name = name;
    p->source = a;
    int64_t page_bytes = a->shape[1] * row_elements * kvc_dtype_size(dtype);
    int64_t padding = b->options ? b->options->page_padding : 0;
    p->cache.num_pages = a->shape[0];
    p->cache.page_rows = a->shape[1];
    p->cache.page_bytes = page_bytes;
    p->cache.page_stride = page_bytes + padding;
    size_t total = (size_t)(p->cache.num_pages * p->cache.page_stride);
    /* Without padding the buffer is the case layout and becomes the
     * output (collect_paged): a fresh one.  With padding, a kept one: every
     * byte up to `total` is written below (the pages, then the canary), so
     * nothing of an earlier run shows through. */
    p->kept = padding > 0 && total <= KEPT_BUFFER_MAX_BYTES;
    p->buffer = p->kept ? kept_buffer(b->num_pages - 1, total) : buffer_alloc(total);
    if (!p->buffer) {
        kept_buffers[b->num_pages - 1].bytes = 0;   /* the next run asks again */
        *rc = case_error(b, "out of memory for %s", name);
        return NULL;
    }
    uint8_t canary = b->options ? b->options->canary : 0;
    for (int64_t page = 0; page < p->cache.num_pages; page++) {
        uint8_t *to = p->buffer + page * p->cache.page_stride;
        memcpy(to, (uint8_t *)a->data + page * page_bytes, (size_t)page_bytes);
        memset(to + page_bytes, canary, (size_t)padding);
    }
    p->cache.data = p->buffer;
    return p;
}

/* An array shaped like `like` over `data` (malloc'ed, taken over). */
static void array_over(kvc_array *out, const kvc_array *like, void *data) {
    memset(out, 0, sizeof *out);
    out->dtype = like->dtype;
    out->ndim = like->ndim;
    memcpy(out->shape, like->shape, sizeof out->shape);
    out->count = like->count;
    out->data = data;
}

/* Copy a paged buffer back into the case layout, checking its padding. */
static void collect_paged(binding *b, paged_copy *p) {
    kvc_run_result *r = b->result;
    kvc_named_array *out = &r->outputs[r->num_outputs++];
    snprintf(out->name, sizeof out->name, "%s", p->name);
    if (p->cache.page_stride == p->cache.page_bytes) {   /* no padding: the buffer is the output */
        array_over(&out->array, p->source, p->buffer);
        p->buffer = NULL;
        return;
    }
    /* Every byte is copied over below: no zeroing. */
    array_over(&out->array, p->source, malloc((size_t)(p->cache.num_pages * p->cache.page_bytes) + 1));
    uint8_t canary = b->options ? b->options->canary : 0;
    for (int64_t page = 0; page < p->cache.num_pages; page++) {
        uint8_t *src = p->buffer + page * p->cache.page_stride;
        memcpy((uint8_t *)out->array.data + page * p->cache.page_bytes, src, (size_t)p->cache.page_bytes);
        for (int64_t i = p->cache.page_bytes; i < p->cache.page_stride; i++)
            if (src[i] != canary && !r->padding_touched) {
                r->padding_touched = 1;
                snprintf(r->padding_message, sizeof r->padding_message, "%s: padding byte %lld after page %lld was written",
                         p->name, (long long)(i - p->cache.page_bytes), (long long)page);
            }
    }
}

static int64_t tokens_of(binding *b, const char *name, int *rc) {
    kvc_array *a = need(b, name, KVC_DT_I8, 1, NULL, rc);
    return *rc ? 0 : a->shape[0];
}

/* Registers a pointer member of the call's arguments; a name seen before
 * (positions in both stages of a forward) gets the second field.  A call
 * has two stages at most, and a v41.forward, the largest, 11 tensors. */
static void add_tensor(binding *b, const char *name, void *field, int64_t bytes, int output) {
    for (int i = 0; i < b->num_tensors; i++)
        if (strcmp(b->tensors[i].name, name) == 0) {
            b->tensors[i].fields[1] = field;
            b->tensors[i].num_fields = 2;
            b->tensors[i].output |= output;
            return;
        }
    b->tensors[b->num_tensors++] = (call_tensor){.name = name, .fields = {field}, .num_fields = 1, .bytes = bytes, .output = output};
}

static int bind_v4_save(binding *b, const kvc_backend *backend, paged_copy *state, kvc_v4_save_args *a) {
    int rc = 0;
    const kvc_case *c = b->c;
    int64_t T = tokens_of(b, "positions", &rc);
    int64_t W = (int64_t)kvc_v4_coff(c->compress_ratio) * c->head_dim;
    int64_t token_shape[2] = {T, W}, ape_shape[2] = {c->compress_ratio, W}, t_shape[1] = {T};
    memset(a, 0, sizeof *a);
    a->num_tokens = T;
    a->compress_ratio = c->compress_ratio;
    a->head_dim = c->head_dim;
    kvc_array *kv = need(b, "kv", KVC_DT_F4, 2, token_shape, &rc);
    kvc_array *score = need(b, "score", KVC_DT_F4, 2, token_shape, &rc);
    kvc_array *ape = need(b, "ape", KVC_DT_F4, 2, ape_shape, &rc);
    kvc_array *slots = need(b, "slot_mapping", KVC_DT_I8, 1, t_shape, &rc);
    if (rc) return rc;
    if (!backend->v4_save_partial_states) return case_error(b, "backend %s has no v4.save_partial_states", backend->name);
    a->kv = kv->data; a->score = score->data; a->ape = ape->data;
    a->positions = kvc_case_get(c, "positions")->data;
    a->slot_mapping = slots->data;
    a->state_cache = state->cache;
    add_tensor(b, "state_cache", &a->state_cache.data, kvc_cache_span(&a->state_cache), 1);
    add_tensor(b, "kv", &a->kv, T * W * 4, 0);
    add_tensor(b, "score", &a->score, T * W * 4, 0);
    add_tensor(b, "ape", &a->ape, c->compress_ratio * W * 4, 0);
    add_tensor(b, "positions", &a->positions, T * 8, 0);
    add_tensor(b, "slot_mapping", &a->slot_mapping, T * 8, 0);
    return 0;
}

/* state_output: the state cache is written by the call (a forward). */
static int bind_v4_compress(binding *b, const kvc_backend *backend, paged_copy *state, paged_copy *kv_cache, int state_output,
                            kvc_v4_compress_args *a) {
    int rc = 0;
    const kvc_case *c = b->c;
    int64_t T = tokens_of(b, "positions", &rc);
    int64_t t_shape[1] = {T}, weight_shape[1] = {c->head_dim}, cos_shape[2] = {-1, 64};
    kvc_array *block_table = need(b, "block_table", KVC_DT_I4, 2, NULL, &rc);
    kvc_array *token_to_req = need(b, "token_to_req", KVC_DT_I4, 1, t_shape, &rc);
    kvc_array *slots = need(b, "slot_mapping", KVC_DT_I8, 1, t_shape, &rc);
    kvc_array *kv_slots = need(b, "kv_slot_mapping", KVC_DT_I8, 1, t_shape, &rc);
    kvc_array *weight = need(b, "norm_weight", KVC_DT_F4, 1, weight_shape, &rc);
    kvc_array *cos_sin = need(b, "cos_sin", KVC_DT_F4, 2, cos_shape, &rc);
    if (rc) return rc;
    if (!backend->v4_compress) return case_error(b, "backend %s has no v4.compress", backend->name);
    memset(a, 0, sizeof *a);
    a->num_tokens = T;
    a->compress_ratio = c->compress_ratio;
    a->head_dim = c->head_dim;
    a->eps = c->eps;
    a->state_cache = state->cache;
    a->block_table = block_table->data;
    a->num_requests = block_table->shape[0];
    a->max_blocks = block_table->shape[1];
    a->token_to_req = token_to_req->data;
    a->positions = kvc_case_get(c, "positions")->data;
    a->slot_mapping = slots->data;
    a->kv_slot_mapping = kv_slots->data;
    a->norm_weight = weight->data;
    a->cos_sin = cos_sin->data;
    a->cos_sin_rows = cos_sin->shape[0];
    a->kv_cache = kv_cache->cache;
    add_tensor(b, "kv_cache", &a->kv_cache.data, kvc_cache_span(&a->kv_cache), 1);
    add_tensor(b, "state_cache", &a->state_cache.data, kvc_cache_span(&a->state_cache), state_output);
    add_tensor(b, "block_table", &a->block_table, (int64_t)block_table->count * 4, 0);
    add_tensor(b, "token_to_req", &a->token_to_req, T * 4, 0);
    add_tensor(b, "positions", &a->positions, T * 8, 0);
    add_tensor(b, "slot_mapping", &a->slot_mapping, T * 8, 0);
    add_tensor(b, "kv_slot_mapping", &a->kv_slot_mapping, T * 8, 0);
    add_tensor(b, "norm_weight", &a->norm_weight, c->head_dim * 4, 0);
    add_tensor(b, "cos_sin", &a->cos_sin, a->cos_sin_rows * 256, 0);
    return 0;
}

static int bind_v41_norm(binding *b, const kvc_backend *backend, paged_copy *ring, kvc_v41_norm_args *a) {
    int rc = 0;
    const kvc_case *c = b->c;
    int64_t T = tokens_of(b, "positions", &rc);
    int32_t R = c->compress_ratio;
    int64_t t_shape[1] = {T}, in_shape[2] = {T, 512 * (int64_t)(R == 2 ? 2 : 1)}, weight_shape[1] = {512};
    int64_t latent_shape[2] = {T, 512};
    kvc_array *kv_score = need(b, "kv_score", KVC_DT_F4, 2, in_shape, &rc);
    kvc_array *slots = need(b, "slot_mapping", KVC_DT_I8, 1, t_shape, &rc);
    kvc_array *weight = need(b, "norm_weight", KVC_DT_U2, 1, weight_shape, &rc);
    kvc_array *latent = need(b, "latent", KVC_DT_U2, 2, latent_shape, &rc);
    kvc_array *qsl = NULL, *token_to_req = NULL;
    if (R == 2) {
        qsl = need(b, "query_start_loc", KVC_DT_I4, 1, NULL, &rc);
        token_to_req = need(b, "token_to_req", KVC_DT_I4, 1, t_shape, &rc);
        if (!rc && qsl->shape[0] < 1) rc = case_error(b, "query_start_loc.npy is empty");
    }
    if (rc) return rc;
    if (!backend->v41_save_compress_norm) return case_error(b, "backend %s has no v41.save_compress_norm", backend->name);
    array_over(&b->latent, latent, malloc((size_t)(T * 512 * 2) + 1));   /* copied over: no zeroing */
    memcpy(b->latent.data, latent->data, (size_t)(T * 512 * 2));
    memset(a, 0, sizeof *a);
    a->num_tokens = T;
    a->compress_ratio = R;
    a->eps = c->eps;
    a->kv_score = kv_score->data;
    a->positions = kvc_case_get(c, "positions")->data;
    a->slot_mapping = slots->data;
    a->norm_weight = weight->data;
    a->latent = b->latent.data;
    add_tensor(b, "latent", &a->latent, T * 1024, 1);
    add_tensor(b, "kv_score", &a->kv_score, (int64_t)kv_score->count * 4, 0);
    add_tensor(b, "positions", &a->positions, T * 8, 0);
    add_tensor(b, "slot_mapping", &a->slot_mapping, T * 8, 0);
    add_tensor(b, "norm_weight", &a->norm_weight, 1024, 0);
    if (R == 2) {
        a->state_cache = ring->cache;
        a->query_start_loc = qsl->data;
        a->num_requests = qsl->shape[0] - 1;
        a->token_to_req = token_to_req->data;
        add_tensor(b, "state_cache", &a->state_cache.data, kvc_cache_span(&a->state_cache), 1);
        add_tensor(b, "query_start_loc", &a->query_start_loc, (int64_t)qsl->count * 4, 0);
        add_tensor(b, "token_to_req", &a->token_to_req, T * 4, 0);
    }
    return 0;
}

/* latent: the forward's working latent, or NULL for the case's. */
static int bind_v41_insert(binding *b, const kvc_backend *backend, paged_copy *kv_cache, const uint16_t *latent,
                           const char *slot_name, kvc_v41_insert_args *a, kvc_v41_insert_fn *fn) {
    int rc = 0;
    const kvc_case *c = b->c;
    int64_t T = tokens_of(b, "positions", &rc);
    int64_t t_shape[1] = {T}, latent_shape[2] = {T, 512}, cos_shape[2] = {-1, 64}, scale_shape[1] = {1};
    kvc_array *latent_in = latent ? NULL : need(b, "latent", KVC_DT_U2, 2, latent_shape, &rc);
    kvc_array *slots = need(b, slot_name, KVC_DT_I8, 1, t_shape, &rc);
    kvc_array *cos_sin = need(b, "cos_sin", KVC_DT_F4, 2, cos_shape, &rc);
    kvc_array *scale = c->cache_dtype == KVC_CACHE_FP8_E4M3 ? need(b, "fp8_scale", KVC_DT_F4, 1, scale_shape, &rc) : NULL;
    if (rc) return rc;
    int quant = c->cache_dtype == KVC_CACHE_FP8_DS_MLA;
    *fn = quant ? backend->v41_rope_quant_insert : backend->v41_rope_plain_insert;
    if (!*fn) return case_error(b, "backend %s has no %s", backend->name, quant ? "v41.rope_quant_insert" : "v41.rope_plain_insert");
    memset(a, 0, sizeof *a);
    a->num_tokens = T;
    a->compress_ratio = c->compress_ratio;
    a->cache_dtype = c->cache_dtype;
    a->latent = latent ? latent : latent_in->data;
    a->positions = kvc_case_get(c, "positions")->data;
    a->slot_mapping = slots->data;
    a->cos_sin = cos_sin->data;
    a->cos_sin_rows = cos_sin->shape[0];
    a->kv_cache = kv_cache->cache;
    a->fp8_scale = scale ? ((float *)scale->data)[0] : 0.0f;
    add_tensor(b, "kv_cache", &a->kv_cache.data, kvc_cache_span(&a->kv_cache), 1);
    add_tensor(b, "latent", &a->latent, T * 1024, 0);
    add_tensor(b, "positions", &a->positions, T * 8, 0);
    add_tensor(b, slot_name, &a->slot_mapping, T * 8, 0);
    add_tensor(b, "cos_sin", &a->cos_sin, a->cos_sin_rows * 256, 0);
    return 0;
}

/* ---- aliased buffers --------------------------------------------------- */

static void *field_pointer(void *field) {
    void *p;
    memcpy(&p, field, sizeof p);
    return p;
}

static void set_fields(const call_tensor *t, void *p) {
    for (int i = 0; i < t->num_fields; i++) memcpy(t->fields[i], &p, sizeof p);
}

/* The tensors of the call that r picks: an output, and another tensor
 * (an input or another output); 0 when the call has no such pair. */
static int pick_pair(binding *b, kvc_rng *r, call_tensor **output, call_tensor **other) {
    call_tensor *outputs[MAX_CALL_TENSORS], *others[MAX_CALL_TENSORS];
    int num_outputs = 0, num_others = 0;
    for (int i = 0; i < b->num_tensors; i++)
        if (b->tensors[i].output && b->tensors[i].bytes > 0) outputs[num_outputs++] = &b->tensors[i];
    if (!num_outputs) return 0;
    *output = outputs[kvc_rng_below(r, num_outputs)];
    for (int i = 0; i < b->num_tensors; i++)
        if (&b->tensors[i] != *output && b->tensors[i].bytes > 0) others[num_others++] = &b->tensors[i];
    if (!num_others) return 0;
    *other = others[kvc_rng_below(r, num_others)];
    return 1;
}

/* Moves an output and another tensor of the call into one allocation so
 * that they overlap (SPEC.md 8.1: the call must be rejected as a
 * conflict, nothing written).  One of the two starts at byte 0, the other
 * at a multiple of 64 inside it, so every alignment rule still holds.
 * The output's bytes are copied first and the other tensor's over them:
 * an index tensor keeps its values, so the overlap is the only fault. */
static void place_aliased(binding *b) {
    uint64_t seed = b->options ? b->options->alias_seed : 0;
    if (!seed) return;
    kvc_rng r;
    kvc_rng_seed(&r, seed, 0xA11A5);
    call_tensor *output, *other;
    if (!pick_pair(b, &r, &output, &other)) return;
    int output_first = kvc_rng_chance(&r, 1, 2);
    call_tensor *first = output_first ? output : other, *second = output_first ? other : output;
    int64_t offset = 64 * kvc_rng_below(&r, (first->bytes + 63) / 64);
    size_t bytes = (size_t)(offset + second->bytes > first->bytes ? offset + second->bytes : first->bytes);
    size_t rounded = (bytes + 63) / 64 * 64;
    uint8_t *block = aligned_alloc(64, 2 * rounded);
    if (!block) return;   /* out of memory: the call runs unaliased (result->aliased 0) */
    /* [0, bytes) is the union of the two ranges: both copies cover it. */
    uint8_t *at_output = block + (output_first ? 0 : offset), *at_other = block + (output_first ? offset : 0);
    memcpy(at_output, field_pointer(output->fields[0]), (size_t)output->bytes);
    memcpy(at_other, field_pointer(other->fields[0]), (size_t)other->bytes);
    set_fields(output, at_output);
    set_fields(other, at_other);
    uint8_t *before = block + rounded;
    memcpy(before, block, bytes);
    b->alias = (aliased_pair){.block = block, .before = before, .bytes = bytes};
    kvc_run_result *res = b->result;
    res->aliased = 1;
    snprintf(res->alias_message, sizeof res->alias_message, "%s (bytes %lld..%lld) and %s (bytes %lld..%lld) in one allocation",
             output->name, (long long)(at_output - block), (long long)(at_output - block + output->bytes), other->name,
             (long long)(at_other - block), (long long)(at_other - block + other->bytes));
}

/* After the call: a byte of the shared allocation that changed. */
static void check_aliased(binding *b) {
    aliased_pair *p = &b->alias;
    if (!p->block) return;
    for (size_t k = 0; k < p->bytes; k++)
        if (p->block[k] != p->before[k]) {
            kvc_run_result *r = b->result;
            size_t n = strlen(r->alias_message);
            r->alias_written = 1;
            snprintf(r->alias_message + n, sizeof r->alias_message - n, ": byte %zu changed from 0x%02x to 0x%02x", k, p->before[k],
                     p->block[k]);
            break;
        }
    free(p->block);
    p->block = p->before = NULL;
}

int kvc_stage_outputs(const kvc_case *c, const char **names) {
    int n = 0, ring = c->compress_ratio == 2;
    switch (c->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES: names[n++] = "state_cache"; break;
    case KVC_STAGE_V4_COMPRESS: names[n++] = "kv_cache"; break;
    case KVC_STAGE_V4_FORWARD: names[n++] = "state_cache"; names[n++] = "kv_cache"; break;
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM: names[n++] = "latent"; if (ring) names[n++] = "state_cache"; break;
    case KVC_STAGE_V41_ROPE_QUANT_INSERT:
    case KVC_STAGE_V41_ROPE_PLAIN_INSERT: names[n++] = "kv_cache"; break;
    case KVC_STAGE_V41_FORWARD: names[n++] = "latent"; if (ring) names[n++] = "state_cache"; names[n++] = "kv_cache"; break;
    default: break;
    }
    return n;
}

static int check_params(binding *b) {
    const kvc_case *c = b->c;
    int v41 = c->stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    int insert = c->stage == KVC_STAGE_V41_ROPE_QUANT_INSERT || c->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT ||
                 c->stage == KVC_STAGE_V41_FORWARD || c->stage == KVC_STAGE_V4_COMPRESS || c->stage == KVC_STAGE_V4_FORWARD;
    if (v41 ? (c->compress_ratio != 1 && c->compress_ratio != 2) : (c->compress_ratio != 4 && c->compress_ratio != 128))
        return case_error(b, "params.compress_ratio = %d is not supported by %s", c->compress_ratio, kvc_stage_name(c->stage));
    if (v41 ? c->head_dim != 512 : (c->head_dim != 512 && c->head_dim != 128))
        return case_error(b, "params.head_dim = %d is not supported by %s", c->head_dim, kvc_stage_name(c->stage));
    if (insert && !c->has_cache_dtype) {
        if (c->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT) return case_error(b, "params.cache_dtype is required (bf16 or fp8_e4m3)");
        ((kvc_case *)c)->cache_dtype = c->head_dim == 128 ? KVC_CACHE_FP8_INDEXER : KVC_CACHE_FP8_DS_MLA;
    }
    return 0;
}

/* Page element type and row width of the kv cache for this case. */
static void kv_cache_geometry(const kvc_case *c, kvc_dtype *dtype, int64_t *row_elements) {
    *dtype = c->cache_dtype == KVC_CACHE_BF16 ? KVC_DT_U2 : KVC_DT_U1;
    *row_elements = c->cache_dtype == KVC_CACHE_BF16 ? 512 : kvc_cache_row_bytes(c->cache_dtype);
}

static int dispatch(binding *b, const kvc_backend *backend) {
    const kvc_case *c = b->c;
    int rc = check_params(b);
    if (rc) return rc;
    int64_t state_row = 2 * (int64_t)kvc_v4_coff(c->compress_ratio) * c->head_dim;
    kvc_dtype kv_dtype;
    int64_t kv_row;
    kv_cache_geometry(c, &kv_dtype, &kv_row);
    paged_copy *state = NULL, *kv = NULL;
    kvc_v4_save_args save;
    kvc_v4_compress_args compress;
    kvc_v41_norm_args norm;
    kvc_v41_insert_args insert;
    kvc_v41_insert_fn insert_fn;
    kvc_error *err = &b->result->error;
    const char *insert_slots = c->compress_ratio == 2 ? "kv_slot_mapping" : "slot_mapping";
    switch (c->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES:
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        if (rc || (rc = bind_v4_save(b, backend, state, &save))) return rc;
        place_aliased(b);
        return backend->v4_save_partial_states(&save, err);
    case KVC_STAGE_V4_COMPRESS:
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        if (rc || (rc = bind_v4_compress(b, backend, state, kv, 0, &compress))) return rc;
        place_aliased(b);
        return backend->v4_compress(&compress, err);
    case KVC_STAGE_V4_FORWARD:
        /* A forward is the backend's two calls in a chain; each gets its
         * arguments as they are, none checked here for it.  Only the
         * overlaps between the two stages' tensors (SPEC.md 8.1: a forward
         * is one call), which neither call can see, are the harness's. */
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        if (rc || (rc = bind_v4_save(b, backend, state, &save)) || (rc = bind_v4_compress(b, backend, state, kv, 1, &compress)))
            return rc;
        place_aliased(b);
        if ((rc = kvc_validate_v4_forward_overlaps(&save, &compress, err))) return rc;
        /* Arguments compress must reject go to the backend's compress
         * before save writes anything (SPEC.md 4.3): its own rejection, or
         * acceptance, is the forward's. */
        if (kvc_validate_v4_compress(&compress, &(kvc_error){0})) return backend->v4_compress(&compress, err);
        rc = backend->v4_save_partial_states(&save, err);
        return rc ? rc : backend->v4_compress(&compress, err);
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM:
        if (c->compress_ratio == 2) state = make_paged(b, "state_cache", KVC_DT_F4, 1024, &rc);
        if (rc || (rc = bind_v41_norm(b, backend, state, &norm))) return rc;
        place_aliased(b);
        return backend->v41_save_compress_norm(&norm, err);
    case KVC_STAGE_V41_ROPE_QUANT_INSERT:
    case KVC_STAGE_V41_ROPE_PLAIN_INSERT:
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        if (rc || (rc = bind_v41_insert(b, backend, kv, NULL, "slot_mapping", &insert, &insert_fn))) return rc;
        place_aliased(b);
        return insert_fn(&insert, err);
    case KVC_STAGE_V41_FORWARD:
        if (c->compress_ratio == 2) state = make_paged(b, "state_cache", KVC_DT_F4, 1024, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        /* The insert stage's latent is the one the norm stage writes. */
        if (rc || (rc = bind_v41_norm(b, backend, state, &norm)) ||
            (rc = bind_v41_insert(b, backend, kv, b->latent.data, insert_slots, &insert, &insert_fn)))
            return rc;
        place_aliased(b);
        if ((rc = kvc_validate_v41_forward_overlaps(&norm, &insert, err))) return rc;
        /* As for v4.forward: arguments the insert must reject reach the
         * backend's insert, on the latent as it was, and nothing else runs. */
        if (kvc_validate_v41_insert(&insert, c->cache_dtype == KVC_CACHE_FP8_DS_MLA, &(kvc_error){0})) return insert_fn(&insert, err);
        rc = backend->v41_save_compress_norm(&norm, err);
        return rc ? rc : insert_fn(&insert, err);
    default:
        return case_error(b, "unknown stage");
    }
}

int kvc_run_case(const kvc_backend *backend, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result) {
    memset(result, 0, sizeof *result);
    binding b = {.c = c, .options = options, .result = result};
    int rc = dispatch(&b, backend);
    check_aliased(&b);
    result->status = rc;
    result->error.code = rc;
    int keep = rc == KVC_OK || (options && options->keep_outputs_on_error && strncmp(result->error.message, "case:", 5) != 0);
    if (keep) {
        const char *names[KVC_MAX_OUTPUTS];
        int n = kvc_stage_outputs(c, names);
        for (int i = 0; i < n; i++) {
            if (strcmp(names[i], "latent") == 0) {
                if (!b.latent.data) continue;   /* rejected before the stage ran */
                kvc_named_array *out = &result->outputs[result->num_outputs++];
                snprintf(out->name, sizeof out->name, "latent");
                out->array = b.latent;
                b.latent.data = NULL;
                continue;
            }
            for (int p = 0; p < b.num_pages; p++)
                if (strcmp(b.pages[p].name, names[i]) == 0) collect_paged(&b, &b.pages[p]);
        }
    }
    for (int p = 0; p < b.num_pages; p++)
        if (!b.pages[p].kept) free(b.pages[p].buffer);
    kvc_array_free(&b.latent);
    return rc;
}

void kvc_run_result_free(kvc_run_result *result) {
    for (int i = 0; i < result->num_outputs; i++) kvc_array_free(&result->outputs[i].array);
    result->num_outputs = 0;
}

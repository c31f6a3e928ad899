/* Binding cases to stage arguments: see run_case.h. */
#include "kvcmp/run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/layout.h"
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
 * buffer for every run was a sixth of its time (issue 20).  Larger
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

typedef struct {
    const kvc_case *c;
    const kvc_run_options *options;
    kvc_run_result *result;
    paged_copy pages[3];
    int num_pages;
    kvc_array latent;        /* working latent (v41 norm and forward) */
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

static int run_v4_save(binding *b, const kvc_backend *backend, paged_copy *state) {
    int rc = 0;
    const kvc_case *c = b->c;
    int64_t T = tokens_of(b, "positions", &rc);
    int64_t W = (int64_t)kvc_v4_coff(c->compress_ratio) * c->head_dim;
    int64_t token_shape[2] = {T, W}, ape_shape[2] = {c->compress_ratio, W}, t_shape[1] = {T};
    kvc_v4_save_args a = {0};
    a.num_tokens = T;
    a.compress_ratio = c->compress_ratio;
    a.head_dim = c->head_dim;
    kvc_array *kv = need(b, "kv", KVC_DT_F4, 2, token_shape, &rc);
    kvc_array *score = need(b, "score", KVC_DT_F4, 2, token_shape, &rc);
    kvc_array *ape = need(b, "ape", KVC_DT_F4, 2, ape_shape, &rc);
    kvc_array *slots = need(b, "slot_mapping", KVC_DT_I8, 1, t_shape, &rc);
    if (rc) return rc;
    if (!backend->v4_save_partial_states) return case_error(b, "backend %s has no v4.save_partial_states", backend->name);
    a.kv = kv->data; a.score = score->data; a.ape = ape->data;
    a.positions = kvc_case_get(c, "positions")->data;
    a.slot_mapping = slots->data;
    a.state_cache = state->cache;
    return backend->v4_save_partial_states(&a, &b->result->error);
}

/* validate_only: check the arguments with the shared validator and stop
 * (a forward validates its second stage before the first one writes). */
static int run_v4_compress(binding *b, const kvc_backend *backend, paged_copy *state, paged_copy *kv_cache, int validate_only) {
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
    kvc_v4_compress_args a = {0};
    a.num_tokens = T;
    a.compress_ratio = c->compress_ratio;
    a.head_dim = c->head_dim;
    a.eps = c->eps;
    a.state_cache = state->cache;
    a.block_table = block_table->data;
    a.num_requests = block_table->shape[0];
    a.max_blocks = block_table->shape[1];
    a.token_to_req = token_to_req->data;
    a.positions = kvc_case_get(c, "positions")->data;
    a.slot_mapping = slots->data;
    a.kv_slot_mapping = kv_slots->data;
    a.norm_weight = weight->data;
    a.cos_sin = cos_sin->data;
    a.cos_sin_rows = cos_sin->shape[0];
    a.kv_cache = kv_cache->cache;
    if (validate_only) return kvc_validate_v4_compress(&a, &b->result->error);
    return backend->v4_compress(&a, &b->result->error);
}

static int run_v41_norm(binding *b, const kvc_backend *backend, paged_copy *ring) {
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
    kvc_v41_norm_args a = {0};
    a.num_tokens = T;
    a.compress_ratio = R;
    a.eps = c->eps;
    a.kv_score = kv_score->data;
    a.positions = kvc_case_get(c, "positions")->data;
    a.slot_mapping = slots->data;
    a.norm_weight = weight->data;
    a.latent = b->latent.data;
    if (R == 2) {
        a.state_cache = ring->cache;
        a.query_start_loc = qsl->data;
        a.num_requests = qsl->shape[0] - 1;
        a.token_to_req = token_to_req->data;
    }
    return backend->v41_save_compress_norm(&a, &b->result->error);
}

static int run_v41_insert(binding *b, const kvc_backend *backend, paged_copy *kv_cache, const uint16_t *latent,
                          const char *slot_name, int validate_only) {
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
    kvc_v41_insert_fn fn = quant ? backend->v41_rope_quant_insert : backend->v41_rope_plain_insert;
    if (!fn) return case_error(b, "backend %s has no %s", backend->name, quant ? "v41.rope_quant_insert" : "v41.rope_plain_insert");
    kvc_v41_insert_args a = {0};
    a.num_tokens = T;
    a.compress_ratio = c->compress_ratio;
    a.cache_dtype = c->cache_dtype;
    a.latent = latent ? latent : latent_in->data;
    a.positions = kvc_case_get(c, "positions")->data;
    a.slot_mapping = slots->data;
    a.cos_sin = cos_sin->data;
    a.cos_sin_rows = cos_sin->shape[0];
    a.kv_cache = kv_cache->cache;
    a.fp8_scale = scale ? ((float *)scale->data)[0] : 0.0f;
    if (validate_only) return kvc_validate_v41_insert(&a, quant, &b->result->error);
    return fn(&a, &b->result->error);
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
    const char *insert_slots;
    switch (c->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES:
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        return rc ? rc : run_v4_save(b, backend, state);
    case KVC_STAGE_V4_COMPRESS:
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        return rc ? rc : run_v4_compress(b, backend, state, kv, 0);
    case KVC_STAGE_V4_FORWARD:
        state = make_paged(b, "state_cache", KVC_DT_F4, state_row, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        if (rc || (rc = run_v4_compress(b, backend, state, kv, 1))) return rc;
        rc = run_v4_save(b, backend, state);
        return rc ? rc : run_v4_compress(b, backend, state, kv, 0);
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM:
        if (c->compress_ratio == 2) state = make_paged(b, "state_cache", KVC_DT_F4, 1024, &rc);
        return rc ? rc : run_v41_norm(b, backend, state);
    case KVC_STAGE_V41_ROPE_QUANT_INSERT:
    case KVC_STAGE_V41_ROPE_PLAIN_INSERT:
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        return rc ? rc : run_v41_insert(b, backend, kv, NULL, "slot_mapping", 0);
    case KVC_STAGE_V41_FORWARD:
        if (c->compress_ratio == 2) state = make_paged(b, "state_cache", KVC_DT_F4, 1024, &rc);
        kv = make_paged(b, "kv_cache", kv_dtype, kv_row, &rc);
        if (rc) return rc;
        insert_slots = c->compress_ratio == 2 ? "kv_slot_mapping" : "slot_mapping";
        if ((rc = run_v41_insert(b, backend, kv, NULL, insert_slots, 1))) return rc;
        rc = run_v41_norm(b, backend, state);
        return rc ? rc : run_v41_insert(b, backend, kv, b->latent.data, insert_slots, 0);
    default:
        return case_error(b, "unknown stage");
    }
}

int kvc_run_case(const kvc_backend *backend, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result) {
    memset(result, 0, sizeof *result);
    binding b = {.c = c, .options = options, .result = result};
    int rc = dispatch(&b, backend);
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

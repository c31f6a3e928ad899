/* Shared validation: see validate.h.  Each check names the tensor and the
 * index it rejects, and nothing has been written when it fails. */
#include "kvcmp/validate.h"
#include "common/validate_parts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvcmp/layout.h"

int kvc_fail(kvc_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *kvc_status_name(int code) {
    switch (code) {
    case KVC_OK: return "ok";
    case KVC_ERR_PARAM: return "bad-parameter";
    case KVC_ERR_INDEX: return "index-out-of-range";
    case KVC_ERR_CONFLICT: return "conflict";
    case KVC_ERR_METADATA: return "inconsistent-metadata";
    case KVC_ERR_NOMEM: return "out-of-memory";
    case KVC_ERR_UNAVAILABLE: return "unavailable";
    case KVC_ERR_CANDIDATE: return "candidate-error";
    case KVC_ERR_CRASHED: return "crashed";
    case KVC_ERR_DEVICE_LOST: return "device-lost";
    }
    return "unknown";
}

static int ok(kvc_error *err) {
    if (err) { err->code = KVC_OK; err->message[0] = 0; }
    return KVC_OK;
}

/* Counts and memory spans are bounded (SPEC.md 9.3) so that every byte
 * size computed below fits in int64: a caller's impossible size is a
 * refusal, never an overflow. */
#define KVC_MAX_COUNT ((int64_t)1 << 40)
#define KVC_MAX_SPAN ((int64_t)1 << 56)

static int check_count(int64_t n, const char *name, kvc_error *err) {
    if (n > KVC_MAX_COUNT) return kvc_fail(err, KVC_ERR_PARAM, "%s = %lld is larger than 2^40", name, (long long)n);
    return KVC_OK;
}

/* Geometry of a paged cache whose rows take row_bytes, aligned to align. */
static int check_cache(const kvc_paged_cache *c, const char *name, int64_t row_bytes, int64_t align,
                       kvc_error *err) {
    if (c->num_pages < 0) return kvc_fail(err, KVC_ERR_PARAM, "%s: num_pages = %lld is negative", name, (long long)c->num_pages);
    if (c->page_rows < 1) return kvc_fail(err, KVC_ERR_PARAM, "%s: page_rows (block size) = %lld, must be >= 1", name, (long long)c->page_rows);
    if (c->page_rows > ((int64_t)1 << 24)) return kvc_fail(err, KVC_ERR_PARAM, "%s: page_rows = %lld is too large", name, (long long)c->page_rows);
    if (c->page_bytes != c->page_rows * row_bytes)
        return kvc_fail(err, KVC_ERR_PARAM, "%s: page_bytes = %lld, expected %lld rows x %lld bytes = %lld", name,
                        (long long)c->page_bytes, (long long)c->page_rows, (long long)row_bytes,
                        (long long)(c->page_rows * row_bytes));
    if (c->page_stride < c->page_bytes)
        return kvc_fail(err, KVC_ERR_PARAM, "%s: page_stride = %lld is smaller than page_bytes = %lld", name,
                        (long long)c->page_stride, (long long)c->page_bytes);
    int64_t span;
    if (__builtin_mul_overflow(c->num_pages, c->page_stride, &span) || span > KVC_MAX_SPAN)
        return kvc_fail(err, KVC_ERR_PARAM, "%s: %lld pages of %lld bytes span more than 2^56 bytes", name,
                        (long long)c->num_pages, (long long)c->page_stride);
    if (c->page_stride % align != 0 || ((uintptr_t)c->data % (uintptr_t)align) != 0)
        return kvc_fail(err, KVC_ERR_PARAM, "%s: data and page_stride must be %lld-byte aligned", name, (long long)align);
    if (c->num_pages > 0 && c->data == NULL) return kvc_fail(err, KVC_ERR_PARAM, "%s: data is NULL", name);
    return KVC_OK;
}

static int check_pointer(const void *p, const char *name, int64_t count, kvc_error *err) {
    if (count > 0 && p == NULL) return kvc_fail(err, KVC_ERR_PARAM, "%s is NULL", name);
    return KVC_OK;
}

/* An output range must not overlap an input range, index tensors
 * included: a stage writing over one would then read an index it never
 * validated. */
static int check_disjoint(const void *out, int64_t out_bytes, const char *out_name, const void *in,
                          int64_t in_bytes, const char *in_name, kvc_error *err) {
    if (!out || !in || out_bytes <= 0 || in_bytes <= 0) return KVC_OK;
    uintptr_t o = (uintptr_t)out, i = (uintptr_t)in;
    if (o < i + (uintptr_t)in_bytes && i < o + (uintptr_t)out_bytes)
        return kvc_fail(err, KVC_ERR_CONFLICT, "%s overlaps %s in memory", out_name, in_name);
    return KVC_OK;
}

static int check_position(const int64_t *positions, int64_t t, kvc_error *err) {
    if (positions[t] < 0 || positions[t] > KVC_MAX_POSITION)
        return kvc_fail(err, KVC_ERR_INDEX, "positions[%lld] = %lld is outside [0, 2^40]", (long long)t,
                        (long long)positions[t]);
    return KVC_OK;
}

static int check_slot(const int64_t *slots, const char *name, int64_t t, const kvc_paged_cache *c,
                      const char *cache_name, kvc_error *err) {
    int64_t rows = c->num_pages * c->page_rows;
    if (slots[t] >= rows)
        return kvc_fail(err, KVC_ERR_INDEX, "%s[%lld] = %lld is outside %s (%lld pages x %lld rows)", name,
                        (long long)t, (long long)slots[t], cache_name, (long long)c->num_pages,
                        (long long)c->page_rows);
    return KVC_OK;
}

static int check_cos_row(int64_t position, int32_t ratio, int64_t cos_sin_rows, int64_t t, kvc_error *err) {
    int64_t row = kvc_rope_row(position, ratio);
    if (row >= cos_sin_rows)
        return kvc_fail(err, KVC_ERR_INDEX, "cos_sin row (positions[%lld] / R) * R = %lld is past the table (%lld rows)",
                        (long long)t, (long long)row, (long long)cos_sin_rows);
    return KVC_OK;
}

/* Two tokens naming one output row: the first writer's index is kept in
 * `owner` (size rows, -1 = free). */
static int check_unique_writers(const int64_t *slots, const char *name, int64_t t, int64_t *owner, kvc_error *err) {
    int64_t s = slots[t];
    if (owner[s] >= 0)
        return kvc_fail(err, KVC_ERR_CONFLICT, "%s[%lld] = %lld is also written by token %lld", name, (long long)t,
                        (long long)s, (long long)owner[s]);
    owner[s] = t;
    return KVC_OK;
}

static int64_t *new_owner_table(int64_t rows) {
    int64_t *owner = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *owner);
    if (owner)
        for (int64_t i = 0; i < rows; i++) owner[i] = -1;
    return owner;
}

#define TRY(expr) do { int rc_ = (expr); if (rc_) return rc_; } while (0)
#define TRY_FREE(expr, p) do { int rc_ = (expr); if (rc_) { free(p); return rc_; } } while (0)

static int check_v4_shape(int32_t ratio, int32_t head_dim, int64_t num_tokens, kvc_error *err) {
    if (ratio != 4 && ratio != 128) return kvc_fail(err, KVC_ERR_PARAM, "compress_ratio = %d, V4 supports 4 and 128", ratio);
    if (head_dim != 512 && head_dim != 128) return kvc_fail(err, KVC_ERR_PARAM, "head_dim = %d, V4 supports 512 and 128", head_dim);
    if (num_tokens < 0) return kvc_fail(err, KVC_ERR_PARAM, "num_tokens = %lld is negative", (long long)num_tokens);
    TRY(check_count(num_tokens, "num_tokens", err));
    return KVC_OK;
}

int kvc_validate_v4_save_fields(const kvc_v4_save_args *a, kvc_error *err) {
    TRY(check_v4_shape(a->compress_ratio, a->head_dim, a->num_tokens, err));
    int64_t T = a->num_tokens, W = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    TRY(check_cache(&a->state_cache, "state_cache", 2 * W * 4, 4, err));
    TRY(check_pointer(a->kv, "kv", T, err));
    TRY(check_pointer(a->score, "score", T, err));
    TRY(check_pointer(a->ape, "ape", 1, err));
    TRY(check_pointer(a->positions, "positions", T, err));
    TRY(check_pointer(a->slot_mapping, "slot_mapping", T, err));
    int64_t span = kvc_cache_span(&a->state_cache);
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->kv, T * W * 4, "kv", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->score, T * W * 4, "score", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->ape, a->compress_ratio * W * 4, "ape", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->positions, T * 8, "positions", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->slot_mapping, T * 8, "slot_mapping", err));
    return ok(err);
}

int kvc_validate_v4_save(const kvc_v4_save_args *a, kvc_error *err) {
    TRY(kvc_validate_v4_save_fields(a, err));
    int64_t T = a->num_tokens;
    int64_t *owner = new_owner_table(a->state_cache.num_pages * a->state_cache.page_rows);
    if (!owner) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory validating state_cache");
    for (int64_t t = 0; t < T; t++) {
        if (a->slot_mapping[t] < 0) continue;
        TRY_FREE(check_position(a->positions, t, err), owner);
        TRY_FREE(check_slot(a->slot_mapping, "slot_mapping", t, &a->state_cache, "state_cache", err), owner);
        TRY_FREE(check_unique_writers(a->slot_mapping, "slot_mapping", t, owner, err), owner);
    }
    free(owner);
    return ok(err);
}

/* Every window entry of closing token t must resolve through the block
 * table to a row inside the state cache. */
static int check_v4_window(const kvc_v4_compress_args *a, int64_t t, kvc_error *err) {
    int64_t p = a->positions[t], req = a->token_to_req[t];
    int64_t window = (int64_t)kvc_v4_coff(a->compress_ratio) * a->compress_ratio;
    int64_t bs = a->state_cache.page_rows;
    for (int64_t w = 0; w < window; w++) {
        int64_t q = p - window + 1 + w;
        if (q < 0) continue;
        int64_t column = q / bs;
        if (column >= a->max_blocks)
            return kvc_fail(err, KVC_ERR_INDEX,
                            "window position %lld of token %lld needs block_table[%lld][%lld], past its %lld columns",
                            (long long)q, (long long)t, (long long)req, (long long)column, (long long)a->max_blocks);
        int32_t block = a->block_table[req * a->max_blocks + column];
        if (block < 0 || block >= a->state_cache.num_pages)
            return kvc_fail(err, KVC_ERR_INDEX, "block_table[%lld][%lld] = %d is outside state_cache (%lld pages), read by token %lld",
                            (long long)req, (long long)column, block, (long long)a->state_cache.num_pages, (long long)t);
    }
    return KVC_OK;
}

int kvc_validate_v4_compress_fields(const kvc_v4_compress_args *a, kvc_error *err) {
    TRY(check_v4_shape(a->compress_ratio, a->head_dim, a->num_tokens, err));
    int64_t T = a->num_tokens, D = a->head_dim, W = (int64_t)kvc_v4_coff(a->compress_ratio) * D;
    if (!(a->eps >= 0.0f && a->eps <= 1.0f)) return kvc_fail(err, KVC_ERR_PARAM, "eps = %g must be in [0, 1]", (double)a->eps);
    TRY(check_cache(&a->state_cache, "state_cache", 2 * W * 4, 4, err));
    kvc_cache_dtype dtype = D == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    TRY(check_cache(&a->kv_cache, "kv_cache", kvc_cache_row_bytes(dtype), 1, err));
    if (a->num_requests < 0 || a->max_blocks < 0)
        return kvc_fail(err, KVC_ERR_PARAM, "block_table shape [%lld, %lld] is negative", (long long)a->num_requests, (long long)a->max_blocks);
    TRY(check_count(a->num_requests, "num_requests", err));   /* SPEC.md 9.3: even with no block-table columns */
    int64_t block_entries;
    if (__builtin_mul_overflow(a->num_requests, a->max_blocks, &block_entries) || block_entries > KVC_MAX_COUNT)
        return kvc_fail(err, KVC_ERR_PARAM, "block_table shape [%lld, %lld] has more than 2^40 entries", (long long)a->num_requests,
                        (long long)a->max_blocks);
    if (a->cos_sin_rows < 0) return kvc_fail(err, KVC_ERR_PARAM, "cos_sin rows = %lld is negative", (long long)a->cos_sin_rows);
    TRY(check_count(a->cos_sin_rows, "cos_sin rows", err));
    TRY(check_pointer(a->positions, "positions", T, err));
    TRY(check_pointer(a->slot_mapping, "slot_mapping", T, err));
    TRY(check_pointer(a->kv_slot_mapping, "kv_slot_mapping", T, err));
    TRY(check_pointer(a->token_to_req, "token_to_req", T, err));
    TRY(check_pointer(a->block_table, "block_table", a->num_requests * a->max_blocks, err));
    TRY(check_pointer(a->norm_weight, "norm_weight", 1, err));
    TRY(check_pointer(a->cos_sin, "cos_sin", a->cos_sin_rows, err));
    int64_t span = kvc_cache_span(&a->kv_cache);
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->state_cache.data, kvc_cache_span(&a->state_cache), "state_cache", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->norm_weight, D * 4, "norm_weight", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->cos_sin, a->cos_sin_rows * 64 * 4, "cos_sin", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->positions, T * 8, "positions", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->slot_mapping, T * 8, "slot_mapping", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->kv_slot_mapping, T * 8, "kv_slot_mapping", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->token_to_req, T * 4, "token_to_req", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->block_table, a->num_requests * a->max_blocks * 4, "block_table", err));
    return ok(err);
}

int kvc_validate_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    TRY(kvc_validate_v4_compress_fields(a, err));
    int64_t T = a->num_tokens;
    int64_t *owner = new_owner_table(a->kv_cache.num_pages * a->kv_cache.page_rows);
    if (!owner) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory validating kv_cache");
    for (int64_t t = 0; t < T; t++) {
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0) continue;
        TRY_FREE(check_position(a->positions, t, err), owner);
        if (!kvc_is_closing(a->positions[t], a->compress_ratio)) continue;
        TRY_FREE(check_slot(a->slot_mapping, "slot_mapping", t, &a->state_cache, "state_cache", err), owner);
        TRY_FREE(check_slot(a->kv_slot_mapping, "kv_slot_mapping", t, &a->kv_cache, "kv_cache", err), owner);
        if (a->token_to_req[t] < 0 || a->token_to_req[t] >= a->num_requests) {
            free(owner);
            return kvc_fail(err, KVC_ERR_INDEX, "token_to_req[%lld] = %d is outside [0, %lld)", (long long)t,
                            a->token_to_req[t], (long long)a->num_requests);
        }
        TRY_FREE(check_cos_row(a->positions[t], a->compress_ratio, a->cos_sin_rows, t, err), owner);
        TRY_FREE(check_v4_window(a, t, err), owner);
        TRY_FREE(check_unique_writers(a->kv_slot_mapping, "kv_slot_mapping", t, owner, err), owner);
    }
    free(owner);
    return ok(err);
}

/* R = 2 metadata: query_start_loc covers the batch, token_to_req agrees,
 * positions follow within a request, ring slots sit at p % CAP of one
 * ring block per request, and no two requests share a ring block. */
static int check_v41_requests(const kvc_v41_norm_args *a, kvc_error *err) {
    const int32_t *qsl = a->query_start_loc;
    int64_t T = a->num_tokens, NR = a->num_requests, cap = a->state_cache.page_rows;
    if (qsl[0] != 0) return kvc_fail(err, KVC_ERR_METADATA, "query_start_loc[0] = %d, must be 0", qsl[0]);
    for (int64_t r = 0; r < NR; r++)
        if (qsl[r + 1] < qsl[r])
            return kvc_fail(err, KVC_ERR_METADATA, "query_start_loc[%lld] = %d is below query_start_loc[%lld] = %d: not monotone",
                            (long long)(r + 1), qsl[r + 1], (long long)r, qsl[r]);
    if (qsl[NR] > T)
        return kvc_fail(err, KVC_ERR_METADATA, "query_start_loc[%lld] = %d is past the batch (%lld tokens)", (long long)NR, qsl[NR], (long long)T);
    for (int64_t t = qsl[NR]; t < T; t++)
        if (a->slot_mapping[t] >= 0)
            return kvc_fail(err, KVC_ERR_METADATA, "slot_mapping[%lld] = %lld, but token %lld is after query_start_loc[%lld] = %d (padding)",
                            (long long)t, (long long)a->slot_mapping[t], (long long)t, (long long)NR, qsl[NR]);
    int64_t *block_owner = new_owner_table(a->state_cache.num_pages);
    if (!block_owner) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory validating state_cache");
    for (int64_t r = 0; r < NR; r++) {
        int64_t block = -1;
        for (int64_t t = qsl[r]; t < qsl[r + 1]; t++) {
            if (a->token_to_req[t] != r) {
                free(block_owner);
                return kvc_fail(err, KVC_ERR_METADATA, "token_to_req[%lld] = %d, but query_start_loc puts token %lld in request %lld",
                                (long long)t, a->token_to_req[t], (long long)t, (long long)r);
            }
            /* No position follows INT64_MAX (a skipped token may carry any value). */
            if (t > qsl[r] && (a->positions[t - 1] == INT64_MAX || a->positions[t] != a->positions[t - 1] + 1)) {
                free(block_owner);
                return kvc_fail(err, KVC_ERR_METADATA, "positions[%lld] = %lld does not follow positions[%lld] = %lld in request %lld",
                                (long long)t, (long long)a->positions[t], (long long)(t - 1), (long long)a->positions[t - 1], (long long)r);
            }
            int64_t s = a->slot_mapping[t];
            if (s < 0) continue;
            TRY_FREE(check_slot(a->slot_mapping, "slot_mapping", t, &a->state_cache, "state_cache", err), block_owner);
            if (s % cap != a->positions[t] % cap) {
                free(block_owner);
                return kvc_fail(err, KVC_ERR_METADATA, "slot_mapping[%lld] = %lld names ring row %lld, but position %lld lives in row %lld (CAP %lld)",
                                (long long)t, (long long)s, (long long)(s % cap), (long long)a->positions[t],
                                (long long)(a->positions[t] % cap), (long long)cap);
            }
            if (block >= 0 && s / cap != block) {
                free(block_owner);
                return kvc_fail(err, KVC_ERR_METADATA, "slot_mapping[%lld] names ring block %lld, but request %lld uses block %lld",
                                (long long)t, (long long)(s / cap), (long long)r, (long long)block);
            }
            if (block < 0) {
                block = s / cap;
                if (block_owner[block] >= 0) {
                    int64_t other = block_owner[block];
                    free(block_owner);
                    return kvc_fail(err, KVC_ERR_CONFLICT, "slot_mapping[%lld]: requests %lld and %lld both name ring block %lld",
                                    (long long)t, (long long)other, (long long)r, (long long)block);
                }
                block_owner[block] = r;
            }
        }
    }
    free(block_owner);
    return KVC_OK;
}

/* v41.save_compress_norm's scalars, pointers and ranges for every R. */
static int check_v41_norm_common_fields(const kvc_v41_norm_args *a, kvc_error *err) {
    int32_t R = a->compress_ratio;
    int64_t T = a->num_tokens;
    if (R != 1 && R != 2) return kvc_fail(err, KVC_ERR_PARAM, "compress_ratio = %d, V4.1 supports 1 and 2", R);
    if (T < 0) return kvc_fail(err, KVC_ERR_PARAM, "num_tokens = %lld is negative", (long long)T);
    TRY(check_count(T, "num_tokens", err));
    if (!(a->eps >= 0.0f && a->eps <= 1.0f)) return kvc_fail(err, KVC_ERR_PARAM, "eps = %g must be in [0, 1]", (double)a->eps);
    TRY(check_pointer(a->kv_score, "kv_score", T, err));
    TRY(check_pointer(a->positions, "positions", T, err));
    TRY(check_pointer(a->slot_mapping, "slot_mapping", T, err));
    TRY(check_pointer(a->latent, "latent", T, err));
    TRY(check_pointer(a->norm_weight, "norm_weight", 1, err));
    int64_t latent_bytes = T * KVC_V41_HEAD_DIM * 2;
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->kv_score, T * 512 * R * 4, "kv_score", err));
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->norm_weight, 1024, "norm_weight", err));
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->positions, T * 8, "positions", err));
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->slot_mapping, T * 8, "slot_mapping", err));
    return KVC_OK;
}

/* R = 2: the ring cache and the request metadata's pointers and ranges. */
static int check_v41_norm_ring_fields(const kvc_v41_norm_args *a, kvc_error *err) {
    int64_t T = a->num_tokens, latent_bytes = T * KVC_V41_HEAD_DIM * 2;
    int64_t cap = a->state_cache.page_rows;
    TRY(check_cache(&a->state_cache, "state_cache", 1024 * 4, 4, err));
    if (cap < 8 || (cap & (cap - 1)) != 0)
        return kvc_fail(err, KVC_ERR_PARAM, "state_cache ring size CAP = %lld, must be a power of two >= 8", (long long)cap);
    if (a->num_requests < 0) return kvc_fail(err, KVC_ERR_PARAM, "num_requests = %lld is negative", (long long)a->num_requests);
    TRY(check_count(a->num_requests, "num_requests", err));
    TRY(check_pointer(a->query_start_loc, "query_start_loc", 1, err));
    TRY(check_pointer(a->token_to_req, "token_to_req", T, err));
    int64_t span = kvc_cache_span(&a->state_cache);
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->kv_score, T * 1024 * 4, "kv_score", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->latent, latent_bytes, "latent", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->norm_weight, 1024, "norm_weight", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->positions, T * 8, "positions", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->slot_mapping, T * 8, "slot_mapping", err));
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->token_to_req, T * 4, "token_to_req", err));
    int64_t starts_bytes = (a->num_requests + 1) * 4;
    TRY(check_disjoint(a->state_cache.data, span, "state_cache", a->query_start_loc, starts_bytes, "query_start_loc", err));
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->token_to_req, T * 4, "token_to_req", err));
    TRY(check_disjoint(a->latent, latent_bytes, "latent", a->query_start_loc, starts_bytes, "query_start_loc", err));
    return KVC_OK;
}

int kvc_validate_v41_norm_fields(const kvc_v41_norm_args *a, kvc_error *err) {
    TRY(check_v41_norm_common_fields(a, err));
    if (a->compress_ratio == 2) TRY(check_v41_norm_ring_fields(a, err));
    return ok(err);
}

int kvc_validate_v41_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    TRY(check_v41_norm_common_fields(a, err));
    for (int64_t t = 0; t < a->num_tokens; t++)
        if (a->slot_mapping[t] >= 0) TRY(check_position(a->positions, t, err));
    if (a->compress_ratio == 1) return ok(err);
    TRY(check_v41_norm_ring_fields(a, err));
    TRY(check_v41_requests(a, err));
    return ok(err);
}

int kvc_validate_v41_insert_fields(const kvc_v41_insert_args *a, int expect_quant, kvc_error *err) {
    int32_t R = a->compress_ratio;
    int64_t T = a->num_tokens;
    if (R != 1 && R != 2) return kvc_fail(err, KVC_ERR_PARAM, "compress_ratio = %d, V4.1 supports 1 and 2", R);
    if (T < 0) return kvc_fail(err, KVC_ERR_PARAM, "num_tokens = %lld is negative", (long long)T);
    TRY(check_count(T, "num_tokens", err));
    if (expect_quant && a->cache_dtype != KVC_CACHE_FP8_DS_MLA)
        return kvc_fail(err, KVC_ERR_PARAM, "kv_cache: rope_quant_insert needs cache_dtype fp8_ds_mla");
    if (!expect_quant && a->cache_dtype != KVC_CACHE_BF16 && a->cache_dtype != KVC_CACHE_FP8_E4M3)
        return kvc_fail(err, KVC_ERR_PARAM, "kv_cache: rope_plain_insert needs cache_dtype bf16 or fp8_e4m3");
    if (a->cache_dtype == KVC_CACHE_FP8_E4M3 && !(a->fp8_scale > 0.0f && a->fp8_scale <= 3.4028234663852886e38f))
        return kvc_fail(err, KVC_ERR_PARAM, "fp8_scale[0] = %g must be finite and > 0", (double)a->fp8_scale);
    int64_t align = a->cache_dtype == KVC_CACHE_BF16 ? 2 : 1;
    TRY(check_cache(&a->kv_cache, "kv_cache", kvc_cache_row_bytes(a->cache_dtype), align, err));
    if (a->cos_sin_rows < 0) return kvc_fail(err, KVC_ERR_PARAM, "cos_sin rows = %lld is negative", (long long)a->cos_sin_rows);
    TRY(check_count(a->cos_sin_rows, "cos_sin rows", err));
    TRY(check_pointer(a->latent, "latent", T, err));
    TRY(check_pointer(a->positions, "positions", T, err));
    TRY(check_pointer(a->slot_mapping, "slot_mapping", T, err));
    TRY(check_pointer(a->cos_sin, "cos_sin", a->cos_sin_rows, err));
    int64_t span = kvc_cache_span(&a->kv_cache);
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->latent, T * 1024, "latent", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->cos_sin, a->cos_sin_rows * 256, "cos_sin", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->positions, T * 8, "positions", err));
    TRY(check_disjoint(a->kv_cache.data, span, "kv_cache", a->slot_mapping, T * 8, "slot_mapping", err));
    return KVC_OK;
}

int kvc_validate_v41_insert(const kvc_v41_insert_args *a, int expect_quant, kvc_error *err) {
    TRY(kvc_validate_v41_insert_fields(a, expect_quant, err));
    int32_t R = a->compress_ratio;
    int64_t T = a->num_tokens;
    int64_t *owner = new_owner_table(a->kv_cache.num_pages * a->kv_cache.page_rows);
    if (!owner) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory validating kv_cache");
    for (int64_t t = 0; t < T; t++) {
        if (a->slot_mapping[t] < 0) continue;
        TRY_FREE(check_position(a->positions, t, err), owner);
        if (!kvc_is_closing(a->positions[t], R)) continue;
        TRY_FREE(check_slot(a->slot_mapping, "slot_mapping", t, &a->kv_cache, "kv_cache", err), owner);
        TRY_FREE(check_cos_row(a->positions[t], R, a->cos_sin_rows, t, err), owner);
        TRY_FREE(check_unique_writers(a->slot_mapping, "slot_mapping", t, owner, err), owner);
    }
    free(owner);
    return ok(err);
}

/* ---- forwards: one call, two stages --------------------------------- */

/* A tensor of a forward call: where it lies and how many bytes. */
typedef struct {
    const void *data;
    int64_t bytes;
    const char *name;
} tensor_range;

/* The byte span of a cache whose geometry its stage has not validated
 * yet: 0 (nothing to compare) when it cannot be a span at all. */
static int64_t unchecked_span(const kvc_paged_cache *c) {
    int64_t span;
    if (c->num_pages <= 0 || c->page_bytes <= 0 || c->page_stride < c->page_bytes ||
        __builtin_mul_overflow(c->num_pages - 1, c->page_stride, &span) || __builtin_add_overflow(span, c->page_bytes, &span))
        return 0;
    return span;
}

/* Every output against every other output and every input: a forward's
 * second stage reads what its first stage wrote, so an overlap between
 * the stages is as much a conflict as one inside a stage. */
static int check_forward_disjoint(const tensor_range *outputs, int num_outputs, const tensor_range *inputs, int num_inputs,
                                  kvc_error *err) {
    for (int o = 0; o < num_outputs; o++) {
        for (int other = o + 1; other < num_outputs; other++)
            TRY(check_disjoint(outputs[o].data, outputs[o].bytes, outputs[o].name, outputs[other].data, outputs[other].bytes,
                               outputs[other].name, err));
        for (int i = 0; i < num_inputs; i++)
            TRY(check_disjoint(outputs[o].data, outputs[o].bytes, outputs[o].name, inputs[i].data, inputs[i].bytes, inputs[i].name, err));
    }
    return KVC_OK;
}

/* count x size bytes, 0 for a count its stage's validator refuses (it
 * runs after these checks): sizes stay far below 2^63. */
static int64_t bytes_of(int64_t count, int64_t size) { return count < 0 || count > KVC_MAX_COUNT ? 0 : count * size; }

int kvc_validate_v4_forward_overlaps(const kvc_v4_save_args *save, const kvc_v4_compress_args *compress, kvc_error *err) {
    int32_t R = compress->compress_ratio, D = compress->head_dim;
    if ((R != 4 && R != 128) || (D != 512 && D != 128)) return ok(err);   /* refused by the stages */
    int64_t T = compress->num_tokens, W = (int64_t)kvc_v4_coff(R) * D, table;
    if (__builtin_mul_overflow(compress->num_requests, compress->max_blocks, &table)) table = -1;
    tensor_range outputs[] = {{save->state_cache.data, unchecked_span(&save->state_cache), "state_cache"},
                              {compress->kv_cache.data, unchecked_span(&compress->kv_cache), "kv_cache"}};
    tensor_range inputs[] = {{save->kv, bytes_of(T, W * 4), "kv"},
                             {save->score, bytes_of(T, W * 4), "score"},
                             {save->ape, R * W * 4, "ape"},
                             {save->positions, bytes_of(T, 8), "positions"},
                             {save->slot_mapping, bytes_of(T, 8), "slot_mapping"},
                             {compress->block_table, bytes_of(table, 4), "block_table"},
                             {compress->token_to_req, bytes_of(T, 4), "token_to_req"},
                             {compress->kv_slot_mapping, bytes_of(T, 8), "kv_slot_mapping"},
                             {compress->norm_weight, D * 4, "norm_weight"},
                             {compress->cos_sin, bytes_of(compress->cos_sin_rows, 64 * 4), "cos_sin"}};
    TRY(check_forward_disjoint(outputs, 2, inputs, (int)(sizeof inputs / sizeof *inputs), err));
    return ok(err);
}

int kvc_validate_v41_forward_overlaps(const kvc_v41_norm_args *norm, const kvc_v41_insert_args *insert, kvc_error *err) {
    int64_t T = insert->num_tokens, R = insert->compress_ratio;
    if (R != 1 && R != 2) return ok(err);   /* refused by the stages */
    int ring = R == 2;
    int64_t NR = norm->num_requests, starts_bytes = NR < 0 || NR > KVC_MAX_COUNT ? 0 : (NR + 1) * 4;
    tensor_range outputs[] = {{norm->latent, bytes_of(T, KVC_V41_HEAD_DIM * 2), "latent"},
                              {insert->kv_cache.data, unchecked_span(&insert->kv_cache), "kv_cache"},
                              {norm->state_cache.data, ring ? unchecked_span(&norm->state_cache) : 0, "state_cache"}};
    tensor_range inputs[] = {{norm->kv_score, bytes_of(T, 512 * R * 4), "kv_score"},
                             {norm->positions, bytes_of(T, 8), "positions"},
                             {norm->slot_mapping, bytes_of(T, 8), "slot_mapping"},
                             {norm->norm_weight, 1024, "norm_weight"},
                             {norm->token_to_req, ring ? bytes_of(T, 4) : 0, "token_to_req"},
                             {norm->query_start_loc, ring ? starts_bytes : 0, "query_start_loc"},
                             {insert->slot_mapping, bytes_of(T, 8), ring ? "kv_slot_mapping" : "slot_mapping"},
                             {insert->cos_sin, bytes_of(insert->cos_sin_rows, 256), "cos_sin"}};
    TRY(check_forward_disjoint(outputs, 3, inputs, (int)(sizeof inputs / sizeof *inputs), err));
    return ok(err);
}

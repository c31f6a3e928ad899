/* A second, independent reading of SPEC.md section 8 (rejected inputs),
 * for tests only.  It is written from the SPEC's rules, one rule at a
 * time, without common/validate.c's order or early returns: it evaluates
 * every rule it can evaluate safely and returns the set of statuses the
 * input earns.  A correct validator then returns KVC_OK exactly when the
 * set is empty, and otherwise one status of the set (its first failing
 * check).  tests/validate/spec_property.h holds the two side by side.
 *
 * Also here: the layout rules of SPEC.md section 3 (where a row of a paged
 * cache lives) and the V4.1 ring store of section 5.1, written from the
 * text, for the layout property tests.
 *
 * Integer arithmetic is done in __int128 so that no rule here can
 * overflow, whatever the input. */
#ifndef KVCMP_TESTS_SPEC_RULES_H
#define KVCMP_TESTS_SPEC_RULES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/kvcmp.h"

__extension__ typedef __int128 spec_wide;

#define SPEC_BIT(code) (1u << (code))
#define SPEC_PARAM SPEC_BIT(KVC_ERR_PARAM)
#define SPEC_INDEX SPEC_BIT(KVC_ERR_INDEX)
#define SPEC_CONFLICT SPEC_BIT(KVC_ERR_CONFLICT)
#define SPEC_METADATA SPEC_BIT(KVC_ERR_METADATA)

/* SPEC.md 8 and 9.3: positions in [0, 2^40]; counts (tokens, requests,
 * cos_sin rows, block-table entries) at most 2^40; a cache's num_pages x
 * page_stride at most 2^56 bytes. */
#define SPEC_MAX_POSITION ((spec_wide)1 << 40)
#define SPEC_MAX_COUNT ((spec_wide)1 << 40)
#define SPEC_MAX_SPAN ((spec_wide)1 << 56)
/* Not in SPEC.md 8: common/validate.c refuses a page of more than 2^24
 * rows as a bad parameter ("too large").  Kept here, named, so that the
 * property tests say so if it changes. */
#define SPEC_IMPLEMENTATION_MAX_PAGE_ROWS ((int64_t)1 << 24)

/* ---- section 3: layouts ---------------------------------------------- */

/* Bytes of one row of each cache format (SPEC.md 3). */
static inline int64_t spec_row_bytes(kvc_cache_dtype dtype) {
    switch (dtype) {
    case KVC_CACHE_FP8_DS_MLA: return 448 + 64 * 2 + 7 + 1;   /* 576 token bytes, 8 scale bytes */
    case KVC_CACHE_FP8_INDEXER: return 128 + 4;               /* 128 codes, one fp32 scale */
    case KVC_CACHE_BF16: return 512 * 2;
    case KVC_CACHE_FP8_E4M3: return 512;
    }
    return -1;
}

/* Byte offset from the cache's first byte of slot s's page: "Slot s lives
 * in page s / page_rows ... Pages are page_stride bytes apart". */
static inline spec_wide spec_page_offset(const kvc_paged_cache *c, int64_t slot) {
    return (spec_wide)(slot / c->page_rows) * c->page_stride;
}
/* "row s mod page_rows" */
static inline int64_t spec_row_in_page(const kvc_paged_cache *c, int64_t slot) { return slot - slot / c->page_rows * c->page_rows; }

/* Offsets of a row's parts in each format. */
static inline spec_wide spec_plain_row_offset(const kvc_paged_cache *c, int64_t slot, int64_t row_bytes) {
    return spec_page_offset(c, slot) + (spec_wide)spec_row_in_page(c, slot) * row_bytes;
}
static inline spec_wide spec_ds_mla_token_offset(const kvc_paged_cache *c, int64_t slot) {
    return spec_page_offset(c, slot) + (spec_wide)spec_row_in_page(c, slot) * 576;
}
static inline spec_wide spec_ds_mla_scales_offset(const kvc_paged_cache *c, int64_t slot) {
    return spec_page_offset(c, slot) + (spec_wide)c->page_rows * 576 + (spec_wide)spec_row_in_page(c, slot) * 8;
}
static inline spec_wide spec_indexer_token_offset(const kvc_paged_cache *c, int64_t slot) {
    return spec_page_offset(c, slot) + (spec_wide)spec_row_in_page(c, slot) * 128;
}
static inline spec_wide spec_indexer_scale_offset(const kvc_paged_cache *c, int64_t slot) {
    return spec_page_offset(c, slot) + (spec_wide)c->page_rows * 128 + (spec_wide)spec_row_in_page(c, slot) * 4;
}

/* V4 state slot of position q of request r: block_table[r][q / BS] * BS + q mod BS. */
static inline int64_t spec_v4_state_slot(const int32_t *block_table, int64_t max_blocks, int64_t bs, int64_t r, int64_t q) {
    return (int64_t)block_table[r * max_blocks + q / bs] * bs + (q - q / bs * bs);
}

/* The bytes a cache spans: its last page ends page_bytes after its start. */
static inline spec_wide spec_cache_span(const kvc_paged_cache *c) {
    if (c->num_pages <= 0) return 0;
    return (spec_wide)(c->num_pages - 1) * c->page_stride + c->page_bytes;
}

/* SPEC.md 5.1, ring store of request r: "the last min(n, CAP) rows t in
 * [e - min(n, CAP), e) with slot >= 0 are copied bit for bit,
 * kv_score[t][0 .. 1024) -> ring slot slot_mapping[t]".  Padding rows of
 * that range count towards min(n, CAP) but write nothing. */
static inline void spec_store_ring(const kvc_v41_norm_args *a, int64_t r) {
    int64_t b = a->query_start_loc[r], e = a->query_start_loc[r + 1], cap = a->state_cache.page_rows;
    int64_t n = e - b, kept = n < cap ? n : cap;
    for (int64_t i = 0; i < kept; i++) {
        int64_t t = e - kept + i, slot = a->slot_mapping[t];
        if (slot < 0) continue;
        uint8_t *row = (uint8_t *)a->state_cache.data + (size_t)spec_plain_row_offset(&a->state_cache, slot, 1024 * 4);
        memcpy(row, (const uint8_t *)a->kv_score + (size_t)t * 1024 * 4, 1024 * 4);
    }
}

/* ---- section 8: rejected inputs --------------------------------------- */

/* A tensor's bytes in memory, for the overlap rule (SPEC.md 8.1). */
typedef struct {
    const void *data;
    spec_wide bytes;
} spec_range;

static inline spec_wide spec_bytes(spec_wide count, spec_wide size) { return count > 0 ? count * size : 0; }

/* "any byte of the ranges ... in common" */
static inline int spec_overlap(spec_range a, spec_range b) {
    if (!a.data || !b.data || a.bytes <= 0 || b.bytes <= 0) return 0;
    spec_wide x = (spec_wide)(uintptr_t)a.data, y = (spec_wide)(uintptr_t)b.data;
    return x < y + b.bytes && y < x + a.bytes;
}

/* "NULL tensors": a tensor of at least one element given as NULL. */
static inline unsigned spec_null(const void *p, spec_wide elements) { return elements > 0 && !p ? SPEC_PARAM : 0; }

/* Counts: "negative token count", "a count past 2^40". */
static inline unsigned spec_count(int64_t n) { return n < 0 || (spec_wide)n > SPEC_MAX_COUNT ? SPEC_PARAM : 0; }

/* A paged cache's geometry: "page_rows < 1; page_bytes not page_rows x
 * row size; page_stride < page_bytes; misaligned data or stride; a cache
 * span past 2^56 bytes"; NULL data for a cache with pages. */
static inline unsigned spec_cache(const kvc_paged_cache *c, int64_t row_bytes, int64_t align) {
    unsigned bad = 0;
    if (c->num_pages < 0) bad |= SPEC_PARAM;
    if (c->page_rows < 1 || c->page_rows > SPEC_IMPLEMENTATION_MAX_PAGE_ROWS) bad |= SPEC_PARAM;
    if ((spec_wide)c->page_bytes != (spec_wide)c->page_rows * row_bytes) bad |= SPEC_PARAM;
    if (c->page_stride < c->page_bytes) bad |= SPEC_PARAM;
    if ((spec_wide)c->num_pages * c->page_stride > SPEC_MAX_SPAN) bad |= SPEC_PARAM;
    if (c->page_stride % align != 0 || (uintptr_t)c->data % (uintptr_t)align != 0) bad |= SPEC_PARAM;
    if (c->num_pages > 0 && !c->data) bad |= SPEC_PARAM;
    return bad;
}

/* The rows of a cache whose geometry passed. */
static inline spec_wide spec_rows(const kvc_paged_cache *c) { return (spec_wide)c->num_pages * c->page_rows; }

static inline spec_range spec_cache_range(const kvc_paged_cache *c) { return (spec_range){c->data, spec_cache_span(c)}; }

/* Output `out` against each of n other ranges: "conflict". */
static inline unsigned spec_disjoint(spec_range out, const spec_range *others, int n) {
    unsigned bad = 0;
    for (int i = 0; i < n; i++)
        if (spec_overlap(out, others[i])) bad |= SPEC_CONFLICT;
    return bad;
}

static inline int spec_position_ok(int64_t p) { return p >= 0 && (spec_wide)p <= SPEC_MAX_POSITION; }
static inline int spec_closes(int64_t p, int32_t ratio) { return ((spec_wide)p + 1) % ratio == 0; }

/* "two tokens writing one output row": the rows of tokens marked in
 * `writes` (each already inside the cache), any row named twice. */
static inline unsigned spec_two_writers(const int64_t *rows_of, const uint8_t *writes, int64_t tokens) {
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t u = 0; writes[t] && u < t; u++)
            if (writes[u] && rows_of[u] == rows_of[t]) return SPEC_CONFLICT;
    return 0;
}

/* Token arrays of more tokens than this are taken for what the property
 * tests make them: sizes that are never read (the fields-only checks). */
#define SPEC_READABLE_TOKENS 100000

/* v4.save_partial_states. */
static inline unsigned spec_v4_save(const kvc_v4_save_args *a, int fields_only) {
    unsigned bad = 0;
    int shape_ok = (a->compress_ratio == 4 || a->compress_ratio == 128) && (a->head_dim == 512 || a->head_dim == 128);
    if (!shape_ok) bad |= SPEC_PARAM;
    bad |= spec_count(a->num_tokens);
    int64_t T = a->num_tokens;
    spec_wide W = shape_ok ? (spec_wide)(a->compress_ratio == 4 ? 2 : 1) * a->head_dim : 0;
    unsigned cache = shape_ok ? spec_cache(&a->state_cache, (int64_t)(2 * W * 4), 4) : SPEC_PARAM;
    bad |= cache;
    bad |= spec_null(a->kv, T) | spec_null(a->score, T) | spec_null(a->ape, shape_ok ? a->compress_ratio : 1) |
           spec_null(a->positions, T) | spec_null(a->slot_mapping, T);
    /* Overlaps are evaluated whatever else fails: a validator may test
     * them first.  The per-token rules come after every field rule. */
    spec_range inputs[] = {{a->kv, spec_bytes(T, W * 4)}, {a->score, spec_bytes(T, W * 4)}, {a->ape, spec_bytes(a->compress_ratio, W * 4)},
                           {a->positions, spec_bytes(T, 8)}, {a->slot_mapping, spec_bytes(T, 8)}};
    bad |= spec_disjoint(spec_cache_range(&a->state_cache), inputs, 5);
    if (bad || fields_only || T > SPEC_READABLE_TOKENS) return bad;
    /* Every token with a slot writes its state row. */
    uint8_t *writes = calloc((size_t)T + 1, 1);
    for (int64_t t = 0; t < T; t++) {
        int64_t s = a->slot_mapping[t];
        if (s < 0) continue;
        if (!spec_position_ok(a->positions[t])) bad |= SPEC_INDEX;
        if ((spec_wide)s >= spec_rows(&a->state_cache)) bad |= SPEC_INDEX;
        else writes[t] = 1;
    }
    bad |= spec_two_writers(a->slot_mapping, writes, T);
    free(writes);
    return bad;
}

/* v4.compress.  The tokens it reads and writes are the closing tokens
 * with both slots >= 0; every token with both slots >= 0 has its
 * position checked ("for tokens that write or are pooled"). */
static inline unsigned spec_v4_compress(const kvc_v4_compress_args *a, int fields_only) {
    unsigned bad = 0;
    int32_t R = a->compress_ratio, D = a->head_dim;
    int shape_ok = (R == 4 || R == 128) && (D == 512 || D == 128);
    if (!shape_ok) bad |= SPEC_PARAM;
    bad |= spec_count(a->num_tokens);
    int64_t T = a->num_tokens;
    if (!(a->eps >= 0.0f && a->eps <= 1.0f)) bad |= SPEC_PARAM;   /* "eps not in [0, 1]" (NaN is not in it) */
    spec_wide W = shape_ok ? (spec_wide)(R == 4 ? 2 : 1) * D : 0;
    bad |= shape_ok ? spec_cache(&a->state_cache, (int64_t)(2 * W * 4), 4) : SPEC_PARAM;
    bad |= shape_ok ? spec_cache(&a->kv_cache, spec_row_bytes(D == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER), 1) : SPEC_PARAM;
    if (a->num_requests < 0 || a->max_blocks < 0) bad |= SPEC_PARAM;
    bad |= spec_count(a->num_requests);   /* SPEC.md 9.3: "request ... counts ... are bounded by 2^40" */
    spec_wide entries = (spec_wide)a->num_requests * a->max_blocks;
    if (entries > SPEC_MAX_COUNT) bad |= SPEC_PARAM;   /* block-table entries */
    bad |= spec_count(a->cos_sin_rows);
    bad |= spec_null(a->positions, T) | spec_null(a->slot_mapping, T) | spec_null(a->kv_slot_mapping, T) |
           spec_null(a->token_to_req, T) | spec_null(a->block_table, entries) | spec_null(a->norm_weight, D) |
           spec_null(a->cos_sin, a->cos_sin_rows);
    spec_range inputs[] = {spec_cache_range(&a->state_cache),  {a->norm_weight, spec_bytes(D, 4)},
                           {a->cos_sin, spec_bytes(a->cos_sin_rows, 64 * 4)},
                           {a->positions, spec_bytes(T, 8)},    {a->slot_mapping, spec_bytes(T, 8)},
                           {a->kv_slot_mapping, spec_bytes(T, 8)}, {a->token_to_req, spec_bytes(T, 4)},
                           {a->block_table, spec_bytes(entries, 4)}};
    bad |= spec_disjoint(spec_cache_range(&a->kv_cache), inputs, 8);
    if (bad || fields_only || T > SPEC_READABLE_TOKENS) return bad;
    int64_t bs = a->state_cache.page_rows, window = (int64_t)(R == 4 ? 2 : 1) * R;
    uint8_t *writes = calloc((size_t)T + 1, 1);
    for (int64_t t = 0; t < T; t++) {
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0) continue;
        int64_t p = a->positions[t];
        if (!spec_position_ok(p)) { bad |= SPEC_INDEX; continue; }
        if (!spec_closes(p, R)) continue;   /* metadata of non-closing tokens is not checked */
        if ((spec_wide)a->slot_mapping[t] >= spec_rows(&a->state_cache)) bad |= SPEC_INDEX;
        if ((spec_wide)a->kv_slot_mapping[t] >= spec_rows(&a->kv_cache)) bad |= SPEC_INDEX;
        else writes[t] = 1;
        if ((spec_wide)(p / R) * R >= a->cos_sin_rows) bad |= SPEC_INDEX;   /* "a cos_sin row (p / R) * R past the table" */
        int32_t r = a->token_to_req[t];
        if (r < 0 || r >= a->num_requests) { bad |= SPEC_INDEX; continue; }   /* "token_to_req outside the block table" */
        for (int64_t w = 0; w < window; w++) {
            int64_t q = p - window + 1 + w;
            if (q < 0) continue;
            int64_t column = q / bs;
            if (column >= a->max_blocks) { bad |= SPEC_INDEX; continue; }   /* "a window position whose column is past max_blocks" */
            int32_t block = a->block_table[(int64_t)r * a->max_blocks + column];
            if (block < 0 || block >= a->state_cache.num_pages) bad |= SPEC_INDEX;   /* "a block-table entry outside the state cache" */
        }
    }
    bad |= spec_two_writers(a->kv_slot_mapping, writes, T);
    free(writes);
    return bad;
}

/* v41.save_compress_norm.  R = 1 ignores the ring, query_start_loc,
 * num_requests and token_to_req; R = 2 checks them. */
static inline unsigned spec_v41_norm(const kvc_v41_norm_args *a, int fields_only) {
    unsigned bad = 0;
    int32_t R = a->compress_ratio;
    if (R != 1 && R != 2) bad |= SPEC_PARAM;
    bad |= spec_count(a->num_tokens);
    int64_t T = a->num_tokens;
    if (!(a->eps >= 0.0f && a->eps <= 1.0f)) bad |= SPEC_PARAM;
    bad |= spec_null(a->kv_score, T) | spec_null(a->positions, T) | spec_null(a->slot_mapping, T) | spec_null(a->latent, T) |
           spec_null(a->norm_weight, 512);
    int ring = R == 2;
    int64_t NR = a->num_requests, cap = a->state_cache.page_rows;
    if (ring) {
        bad |= spec_cache(&a->state_cache, 1024 * 4, 4);
        if (cap < 8 || (cap & (cap - 1)) != 0) bad |= SPEC_PARAM;   /* "CAP not a power of two >= 8" */
        bad |= spec_count(NR);
        bad |= spec_null(a->query_start_loc, (spec_wide)NR + 1) | spec_null(a->token_to_req, T);
    }
    spec_range latent = {a->latent, spec_bytes(T, 512 * 2)}, state = ring ? spec_cache_range(&a->state_cache) : (spec_range){0, 0};
    spec_range inputs[] = {{a->kv_score, spec_bytes(T, 512 * (R == 2 ? 2 : 1) * 4)}, {a->norm_weight, 1024},
                           {a->positions, spec_bytes(T, 8)},         {a->slot_mapping, spec_bytes(T, 8)},
                           {a->token_to_req, ring ? spec_bytes(T, 4) : 0},
                           {a->query_start_loc, ring ? spec_bytes((spec_wide)NR + 1, 4) : 0}};
    bad |= spec_disjoint(latent, inputs, 6);
    bad |= spec_disjoint(state, inputs, 6);
    bad |= spec_disjoint(state, &latent, 1);
    /* Positions of valid tokens: readable whenever the token count is. */
    int tokens_readable = !fields_only && T >= 0 && T <= SPEC_READABLE_TOKENS && a->positions && a->slot_mapping;
    for (int64_t t = 0; tokens_readable && t < T; t++)
        if (a->slot_mapping[t] >= 0 && !spec_position_ok(a->positions[t])) bad |= SPEC_INDEX;
    /* The request rules come after every other rule. */
    if (!ring || fields_only || bad || !tokens_readable || NR > SPEC_READABLE_TOKENS) return bad;
    /* R = 2 metadata. */
    const int32_t *q = a->query_start_loc;
    if (q[0] != 0) bad |= SPEC_METADATA;
    for (int64_t r = 0; r < NR; r++)
        if (q[r + 1] < q[r]) bad |= SPEC_METADATA;   /* "not monotone" */
    if (q[NR] > T) bad |= SPEC_METADATA;              /* "past the batch" */
    for (int64_t t = q[NR] < 0 ? 0 : q[NR]; t < T; t++)
        if (a->slot_mapping[t] >= 0) bad |= SPEC_METADATA;   /* "a valid slot after query_start_loc[NR]" */
    spec_wide rows = spec_rows(&a->state_cache);
    int64_t *first_block = malloc(((size_t)NR + 1) * sizeof *first_block);
    for (int64_t r = 0; r < NR; r++) {
        first_block[r] = -1;
        int64_t b = q[r] < 0 ? 0 : q[r], e = q[r + 1] > T ? T : q[r + 1];
        for (int64_t t = b; t < e; t++) {
            if (a->token_to_req[t] != r) bad |= SPEC_METADATA;   /* "token_to_req disagreeing with query_start_loc" */
            if (t > b && (spec_wide)a->positions[t] != (spec_wide)a->positions[t - 1] + 1) bad |= SPEC_METADATA;   /* "not consecutive" */
            int64_t s = a->slot_mapping[t];
            if (s < 0) continue;
            if ((spec_wide)s >= rows) { bad |= SPEC_INDEX; continue; }   /* "a slot past its cache" */
            int64_t p = a->positions[t];
            if (spec_position_ok(p) && s % cap != p % cap) bad |= SPEC_METADATA;   /* "a ring slot whose row is not p mod CAP" */
            int64_t block = s / cap;
            if (first_block[r] < 0) first_block[r] = block;
            else if (block != first_block[r]) bad |= SPEC_METADATA;   /* "two ring blocks named within one request" */
        }
    }
    /* "two V4.1 requests naming one ring block": valid tokens of two
     * requests' chunks in one block. */
    int64_t *request_of = malloc(((size_t)T + 1) * sizeof *request_of);
    for (int64_t t = 0; t < T; t++) request_of[t] = -1;
    for (int64_t r = 0; r < NR; r++)
        for (int64_t t = q[r] < 0 ? 0 : q[r]; t < (q[r + 1] > T ? T : q[r + 1]); t++) request_of[t] = r;
    for (int64_t t = 0; t < T; t++)
        for (int64_t u = 0; u < t; u++) {
            int64_t s = a->slot_mapping[t], v = a->slot_mapping[u];
            if (request_of[t] < 0 || request_of[u] < 0 || request_of[t] == request_of[u]) continue;
            if (s < 0 || v < 0 || (spec_wide)s >= rows || (spec_wide)v >= rows) continue;
            if (s / cap == v / cap) bad |= SPEC_CONFLICT;
        }
    free(request_of);
    free(first_block);
    return bad;
}

/* v41.rope_quant_insert (quant = 1) and v41.rope_plain_insert. */
static inline unsigned spec_v41_insert(const kvc_v41_insert_args *a, int quant, int fields_only) {
    unsigned bad = 0;
    int32_t R = a->compress_ratio;
    if (R != 1 && R != 2) bad |= SPEC_PARAM;
    bad |= spec_count(a->num_tokens);
    int64_t T = a->num_tokens;
    kvc_cache_dtype dtype = a->cache_dtype;
    int dtype_ok = quant ? dtype == KVC_CACHE_FP8_DS_MLA : dtype == KVC_CACHE_BF16 || dtype == KVC_CACHE_FP8_E4M3;
    if (!dtype_ok) bad |= SPEC_PARAM;   /* "wrong cache dtype for the stage" */
    /* "fp8_scale not finite or <= 0" (fp8_e4m3 rows only) */
    if (dtype_ok && dtype == KVC_CACHE_FP8_E4M3 && !(a->fp8_scale > 0.0f && a->fp8_scale - a->fp8_scale == 0.0f)) bad |= SPEC_PARAM;
    bad |= dtype_ok ? spec_cache(&a->kv_cache, spec_row_bytes(dtype), dtype == KVC_CACHE_BF16 ? 2 : 1) : SPEC_PARAM;
    bad |= spec_count(a->cos_sin_rows);
    bad |= spec_null(a->latent, T) | spec_null(a->positions, T) | spec_null(a->slot_mapping, T) | spec_null(a->cos_sin, a->cos_sin_rows);
    spec_range inputs[] = {{a->latent, spec_bytes(T, 1024)}, {a->cos_sin, spec_bytes(a->cos_sin_rows, 256)},
                           {a->positions, spec_bytes(T, 8)}, {a->slot_mapping, spec_bytes(T, 8)}};
    bad |= spec_disjoint(spec_cache_range(&a->kv_cache), inputs, 4);
    if (bad || fields_only || T > SPEC_READABLE_TOKENS) return bad;
    uint8_t *writes = calloc((size_t)T + 1, 1);
    for (int64_t t = 0; t < T; t++) {
        int64_t s = a->slot_mapping[t], p = a->positions[t];
        if (s < 0) continue;
        if (!spec_position_ok(p)) { bad |= SPEC_INDEX; continue; }
        if (!spec_closes(p, R)) continue;
        if ((spec_wide)s >= spec_rows(&a->kv_cache)) bad |= SPEC_INDEX;
        else writes[t] = 1;
        if ((spec_wide)(p / R) * R >= a->cos_sin_rows) bad |= SPEC_INDEX;
    }
    bad |= spec_two_writers(a->slot_mapping, writes, T);
    free(writes);
    return bad;
}

#endif

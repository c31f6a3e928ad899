/* Where a row lives in a paged cache (SPEC.md section "Layouts").
 * Callers validate slots first; these helpers only do the arithmetic. */
#ifndef KVCMP_LAYOUT_H
#define KVCMP_LAYOUT_H

#include <string.h>

#include "kvcmp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* First byte of page `slot / page_rows`. */
static inline uint8_t *kvc_page_of_slot(const kvc_paged_cache *cache, int64_t slot) {
    return (uint8_t *)cache->data + (slot / cache->page_rows) * cache->page_stride;
}
static inline int64_t kvc_row_in_page(const kvc_paged_cache *cache, int64_t slot) {
    return slot % cache->page_rows;
}
/* A cache whose rows are `row_bytes` apart from the page start (state
 * caches, V4.1 rings and plain bf16/fp8 rows). */
static inline uint8_t *kvc_plain_row(const kvc_paged_cache *cache, int64_t slot, int64_t row_bytes) {
    return kvc_page_of_slot(cache, slot) + kvc_row_in_page(cache, slot) * row_bytes;
}
/* fp8_ds_mla: token data (448 fp8 + 64 bf16) at row*576, then after all
 * the page's token data, 8 scale bytes per row. */
static inline uint8_t *kvc_ds_mla_token(const kvc_paged_cache *cache, int64_t slot) {
    return kvc_page_of_slot(cache, slot) + kvc_row_in_page(cache, slot) * KVC_FP8_DS_MLA_TOKEN_BYTES;
}
static inline uint8_t *kvc_ds_mla_scales(const kvc_paged_cache *cache, int64_t slot) {
    return kvc_page_of_slot(cache, slot) + cache->page_rows * KVC_FP8_DS_MLA_TOKEN_BYTES +
           kvc_row_in_page(cache, slot) * KVC_FP8_DS_MLA_SCALE_BYTES;
}
/* fp8_indexer: 128 fp8 codes at row*128, then one fp32 scale per row. */
static inline uint8_t *kvc_indexer_token(const kvc_paged_cache *cache, int64_t slot) {
    return kvc_page_of_slot(cache, slot) + kvc_row_in_page(cache, slot) * KVC_FP8_INDEXER_TOKEN_BYTES;
}
static inline uint8_t *kvc_indexer_scale(const kvc_paged_cache *cache, int64_t slot) {
    return kvc_page_of_slot(cache, slot) + cache->page_rows * KVC_FP8_INDEXER_TOKEN_BYTES +
           kvc_row_in_page(cache, slot) * KVC_FP8_INDEXER_SCALE_BYTES;
}

/* Bytes one row (token) takes in a page of the given dtype. */
static inline int64_t kvc_cache_row_bytes(kvc_cache_dtype dtype) {
    switch (dtype) {
    case KVC_CACHE_FP8_DS_MLA: return KVC_FP8_DS_MLA_TOKEN_BYTES + KVC_FP8_DS_MLA_SCALE_BYTES;
    case KVC_CACHE_FP8_INDEXER: return KVC_FP8_INDEXER_TOKEN_BYTES + KVC_FP8_INDEXER_SCALE_BYTES;
    case KVC_CACHE_BF16: return 2 * KVC_V41_HEAD_DIM;
    case KVC_CACHE_FP8_E4M3: return KVC_V41_HEAD_DIM;
    }
    return 0;
}

/* V4 state row of position q for request req (SPEC.md section 2). */
static inline int64_t kvc_v4_state_slot(const kvc_v4_compress_args *a, int64_t req, int64_t q) {
    int64_t bs = a->state_cache.page_rows;
    return (int64_t)a->block_table[req * a->max_blocks + q / bs] * bs + q % bs;
}

/* V4.1 ring store (SPEC.md 5.1) for request req: the last min(n, CAP)
 * rows of its chunk are copied bit for bit to their ring slots (padding
 * rows count towards the min but write nothing).  Requests own distinct
 * ring blocks (validated), so they may be stored in any order. */
static inline void kvc_v41_store_ring(const kvc_v41_norm_args *a, int64_t req) {
    int64_t begin = a->query_start_loc[req], end = a->query_start_loc[req + 1], cap = a->state_cache.page_rows;
    int64_t row_bytes = 2 * KVC_V41_HEAD_DIM * 4;
    for (int64_t t = end - begin > cap ? end - cap : begin; t < end; t++)
        if (a->slot_mapping[t] >= 0)
            memcpy(kvc_plain_row(&a->state_cache, a->slot_mapping[t], row_bytes), a->kv_score + t * 2 * KVC_V41_HEAD_DIM,
                   (size_t)row_bytes);
}

/* Bytes spanned by a paged cache in memory. */
static inline int64_t kvc_cache_span(const kvc_paged_cache *cache) {
    return cache->num_pages == 0 ? 0 : (cache->num_pages - 1) * cache->page_stride + cache->page_bytes;
}

#ifdef __cplusplus
}
#endif

#endif

/* Property tests of the layout helpers (include/kvcmp/layout.h), which
 * the reference and the optimized backend share, against SPEC.md 3 and
 * 5.1 as tests/validate/spec_rules.h reads them: where each row of each
 * cache format lives for random page geometries (odd paddings, page
 * sizes that are no power of two), the V4 state slot through the block
 * table, and the V4.1 ring store on random chunks (longer than CAP,
 * padding rows anywhere, the last CAP rows included).
 *
 * Used by tests/layout/test_layout_rules.c and by the self-check driver
 * of the shared-code mutants (harness/mutants/self_check.c): each entry
 * point returns the number of disagreements and describes the first. */
#ifndef KVCMP_TESTS_LAYOUT_PROPERTY_H
#define KVCMP_TESTS_LAYOUT_PROPERTY_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/layout.h"
#include "kvcmp/rng.h"
#include "tests/validate/spec_rules.h"

typedef struct {
    int64_t checks, disagreements;
    int64_t long_chunks_padded_at_end;   /* chunks longer than CAP with padding in their last CAP rows */
    char why[600];
} layout_run;

static inline void layout_disagree(layout_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void layout_disagree(layout_run *run, const char *fmt, ...) {
    if (run->disagreements++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->why, sizeof run->why, fmt, ap);
        va_end(ap);
    }
}

static inline void layout_expect_offset(layout_run *run, const char *what, const kvc_paged_cache *c, int64_t slot, const uint8_t *got,
                                 spec_wide expected) {
    run->checks++;
    spec_wide offset = (spec_wide)(got - (const uint8_t *)c->data);
    if (offset != expected)
        layout_disagree(run, "%s of slot %lld (%lld pages of %lld rows, %lld bytes, stride %lld): byte %lld, SPEC.md 3 says %lld", what,
                        (long long)slot, (long long)c->num_pages, (long long)c->page_rows, (long long)c->page_bytes,
                        (long long)c->page_stride, (long long)offset, (long long)expected);
}

/* Every row of random caches of every format. */
static inline int64_t layout_addressing_cases(layout_run *run, uint64_t seed, int64_t caches) {
    kvc_rng rng;
    kvc_rng_seed(&rng, seed, 0x1a0);
    static const kvc_cache_dtype dtypes[] = {KVC_CACHE_FP8_DS_MLA, KVC_CACHE_FP8_INDEXER, KVC_CACHE_BF16, KVC_CACHE_FP8_E4M3};
    for (int d = 0; d < 4; d++) {
        run->checks++;
        if (kvc_cache_row_bytes(dtypes[d]) != spec_row_bytes(dtypes[d]))
            layout_disagree(run, "row bytes of cache dtype %d: %lld, SPEC.md 3 says %lld", (int)dtypes[d],
                            (long long)kvc_cache_row_bytes(dtypes[d]), (long long)spec_row_bytes(dtypes[d]));
    }
    for (int64_t i = 0; i < caches; i++) {
        kvc_cache_dtype dtype = dtypes[kvc_rng_below(&rng, 4)];
        int64_t row_bytes = spec_row_bytes(dtype), rows = kvc_rng_range(&rng, 1, kvc_rng_chance(&rng, 1, 4) ? 70 : 9);
        static const int64_t paddings[] = {0, 1, 2, 4, 60, 64, 68, 100, 128, 4100};
        int64_t padding = paddings[kvc_rng_below(&rng, 10)];
        kvc_paged_cache c = {.num_pages = kvc_rng_range(&rng, 1, 5), .page_rows = rows, .page_bytes = rows * row_bytes};
        c.page_stride = c.page_bytes + padding;
        int64_t span = (c.num_pages - 1) * c.page_stride + c.page_bytes;
        c.data = malloc((size_t)span);
        run->checks++;
        if ((spec_wide)kvc_cache_span(&c) != spec_cache_span(&c))
            layout_disagree(run, "span of %lld pages of stride %lld: %lld, SPEC.md 3 says %lld", (long long)c.num_pages,
                            (long long)c.page_stride, (long long)kvc_cache_span(&c), (long long)spec_cache_span(&c));
        for (int64_t slot = 0; slot < c.num_pages * rows; slot++) {
            layout_expect_offset(run, "page", &c, slot, kvc_page_of_slot(&c, slot), spec_page_offset(&c, slot));
            run->checks++;
            if (kvc_row_in_page(&c, slot) != spec_row_in_page(&c, slot))
                layout_disagree(run, "row in page of slot %lld (%lld rows a page): %lld", (long long)slot, (long long)rows,
                                (long long)kvc_row_in_page(&c, slot));
            switch (dtype) {
            case KVC_CACHE_FP8_DS_MLA:
                layout_expect_offset(run, "fp8_ds_mla token", &c, slot, kvc_ds_mla_token(&c, slot), spec_ds_mla_token_offset(&c, slot));
                layout_expect_offset(run, "fp8_ds_mla scales", &c, slot, kvc_ds_mla_scales(&c, slot), spec_ds_mla_scales_offset(&c, slot));
                break;
            case KVC_CACHE_FP8_INDEXER:
                layout_expect_offset(run, "fp8_indexer codes", &c, slot, kvc_indexer_token(&c, slot), spec_indexer_token_offset(&c, slot));
                layout_expect_offset(run, "fp8_indexer scale", &c, slot, kvc_indexer_scale(&c, slot), spec_indexer_scale_offset(&c, slot));
                break;
            default:
                layout_expect_offset(run, "plain row", &c, slot, kvc_plain_row(&c, slot, row_bytes), spec_plain_row_offset(&c, slot, row_bytes));
                break;
            }
        }
        free(c.data);
    }
    return run->disagreements;
}

/* kvc_v4_state_slot on random block tables. */
static inline int64_t layout_state_slot_cases(layout_run *run, uint64_t seed, int64_t cases) {
    kvc_rng rng;
    kvc_rng_seed(&rng, seed, 0x57a7e);
    for (int64_t i = 0; i < cases; i++) {
        int32_t table[4 * 12];
        int64_t bs = kvc_rng_range(&rng, 1, 17), requests = kvc_rng_range(&rng, 1, 4), columns = kvc_rng_range(&rng, 1, 12);
        for (int64_t k = 0; k < requests * columns; k++) table[k] = (int32_t)kvc_rng_range(&rng, 0, 40);
        kvc_v4_compress_args a = {.block_table = table, .num_requests = requests, .max_blocks = columns,
                                  .state_cache = {.page_rows = bs, .num_pages = 41}};
        int64_t r = kvc_rng_below(&rng, requests), q = kvc_rng_below(&rng, columns * bs);
        run->checks++;
        int64_t got = kvc_v4_state_slot(&a, r, q), expected = spec_v4_state_slot(table, columns, bs, r, q);
        if (got != expected)
            layout_disagree(run, "V4 state slot of position %lld of request %lld (BS %lld, %lld columns): %lld, SPEC.md 3 says %lld",
                            (long long)q, (long long)r, (long long)bs, (long long)columns, (long long)got, (long long)expected);
    }
    return run->disagreements;
}

/* The ring store of random V4.1 R = 2 steps: the ring after
 * kvc_v41_store_ring of every request, byte for byte (page padding
 * included), against the ring after SPEC.md 5.1's store. */
static inline int64_t layout_ring_store_cases(layout_run *run, uint64_t seed, int64_t cases) {
    kvc_rng rng;
    kvc_rng_seed(&rng, seed, 0x7126);
    for (int64_t i = 0; i < cases; i++) {
        static const int64_t caps[] = {8, 16, 32};
        int64_t cap = caps[kvc_rng_below(&rng, 3)], NR = kvc_rng_range(&rng, 1, 3), blocks = NR + kvc_rng_range(&rng, 0, 1);
        int64_t padding = kvc_rng_chance(&rng, 1, 2) ? 0 : 4 * kvc_rng_range(&rng, 1, 40);
        int32_t qsl[4] = {0};
        int64_t order[4] = {0, 1, 2, 3}, history[3], T = 0;
        for (int64_t k = blocks - 1; k > 0; k--) {
            int64_t j = kvc_rng_below(&rng, k + 1), x = order[k];
            order[k] = order[j];
            order[j] = x;
        }
        for (int64_t r = 0; r < NR; r++) {
            int64_t n;
            switch (kvc_rng_below(&rng, 4)) {
            case 0: n = kvc_rng_range(&rng, 0, cap); break;
            case 1: n = cap + kvc_rng_range(&rng, 1, cap + 3); break;   /* longer than CAP */
            case 2: n = kvc_rng_range(&rng, 1, 3); break;
            default: n = cap + kvc_rng_range(&rng, 1, 2); break;
            }
            history[r] = kvc_rng_range(&rng, 0, 200);
            T += n;
            qsl[r + 1] = (int32_t)T;
        }
        int64_t trailing = kvc_rng_range(&rng, 0, 2);
        T += trailing;
        int64_t *positions = calloc((size_t)T + 1, 8), *slots = calloc((size_t)T + 1, 8);
        float *kv_score = malloc(((size_t)T + 1) * 1024 * 4);
        for (int64_t k = 0; k < T * 1024; k++) {   /* every row its own bits */
            uint32_t bits = (uint32_t)kvc_rng_next(&rng);
            memcpy(&kv_score[k], &bits, 4);
        }
        for (int64_t r = 0; r < NR; r++) {
            int64_t b = qsl[r], e = qsl[r + 1];
            int pad_tail = e - b > cap && kvc_rng_chance(&rng, 1, 2);
            for (int64_t t = b; t < e; t++) {
                positions[t] = history[r] + (t - b);
                int padding_row = kvc_rng_chance(&rng, 1, 6) || (pad_tail && t >= e - 2 && kvc_rng_chance(&rng, 2, 3));
                slots[t] = padding_row ? -kvc_rng_range(&rng, 1, 2) : order[r] * cap + positions[t] % cap;
            }
            int padded_in_last_rows = 0;
            for (int64_t t = e - cap > b ? e - cap : b; t < e; t++) padded_in_last_rows |= slots[t] < 0;
            run->long_chunks_padded_at_end += e - b > cap && padded_in_last_rows;
        }
        for (int64_t t = qsl[NR]; t < T; t++) slots[t] = -1;
        int64_t page_bytes = cap * 4096, stride = page_bytes + padding, span = (blocks - 1) * stride + page_bytes + padding;
        uint8_t *got = malloc((size_t)span), *expected = malloc((size_t)span);
        for (int64_t k = 0; k < span; k++) got[k] = (uint8_t)kvc_rng_next(&rng);
        memcpy(expected, got, (size_t)span);
        kvc_v41_norm_args a = {.num_tokens = T, .compress_ratio = 2, .kv_score = kv_score, .positions = positions,
                               .slot_mapping = slots, .query_start_loc = qsl, .num_requests = NR,
                               .state_cache = {.data = got, .num_pages = blocks, .page_rows = cap, .page_bytes = page_bytes, .page_stride = stride}};
        for (int64_t r = 0; r < NR; r++) kvc_v41_store_ring(&a, r);
        a.state_cache.data = expected;
        for (int64_t r = 0; r < NR; r++) spec_store_ring(&a, r);
        run->checks++;
        if (memcmp(got, expected, (size_t)span) != 0) {
            int64_t at = 0;
            while (got[at] == expected[at]) at++;
            layout_disagree(run, "ring store (CAP %lld, %lld requests, chunks [%d,%d,%d,%d], page padding %lld): byte %lld of the ring "
                                 "(block %lld, row %lld) is 0x%02x, SPEC.md 5.1 gives 0x%02x",
                            (long long)cap, (long long)NR, qsl[0], qsl[1], qsl[2], qsl[3], (long long)padding, (long long)at,
                            (long long)(at / stride), (long long)(at % stride / 4096), got[at], expected[at]);
        }
        free(got);
        free(expected);
        free(kv_score);
        free(positions);
        free(slots);
    }
    return run->disagreements;
}

#endif

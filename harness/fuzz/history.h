/* The multi-step driver: one request's whole history fed to a backend as
 * one prefill, as chunks of random sizes, or token by token with
 * speculative drafts (k drafts sent, the rejected ones carrying wrong
 * data, then re-sent).  Every way must leave the same latent rows and
 * cache bytes (SPEC.md, chunking invariance).  This is the property that
 * catches ring bugs (V4.1) and window bugs across steps (V4). */
#ifndef KVCMP_HISTORY_H
#define KVCMP_HISTORY_H

#include "kvcmp/case.h"
#include "kvcmp/rng.h"

typedef struct {
    int version;               /* 4 (V4 forward) or 41 (V4.1 forward) */
    int32_t compress_ratio;    /* V4: 4 or 128; V4.1: 1 or 2 */
    int32_t head_dim;          /* V4: 512 or 128; V4.1: 512 */
    int64_t length;            /* tokens in the history */
    float eps;
    int64_t row_width;         /* floats per token: V4 coff*D (kv and score each), V4.1 512*R */
    float *kv, *score, *ape;   /* V4: [length, W], [length, W], [R, W] */
    float *kv_score;           /* V4.1: [length, 512R] */
    float *norm_weight;        /* V4: [D] */
    uint16_t *norm_weight_bf16;/* V4.1: [512] */
    float *cos_sin;
    int64_t cos_sin_rows;
    /* Cache geometry, the same in every feeding so bytes compare. */
    int64_t state_block_size;  /* V4 BS, V4.1 ring CAP */
    int64_t state_pages;       /* V4: logical blocks are spread over these */
    int32_t *block_table;      /* V4: [1, block_columns] logical -> physical */
    int64_t block_columns;     /* V4: blocks of the length, or under a geometry pool of its next power of two */
    int64_t ring_block;        /* V4.1 R=2: the request's ring page */
    int64_t kv_block_size, kv_pages;
    int64_t *kv_page_of_group; /* group g = p / R lives in page kv_page_of_group[g / KB] */
    int64_t page_padding;      /* bytes between pages (multiple of 64) */
    int family;
    uint64_t seed;             /* draws of rejected drafts' wrong data */
} kvc_history;

typedef enum { KVC_FEED_PREFILL = 0, KVC_FEED_CHUNKS = 1, KVC_FEED_SPECULATIVE = 2 } kvc_feed_mode;

typedef struct {
    uint8_t *state; int64_t state_bytes;   /* V4 state cache or V4.1 ring, pages incl. padding */
    uint8_t *kv; int64_t kv_bytes;         /* compressed cache, pages incl. padding */
    uint16_t *latent;                      /* V4.1: [length, 512], row p = the latent of position p */
    int64_t steps, tokens_sent;
} kvc_history_result;

/* A random history (version 4 or 41; ratio/head_dim 0 = random). */
int kvc_history_generate(kvc_rng *rng, int version, int32_t ratio, int32_t head_dim, int family, kvc_history *h);
/* The same with a geometry pool: page rows and padding from `pool` (a
 * stream per campaign slot), the caches, block table and cos_sin sized
 * for the next power of two of the length; pool NULL: kvc_history_generate. */
int kvc_history_generate_pooled(kvc_rng *rng, int version, int32_t ratio, int32_t head_dim, int family, kvc_rng *pool,
                                kvc_history *h);
void kvc_history_free(kvc_history *h);
/* Feed the history in `mode` (seed draws the chunk sizes, drafts and
 * their wrong data).  Returns the first stage error, KVC_OK otherwise. */
int kvc_history_feed(const kvc_backend *backend, const kvc_history *h, kvc_feed_mode mode, uint64_t seed,
                     kvc_history_result *out, kvc_error *err);
void kvc_history_result_free(kvc_history_result *r);
/* Feed the same steps to two backends in lockstep and compare every
 * buffer after each step.  Returns 1 at the first step after which they
 * differ (described in detail; when diverging_step is not NULL it
 * receives that step as a single v4.forward / v41.forward case, with the
 * caches as they were before it, ready to shrink and save), 0 when they
 * never differ, -1 when a backend lacks the stages. */
int kvc_history_lockstep(const kvc_backend *expected, const kvc_backend *got, const kvc_history *h, kvc_feed_mode mode, uint64_t seed,
                         kvc_case *diverging_step, char *detail, size_t size);
/* 0 when equal; else 1 with the first differing byte described. */
int kvc_history_compare(const kvc_history *h, const kvc_history_result *expected, const kvc_history_result *got, char *detail,
                        size_t size);
const char *kvc_feed_mode_name(kvc_feed_mode mode);

#endif

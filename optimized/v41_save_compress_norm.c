/* Optimized v41.save_compress_norm: the same steps as
 * reference/v41_save_compress_norm.c.  Every latent row depends only on
 * kv_score rows and ring rows that no part of this stage writes before
 * the ring stores, so tokens are spread over the threads, and the ring
 * rows are stored, by the same team, only after the pooling loop's
 * barrier (all reads done). */
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "common/validate_parts.h"
#include "optimized/validate_tokens.h"
#include "optimized/stages.h"
#include "optimized/vector_math.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define RING_ROW_BYTES (2 * HEAD_DIM * 4)

/* R = 2 predecessor: batch row t-1, or for the first token of its
 * request's chunk, ring row (p-1) % CAP of the block t's slot names. */
static const float *predecessor_row(const kvc_v41_norm_args *a, int64_t t) {
    int64_t req = a->token_to_req[t];   /* valid tokens lie before query_start_loc[NR] */
    if (t > a->query_start_loc[req]) return a->kv_score + (t - 1) * 2 * HEAD_DIM;
    int64_t cap = a->state_cache.page_rows;
    int64_t ring_slot = (a->slot_mapping[t] / cap) * cap + (a->positions[t] - 1) % cap;
    return (const float *)kvc_plain_row(&a->state_cache, ring_slot, RING_ROW_BYTES);
}

/* Step 2's two weights exp(x0), exp(x1), x_i = score_i - max.  In a lane
 * with finite scores the maximum is one of the two, whose x is s - s = +0
 * (or -0 - +0 = -0), and exp(+-0) is exactly 1: only the other entry needs
 * an exp (it is 1 too where the scores tie).  A vector with any other lane
 * (NaN, or +inf - +inf) computes both. */
static void pair_weights(__m512 x0, __m512 x1, __m512 *weight0, __m512 *weight1) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __mmask16 first_is_max = _mm512_cmp_ps_mask(x0, zero, _CMP_EQ_OQ);
    __mmask16 second_is_max = _mm512_cmp_ps_mask(x1, zero, _CMP_EQ_OQ);
    if ((__mmask16)(first_is_max | second_is_max) != 0xFFFF) {
        *weight0 = opt_exp16(x0);
        *weight1 = opt_exp16(x1);
        return;
    }
    __m512 other = opt_exp16(_mm512_mask_blend_ps(first_is_max, x0, x1));
    *weight0 = _mm512_mask_blend_ps(first_is_max, other, one);
    *weight1 = _mm512_mask_blend_ps(first_is_max, one, other);
}

/* Steps 1-3 over the two entries (predecessor, t), 16 channels at a time,
 * with the reference's operations: max from entry 0, sums from +0. */
static void pool_pair(const float *previous, const float *current, float *pooled) {
    const __m512 zero = _mm512_setzero_ps();
    for (int d = 0; d < HEAD_DIM; d += 16) {
        __m512 score0 = _mm512_loadu_ps(previous + HEAD_DIM + d), score1 = _mm512_loadu_ps(current + HEAD_DIM + d);
        __m512 maximum = opt_max_nan16(score0, score1);
        __m512 weight0, weight1;
        pair_weights(_mm512_sub_ps(score0, maximum), _mm512_sub_ps(score1, maximum), &weight0, &weight1);
        /* 0 + e and fma(e, kv, +0) are kept literally: fma(e, kv, +0)
         * differs from e * kv when the product is -0. */
        __m512 denom = _mm512_add_ps(_mm512_add_ps(zero, weight0), weight1);
        __m512 acc = _mm512_fmadd_ps(weight0, _mm512_loadu_ps(previous + d), zero);
        acc = _mm512_fmadd_ps(weight1, _mm512_loadu_ps(current + d), acc);
        _mm512_storeu_ps(pooled + d, _mm512_div_ps(acc, denom));
    }
}

static void write_latent(uint16_t *latent_row, const float *pooled, const float *weight, float eps) {
    float normed[HEAD_DIM];
    opt_rms_norm(pooled, weight, HEAD_DIM, eps, normed);
    for (int d = 0; d < HEAD_DIM; d += 16)
        _mm256_storeu_si256((__m256i *)(latent_row + d), opt_bf16_from_f32x16(_mm512_loadu_ps(normed + d)));
}

/* Each request's ring rows, spread over the threads of the enclosing
 * team (an orphaned loop: called outside a parallel region, one thread
 * stores them all).  Bit-identical at any thread count: each ring row is
 * copied bit for bit by the one thread that owns its request (no two
 * requests share a ring block, section 8). */
static void store_rings(const kvc_v41_norm_args *a) {
#pragma omp for schedule(static)
    for (int64_t req = 0; req < a->num_requests; req++) kvc_v41_store_ring(a, req);
}

int opt_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    /* Section 8: the per-token and per-request checks on the threads when
     * every token passes; otherwise (or when a field fails, see
     * validate_parts.h) the common validator's verdict. */
    int rc = KVC_OK;
    if ((kvc_validate_v41_norm_fields(a, err) != KVC_OK || !opt_v41_norm_tokens_valid(a)) &&
        (rc = kvc_validate_v41_norm(a, err)) != KVC_OK)
        return rc;
    float weight[HEAD_DIM];   /* the bf16 weight widened once per call */
    for (int d = 0; d < HEAD_DIM; d += 16)
        _mm512_storeu_ps(weight + d, opt_f32_from_bf16x16(_mm256_loadu_si256((const __m256i *)(a->norm_weight + d))));
    int32_t ratio = a->compress_ratio;
    /* At most CAP ring rows per request are stored. */
    int64_t ring_rows = ratio != 2 ? 0 : a->num_tokens < a->num_requests * a->state_cache.page_rows ? a->num_tokens
                                                                                                  : a->num_requests * a->state_cache.page_rows;
    /* About 10 decode tokens (row, exps and ring row) per thread at least (stages.h). */
    int threads = opt_threads_for(opt_v41_norm_nanoseconds(a->num_tokens, ratio, ring_rows));
    int chunk = opt_chunk_for(a->num_tokens, threads, 16);
    /* One team for the pooling and the ring stores: one thread start per call. */
#pragma omp parallel num_threads(threads)
    {
        /* Bit-identical at any thread count: each latent row is written by
         * exactly one thread, from rows no thread writes in this loop. */
#pragma omp for schedule(dynamic, chunk)
        for (int64_t t = 0; t < a->num_tokens; t++) {
            const float *row = a->kv_score + t * (int64_t)HEAD_DIM * ratio;
            if (t + 2 < a->num_tokens) opt_prefetch_bytes(row + 2 * (int64_t)HEAD_DIM * ratio, (int64_t)HEAD_DIM * ratio * 4);
            if (a->slot_mapping[t] < 0 || !kvc_is_closing(a->positions[t], ratio)) continue;
            float pooled[HEAD_DIM];
            if (ratio == 2) pool_pair(predecessor_row(a, t), row, pooled);
            write_latent(a->latent + t * HEAD_DIM, ratio == 2 ? pooled : row, weight, a->eps);
        }
        /* The loop's implicit barrier: every pooling read of the call is
         * done before the first ring row is stored. */
        if (ratio == 2) store_rings(a);
    }
    opt_leave_vector_code();
    return KVC_OK;
}

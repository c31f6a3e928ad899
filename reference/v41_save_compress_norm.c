/* Reference v41.save_compress_norm (SPEC.md 5.1): pool (R = 2) or pass
 * (R = 1), RMSNorm with the bf16 weight, write the bf16 latent, and only
 * then store each request's ring rows. */
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/steps.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define RING_ROW_BYTES (2 * HEAD_DIM * 4)

/* The request owning batch row t, or -1 for trailing padding. */
static int64_t request_of(const kvc_v41_norm_args *a, int64_t t) {
    return t < a->query_start_loc[a->num_requests] ? a->token_to_req[t] : -1;
}

/* R = 2: the predecessor row of closing token t is batch row t-1, except
 * for the first token of its request's chunk: then ring row (p-1) % CAP of
 * the ring block named by t's own slot. */
static const float *predecessor_row(const ref_steps *s, const kvc_v41_norm_args *a, int64_t t) {
    int64_t req = request_of(a, t);
    if (t > a->query_start_loc[req]) return a->kv_score + (t - 1) * 2 * HEAD_DIM;
    int64_t cap = a->state_cache.page_rows;
    int64_t ring_block = a->slot_mapping[t] / cap;
    int64_t ring_slot = ring_block * cap + s->ring_row(a->positions[t], cap);
    return (const float *)kvc_plain_row(&a->state_cache, ring_slot, RING_ROW_BYTES);
}

static void pool_pair(const ref_steps *s, const kvc_v41_norm_args *a, int64_t t, float *pooled) {
    const float *rows[2] = {predecessor_row(s, a, t), a->kv_score + t * 2 * HEAD_DIM};
    for (int d = 0; d < HEAD_DIM; d++) {
        /* Steps 1-3 over the entries (predecessor, t). */
        float window_kv[2] = {rows[0][d], rows[1][d]};
        float window_score[2] = {rows[0][HEAD_DIM + d], rows[1][HEAD_DIM + d]};
        pooled[d] = s->softmax_pool(window_kv, window_score, 2);
    }
}

/* Norm: steps 4-6 with the bf16 weight widened; latent = bf16(normed). */
static void write_latent(const ref_steps *s, const kvc_v41_norm_args *a, int64_t t, const float *pooled) {
    float weight[HEAD_DIM], normed[HEAD_DIM];
    for (int d = 0; d < HEAD_DIM; d++) weight[d] = kvc_f32_from_bf16(a->norm_weight[d]);
    float inv = s->inverse_rms(s->sum_of_squares(pooled, HEAD_DIM), HEAD_DIM, a->eps);
    s->norm_product(pooled, inv, weight, HEAD_DIM, normed);
    s->bf16_row(normed, a->latent + t * HEAD_DIM, HEAD_DIM);
}

/* Ring store (R = 2), after every pooling read of the call: each
 * request's ring rows. */
static void store_rings(const ref_steps *s, const kvc_v41_norm_args *a) {
    for (int64_t req = 0; req < a->num_requests; req++) s->store_ring(a, req);
}

int ref_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_norm(a, err);
    if (rc) return rc;
    const ref_steps *s = ref_steps_in_use();
    if (s->v41_save_compress_norm) return s->v41_save_compress_norm(a, err);
    float pooled[HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Valid closing tokens only. */
        if (a->slot_mapping[t] < 0 || !s->v41_norm_closes(a, t)) continue;
        /* R = 1: pooled = kv_score[t][0 .. 512); R = 2: steps 1-3. */
        if (a->compress_ratio == 1) memcpy(pooled, a->kv_score + t * HEAD_DIM, sizeof pooled);
        else pool_pair(s, a, t, pooled);
        write_latent(s, a, t, pooled);
    }
    if (a->compress_ratio == 2) store_rings(s, a);
    return KVC_OK;
}

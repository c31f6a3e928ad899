/* Reference v4.compress (SPEC.md 3.2): window -> pooled -> normed ->
 * RoPE -> quantised store, one closing token at a time. */
#include <math.h>
#include <stdlib.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "reference/deviations.h"

#define MAX_WINDOW 256   /* coff * R: 8 for R = 4, 128 for R = 128 */
#define MAX_HEAD_DIM 512

/* Steps 1-3 for every channel of closing token t. */
static void pool_window(const kvc_v4_compress_args *a, int64_t t, float *pooled) {
    int32_t ratio = a->compress_ratio, head_dim = a->head_dim;
    int64_t coff = kvc_v4_coff(ratio), width = coff * head_dim;
    int64_t window = coff * ratio, p = a->positions[t], req = a->token_to_req[t];
    const float *entry_row[MAX_WINDOW];
    int64_t entry_half[MAX_WINDOW];
    int entries = 0;
    /* The window: entry w is position q = p - coff*R + 1 + w, valid iff
     * q >= 0; entries of the current group (w >= R) read the second half. */
    for (int64_t w = 0; w < window; w++) {
        int64_t q = p - window + 1 + w;
        if (ref_deviating()) q = ref_deviant_window_position(a, req, q, p);
        if (q < 0) continue;
        entry_row[entries] = (const float *)kvc_plain_row(&a->state_cache, kvc_v4_state_slot(a, req, q), 2 * width * 4);
        entry_half[entries] = (ratio == 4 && w >= ratio) ? head_dim : 0;
        if (ratio == 4 && ref_deviates(KVC_DEV_R4_HALVES_SWAPPED)) entry_half[entries] = head_dim - entry_half[entries];
        entries++;
    }
    float window_kv[MAX_WINDOW], window_score[MAX_WINDOW];
    for (int d = 0; d < head_dim; d++) {
        for (int e = 0; e < entries; e++) {
            window_kv[e] = entry_row[e][entry_half[e] + d];
            window_score[e] = entry_row[e][width + entry_half[e] + d];
        }
        pooled[d] = ref_softmax_pool(window_kv, window_score, entries);
    }
}

/* Steps 8-9, D = 512: NoPE rounded to bf16 then block-quantised; RoPE
 * applied to the un-rounded fp32 values and stored as bf16. */
static void store_main(const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int nope_dims = 512 - KVC_ROPE_DIMS;
    int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
    if (ref_deviates(KVC_DEV_ROPE_ROW_P) && a->positions[t] < a->cos_sin_rows) cos_row = a->positions[t];
    /* rope-on-nope rotates dims 0 .. 64 before they are rounded. */
    if (ref_deviates(KVC_DEV_ROPE_ON_NOPE)) ref_rope(normed, a->cos_sin + cos_row * KVC_ROPE_DIMS);
    float nope_bf16[512];
    for (int d = 0; d < nope_dims; d++) nope_bf16[d] = kvc_f32_from_bf16(ref_bf16(normed[d]));
    if (ref_deviates(KVC_DEV_ROPE_ON_ROUNDED))
        for (int d = nope_dims; d < 512; d++) normed[d] = kvc_f32_from_bf16(ref_bf16(normed[d]));
    if (!ref_deviates(KVC_DEV_ROPE_ON_NOPE)) ref_rope(normed + nope_dims, a->cos_sin + cos_row * KVC_ROPE_DIMS);
    int64_t slot = a->kv_slot_mapping[t];
    ref_store_ds_mla(nope_bf16, normed + nope_dims, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
}

/* D = 128 indexer: RoPE first on fp32, then all 128 dims rounded to bf16
 * and quantised as one block with an fp32 power-of-two scale. */
static void store_indexer(const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
    if (ref_deviates(KVC_DEV_ROPE_ROW_P) && a->positions[t] < a->cos_sin_rows) cos_row = a->positions[t];
    ref_rope(ref_rope_dims(normed, 128), a->cos_sin + cos_row * KVC_ROPE_DIMS);
    float z[128];
    float magnitude = 1e-4f;
    for (int d = 0; d < 128; d++) {
        z[d] = kvc_f32_from_bf16(ref_bf16(normed[d]));
        magnitude = kvc_max_nan(magnitude, fabsf(z[d]));
    }
    kvc_block_scale scale = kvc_block_scale_from_quotient(magnitude / KVC_FP8_MAX);
    if (ref_deviating()) scale = ref_deviant_block_scale(z, 128, scale);
    float multiplier = kvc_scale_multiplier(scale);
    int64_t slot = a->kv_slot_mapping[t];
    uint8_t *codes = kvc_indexer_token(&a->kv_cache, slot);
    for (int d = 0; d < 128; d++) codes[d] = ref_fp8_code(z[d] * multiplier);
    kvc_store_f32(kvc_indexer_scale(&a->kv_cache, slot), ref_canonical_f32(kvc_scale_value(scale)));
}

int ref_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_compress(a, err);
    if (rc) return rc;
    if (ref_deviates(KVC_DEV_STATE_SLOT_IGNORED)) return ref_deviant_v4_compress(a, err);
    if (ref_deviates(KVC_DEV_POSITIONS_INT32)) return ref_deviant_positions_v4_compress(a, err);
    float pooled[MAX_HEAD_DIM], normed[MAX_HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Only closing tokens with both slots valid produce a row. */
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0) continue;
        if (!ref_closes(a->positions[t], a->compress_ratio)) continue;
        if (ref_deviates(KVC_DEV_CLOSING_OFF_BY_ONE) && !ref_deviant_compress_token_in_bounds(a, t)) continue;
        pool_window(a, t, pooled);
        ref_rms_norm(pooled, a->norm_weight, a->head_dim, a->eps, normed);
        if (a->head_dim == 512) store_main(a, t, normed);
        else store_indexer(a, t, normed);
    }
    return KVC_OK;
}

/* Reference v4.compress (SPEC.md 4.2): window -> pooled -> normed ->
 * RoPE -> quantised store, one closing token at a time. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/steps.h"

#define MAX_WINDOW 256   /* coff * R: 8 for R = 4, 128 for R = 128 */
#define MAX_HEAD_DIM 512

/* Window and steps 1-3 for every channel of closing token t. */
static void pool_window(const ref_steps *s, const kvc_v4_compress_args *a, int64_t t, float *pooled) {
    int32_t ratio = a->compress_ratio, head_dim = a->head_dim;
    int64_t coff = kvc_v4_coff(ratio), width = coff * head_dim;
    int64_t window = coff * ratio, req = a->token_to_req[t];
    const float *entry_row[MAX_WINDOW];
    int64_t entry_half[MAX_WINDOW];
    int entries = 0;
    /* Window: entry w reads position q, valid iff q >= 0, from the column
     * h where its half starts; walked in increasing w. */
    for (int64_t w = 0; w < window; w++) {
        int64_t q = s->window_position(a, t, w);
        if (q < 0) continue;
        entry_row[entries] = (const float *)kvc_plain_row(&a->state_cache, kvc_v4_state_slot(a, req, q), 2 * width * 4);
        entry_half[entries] = s->window_half(a, w);
        entries++;
    }
    float window_kv[MAX_WINDOW], window_score[MAX_WINDOW];
    for (int d = 0; d < head_dim; d++) {
        /* kv_w = state[slot(q)][h + d], s_w = state[slot(q)][coff*D + h + d]. */
        for (int e = 0; e < entries; e++) {
            window_kv[e] = entry_row[e][entry_half[e] + d];
            window_score[e] = entry_row[e][width + entry_half[e] + d];
        }
        /* Steps 1-3. */
        pooled[d] = s->softmax_pool(window_kv, window_score, entries);
    }
}

/* Steps 4-6. */
static void rms_norm(const ref_steps *s, const kvc_v4_compress_args *a, const float *pooled, float *normed) {
    float inv = s->inverse_rms(s->sum_of_squares(pooled, a->head_dim), a->head_dim, a->eps);
    s->norm_product(pooled, inv, a->norm_weight, a->head_dim, normed);
}

/* Store, D = 512: steps 7-8, NoPE rounded to bf16, RoPE applied to the
 * un-rounded fp32 values; step 9, the fp8_ds_mla row kv_slot_mapping[t]. */
static void store_main(const ref_steps *s, const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int nope_dims = 512 - KVC_ROPE_DIMS;
    int64_t cos_row = s->cos_sin_row(a->positions[t], a->compress_ratio, a->cos_sin_rows);
    float nope_bf16[512];
    s->rotate_and_round(s, normed, a->cos_sin + cos_row * KVC_ROPE_DIMS, nope_bf16);
    int64_t slot = a->kv_slot_mapping[t];
    ref_store_ds_mla_steps(s, nope_bf16, normed + nope_dims, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
}

/* Store, D = 128 (fp8_indexer row): RoPE first on fp32, then all 128 dims
 * rounded to bf16 and quantised as one block with an fp32 power-of-two
 * scale. */
static void store_indexer(const ref_steps *s, const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int64_t cos_row = s->cos_sin_row(a->positions[t], a->compress_ratio, a->cos_sin_rows);
    /* Step 7 on normed[64 .. 128). */
    s->rope(s->rope_dims(normed, 128), a->cos_sin + cos_row * KVC_ROPE_DIMS);
    /* z[d] = bf16(all 128 values) widened. */
    uint16_t rounded[128];
    float z[128];
    s->bf16_row(normed, rounded, 128);
    for (int d = 0; d < 128; d++) z[d] = kvc_f32_from_bf16(rounded[d]);
    /* a = max(1e-4, max |z|), e as in step 9. */
    kvc_block_scale scale = s->block_scale(z, 128);
    int64_t slot = a->kv_slot_mapping[t];
    /* code_d = fp8(clamp(z_d * 2^-e, -448, 448)); scale = 2^e as fp32. */
    s->fp8_codes(z, kvc_scale_multiplier(scale), kvc_indexer_token(&a->kv_cache, slot), 128);
    kvc_store_f32(kvc_indexer_scale(&a->kv_cache, slot), s->canonical_f32(kvc_scale_value(scale)));
}

int ref_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_compress(a, err);
    if (rc) return rc;
    const ref_steps *s = ref_steps_in_use();
    if (s->v4_compress) return s->v4_compress(a, err);
    float pooled[MAX_HEAD_DIM], normed[MAX_HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Only closing tokens with both slots valid produce a row. */
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0) continue;
        if (!s->v4_closes(a, t)) continue;
        pool_window(s, a, t, pooled);
        rms_norm(s, a, pooled, normed);
        if (a->head_dim == 512) store_main(s, a, t, normed);
        else store_indexer(s, a, t, normed);
    }
    return KVC_OK;
}

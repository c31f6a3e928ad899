/* Reference v41.rope_plain_insert (SPEC.md 3.5): plain 512-wide rows,
 * bf16 or fp8 e4m3fn with one per-tensor scale. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "reference/deviations.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define NOPE_DIMS (HEAD_DIM - KVC_ROPE_DIMS)

int ref_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 0, err);
    if (rc) return rc;
    if (ref_deviates(KVC_DEV_POSITIONS_INT32)) return ref_deviant_positions_v41_insert(a, 0, err);
    int64_t row_bytes = kvc_cache_row_bytes(a->cache_dtype);
    /* r = 1 / scale, rounded once to fp32. */
    float inverse_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? 1.0f / a->fp8_scale : 1.0f;
    if (a->cache_dtype == KVC_CACHE_FP8_E4M3 && ref_deviating()) inverse_scale = ref_deviant_reciprocal(a->fp8_scale, inverse_scale);
    float x[HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0 || !ref_closes(a->positions[t], a->compress_ratio)) continue;
        if (ref_deviates(KVC_DEV_CLOSING_OFF_BY_ONE) && !ref_deviant_insert_token_in_bounds(a, t)) continue;
        for (int d = 0; d < HEAD_DIM; d++) x[d] = kvc_f32_from_bf16(a->latent[t * HEAD_DIM + d]);
        int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
        if (ref_deviates(KVC_DEV_ROPE_ROW_P) && a->positions[t] < a->cos_sin_rows) cos_row = a->positions[t];
        ref_rope(ref_rope_dims(x, HEAD_DIM), a->cos_sin + cos_row * KVC_ROPE_DIMS);
        if (ref_deviates(KVC_DEV_NOPE_PAIR_ROTATED)) ref_deviant_rotate_nope(x);
        uint8_t *row = kvc_plain_row(&a->kv_cache, slot, row_bytes);
        for (int d = 0; d < HEAD_DIM; d++) {
            /* The whole row is rounded to bf16 (NoPE values are bf16
             * already, so only a NaN changes: it becomes 0x7FC0). */
            uint16_t rounded = ref_bf16(x[d]);
            if (a->cache_dtype == KVC_CACHE_BF16) kvc_store_u16(row + 2 * d, rounded);
            else row[d] = kvc_fp8_from_f32(kvc_clamp_fp8_range(kvc_f32_from_bf16(rounded) * inverse_scale));
            if (a->cache_dtype != KVC_CACHE_BF16 && ref_deviating()) row[d] = ref_deviant_plain_fp8(x[d], rounded, a->fp8_scale, inverse_scale);
        }
    }
    return KVC_OK;
}

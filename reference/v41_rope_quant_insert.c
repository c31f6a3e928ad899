/* Reference v41.rope_quant_insert (SPEC.md 3.4): the latent is already
 * bf16, so NoPE blocks are quantised without a second rounding. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "reference/deviations.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define NOPE_DIMS (HEAD_DIM - KVC_ROPE_DIMS)

int ref_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 1, err);
    if (rc) return rc;
    if (ref_deviates(KVC_DEV_POSITIONS_INT32)) return ref_deviant_positions_v41_insert(a, 1, err);
    float x[HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0 || !ref_closes(a->positions[t], a->compress_ratio)) continue;
        if (ref_deviates(KVC_DEV_CLOSING_OFF_BY_ONE) && !ref_deviant_insert_token_in_bounds(a, t)) continue;
        for (int d = 0; d < HEAD_DIM; d++) x[d] = kvc_f32_from_bf16(a->latent[t * HEAD_DIM + d]);
        int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
        if (ref_deviates(KVC_DEV_ROPE_ROW_P) && a->positions[t] < a->cos_sin_rows) cos_row = a->positions[t];
        ref_rope(ref_rope_dims(x, HEAD_DIM), a->cos_sin + cos_row * KVC_ROPE_DIMS);
        ref_store_ds_mla(x, x + NOPE_DIMS, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
    }
    return KVC_OK;
}

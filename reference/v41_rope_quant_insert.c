/* Reference v41.rope_quant_insert (SPEC.md 5.2): the latent is already
 * bf16, so NoPE blocks are quantised without a second rounding. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/steps.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define NOPE_DIMS (HEAD_DIM - KVC_ROPE_DIMS)

int ref_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 1, err);
    if (rc) return rc;
    const ref_steps *s = ref_steps_in_use();
    if (s->v41_rope_quant_insert) return s->v41_rope_quant_insert(a, err);
    float x[HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Valid closing tokens only. */
        int64_t slot = a->slot_mapping[t];
        if (slot < 0 || !s->v41_insert_closes(a, t)) continue;
        /* x = latent[t] widened. */
        for (int d = 0; d < HEAD_DIM; d++) x[d] = kvc_f32_from_bf16(a->latent[t * HEAD_DIM + d]);
        /* Step 7 on x[448 .. 512) with row cp = (p / R) * R. */
        int64_t cos_row = s->cos_sin_row(a->positions[t], a->compress_ratio, a->cos_sin_rows);
        s->rope(s->rope_dims(x, HEAD_DIM), a->cos_sin + cos_row * KVC_ROPE_DIMS);
        /* Step 9 on the NoPE blocks, RoPE values as bf16. */
        ref_store_ds_mla_steps(s, x, x + NOPE_DIMS, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
    }
    return KVC_OK;
}

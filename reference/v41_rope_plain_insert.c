/* Reference v41.rope_plain_insert (SPEC.md 5.3): plain 512-wide rows,
 * bf16 or fp8 e4m3fn with one per-tensor scale. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/steps.h"

#define HEAD_DIM KVC_V41_HEAD_DIM

int ref_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 0, err);
    if (rc) return rc;
    const ref_steps *s = ref_steps_in_use();
    if (s->v41_rope_plain_insert) return s->v41_rope_plain_insert(a, err);
    int64_t row_bytes = kvc_cache_row_bytes(a->cache_dtype);
    /* r = 1 / scale, rounded once to fp32. */
    float inverse_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? s->reciprocal(a->fp8_scale) : 1.0f;
    float x[HEAD_DIM];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Valid closing tokens only. */
        int64_t slot = a->slot_mapping[t];
        if (slot < 0 || !s->v41_insert_closes(a, t)) continue;
        /* x = latent[t] widened. */
        for (int d = 0; d < HEAD_DIM; d++) x[d] = kvc_f32_from_bf16(a->latent[t * HEAD_DIM + d]);
        /* Step 7 on the last 64 dims. */
        int64_t cos_row = s->cos_sin_row(a->positions[t], a->compress_ratio, a->cos_sin_rows);
        s->rope(s->rope_dims(x, HEAD_DIM), a->cos_sin + cos_row * KVC_ROPE_DIMS);
        /* v = bf16(x[d]) for every dim, stored as the cache's dtype. */
        s->plain_row(s, x, a->cache_dtype, a->fp8_scale, inverse_scale, kvc_plain_row(&a->kv_cache, slot, row_bytes));
    }
    return KVC_OK;
}

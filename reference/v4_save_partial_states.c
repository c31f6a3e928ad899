/* Reference v4.save_partial_states (SPEC.md 3.1). */
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/deviations.h"

int ref_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_save(a, err);
    if (rc) return rc;
    if (ref_deviates(KVC_DEV_POSITIONS_INT32)) return ref_deviant_positions_v4_save(a, err);
    int64_t width = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0) continue;
        float *state_row = (float *)kvc_plain_row(&a->state_cache, slot, 2 * width * 4);
        const float *ape_row = a->ape + (a->positions[t] % a->compress_ratio) * width;
        /* The kv half is copied bit for bit. */
        memcpy(state_row, a->kv + t * width, (size_t)width * 4);
        if (ref_deviates(KVC_DEV_SAVE_KV_NAN_CANONICAL))
            for (int64_t i = 0; i < width; i++) state_row[i] = kvc_canonical_f32(state_row[i]);
        /* The score half: one fp32 add per element. */
        for (int64_t i = 0; i < width; i++)
            state_row[width + i] = ref_canonical_f32(a->score[t * width + i] + ape_row[i]);
        if (ref_deviates(KVC_DEV_SAVE_NAN_PAYLOAD_KEPT))
            for (int64_t i = 0; i < width; i++) state_row[width + i] = a->score[t * width + i] + ape_row[i];
    }
    return KVC_OK;
}

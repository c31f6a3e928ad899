/* Reference v4.save_partial_states (SPEC.md 4.1). */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "reference/steps.h"

int ref_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_save(a, err);
    if (rc) return rc;
    const ref_steps *s = ref_steps_in_use();
    if (s->v4_save_partial_states) return s->v4_save_partial_states(a, err);
    int64_t width = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        /* Tokens with s < 0 are padding and write nothing. */
        int64_t slot = a->slot_mapping[t];
        if (slot < 0) continue;
        float *state_row = (float *)kvc_plain_row(&a->state_cache, slot, 2 * width * 4);
        const float *ape_row = a->ape + (a->positions[t] % a->compress_ratio) * width;
        /* S1: state[s][0 .. W) = kv[t][0 .. W), bit for bit. */
        s->save_kv(state_row, a->kv + t * width, width);
        /* S2: state[s][W + i] = score[t][i] + ape[p mod R][i]. */
        s->save_score(state_row + width, a->score + t * width, ape_row, width);
    }
    return KVC_OK;
}

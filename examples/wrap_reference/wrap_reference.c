/* Wrapping a kernel written like vLLM's CPU port as a kvcmp candidate.
 *
 * vLLM's CPU kernels take raw base pointers, element strides and gather
 * slots that the caller resolved beforehand.  The two "kernels" below are
 * written that way (here they compute with the reference's own steps, so
 * the candidate must pass); the adapters under them are all it takes to
 * put such kernels behind the plug-in ABI (include/kvcmp/plugin.h):
 * validate with the shared validators, resolve slots and strides, call.
 * Stages not wrapped here are passed straight through from the reference.
 *
 * Build: make examples   (build/examples/wrap_reference.so), or against an
 *        installed libkvcmp, in one line:
 *          cc -std=c17 -O1 -fPIC -shared -fvisibility=hidden wrap_reference.c
 *            $(pkg-config --cflags kvcmp) $(pkg-config --variable=plugin_cflags kvcmp)
 *            $(pkg-config --libs kvcmp) -o wrap_reference.so
 *        (plugin_cflags: the adapters call the reference's steps inline,
 *        whose arithmetic must not be contracted into fma)
 * Fuzz:  build/kvcmp fuzz --candidate build/examples/wrap_reference.so
 * The same wrapper in C++17: examples/cpp_plugin/cpp_plugin.cpp. */
#include <math.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "kvcmp/plugin.h"

/* ---- kernels in vLLM's calling convention ---------------------------- */

/* state[slot] = [kv | score + ape[p % R]]; state_stride = floats per page. */
static void save_states_kernel(float *state, int64_t state_stride, int64_t block_size, const float *kv, const float *score,
                               const float *ape, const int64_t *positions, const int64_t *slots, int64_t tokens, int64_t width,
                               int64_t ratio) {
    for (int64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0) continue;
        float *row = state + slots[t] / block_size * state_stride + slots[t] % block_size * 2 * width;
        memcpy(row, kv + t * width, (size_t)width * 4);
        for (int64_t i = 0; i < width; i++)
            row[width + i] = kvc_canonical_f32(score[t * width + i] + ape[positions[t] % ratio * width + i]);
    }
}

/* One compressed row from a pre-resolved window: rows[w] is the state row
 * of window entry w (NULL = before position 0), half[w] its column offset. */
static void compress_row_kernel(const float *const *rows, const int64_t *half, int window, int64_t width, int head_dim, float eps,
                                const float *weight, const float *cos_sin_row, uint8_t *token, uint8_t *scales) {
    float pooled[512], normed[512], kv[256], sc[256];
    for (int d = 0; d < head_dim; d++) {
        int n = 0;
        for (int w = 0; w < window; w++)
            if (rows[w]) { kv[n] = rows[w][half[w] + d]; sc[n++] = rows[w][width + half[w] + d]; }
        pooled[d] = ref_softmax_pool(kv, sc, n);
    }
    ref_rms_norm(pooled, weight, head_dim, eps, normed);
    int nope = head_dim - KVC_ROPE_DIMS;
    if (head_dim == 512) {   /* fp8_ds_mla: NoPE rounded to bf16 first, RoPE on fp32 */
        for (int d = 0; d < nope; d++) pooled[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]));
        ref_rope(normed + nope, cos_sin_row);
        ref_store_ds_mla(pooled, normed + nope, token, scales);
        return;
    }
    ref_rope(normed + nope, cos_sin_row);   /* indexer: RoPE, bf16, one fp32 power-of-two scale */
    float a = 1e-4f;
    for (int d = 0; d < head_dim; d++) a = kvc_max_nan(a, fabsf(normed[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]))));
    kvc_block_scale s = kvc_block_scale_from_quotient(a / KVC_FP8_MAX);
    for (int d = 0; d < head_dim; d++) token[d] = kvc_fp8_from_f32(kvc_clamp_fp8_range(normed[d] * kvc_scale_multiplier(s)));
    kvc_store_f32(scales, kvc_scale_value(s));
}

/* ---- adapters: kvcmp arguments -> the kernels' convention ------------- */

static int wrap_save(const kvc_v4_save_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_save(a, err);
    if (rc) return rc;
    int64_t width = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    save_states_kernel(a->state_cache.data, a->state_cache.page_stride / 4, a->state_cache.page_rows, a->kv, a->score, a->ape,
                       a->positions, a->slot_mapping, a->num_tokens, width, a->compress_ratio);
    return KVC_OK;
}

static int wrap_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_compress(a, err);
    if (rc) return rc;
    int R = a->compress_ratio, coff = kvc_v4_coff(R), window = coff * R;
    int64_t width = (int64_t)coff * a->head_dim, half[256];
    const float *rows[256];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t p = a->positions[t];
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0 || !kvc_is_closing(p, R)) continue;
        for (int w = 0; w < window; w++) {   /* resolve the gather slots */
            int64_t q = p - window + 1 + w;
            rows[w] = q < 0 ? NULL : (const float *)kvc_plain_row(&a->state_cache, kvc_v4_state_slot(a, a->token_to_req[t], q), 2 * width * 4);
            half[w] = R == 4 && w >= R ? a->head_dim : 0;
        }
        int64_t slot = a->kv_slot_mapping[t];
        int ds_mla = a->head_dim == 512;
        compress_row_kernel(rows, half, window, width, a->head_dim, a->eps, a->norm_weight, a->cos_sin + p / R * R * 64,
                            ds_mla ? kvc_ds_mla_token(&a->kv_cache, slot) : kvc_indexer_token(&a->kv_cache, slot),
                            ds_mla ? kvc_ds_mla_scales(&a->kv_cache, slot) : kvc_indexer_scale(&a->kv_cache, slot));
    }
    return KVC_OK;
}

static const kvcmp_plugin wrapped = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvcmp_plugin),
    .name = "wrap_reference (vLLM-style kernels around the reference)",
    .v4_save_partial_states = wrap_save,
    .v4_compress = wrap_compress,
    .v41_save_compress_norm = ref_v41_save_compress_norm,
    .v41_rope_quant_insert = ref_v41_rope_quant_insert,
    .v41_rope_plain_insert = ref_v41_rope_plain_insert,
};

KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &wrapped; }

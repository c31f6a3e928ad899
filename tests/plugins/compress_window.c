/* A v4.compress whose window is its own, written from SPEC.md 4.2, with
 * one bug: entry w is position p - coff*R + w, one row early (the token
 * itself left out, one row before the window read).  The steps the bug
 * does not touch come from the reference's public steps
 * (kvcmp/reference_steps.h: pooling over the entries given, RMSNorm,
 * RoPE, the D = 512 store) and the format helpers; the D = 128 store is
 * written here from SPEC.md 4.2.  The diagnosis must name the bug
 * window-starts-early (tests/diagnose/test_root_causes.c). */
#include <math.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/plugin.h"
#include "kvcmp/reference_steps.h"
#include "kvcmp/validate.h"

static void pool(const kvc_v4_compress_args *a, int64_t t, float *pooled) {
    int64_t ratio = a->compress_ratio, coff = ratio == 4 ? 2 : 1, head_dim = a->head_dim, width = coff * head_dim;
    int64_t window = coff * ratio, p = a->positions[t], req = a->token_to_req[t];
    const float *row[256];
    int64_t half[256];
    int n = 0;
    for (int64_t w = 0; w < window; w++) {
        int64_t q = p - window + w;   /* the bug: SPEC.md 4.2 says p - coff*R + 1 + w */
        if (q < 0) continue;
        row[n] = (const float *)kvc_plain_row(&a->state_cache, kvc_v4_state_slot(a, req, q), 2 * width * 4);
        half[n++] = ratio == 4 && w >= ratio ? head_dim : 0;
    }
    float kv[256], score[256];
    for (int64_t d = 0; d < head_dim; d++) {
        for (int e = 0; e < n; e++) kv[e] = row[e][half[e] + d], score[e] = row[e][width + half[e] + d];
        pooled[d] = ref_softmax_pool(kv, score, n);
    }
}

static int compress(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_compress(a, err);
    if (rc) return rc;
    float pooled[512], normed[512];
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t p = a->positions[t], slot = a->kv_slot_mapping[t];
        if (a->slot_mapping[t] < 0 || slot < 0 || (p + 1) % a->compress_ratio != 0) continue;
        pool(a, t, pooled);
        ref_rms_norm(pooled, a->norm_weight, a->head_dim, a->eps, normed);
        const float *cos_sin = a->cos_sin + (p / a->compress_ratio) * a->compress_ratio * 64;
        if (a->head_dim == 512) {
            float nope[448];
            for (int d = 0; d < 448; d++) nope[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]));
            ref_rope(normed + 448, cos_sin);
            ref_store_ds_mla(nope, normed + 448, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
            continue;
        }
        /* D = 128: RoPE on fp32, all 128 rounded to bf16, one block. */
        ref_rope(normed + 64, cos_sin);
        float z[128], m = 1e-4f;
        for (int d = 0; d < 128; d++) {
            z[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]));
            m = kvc_max_nan(m, fabsf(z[d]));
        }
        kvc_block_scale scale = kvc_block_scale_from_quotient(m / 448.0f);
        float multiplier = kvc_scale_multiplier(scale);
        uint8_t *codes = kvc_indexer_token(&a->kv_cache, slot);
        for (int d = 0; d < 128; d++) codes[d] = kvc_fp8_from_f32(kvc_clamp_fp8_range(z[d] * multiplier));
        kvc_store_f32(kvc_indexer_scale(&a->kv_cache, slot), kvc_canonical_f32(kvc_scale_value(scale)));
    }
    return KVC_OK;
}

static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "independent window (test candidate)",
    .v4_compress = compress,
};

KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &table; }

/* A v41.rope_plain_insert written on its own from SPEC.md 5.3 (only the
 * validation of section 8 is libkvcmp's), with its own RoPE, bf16 and
 * fp8 rounding, and one bug in its own code.  The Makefile builds one
 * library per kind:
 *
 *   fp8_subnormal_ties_away   a subnormal halfway between two codes goes
 *                             away from zero instead of to the even code
 *   fp8_subnormals_truncated  a subnormal result is truncated towards
 *                             zero instead of rounded to nearest even (a
 *                             bug the deviation catalogue has no entry for)
 *   fp8_ties_away             every fp8 tie goes away from zero
 *   fp8_truncation            every fp8 result is truncated towards zero
 *   bf16_ties_away            a bf16 tie goes away from zero
 *   bf16_truncation           bf16 keeps the upper 16 bits
 *   bf16_nan_payload_kept     bf16(NaN) keeps the sign and upper payload
 *                             bits, quieted, instead of 0x7FC0
 *   block_max_drops_nan       a v41.rope_quant_insert (SPEC.md 5.2, step
 *                             9 and the fp8_ds_mla row of SPEC.md 3 its
 *                             own) whose block magnitude skips NaN values
 *                             (this kind offers that stage only)
 *
 * The diagnosis must name each by the catalogue's entry for it, or leave
 * it unexplained where the catalogue lacks it, never misname it
 * (tests/diagnose/test_root_causes.c). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvcmp/layout.h"
#include "kvcmp/plugin.h"
#include "kvcmp/validate.h"

static float widen(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even on the low 16 bits; any NaN is 0x7FC0. */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
#if defined(KIND_bf16_nan_payload_kept)
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
#else
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
#endif
#if defined(KIND_bf16_truncation)
    return (uint16_t)(u >> 16);
#elif defined(KIND_bf16_ties_away)
    u += 0x8000u;
    return (uint16_t)(u >> 16);
#else
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
#endif
}

/* n + frac steps of a binade rounded to a whole number of steps. */
static int round_steps(float steps, int subnormal) {
    float whole = floorf(steps), rest = steps - whole;
    int n = (int)whole;
#if defined(KIND_fp8_subnormals_truncated)
    if (subnormal) return n;
#endif
    int up = rest > 0.5f || (rest == 0.5f && (n & 1));
#if defined(KIND_fp8_subnormal_ties_away)
    if (subnormal && rest == 0.5f) up = 1;
#elif defined(KIND_fp8_ties_away)
    if (rest == 0.5f) up = 1;
#elif defined(KIND_fp8_truncation)
    up = 0;
#endif
    (void)subnormal;
    return n + up;
}

/* e4m3fn of a value already clamped to [-448, 448] (or NaN). */
static uint8_t to_fp8(float f) {
    if (f != f) return 0x7F;
    uint8_t sign = signbit(f) ? 0x80 : 0x00;
    float m = fabsf(f);
    if (m < 0x1p-6f) return (uint8_t)(sign | round_steps(m * 512.0f, 1));   /* 8 steps is the smallest normal, code 0x08 */
    int e = ilogbf(m);
    int n = round_steps(ldexpf(m, 3 - e), 0);   /* 8 .. 16 */
    if (n == 16) n = 8, e++;
    if (e + 7 > 15 || (e + 7 == 15 && n == 15)) return 0x7F;
    return (uint8_t)(sign | (e + 7) << 3 | (n - 8));
}

#if !defined(KIND_block_max_drops_nan)
static int plain_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 0, err);
    if (rc) return rc;
    int fp8 = a->cache_dtype == KVC_CACHE_FP8_E4M3;
    float r = fp8 ? 1.0f / a->fp8_scale : 1.0f;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t], p = a->positions[t];
        if (slot < 0 || (p + 1) % a->compress_ratio != 0) continue;
        float x[512];
        for (int d = 0; d < 512; d++) x[d] = widen(a->latent[t * 512 + d]);
        const float *cs = a->cos_sin + (p / a->compress_ratio) * a->compress_ratio * 64;
        for (int i = 0; i < 32; i++) {
            float c = cs[i], s = cs[32 + i], even = x[448 + 2 * i], odd = x[448 + 2 * i + 1];
            x[448 + 2 * i] = fmaf(even, c, -(odd * s));
            x[448 + 2 * i + 1] = fmaf(odd, c, even * s);
        }
        uint8_t *row = kvc_plain_row(&a->kv_cache, slot, fp8 ? 512 : 1024);
        for (int d = 0; d < 512; d++) {
            uint16_t v = to_bf16(x[d]);
            if (!fp8) {
                row[2 * d] = (uint8_t)v;
                row[2 * d + 1] = (uint8_t)(v >> 8);
                continue;
            }
            float y = widen(v) * r;
            if (y > 448.0f) y = 448.0f;
            if (y < -448.0f) y = -448.0f;
            row[d] = to_fp8(y);
        }
    }
    return KVC_OK;
}
#endif

#if defined(KIND_block_max_drops_nan)
/* SPEC.md 5.2: step 9 on the seven 64-wide NoPE blocks, RoPE on the
 * last 64 dims stored as bf16, the eighth scale byte 0. */
static int quant_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_validate_v41_insert(a, 1, err);
    if (rc) return rc;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t], p = a->positions[t];
        if (slot < 0 || (p + 1) % a->compress_ratio != 0) continue;
        float x[512];
        for (int d = 0; d < 512; d++) x[d] = widen(a->latent[t * 512 + d]);
        uint8_t *token = kvc_ds_mla_token(&a->kv_cache, slot), *scales = kvc_ds_mla_scales(&a->kv_cache, slot);
        for (int b = 0; b < 7; b++) {
            const float *y = x + 64 * b;
            float m = 1e-4f;
            for (int j = 0; j < 64; j++) {
                float v = fabsf(y[j]);
#if defined(KIND_block_max_drops_nan)
                if (v != v) continue;
#endif
                if (v != v || m != m) m = NAN;
                else if (v > m) m = v;
            }
            float q = m / 448.0f, multiplier;
            if (q != q) {
                multiplier = NAN;
                scales[b] = 255;
            } else if (isinf(q)) {
                multiplier = 0.0f;
                scales[b] = 255;
            } else {
                int k;
                float f = frexpf(q, &k);   /* q = f * 2^k, f in [0.5, 1): ceil(log2 q) = k, or k - 1 when f = 0.5 */
                int e = f == 0.5f ? k - 1 : k;
                multiplier = ldexpf(1.0f, -e);
                scales[b] = (uint8_t)(e + 127 < 0 ? 0 : e + 127 > 255 ? 255 : e + 127);
            }
            for (int j = 0; j < 64; j++) {
                float v = y[j] * multiplier;
                if (v > 448.0f) v = 448.0f;
                if (v < -448.0f) v = -448.0f;
                token[64 * b + j] = to_fp8(v);
            }
        }
        scales[7] = 0;
        const float *cs = a->cos_sin + (p / a->compress_ratio) * a->compress_ratio * 64;
        for (int i = 0; i < 32; i++) {
            float c = cs[i], s = cs[32 + i], even = x[448 + 2 * i], odd = x[448 + 2 * i + 1];
            uint16_t e = to_bf16(fmaf(even, c, -(odd * s))), o = to_bf16(fmaf(odd, c, even * s));
            token[448 + 4 * i] = (uint8_t)e;
            token[448 + 4 * i + 1] = (uint8_t)(e >> 8);
            token[448 + 4 * i + 2] = (uint8_t)o;
            token[448 + 4 * i + 3] = (uint8_t)(o >> 8);
        }
    }
    return KVC_OK;
}
#endif

static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "independent insert (test candidate)",
#if defined(KIND_block_max_drops_nan)
    .v41_rope_quant_insert = quant_insert,
#else
    .v41_rope_plain_insert = plain_insert,
#endif
};

KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &table; }

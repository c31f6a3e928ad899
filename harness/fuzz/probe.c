/* Rounding probes (kvc_probe_apply in fuzz_gen.h).
 *
 * A last-bit difference inside the pipeline (the sum of squares in
 * another order, a separate multiply and add where the contract says
 * fma) changes a stored byte only when a value sits next to a rounding
 * boundary of bf16 or fp8, about once in 2^15 elements of random data.
 * These probes put values exactly there: the generator computes what the
 * contract computes (with the reference's own steps) and then adjusts
 * inputs so that
 *   - normed values land exactly on a bf16 tie (V4: by tuning fp32 norm
 *     weights; V4.1: by tuning small "probe" inputs whose squares do not
 *     move the sum of squares), so one ulp of difference in the inverse
 *     norm flips the rounding of many of them;
 *   - RoPE outputs land on a bf16 tie when computed with the fma and one
 *     ulp beside it when the product is rounded first (by choosing the
 *     cos/sin row: a product just past an fp32 rounding boundary, and a
 *     sin term that brings the fused result back onto the tie).
 * Each probe is verified with the contract's arithmetic before it is
 * kept; any that misses is simply a random value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/reference_steps.h"
#include "kvcmp/generate.h"
#include "kvcmp/run.h"

/* ---- bf16 ties ------------------------------------------------------- */

static int finite_normal(float x) { return isfinite(x) && fabsf(x) >= 0x1p-100f && fabsf(x) <= 0x1p100f; }

/* A bf16 tie near x (the fp32 value halfway between two bf16 values),
 * chosen so that rounding to even goes toward `even_down` (1: down in
 * magnitude).  The two candidate ties around x alternate in parity. */
static float bf16_tie_near(float x, int even_down) {
    uint32_t bits = kvc_f32_bits(x) & 0xFFFF0000u;   /* bf16 value at or below |x| */
    for (int k = 0; k < 2; k++, bits += 0x10000u) {
        int low_is_even = ((bits >> 16) & 1u) == 0;
        if (low_is_even == even_down) return kvc_f32_from_bits(bits | 0x8000u);
    }
    return x;
}

/* w with fl(y * w) == target, searched around target / y; 0 if none. */
static float factor_hitting(float y, float target) {
    float w = (float)((double)target / (double)y);
    for (int step = 0; step < 16; step++) {
        if (y * w == target) return w;
        w = y * w < target ? nextafterf(w, (y > 0) == (target > 0) ? INFINITY : -INFINITY)
                           : nextafterf(w, (y > 0) == (target > 0) ? -INFINITY : INFINITY);
        if (!isfinite(w)) return 0.0f;
    }
    return 0.0f;
}

/* The contract's inverse norm (steps 4-5). */
static float contract_inverse_norm(const float *v, int n, float eps) {
    float lanes[16] = {0};
    for (int d = 0; d < n; d++) lanes[d % 16] = fmaf(v[d], v[d], lanes[d % 16]);
    for (int width = 8; width >= 1; width /= 2)
        for (int j = 0; j < width; j++) lanes[j] = lanes[j] + lanes[j + width];
    return 1.0f / sqrtf(lanes[0] / (float)n + eps);
}

static int is_probe_dim(int d, int nope) { return d < nope && d % 4 == 1; }

/* ---- RoPE: fused on a tie, separate one ulp off ----------------------- */

/* Choose (c, s) for one pair (x_e, x_o) so the even output is a bf16 tie
 * with the fma and not with a rounded product.  1 if it worked. */
static int rope_pair_probe(kvc_rng *r, float x_e, float x_o, float *c_out, float *s_out) {
    if (!finite_normal(x_e) || !finite_normal(x_o)) return 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        float c = 0.5f + 0.5f * kvc_rng_unit(r);
        double a = (double)x_e * (double)c;              /* exact: at most 48 bits */
        float rounded = (float)a;
        double excess = (double)rounded - a;             /* the product's rounding error */
        float ulp = nextafterf(fabsf(rounded), INFINITY) - fabsf(rounded);
        if (fabs(excess) < ulp / 8.0) continue;
        int up = (excess > 0) == (rounded > 0);          /* rounding moved |a| up */
        float tie = bf16_tie_near(rounded, up);          /* even lies the other way */
        double delta = (excess > 0 ? 1.0 : -1.0) * (7.0 / 16.0) * ulp;
        double wanted = a - (double)tie - delta;         /* = fl(x_o * s) */
        float s = (float)(wanted / (double)x_o);
        if (!isfinite(s)) continue;
        float fused = fmaf(x_e, c, -(x_o * s)), separate = x_e * c - x_o * s;
        if (kvc_bf16_from_f32(fused) != kvc_bf16_from_f32(separate)) {
            *c_out = c;
            *s_out = s;
            return 1;
        }
    }
    return 0;
}

/* Tune cos_sin row `row` for one token's 64 rotated inputs x. */
static void rope_row_probe(kvc_rng *r, float *cos_sin, int64_t row, const float *x) {
    for (int i = 0; i < 32; i++) {
        float c, s;
        if (rope_pair_probe(r, x[2 * i], x[2 * i + 1], &c, &s)) {
            cos_sin[row * 64 + i] = c;
            cos_sin[row * 64 + 32 + i] = s;
        }
    }
}

/* Insert stages: rotated inputs are the latent's last 64 dims. */
static void probe_insert(kvc_rng *r, kvc_case *c, const uint16_t *latent, const char *slot_name) {
    kvc_array *positions = kvc_case_get(c, "positions"), *slots = kvc_case_get(c, slot_name), *cos_sin = kvc_case_get(c, "cos_sin");
    if (!positions || !slots || !cos_sin) return;
    int32_t R = c->compress_ratio;
    char *tuned = calloc((size_t)cos_sin->shape[0] + 1, 1);
    for (int64_t t = 0; t < positions->count; t++) {
        int64_t p = ((int64_t *)positions->data)[t], row = p / R * R;
        if (((int64_t *)slots->data)[t] < 0 || (p + 1) % R || row >= cos_sin->shape[0] || tuned[row]) continue;
        float x[64];
        for (int d = 0; d < 64; d++) x[d] = kvc_f32_from_bf16(latent[t * 512 + 448 + d]);
        rope_row_probe(r, cos_sin->data, row, x);
        tuned[row] = 1;
    }
    free(tuned);
}

/* ---- V4.1 norm: tiny probe inputs on bf16 ties ------------------------ */

/* The predecessor row of closing token t (R = 2), as the contract says. */
static float *predecessor(kvc_case *c, int64_t t) {
    int64_t *pos = kvc_case_get(c, "positions")->data, *slot = kvc_case_get(c, "slot_mapping")->data;
    int32_t *qsl = kvc_case_get(c, "query_start_loc")->data, *owner = kvc_case_get(c, "token_to_req")->data;
    float *rows = kvc_case_get(c, "kv_score")->data;
    if (t > qsl[owner[t]]) return rows + (t - 1) * 1024;
    kvc_array *ring = kvc_case_get(c, "state_cache");
    int64_t cap = ring->shape[1], ring_row = slot[t] / cap * cap + (pos[t] - 1) % cap;
    if (ring_row < 0 || ring_row >= ring->shape[0] * cap) return NULL;
    return (float *)ring->data + ring_row * 1024;
}

static void probe_v41_norm(kvc_rng *r, kvc_case *c) {
    kvc_array *positions = kvc_case_get(c, "positions"), *slots = kvc_case_get(c, "slot_mapping");
    kvc_array *rows = kvc_case_get(c, "kv_score"), *weight = kvc_case_get(c, "norm_weight");
    if (!positions || !slots || !rows || !weight) return;
    int32_t R = c->compress_ratio;
    int64_t width = 512 * (int64_t)R;
    for (int d = 0; d < 448; d++)
        if (is_probe_dim(d, 448)) ((uint16_t *)weight->data)[d] = 0x3F80;   /* 1.0: normed = x * inv exactly */
    for (int64_t t = 0; t < positions->count; t++) {
        int64_t p = ((int64_t *)positions->data)[t];
        if (((int64_t *)slots->data)[t] < 0 || (p + 1) % R) continue;
        float *cur = (float *)rows->data + t * width, *pred = R == 2 ? predecessor(c, t) : NULL;
        if (R == 2 && !pred) continue;
        float pooled[512];
        for (int d = 0; d < 512; d++) {
            if (is_probe_dim(d, 448)) {
                cur[d] = 0.0f;
                if (pred) { pred[d] = 0.0f; pred[512 + d] = 0.0f; cur[512 + d] = 0.0f; }
            }
            if (R == 1) { pooled[d] = cur[d]; continue; }
            float kv[2] = {pred[d], cur[d]}, score[2] = {pred[512 + d], cur[512 + d]};
            pooled[d] = ref_softmax_pool(kv, score, 2);
        }
        float inv = contract_inverse_norm(pooled, 512, c->eps);
        if (!finite_normal(inv)) continue;
        for (int d = 0; d < 448; d++) {
            if (!is_probe_dim(d, 448)) continue;
            float magnitude = ldexpf(1.0f + kvc_rng_unit(r), -(int)kvc_rng_range(r, 12, 16));
            float tie = bf16_tie_near(magnitude, (int)kvc_rng_below(r, 2));
            float x = factor_hitting(inv, tie);   /* fl(inv * x) == tie */
            cur[d] = x;
            if (pred) pred[d] = x;   /* equal scores, equal values: pooled = x exactly */
        }
    }
}

/* ---- V4: tuned norm weights for one closing token --------------------- */

/* The state cache after save_partial_states (a forward), or as given. */
static float *state_after_save(kvc_case *c, int *owned) {
    *owned = 0;
    if (c->stage != KVC_STAGE_V4_FORWARD) return kvc_case_get(c, "state_cache")->data;
    kvc_stage stage = c->stage;
    c->stage = KVC_STAGE_V4_SAVE_PARTIAL_STATES;
    kvc_run_result result;
    kvc_run_options options = {0};
    int rc = kvc_run_case(&kvc_reference_backend, c, &options, &result);
    c->stage = stage;
    if (rc || result.num_outputs < 1) { kvc_run_result_free(&result); return NULL; }
    float *state = result.outputs[0].array.data;
    result.outputs[0].array.data = NULL;
    kvc_run_result_free(&result);
    *owned = 1;
    return state;
}

static void probe_v4(kvc_rng *r, kvc_case *c) {
    kvc_array *positions = kvc_case_get(c, "positions"), *slots = kvc_case_get(c, "slot_mapping");
    kvc_array *kv_slots = kvc_case_get(c, "kv_slot_mapping"), *table = kvc_case_get(c, "block_table");
    kvc_array *owner = kvc_case_get(c, "token_to_req"), *weight = kvc_case_get(c, "norm_weight");
    kvc_array *cos_sin = kvc_case_get(c, "cos_sin"), *state_tensor = kvc_case_get(c, "state_cache");
    if (!positions || !kv_slots || !table || !owner || !weight || !cos_sin || !state_tensor) return;
    int32_t R = c->compress_ratio, D = c->head_dim;
    int64_t coff = kvc_v4_coff(R), width = coff * D, window = coff * R, bs = state_tensor->shape[1];
    int64_t t = 0;
    for (; t < positions->count; t++) {
        int64_t p = ((int64_t *)positions->data)[t];
        if (((int64_t *)slots->data)[t] >= 0 && ((int64_t *)kv_slots->data)[t] >= 0 && (p + 1) % R == 0) break;
    }
    if (t == positions->count) return;
    int owned;
    float *state = state_after_save(c, &owned);
    if (!state) return;
    int64_t p = ((int64_t *)positions->data)[t], req = ((int32_t *)owner->data)[t];
    float pooled[512], y[512], ones[512], kv[256], score[256];
    for (int d = 0; d < D; d++) ones[d] = 1.0f;
    for (int d = 0; d < D; d++) {
        int n = 0;
        for (int64_t w = 0; w < window; w++) {
            int64_t q = p - window + 1 + w;
            if (q < 0) continue;
            int64_t block = ((int32_t *)table->data)[req * table->shape[1] + q / bs];
            const float *row = state + (block * bs + q % bs) * 2 * width;
            int64_t half = R == 4 && w >= R ? D : 0;
            kv[n] = row[half + d];
            score[n++] = row[width + half + d];
        }
        pooled[d] = ref_softmax_pool(kv, score, n);
    }
    if (owned) free(state);
    ref_rms_norm(pooled, ones, D, c->eps, y);   /* y = fl(pooled * inv) */
    float *w = weight->data, normed[512];
    int nope = D - KVC_ROPE_DIMS;
    for (int d = 0; d < D; d++) {
        normed[d] = y[d] * w[d];
        if (!is_probe_dim(d, nope) || !finite_normal(y[d])) continue;
        float tie = bf16_tie_near(y[d], (int)kvc_rng_below(r, 2)), factor = factor_hitting(y[d], tie);
        if (factor != 0.0f && isfinite(factor)) { w[d] = factor; normed[d] = tie; }
    }
    int64_t row = p / R * R;
    if (row < cos_sin->shape[0]) rope_row_probe(r, cos_sin->data, row, normed + nope);
}

/* ---- V4.1 forward: norm probes, then RoPE probes on the real latent ---- */

static void probe_v41_forward(kvc_rng *r, kvc_case *c) {
    probe_v41_norm(r, c);
    c->stage = KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    kvc_run_result result;
    kvc_run_options options = {0};
    int rc = kvc_run_case(&kvc_reference_backend, c, &options, &result);
    c->stage = KVC_STAGE_V41_FORWARD;
    if (rc == KVC_OK && result.num_outputs > 0)
        probe_insert(r, c, result.outputs[0].array.data, c->compress_ratio == 2 ? "kv_slot_mapping" : "slot_mapping");
    kvc_run_result_free(&result);
}

void kvc_probe_apply(kvc_rng *r, kvc_case *c) {
    switch (c->stage) {
    case KVC_STAGE_V4_COMPRESS:
    case KVC_STAGE_V4_FORWARD: probe_v4(r, c); break;
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM: probe_v41_norm(r, c); break;
    case KVC_STAGE_V41_FORWARD: probe_v41_forward(r, c); break;
    case KVC_STAGE_V41_ROPE_QUANT_INSERT:
    case KVC_STAGE_V41_ROPE_PLAIN_INSERT: {
        kvc_array *latent = kvc_case_get(c, "latent");
        if (latent) probe_insert(r, c, latent->data, "slot_mapping");
        break;
    }
    default: break;
    }
}

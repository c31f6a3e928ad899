/* The generator's case-wide passes after a stage's tensors: raw bit patterns, edges placed row by row, other padding slots. */

#include "harness/fuzz/gen_passes.h"

#include <stdint.h>

#include "harness/fuzz/gen_values.h"

/* ---- raw bit patterns ------------------------------------------------- */

/* Every kv entry -0 (V4 kv and state kv halves, V4.1 kv_score kv
 * halves and ring kv halves): a window whose pooled value must be -0. */
static void negative_zero_kv(gen *g) {
    const float minus_zero = kvc_f32_from_bits(0x80000000u);
    int64_t width = g->stage < KVC_STAGE_V41_SAVE_COMPRESS_NORM ? (int64_t)kvc_v4_coff(g->ratio) * g->head_dim : 512;
    kvc_array *kv = kvc_case_get(g->c, "kv"), *state = kvc_case_get(g->c, "state_cache"), *rows = kvc_case_get(g->c, "kv_score");
    for (int64_t i = 0; kv && i < kv->count; i++) ((float *)kv->data)[i] = minus_zero;
    for (int64_t i = 0; state && i < state->count; i++)
        if (i % (2 * width) < width) ((float *)state->data)[i] = minus_zero;
    int64_t row = rows && rows->ndim == 2 ? rows->shape[1] : 1;
    for (int64_t i = 0; rows && i < rows->count; i++)
        if (i % row < 512) ((float *)rows->data)[i] = minus_zero;
    g->dimensions |= KVC_DIM_NEG_ZERO_KV;
}

/* Raw bf16 patterns over a share of a bf16 input: NaN payloads of both
 * signs (quiet and signalling), signed zeros, subnormals, extremes. */
static void raw_bf16(gen *g, const char *name, int one_in) {
    static const uint16_t patterns[] = {0x8000, 0x0000, 0x7FC1, 0xFFC0, 0x7F81, 0xFFFF, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7F7F, 0x0080};
    kvc_array *a = kvc_case_get(g->c, name);
    if (!a || a->dtype != KVC_DT_U2) return;
    for (int64_t i = 0; i < a->count; i++)
        if (kvc_rng_chance(g->r, 1, one_in)) ((uint16_t *)a->data)[i] = patterns[kvc_rng_below(g->r, 12)];
    g->dimensions |= KVC_DIM_RAW_BF16;
}

void apply_bit_patterns(gen *g) {
    if (kvc_rng_chance(g->r, 1, 3)) negative_zero_kv(g);
    if (g->stage == KVC_STAGE_V41_ROPE_QUANT_INSERT || g->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT) raw_bf16(g, "latent", 8);
    if (kvc_rng_chance(g->r, 1, 4)) raw_bf16(g, "norm_weight", 64);
}

/* ---- edges placed row by row ----------------------------------------- */

/* Whether a row of kv/score holds an even position: a closing position is
 * odd for every even R, so even rows never hold the window's last entry
 * and a window always keeps a finite score there.  V4 state rows sit at
 * slot = page * BS + q mod BS, whose parity is q's only for even BS
 * (odd BS: every row counts as odd). */
static int even_state_row(int64_t row, int64_t page_rows) { return page_rows % 2 == 0 && row % 2 == 0; }

/* One row's kv and score halves (score NULL: a kv-only row).
 * isolated_edges: every kv of channel zero_phase mod 8 is -0 (a pooled
 *   window of -0), and even rows' scores are -inf or underflow exp.
 * cross_magnitude: even rows pair a score whose exp underflows (e as small
 *   as 2^-150) with a kv about 1/e, so e * kv is as large as the odd rows'
 *   terms; odd rows take an exp boundary score (or 0) with a kv near +-1
 *   that cancels against the others. */
static int64_t shape_row(gen *g, float *kv, float *score, int64_t width, int even, int zero_phase) {
    int64_t paired = 0;
    for (int64_t i = 0; i < width; i++) {
        if (g->family == KVC_FAM_ISOLATED_EDGES) {
            if ((i % g->head_dim) % 8 == zero_phase) kv[i] = kvc_f32_from_bits(0x80000000u);
            if (score && even && kvc_rng_chance(g->r, 1, 4))
                score[i] = kvc_rng_chance(g->r, 1, 2) ? kvc_f32_from_bits(0xFF800000u) : -(88.0f + kvc_rng_unit(g->r) * 16.0f);
        } else if (even && kvc_rng_chance(g->r, 1, 2)) {
            float s = -(80.0f + kvc_rng_unit(g->r) * 24.0f);
            int k = (int)(-s * 1.44269504f) - (int)kvc_rng_range(g->r, 0, 6);
            score[i] = s;
            kv[i] = random_sign(g->r, ldexpf_exact(0.5f + 0.5f * kvc_rng_unit(g->r), k > 127 ? 127 : k));
            paired++;
        } else if (!even && kvc_rng_chance(g->r, 1, 2)) {
            score[i] = kvc_rng_chance(g->r, 1, 2) ? 0.0f : exp_boundary(g->r);
            kv[i] = random_sign(g->r, scaled(g->r, 1.0f + scaled(g->r, normal(g->r), -20, -8), -4, 4));
        }
    }
    return paired;
}

/* The isolated_edges and cross_magnitude families' rows: V4 kv/score
 * and state rows, V4.1 kv_score and ring rows. */
void shape_edge_rows(gen *g) {
    kvc_case *c = g->c;
    int zero_phase = (int)kvc_rng_below(g->r, 8);
    int64_t paired = 0;   /* cross_magnitude's underflow and huge-kv pairs */
    kvc_array *positions = kvc_case_get(c, "positions"), *kv = kvc_case_get(c, "kv"), *score = kvc_case_get(c, "score");
    kvc_array *rows = kvc_case_get(c, "kv_score"), *state = kvc_case_get(c, "state_cache");
    const int64_t *p = positions->data;
    if (g->family == KVC_FAM_CROSS_MAGNITUDE && !state && (!rows || rows->shape[1] == 512)) return;   /* nothing pooled */
    for (int64_t t = 0; kv && score && t < kv->shape[0]; t++)
        paired += shape_row(g, (float *)kv->data + t * kv->shape[1], (float *)score->data + t * kv->shape[1], kv->shape[1], p[t] % 2 == 0,
                  zero_phase);
    for (int64_t t = 0; rows && t < rows->shape[0]; t++) {
        float *row = (float *)rows->data + t * rows->shape[1];
        paired += shape_row(g, row, rows->shape[1] == 1024 ? row + 512 : NULL, 512, p[t] % 2 == 0, zero_phase);
    }
    if (c->stage == KVC_STAGE_V4_SAVE_PARTIAL_STATES) state = NULL;   /* never read (gen_v4) */
    int64_t half = state ? state->shape[2] / 2 : 0;
    for (int64_t r = 0; state && r < state->shape[0] * state->shape[1]; r++)
        paired += shape_row(g, (float *)state->data + r * 2 * half, (float *)state->data + r * 2 * half + half, half,
                  even_state_row(r, state->shape[1]), zero_phase);
    g->dimensions |= g->family == KVC_FAM_ISOLATED_EDGES ? KVC_DIM_ISOLATED_EDGES : paired ? KVC_DIM_CROSS_MAGNITUDE : 0;
}

/* ---- padding slots ---------------------------------------------------- */

/* SPEC.md 4.1 and 5.1: any negative slot is padding, not only -1. */
void other_padding_slots(gen *g) {
    static const int64_t negatives[] = {-2, INT64_MIN, INT64_MIN + 1, INT32_MIN, -((int64_t)1 << 40) - 1};
    static const char *const names[] = {"slot_mapping", "kv_slot_mapping"};
    for (int n = 0; n < 2; n++) {
        kvc_array *a = kvc_case_get(g->c, names[n]);
        for (int64_t t = 0; a && t < a->count; t++)
            if (((int64_t *)a->data)[t] == -1 && kvc_rng_chance(g->r, 1, 2)) {
                ((int64_t *)a->data)[t] = negatives[kvc_rng_below(g->r, (int64_t)(sizeof negatives / sizeof *negatives))];
                g->dimensions |= KVC_DIM_PADDING_SLOTS;
            }
    }
}

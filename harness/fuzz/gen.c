/* The scenario generator's tables (variants, families) and entry points (kvcmp/generate.h). */
/* The layers below it, from the ground up: gen_values.c (values from a
 * stream alone), gen_assembly.c (the case under assembly: its batch,
 * sizes and common tensors), gen_passes.c (case-wide passes),
 * gen_variants.c and gen_invalid.c (the stages' cases, corruptions).
 * Only integer draws and exact float operations (ldexpf, scaling by
 * powers of two, fp32 adds of 24-bit fractions) make values, so a seed
 * means the same bytes on every machine.  Sizes are kept small on average
 * (a few tokens per case): the reference's correctly rounded exp makes
 * big windows expensive. */
#include "kvcmp/generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/edges.h"
#include "harness/fuzz/gen_assembly.h"
#include "harness/fuzz/gen_invalid.h"
#include "harness/fuzz/gen_passes.h"
#include "harness/fuzz/gen_variants.h"

static const char *const family_names[KVC_FAM_COUNT] = {
    "normal", "heavy_tail", "tiny", "pow2_edge", "fp8_ties", "exp_underflow",
    "huge_scores", "nonfinite", "small_weight", "cancellation", "rounding_probe",
    "bit_patterns", "mixed", "exp_boundary", "isolated_edges", "cross_magnitude",
};
static const char *const dimension_names[KVC_DIM_COUNT] = {
    "wide_batch", "high_positions", "negative_zero_kv", "raw_bf16", "adversarial_fp8_scale",
    "isolated_edges", "cross_magnitude", "padding_slots", "large_ring", "large_batch",
};
const char *kvc_dimension_name(int bit_index) { return bit_index >= 0 && bit_index < KVC_DIM_COUNT ? dimension_names[bit_index] : "?"; }

const char *kvc_family_name(int family) { return family >= 0 && family < KVC_FAM_COUNT ? family_names[family] : "?"; }

uint32_t kvc_family_mask(const char *list, char *bad, size_t bad_size) {
    uint32_t mask = 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        uint32_t matched = 0;
        for (int f = 0; f < KVC_FAM_COUNT; f++)
            if (strncmp(family_names[f], item, strlen(item)) == 0) matched |= 1u << f;
        if (!matched) { snprintf(bad, bad_size, "%s", item); return 0; }
        mask |= matched;
    }
    return mask;
}

/* Weights favour the cheap variants; D=512 R=128 windows cost 65536
 * correctly rounded exps per closing token. */
static const kvc_variant_info variants[] = {
    {"v4.save_partial_states/d512/r4", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 4, 512, -1, 4},
    {"v4.save_partial_states/d512/r128", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 128, 512, -1, 3},
    {"v4.save_partial_states/d128/r4", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 4, 128, -1, 3},
    {"v4.save_partial_states/d128/r128", KVC_STAGE_V4_SAVE_PARTIAL_STATES, 128, 128, -1, 3},
    {"v4.compress/d512/r4", KVC_STAGE_V4_COMPRESS, 4, 512, -1, 10},
    {"v4.compress/d512/r128", KVC_STAGE_V4_COMPRESS, 128, 512, -1, 2},
    {"v4.compress/d128/r4", KVC_STAGE_V4_COMPRESS, 4, 128, -1, 8},
    {"v4.compress/d128/r128", KVC_STAGE_V4_COMPRESS, 128, 128, -1, 3},
    {"v4.forward/d512/r4", KVC_STAGE_V4_FORWARD, 4, 512, -1, 8},
    {"v4.forward/d512/r128", KVC_STAGE_V4_FORWARD, 128, 512, -1, 2},
    {"v4.forward/d128/r4", KVC_STAGE_V4_FORWARD, 4, 128, -1, 6},
    {"v4.forward/d128/r128", KVC_STAGE_V4_FORWARD, 128, 128, -1, 2},
    {"v41.save_compress_norm/r1", KVC_STAGE_V41_SAVE_COMPRESS_NORM, 1, 512, -1, 6},
    {"v41.save_compress_norm/r2", KVC_STAGE_V41_SAVE_COMPRESS_NORM, 2, 512, -1, 10},
    {"v41.rope_quant_insert", KVC_STAGE_V41_ROPE_QUANT_INSERT, 0, 512, KVC_CACHE_FP8_DS_MLA, 8},
    {"v41.rope_plain_insert/bf16", KVC_STAGE_V41_ROPE_PLAIN_INSERT, 0, 512, KVC_CACHE_BF16, 5},
    {"v41.rope_plain_insert/fp8", KVC_STAGE_V41_ROPE_PLAIN_INSERT, 0, 512, KVC_CACHE_FP8_E4M3, 5},
    {"v41.forward/r1", KVC_STAGE_V41_FORWARD, 1, 512, KVC_CACHE_FP8_DS_MLA, 4},
    {"v41.forward/r2", KVC_STAGE_V41_FORWARD, 2, 512, KVC_CACHE_FP8_DS_MLA, 8},
    {"history.v4", -1, 0, 0, -1, 2},
    {"history.v41", -1, 0, 512, -1, 3},
};
#define NUM_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

int kvc_variant_count(void) { return NUM_VARIANTS; }
const kvc_variant_info *kvc_variant(int index) { return &variants[index]; }

uint64_t kvc_variant_mask(const char *list, char *bad, size_t bad_size) {
    uint64_t mask = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        uint64_t matched = 0;
        for (int v = 0; v < NUM_VARIANTS; v++)
            if (strncmp(variants[v].name, item, strlen(item)) == 0) matched |= 1ull << v;
        if (!matched) { snprintf(bad, bad_size, "%s", item); return 0; }
        mask |= matched;
    }
    return mask;
}


static float pick_eps(gen *g) {
    static const float choices[] = {1e-6f, 1e-5f, 0.0f, 1e-3f, 1e-20f};
    return choices[kvc_rng_below(g->r, 5)];
}

/* ---- entry points ---------------------------------------------------- */

static int pick_variant(kvc_rng *r, uint64_t mask) {
    int total = 0;
    for (int v = 0; v < NUM_VARIANTS; v++)
        if (!mask || (mask >> v & 1)) total += variants[v].weight;
    int64_t x = kvc_rng_below(r, total);
    for (int v = 0; v < NUM_VARIANTS; v++) {
        if (mask && !(mask >> v & 1)) continue;
        if (x < variants[v].weight) return v;
        x -= variants[v].weight;
    }
    return 0;
}

int kvc_gen_make_from(const kvc_gen_config *config, kvc_rng *r, kvc_gen_case *out) {
    memset(out, 0, sizeof *out);
    out->variant = pick_variant(r, config->variant_mask);
    out->family = (int)kvc_rng_below(r, KVC_FAM_COUNT);
    while (config->family_mask && !(config->family_mask >> out->family & 1)) out->family = (out->family + 1) % KVC_FAM_COUNT;
    const kvc_variant_info *v = &variants[out->variant];
    if (v->stage < 0) { out->history = 1; return 0; }
    gen g = {.r = r, .c = &out->c, .family = out->family, .stage = v->stage, .ratio = v->compress_ratio, .head_dim = v->head_dim,
             .geometry_pool = config->geometry_pool, .seed = config->seed};
    if (config->geometry_pool > 0) {
        /* The case's geometry slot, from a stream of its own seeded from
         * the case's without advancing it. */
        kvc_rng own;
        kvc_rng_seed(&own, r->s[1] ^ kvc_rotl64(r->s[3], 11), 0x5107);
        g.geometry_slot = (int)kvc_rng_below(&own, config->geometry_pool);
        out->geometry_slot = g.geometry_slot + 1;
    }
    out->c.stage = (kvc_stage)v->stage;
    out->c.compress_ratio = v->compress_ratio;
    out->c.head_dim = v->head_dim;
    switch (v->stage) {
    case KVC_STAGE_V4_SAVE_PARTIAL_STATES:
    case KVC_STAGE_V4_COMPRESS:
    case KVC_STAGE_V4_FORWARD: gen_v4(&g); break;
    case KVC_STAGE_V41_SAVE_COMPRESS_NORM: gen_v41_norm(&g, 0); break;
    case KVC_STAGE_V41_FORWARD: gen_v41_norm(&g, 1); break;
    default: gen_v41_insert(&g, (kvc_cache_dtype)v->cache_dtype); break;
    }
    out->c.eps = pick_eps(&g);
    /* The bounds draw from a stream of their own, seeded from the case's
     * without advancing it: every other draw of the case is unchanged. */
    kvc_rng edge_rng;
    kvc_rng_seed(&edge_rng, r->s[0] ^ kvc_rotl64(r->s[3], 17), 0xED6E5);
    g.edge_rng = &edge_rng;
    kvc_edges_draw(&edge_rng, &out->c);
    if (out->family == KVC_FAM_ISOLATED_EDGES || out->family == KVC_FAM_CROSS_MAGNITUDE) shape_edge_rows(&g);
    if (kvc_rng_chance(r, 1, 8)) other_padding_slots(&g);
    if (out->family == KVC_FAM_BIT_PATTERNS) apply_bit_patterns(&g);
    if (out->family == KVC_FAM_ROUNDING_PROBE) kvc_probe_apply(r, &out->c);
    if (config->invalid_per_mille && kvc_rng_below(r, 1000) < config->invalid_per_mille)
        corrupt(&g, out->invalid, sizeof out->invalid);
    out->dimensions = g.dimensions;
    out->rule = g.rule;
    out->edges = kvc_edges_measure(&out->c) | g.edges;
    snprintf(out->c.source, sizeof out->c.source, "kvcmp-fuzz seed %llu variant %s family %s%s%s",
             (unsigned long long)config->seed, v->name, family_names[out->family], out->invalid[0] ? " invalid: " : "",
             out->invalid);
    return 0;
}

int kvc_gen_make(const kvc_gen_config *config, int64_t index, kvc_gen_case *out) {
    kvc_rng r;
    kvc_rng_seed(&r, config->seed, (uint64_t)index);
    return kvc_gen_make_from(config, &r, out);
}

void kvc_gen_free(kvc_gen_case *g) { kvc_case_free(&g->c); }

void kvc_gen_case_name(uint64_t seed, int64_t index, int variant, char *out, size_t size) {
    snprintf(out, size, "fuzz-s%llu-c%lld-%s", (unsigned long long)seed, (long long)index, variants[variant].name);
    for (char *p = out; *p; p++)
        if (*p == '/') *p = '_';
}

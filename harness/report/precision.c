/* kvcmp report precision: run the reference on the seeded corpus and
 * measure every intermediate and every stored value against the MPFR
 * oracle (report_oracle.c).  Intermediates come from the reference's own
 * step functions (include/kvcmp/reference_steps.h, the code its stages call); stored
 * values come from running the whole stage on the case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvcmp/formats.h"
#include "kvcmp/reference_steps.h"
#include "harness/report/report.h"
#include "harness/report/corpus.h"
#include "harness/report/oracle.h"
#include "kvcmp/run.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"

#define MAX_HEAD_DIM 512
#define MAX_WINDOW 256

static const struct {
    const char *name;
    kvc_error_unit unit;
} metric_info[KVC_METRIC_COUNT] = {
    {"pooled", KVC_UNIT_F32_ULPS},   {"pooled vs mean abs kv", KVC_UNIT_F32_ULPS}, {"normed", KVC_UNIT_F32_ULPS},    {"RoPE output", KVC_UNIT_F32_ULPS}, {"RoPE vs abs products", KVC_UNIT_F32_ULPS},
    {"state score+ape", KVC_UNIT_F32_ULPS}, {"scale", KVC_UNIT_SCALE_STEPS}, {"fp8 code", KVC_UNIT_FP8_STEPS},
    {"bf16 value", KVC_UNIT_BF16_ULPS}, {"latent", KVC_UNIT_BF16_ULPS},
};

/* One case under analysis. */
typedef struct {
    kvc_precision_variant *variant;
    const kvc_case *c;
    const kvc_run_result *result;
    const char *label;              /* "family normal seed 7" */
    double worst_output, worst_ulps; /* finite errors of this case, for ranking */
    int stored_only;                /* a candidate's run: its intermediates are the reference's, not measured */
    /* The stored values' bits in the order they are measured: collected
     * from the reference's run (trace), then compared with the
     * candidate's at the same place (contract, next). */
    uint32_t *trace;
    int64_t traced, trace_capacity;
    const uint32_t *contract;
    int64_t contract_count, next;
} analysis;

/* ---- small helpers ------------------------------------------------- */

static mpfr_t *vector_new(int n) {
    mpfr_t *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; v && i < n; i++) mpfr_init2(v[i], KVC_ORACLE_BITS);
    return v;
}

static void vector_free(mpfr_t *v, int n) {
    for (int i = 0; v && i < n; i++) mpfr_clear(v[i]);
    free(v);
}

static const kvc_array *output_of(const kvc_run_result *r, const char *name) {
    for (int i = 0; i < r->num_outputs; i++)
        if (strcmp(r->outputs[i].name, name) == 0) return &r->outputs[i].array;
    return NULL;
}

static void *input_of(const kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    return a ? a->data : NULL;
}

/* Values a stage stores, which a candidate's outputs show: the save's
 * score + ape is written to the state row, so it counts as one. */
static int is_output_metric(kvc_precision_metric m) { return m >= KVC_METRIC_SCALE || m == KVC_METRIC_STATE; }

static void record(analysis *a, kvc_precision_metric m, double error, int equal, double magnitude, int64_t token, int dim, uint32_t bits) {
    if (a->stored_only && !is_output_metric(m)) return;
    if (a->trace) {
        /* The reference's pass: its bits only. */
        if (a->traced == a->trace_capacity) {
            int64_t capacity = a->trace_capacity ? 2 * a->trace_capacity : 4096;
            uint32_t *grown = realloc(a->trace, (size_t)capacity * sizeof *grown);
            if (!grown) return;
            a->trace = grown;
            a->trace_capacity = capacity;
        }
        a->trace[a->traced++] = bits;
        return;
    }
    if (a->contract && is_output_metric(m)) {
        int64_t k = a->next++;
        if (k >= a->contract_count || a->contract[k] != bits) {
            a->variant->departures[m]++;
            a->variant->departures_at_ideal[m] += equal != 0;
            if (error >= 0 && isfinite(error)) a->variant->departure_hist[m][kvc_hist_bin(error)]++;
        }
    }
    kvc_error_stats *s = &a->variant->metrics[m];
    char where[200] = "";
    int finite = error >= 0 && isfinite(error);
    if (finite && (error > s->max || s->worst_where[0] == 0))
        snprintf(where, sizeof where, "%s, token %lld, dim %d", a->label, (long long)token, dim);
    kvc_stats_add(s, error, equal, magnitude, where[0] ? where : NULL);
    if (!finite) return;
    if (is_output_metric(m)) { if (error > a->worst_output) a->worst_output = error; }
    else if (error > a->worst_ulps) a->worst_ulps = error;
}

/* An fp32 intermediate: error in ulps; equal when it is the exactly rounded value. */
static void record_ulps(analysis *a, kvc_precision_metric m, float got, mpfr_t exact, int64_t token, int dim) {
    float rounded = kvc_oracle_to_f32(exact);
    int equal = (isnan(got) && isnan(rounded)) || kvc_f32_bits(got) == kvc_f32_bits(rounded);
    record(a, m, kvc_oracle_ulps(got, exact), equal, fabs(mpfr_get_d(exact, MPFR_RNDN)), token, dim, kvc_f32_bits(got));
}

/* A stored value: distance in steps of its format from the ideal encoding. */
static void record_steps(analysis *a, kvc_precision_metric m, int64_t distance, double magnitude, int64_t token, int dim, uint32_t stored) {
    record(a, m, distance < 0 ? -1.0 : (double)distance, distance == 0, magnitude, token, dim, stored);
}

/* The exponent of a stored indexer scale 2^e (fp32), as a block scale. */
static kvc_block_scale scale_of_stored_f32(float stored) {
    kvc_block_scale s = {KVC_SCALE_FINITE, 0};
    if (isnan(stored)) s.kind = KVC_SCALE_NAN;
    else if (isinf(stored)) s.kind = KVC_SCALE_INF;
    else { int e; frexp(stored, &e); s.scale_exp = e - 1; }
    return s;
}

/* A stored block scale: the UE8M0 byte (D = 512), or the fp32 2^e (D = 128). */
typedef struct {
    int is_ue8m0;
    uint8_t byte;
    float value;
} stored_scale;

/* UE8M0 (SPEC.md step 9): e + 127 clamped to [0, 255]; 255 for inf and NaN alike. */
static uint8_t ideal_ue8m0(kvc_block_scale s) {
    if (s.kind != KVC_SCALE_FINITE) return KVC_UE8M0_NAN;
    return (uint8_t)(s.scale_exp + 127 < 0 ? 0 : s.scale_exp + 127 > 255 ? 255 : s.scale_exp + 127);
}

static int64_t scale_distance(stored_scale stored, kvc_block_scale ideal) {
    if (stored.is_ue8m0) return kvc_ue8m0_distance(stored.byte, ideal_ue8m0(ideal));
    kvc_block_scale got = scale_of_stored_f32(stored.value);
    if (got.kind != KVC_SCALE_FINITE || ideal.kind != KVC_SCALE_FINITE) return got.kind == ideal.kind ? 0 : -1;
    return llabs((int64_t)got.scale_exp - ideal.scale_exp);
}

/* NaN-propagating maximum of |y_j| over a block of exact values. */
static void block_magnitude(mpfr_t a, mpfr_t *y, int n) {
    mpfr_set_zero(a, 1);
    for (int j = 0; j < n; j++) {
        if (mpfr_nan_p(y[j])) { mpfr_set_nan(a); return; }
        if (mpfr_cmpabs(y[j], a) > 0) mpfr_abs(a, y[j], MPFR_RNDN);
    }
}

/* One quantisation block: ideal scale and codes from the exact bf16 values
 * y, compared with the stored scale (already decoded) and codes. */
static void check_block(analysis *a, mpfr_t *y, int n, stored_scale stored, const uint8_t *stored_codes, int64_t token,
                        int first_dim) {
    mpfr_t magnitude;
    mpfr_init2(magnitude, KVC_ORACLE_BITS);
    block_magnitude(magnitude, y, n);
    kvc_block_scale ideal = kvc_oracle_block_scale(magnitude);
    record_steps(a, KVC_METRIC_SCALE, scale_distance(stored, ideal), mpfr_get_d(magnitude, MPFR_RNDN), token, first_dim,
                 stored.is_ue8m0 ? stored.byte : kvc_f32_bits(stored.value));
    for (int j = 0; j < n; j++)
        record_steps(a, KVC_METRIC_CODE, kvc_fp8_distance(stored_codes[j], kvc_oracle_block_code(y[j], ideal)),
                     fabs(mpfr_get_d(y[j], MPFR_RNDN)), token, first_dim + j, stored_codes[j]);
    mpfr_clear(magnitude);
}

static stored_scale scale_of_byte(uint8_t byte) { return (stored_scale){.is_ue8m0 = 1, .byte = byte}; }

/* Replace each exact value by its exactly rounded bf16 value. */
static void round_vector_to_bf16(mpfr_t *dst, mpfr_t *src, int n) {
    for (int i = 0; i < n; i++) mpfr_set_flt(dst[i], kvc_f32_from_bf16(kvc_oracle_to_bf16(src[i])), MPFR_RNDN);
}

/* RoPE: reference (fp32, in place on ref) against exact (in place on exact). */
static void check_rope(analysis *a, mpfr_t *exact, float *ref, const float *cos_sin_row, int64_t token, int first_dim) {
    /* The products' magnitudes first, from the inputs of the rotation. */
    mpfr_t magnitude[KVC_ROPE_DIMS];
    for (int i = 0; i < KVC_ROPE_DIMS; i++) {
        mpfr_init2(magnitude[i], KVC_ORACLE_BITS);
        kvc_oracle_rope_magnitude(magnitude[i], exact, cos_sin_row, i);
    }
    kvc_oracle_rope(exact, exact, cos_sin_row);
    ref_rope(ref, cos_sin_row);
    for (int i = 0; i < KVC_ROPE_DIMS; i++) {
        record_ulps(a, KVC_METRIC_ROPE, ref[i], exact[i], token, first_dim + i);
        float rounded = kvc_oracle_to_f32(exact[i]);
        int equal = (isnan(rounded) && isnan(ref[i])) || kvc_f32_bits(rounded) == kvc_f32_bits(ref[i]);
        record(a, KVC_METRIC_ROPE_SCALED, kvc_oracle_ulps_of(ref[i], exact[i], magnitude[i]), equal,
               fabs(mpfr_get_d(magnitude[i], MPFR_RNDN)), token, first_dim + i, kvc_f32_bits(ref[i]));
        mpfr_clear(magnitude[i]);
    }
}

/* Pooling and norm of one token: window entries -> pooled -> normed, both
 * in fp32 by the reference's steps and exactly; leaves both in the arrays. */
static void check_pool_and_norm(analysis *a, const float *const *entry_kv, const float *const *entry_score, int entries, int head_dim,
                                const float *weight, int64_t token, mpfr_t *pooled_x, float *normed_ref, mpfr_t *normed_x) {
    float pooled_ref[MAX_HEAD_DIM] = {0}, window_kv[MAX_WINDOW], window_score[MAX_WINDOW];
    for (int d = 0; d < head_dim && !entry_score; d++) {
        /* V4.1 R = 1: no pooling, the row itself (signed zeros and all). */
        pooled_ref[d] = entry_kv[0][d];
        mpfr_set_flt(pooled_x[d], pooled_ref[d], MPFR_RNDN);
    }
    mpfr_t magnitude;
    mpfr_init2(magnitude, KVC_ORACLE_BITS);
    for (int d = 0; d < head_dim && entry_score; d++) {
        for (int e = 0; e < entries; e++) { window_kv[e] = entry_kv[e][d]; window_score[e] = entry_score[e][d]; }
        pooled_ref[d] = ref_softmax_pool(window_kv, window_score, entries);
        kvc_oracle_pool(pooled_x[d], window_kv, window_score, entries);
        record_ulps(a, KVC_METRIC_POOLED, pooled_ref[d], pooled_x[d], token, d);
        /* Cancellation makes the ulps of the result meaningless as a
         * measure of the arithmetic; the ulps of the entries' weighted
         * magnitude are what the rounding errors scale with. */
        kvc_oracle_pool_magnitude(magnitude, window_kv, window_score, entries);
        float rounded = kvc_oracle_to_f32(pooled_x[d]);
        int equal = (isnan(rounded) && isnan(pooled_ref[d])) || kvc_f32_bits(rounded) == kvc_f32_bits(pooled_ref[d]);
        record(a, KVC_METRIC_POOLED_SCALED, kvc_oracle_ulps_of(pooled_ref[d], pooled_x[d], magnitude), equal,
               fabs(mpfr_get_d(magnitude, MPFR_RNDN)), token, d, kvc_f32_bits(pooled_ref[d]));
    }
    mpfr_clear(magnitude);
    ref_rms_norm(pooled_ref, weight, head_dim, a->c->eps, normed_ref);
    kvc_oracle_rms_norm(normed_x, pooled_x, weight, head_dim, a->c->eps);
    for (int d = 0; d < head_dim; d++) record_ulps(a, KVC_METRIC_NORMED, normed_ref[d], normed_x[d], token, d);
}

/* ---- per stage ----------------------------------------------------- */

static void analyse_save(analysis *a) {
    const kvc_case *c = a->c;
    int64_t width = (int64_t)kvc_v4_coff(c->compress_ratio) * c->head_dim;
    const kvc_array *state = output_of(a->result, "state_cache");
    const float *score = input_of(c, "score"), *ape = input_of(c, "ape"), *out = state->data;
    const int64_t *positions = input_of(c, "positions"), *slots = input_of(c, "slot_mapping");
    int64_t tokens = kvc_case_get(c, "positions")->count;
    mpfr_t sum;
    mpfr_init2(sum, 300);   /* two fp32 values add exactly in 277 bits */
    for (int64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0) continue;
        a->variant->rows++;
        const float *ape_row = ape + (positions[t] % c->compress_ratio) * width;
        for (int64_t i = 0; i < width; i++) {
            mpfr_set_flt(sum, score[t * width + i], MPFR_RNDN);
            mpfr_add_d(sum, sum, (double)ape_row[i], MPFR_RNDN);
            record_ulps(a, KVC_METRIC_STATE, out[slots[t] * 2 * width + width + i], sum, t, (int)i);
        }
    }
    mpfr_clear(sum);
}

/* Window entries of closing token t, as the contract walks them. */
static int gather_v4_window(const kvc_case *c, int64_t p, const float **entry_kv, const float **entry_score) {
    int32_t ratio = c->compress_ratio;
    int64_t width = (int64_t)kvc_v4_coff(ratio) * c->head_dim, window = kvc_v4_coff(ratio) * ratio;
    const kvc_array *state = kvc_case_get(c, "state_cache"), *table = kvc_case_get(c, "block_table");
    int64_t bs = state->shape[1];
    const int32_t *blocks = table->data;   /* request 0: the corpus has one */
    int entries = 0;
    for (int64_t w = 0; w < window; w++) {
        int64_t q = p - window + 1 + w;
        if (q < 0) continue;
        const float *row = (const float *)state->data + (blocks[q / bs] * bs + q % bs) * 2 * width;
        int64_t half = (ratio == 4 && w >= ratio) ? c->head_dim : 0;
        entry_kv[entries] = row + half;
        entry_score[entries] = row + width + half;
        entries++;
    }
    return entries;
}

static void check_main_store(analysis *a, mpfr_t *normed_x, float *normed_ref, const float *cos_sin_row, const uint8_t *token_bytes,
                             const uint8_t *scales, int64_t t) {
    mpfr_t *y = vector_new(448);
    round_vector_to_bf16(y, normed_x, 448);
    for (int block = 0; block < 7; block++)
        check_block(a, y + 64 * block, 64, scale_of_byte(scales[block]), token_bytes + 64 * block, t, 64 * block);
    check_rope(a, normed_x + 448, normed_ref + 448, cos_sin_row, t, 448);
    for (int i = 0; i < 64; i++)
        record_steps(a, KVC_METRIC_BF16, kvc_bf16_distance(kvc_load_u16(token_bytes + 448 + 2 * i), kvc_oracle_to_bf16(normed_x[448 + i])),
                     fabs(mpfr_get_d(normed_x[448 + i], MPFR_RNDN)), t, 448 + i, kvc_load_u16(token_bytes + 448 + 2 * i));
    vector_free(y, 448);
}

static void check_indexer_store(analysis *a, mpfr_t *normed_x, float *normed_ref, const float *cos_sin_row, const uint8_t *codes,
                                const uint8_t *scale_bytes, int64_t t) {
    check_rope(a, normed_x + 64, normed_ref + 64, cos_sin_row, t, 64);
    mpfr_t *z = vector_new(128);
    round_vector_to_bf16(z, normed_x, 128);
    float stored;
    memcpy(&stored, scale_bytes, 4);
    check_block(a, z, 128, (stored_scale){.value = stored}, codes, t, 0);
    vector_free(z, 128);
}

static void analyse_compress(analysis *a) {
    const kvc_case *c = a->c;
    int D = c->head_dim;
    const kvc_array *cache = output_of(a->result, "kv_cache");
    const int64_t *positions = input_of(c, "positions"), *slots = input_of(c, "slot_mapping"), *kv_slots = input_of(c, "kv_slot_mapping");
    const float *weight = input_of(c, "norm_weight"), *cos_sin = input_of(c, "cos_sin");
    int64_t tokens = kvc_case_get(c, "positions")->count, page_rows = cache->shape[1], page_bytes = page_rows * cache->shape[2];
    const float *entry_kv[MAX_WINDOW], *entry_score[MAX_WINDOW];
    float normed_ref[MAX_HEAD_DIM];
    mpfr_t *pooled_x = vector_new(D), *normed_x = vector_new(D);
    for (int64_t t = 0; t < tokens; t++) {
        int64_t p = positions[t];
        if (slots[t] < 0 || kv_slots[t] < 0 || (p + 1) % c->compress_ratio) continue;
        a->variant->rows++;
        int entries = gather_v4_window(c, p, entry_kv, entry_score);
        check_pool_and_norm(a, entry_kv, entry_score, entries, D, weight, t, pooled_x, normed_ref, normed_x);
        const float *row = cos_sin + (p / c->compress_ratio) * c->compress_ratio * 64;
        const uint8_t *page = (const uint8_t *)cache->data + kv_slots[t] / page_rows * page_bytes;
        int64_t r = kv_slots[t] % page_rows;
        if (D == 512) check_main_store(a, normed_x, normed_ref, row, page + r * 576, page + page_rows * 576 + r * 8, t);
        else check_indexer_store(a, normed_x, normed_ref, row, page + r * 128, page + page_rows * 128 + r * 4, t);
    }
    vector_free(pooled_x, D);
    vector_free(normed_x, D);
}

static void analyse_norm(analysis *a) {
    const kvc_case *c = a->c;
    int32_t ratio = c->compress_ratio;
    int64_t width = 512 * ratio;
    const uint16_t *latent = output_of(a->result, "latent")->data, *weight_bits = input_of(c, "norm_weight");
    const float *kv_score = input_of(c, "kv_score");
    const int64_t *positions = input_of(c, "positions"), *slots = input_of(c, "slot_mapping");
    int64_t tokens = kvc_case_get(c, "positions")->count;
    float weight[512], normed_ref[512];
    for (int d = 0; d < 512; d++) weight[d] = kvc_f32_from_bf16(weight_bits[d]);
    mpfr_t *pooled_x = vector_new(512), *normed_x = vector_new(512);
    for (int64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0 || (positions[t] + 1) % ratio) continue;
        a->variant->rows++;
        const float *rows[2], *entry_kv[2], *entry_score[2];
        int entries = 1;
        rows[0] = kv_score + t * width;
        if (ratio == 2) {
            /* The corpus has one request starting at batch row 0: its first
             * token pools with ring row (p-1) % CAP of the ring block. */
            const kvc_array *ring = kvc_case_get(c, "state_cache");
            int64_t cap = ring->shape[1], ring_row = slots[t] / cap * cap + (positions[t] - 1) % cap;
            rows[1] = rows[0];
            rows[0] = t > 0 ? kv_score + (t - 1) * width : (const float *)ring->data + ring_row * 1024;
            entries = 2;
        }
        for (int e = 0; e < entries; e++) { entry_kv[e] = rows[e]; entry_score[e] = rows[e] + 512; }
        check_pool_and_norm(a, entry_kv, ratio == 2 ? entry_score : NULL, entries, 512, weight, t, pooled_x, normed_ref, normed_x);
        for (int d = 0; d < 512; d++)
            record_steps(a, KVC_METRIC_LATENT, kvc_bf16_distance(latent[t * 512 + d], kvc_oracle_to_bf16(normed_x[d])),
                         fabs(mpfr_get_d(normed_x[d], MPFR_RNDN)), t, d, latent[t * 512 + d]);
    }
    vector_free(pooled_x, 512);
    vector_free(normed_x, 512);
}

/* Plain rows: every dim as the ideal bf16 value, then (fp8) divided by
 * the scale exactly and rounded once. */
static void check_plain_row(analysis *a, mpfr_t *x, const uint8_t *row, int64_t t) {
    const kvc_case *c = a->c;
    if (c->cache_dtype == KVC_CACHE_BF16) {
        for (int d = 0; d < 512; d++)
            record_steps(a, KVC_METRIC_BF16, kvc_bf16_distance(kvc_load_u16(row + 2 * d), kvc_oracle_to_bf16(x[d])),
                         fabs(mpfr_get_d(x[d], MPFR_RNDN)), t, d, kvc_load_u16(row + 2 * d));
        return;
    }
    float scale = ((const float *)input_of(c, "fp8_scale"))[0];
    mpfr_t v;
    mpfr_init2(v, KVC_ORACLE_BITS);
    for (int d = 0; d < 512; d++) {
        mpfr_set_flt(v, kvc_f32_from_bf16(kvc_oracle_to_bf16(x[d])), MPFR_RNDN);
        mpfr_div_d(v, v, (double)scale, MPFR_RNDN);
        record_steps(a, KVC_METRIC_CODE, kvc_fp8_distance(row[d], kvc_oracle_to_fp8(v)), fabs(mpfr_get_d(v, MPFR_RNDN)), t, d, row[d]);
    }
    mpfr_clear(v);
}

static void analyse_insert(analysis *a) {
    const kvc_case *c = a->c;
    const kvc_array *cache = output_of(a->result, "kv_cache");
    const uint16_t *latent = input_of(c, "latent");
    const float *cos_sin = input_of(c, "cos_sin");
    const int64_t *positions = input_of(c, "positions"), *slots = input_of(c, "slot_mapping");
    int64_t tokens = kvc_case_get(c, "positions")->count, page_rows = cache->shape[1];
    int64_t page_bytes = page_rows * cache->shape[2] * kvc_dtype_size(cache->dtype);
    mpfr_t *x = vector_new(512);
    float rope_ref[64];
    for (int64_t t = 0; t < tokens; t++) {
        int64_t p = positions[t];
        if (slots[t] < 0 || (p + 1) % c->compress_ratio) continue;
        a->variant->rows++;
        for (int d = 0; d < 512; d++) mpfr_set_flt(x[d], kvc_f32_from_bf16(latent[t * 512 + d]), MPFR_RNDN);
        for (int i = 0; i < 64; i++) rope_ref[i] = kvc_f32_from_bf16(latent[t * 512 + 448 + i]);
        check_rope(a, x + 448, rope_ref, cos_sin + (p / c->compress_ratio) * c->compress_ratio * 64, t, 448);
        const uint8_t *page = (const uint8_t *)cache->data + slots[t] / page_rows * page_bytes;
        int64_t r = slots[t] % page_rows;
        if (c->cache_dtype != KVC_CACHE_FP8_DS_MLA) { check_plain_row(a, x, page + r * (page_bytes / page_rows), t); continue; }
        const uint8_t *token_bytes = page + r * 576, *scales = page + page_rows * 576 + r * 8;
        for (int block = 0; block < 7; block++)
            check_block(a, x + 64 * block, 64, scale_of_byte(scales[block]), token_bytes + 64 * block, t, 64 * block);
        for (int i = 0; i < 64; i++)
            record_steps(a, KVC_METRIC_BF16, kvc_bf16_distance(kvc_load_u16(token_bytes + 448 + 2 * i), kvc_oracle_to_bf16(x[448 + i])),
                         fabs(mpfr_get_d(x[448 + i], MPFR_RNDN)), t, 448 + i, kvc_load_u16(token_bytes + 448 + 2 * i));
    }
    vector_free(x, 512);
}

/* ---- the corpus loop ----------------------------------------------- */

/* Keeps the case if it ranks among the variant's worst; takes ownership. */
static void keep_if_worst(kvc_precision_variant *v, kvc_case *c, double score, const char *description) {
    int slot = v->num_worst < KVC_PRECISION_WORST ? v->num_worst++ : -1;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < KVC_PRECISION_WORST; i++)
            if (v->worst[i].score < v->worst[slot].score) slot = i;
        if (v->worst[slot].score >= score) { kvc_case_free(c); return; }
        kvc_case_free(&v->worst[slot].c);
    }
    v->worst[slot].c = *c;
    v->worst[slot].score = score;
    snprintf(v->worst[slot].description, sizeof v->worst[slot].description, "%s", description);
    memset(c, 0, sizeof *c);
}

/* The reference's outputs become the case's expected tensors, so a saved
 * case replays as a pass and reproduces exactly what was measured. */
static void attach_outputs(kvc_case *c, kvc_run_result *result) {
    for (int i = 0; i < result->num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.out", result->outputs[i].name);
        if (kvc_case_put(c, name, &result->outputs[i].array) == 0) result->outputs[i].array.data = NULL;
    }
}

static void analyse(analysis *a, kvc_corpus_variant variant) {
    if (variant <= KVC_VARIANT_SAVE_D128_R128) analyse_save(a);
    else if (variant <= KVC_VARIANT_COMPRESS_D128_R128) analyse_compress(a);
    else if (variant <= KVC_VARIANT_NORM_R2) analyse_norm(a);
    else analyse_insert(a);
}

static int run_one(const kvc_backend *backend, kvc_precision_variant *v, kvc_corpus_variant variant, kvc_corpus_family family,
                   uint64_t seed) {
    kvc_case c;
    if (kvc_corpus_make_case(variant, family, seed, &c)) return -1;
    if (backend != &kvc_reference_backend && !kvc_backend_has_stage(backend, &c)) {
        v->skipped++;
        kvc_case_free(&c);
        return 0;
    }
    kvc_run_result result;
    if (kvc_run_case(backend, &c, NULL, &result)) {
        fprintf(stderr, "kvcmp report: %s rejected corpus case %s: %s\n", backend == &kvc_reference_backend ? "the reference" : "the candidate",
                c.source, result.error.message);
        kvc_run_result_free(&result);
        kvc_case_free(&c);
        return -1;
    }
    char label[128];
    snprintf(label, sizeof label, "family %s seed %llu", kvc_corpus_family_name(family), (unsigned long long)seed);
    analysis a = {.variant = v, .c = &c, .result = &result, .label = label, .stored_only = backend != &kvc_reference_backend};
    analysis contract = {0};
    if (a.stored_only) {
        /* The reference's stored bits on the same case: where the
         * candidate's equal them, its distance from the exact value is the
         * contract's own; elsewhere it departs from the reference. */
        kvc_run_result reference;
        kvc_precision_variant scratch = {0};
        if (kvc_run_case(&kvc_reference_backend, &c, NULL, &reference) == 0) {
            contract = (analysis){.variant = &scratch, .c = &c, .result = &reference, .label = label, .stored_only = 1,
                                  .trace = malloc(4096 * sizeof(uint32_t)), .trace_capacity = 4096};
            if (contract.trace) analyse(&contract, variant);
            a.contract = contract.trace;
            a.contract_count = contract.traced;
            v->compared_with_reference = a.contract != NULL;
        }
        kvc_run_result_free(&reference);
    }
    analyse(&a, variant);
    free(contract.trace);
    v->cases++;
    v->families_mask |= 1 << family;
    attach_outputs(&c, &result);
    kvc_run_result_free(&result);
    char description[320];
    snprintf(description, sizeof description, "%s: max output error %g steps, max intermediate error %.3g fp32 ulps", label,
             a.worst_output, a.worst_ulps);
    /* Rank by stored-value error first; intermediates (capped) break ties. */
    keep_if_worst(v, &c, a.worst_output * 1e6 + fmin(a.worst_ulps, 999999.0), description);
    return 0;
}

static void save_worst(kvc_precision_variant *v, const char *out_dir) {
    for (int i = 0; i < v->num_worst; i++) {
        kvc_worst_case *w = &v->worst[i];
        char error[512];
        snprintf(w->saved_dir, sizeof w->saved_dir, "%s/precision-cases/%s/worst-%d", out_dir, v->slug, i + 1);
        if (kvc_case_save(w->saved_dir, &w->c, error, sizeof error)) {
            fprintf(stderr, "kvcmp report: %s\n", error);
            w->saved_dir[0] = 0;
        }
    }
}

static int compare_worst(const void *x, const void *y) {
    double a = ((const kvc_worst_case *)x)->score, b = ((const kvc_worst_case *)y)->score;
    return (a < b) - (a > b);
}

int kvc_precision_run_variant(int variant, unsigned family_mask, uint64_t seed, int cases_per_family, kvc_precision_variant *v) {
    return kvc_precision_run_variant_on(&kvc_reference_backend, variant, family_mask, seed, cases_per_family, v);
}

int kvc_precision_run_variant_on(const kvc_backend *backend, int variant, unsigned family_mask, uint64_t seed, int cases_per_family,
                                 kvc_precision_variant *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", kvc_corpus_variant_name(variant));
    snprintf(v->slug, sizeof v->slug, "%s", kvc_corpus_variant_slug(variant));
    for (int m = 0; m < KVC_METRIC_COUNT; m++) kvc_stats_init(&v->metrics[m], metric_info[m].name, metric_info[m].unit);
    int failures = 0;
    for (int family = 0; family < KVC_FAMILY_COUNT; family++) {
        if (!(family_mask & (1u << family)) || !kvc_corpus_family_applies(variant, family)) continue;
        for (int k = 0; k < cases_per_family; k++) failures += run_one(backend, v, variant, family, seed + (uint64_t)k) != 0;
    }
    qsort(v->worst, (size_t)v->num_worst, sizeof v->worst[0], compare_worst);
    return failures ? -1 : 0;
}

void kvc_precision_empty_reason(const kvc_precision_report *r, const kvc_precision_variant *v, char *out, size_t size) {
    out[0] = 0;
    for (int m = 0; m < KVC_METRIC_COUNT; m++)
        if (v->metrics[m].count) return;
    const char *impl = r->impl_name ? r->impl_name : "ref";
    if (v->skipped && !v->cases)
        snprintf(out, size, "%s does not offer this stage (%d corpus cases skipped); give --impl a library that implements it", impl,
                 v->skipped);
    else
        snprintf(out, size, "none of the %d corpus cases wrote a row; run more cases with --cases", v->cases);
}

void kvc_precision_variant_free(kvc_precision_variant *v) {
    for (int m = 0; m < KVC_METRIC_COUNT; m++) kvc_stats_free(&v->metrics[m]);
    for (int w = 0; w < v->num_worst; w++) kvc_case_free(&v->worst[w].c);
    v->num_worst = 0;
}

int kvc_precision_run(uint64_t seed, int cases_per_family, const char *out_dir, kvc_precision_report *report) {
    return kvc_precision_run_impl(&kvc_reference_backend, "ref", seed, cases_per_family, out_dir, report);
}

int kvc_precision_run_impl(const kvc_backend *backend, const char *impl_name, uint64_t seed, int cases_per_family, const char *out_dir,
                           kvc_precision_report *report) {
    memset(report, 0, sizeof *report);
    report->seed = seed;
    report->cases_per_family = cases_per_family;
    report->impl_name = impl_name;
    report->stored_only = backend != &kvc_reference_backend;
    report->num_variants = KVC_VARIANT_COUNT;
    report->variants = calloc(KVC_VARIANT_COUNT, sizeof *report->variants);
    if (!report->variants) return -1;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int failures = 0;
    for (int variant = 0; variant < KVC_VARIANT_COUNT; variant++) {
        kvc_precision_variant *v = &report->variants[variant];
        failures += kvc_precision_run_variant_on(backend, variant, ~0u, seed, cases_per_family, v) != 0;
        if (out_dir) save_worst(v, out_dir);
        fprintf(stderr, "  precision: %-36s %3d cases, %4d rows\n", v->name, v->cases, v->rows);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    report->seconds = (double)(end.tv_sec - start.tv_sec) + 1e-9 * (double)(end.tv_nsec - start.tv_nsec);
    return failures ? -1 : 0;
}

void kvc_precision_free(kvc_precision_report *report) {
    for (int i = 0; i < report->num_variants; i++) kvc_precision_variant_free(&report->variants[i]);
    free(report->variants);
    memset(report, 0, sizeof *report);
}

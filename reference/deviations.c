/* The deviations' switches and their wrong arithmetic (reference/deviations.h),
 * the catalogue's public queries and one variant backend per deviation
 * (include/kvcmp/deviations.h). */
#include "reference/deviations.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/deviations.h"
#include "kvcmp/formats.h"
#include "kvcmp/reference.h"
#include "kvcmp/reference_steps.h"
#include "kvcmp/validate.h"

_Thread_local kvc_deviation_id ref_active_deviations[REF_DEVIATION_SLOTS];
_Static_assert(REF_DEVIATION_SLOTS == KVC_DIAGNOSIS_DEPTH, "an explanation's members are active at once");

/* ---- the wrong versions of the format steps ----------------------------- */

uint16_t ref_deviant_bf16(float x) {
    uint32_t u = kvc_f32_bits(x);
    uint16_t b = kvc_bf16_from_f32(x);
    if (kvc_f32_is_nan(x)) b = ref_deviates(KVC_DEV_BF16_NAN_PAYLOAD_KEPT) ? (uint16_t)((u >> 16) | 0x0040u)
                                : ref_deviates(KVC_DEV_NAN_ALL_ONES)       ? 0x7FFFu
                                                                           : b;
    else if (ref_deviates(KVC_DEV_BF16_SUBNORMALS_FLUSHED) && (u & 0x7F800000u) == 0) b = (uint16_t)((u >> 16) & 0x8000u);
    else if (ref_deviates(KVC_DEV_BF16_TRUNCATION)) b = (uint16_t)(u >> 16);
    else if (ref_deviates(KVC_DEV_BF16_HALF_AWAY)) b = (uint16_t)((u + 0x8000u) >> 16);
    if (ref_deviates(KVC_DEV_BF16_NEGATIVE_ZERO_FLUSHED) && b == 0x8000u) b = 0;
    return b;
}

/* fp8 e4m3fn by truncation towards zero; magnitudes of 480 and above
 * (and infinity) have no code: NaN. */
static uint8_t fp8_truncated(float x) {
    uint32_t u = kvc_f32_bits(x), abs_bits = u & 0x7FFFFFFFu;
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (abs_bits >= 0x7F800000u) return KVC_FP8_NAN;
    int e32 = (int)(abs_bits >> 23) - 127;
    if (e32 < -6) return (uint8_t)(sign | (uint8_t)truncf(ldexpf(kvc_f32_from_bits(abs_bits), 9)));
    uint32_t kept = ((abs_bits & 0x7FFFFFu) | 0x800000u) >> 20;
    int e8 = e32 + 7;
    if (e8 > 15 || (e8 == 15 && kept - 8 == 7)) return KVC_FP8_NAN;
    return (uint8_t)(sign | (uint8_t)(e8 << 3) | (uint8_t)(kept - 8));
}

/* |x| lies exactly halfway between two fp8 magnitudes (up to 464, the
 * tie between 448 and the missing 480) and rounding to even went
 * towards zero: the even one is the smaller. */
static int fp8_tie_rounded_down(float x) {
    float m = fabsf(x);
    if (!(m > 0.0f && m <= 464.0f)) return 0;
    /* m in steps of the fp8 spacing at its binade (2^-9 below 2^-6): exact. */
    float q = m < 0x1p-6f ? ldexpf(m, 9) : ldexpf(m, 3 - ilogbf(m)), whole = floorf(q);
    return q - whole == 0.5f && fmodf(whole, 2.0f) == 0.0f;
}

uint8_t ref_deviant_fp8_code(float x) {
    if (ref_deviates(KVC_DEV_CLAMP_NAN_TO_MINUS_448)) x = fminf(fmaxf(x, -KVC_FP8_MAX), KVC_FP8_MAX);
    else if (ref_deviates(KVC_DEV_CLAMP_NAN_TO_PLUS_448)) x = fmaxf(fminf(x, KVC_FP8_MAX), -KVC_FP8_MAX);
    else if (!ref_deviates(KVC_DEV_FP8_NO_SATURATION)) x = kvc_clamp_fp8_range(x);
    uint8_t code = ref_deviates(KVC_DEV_FP8_TRUNCATION) ? fp8_truncated(x) : kvc_fp8_from_f32(x);
    int away = ref_deviates(KVC_DEV_FP8_TIES_AWAY) || (ref_deviates(KVC_DEV_FP8_SUBNORMAL_TIES_AWAY) && fabsf(x) < 0x1p-6f);
    /* The next magnitude up: codes are ordered by magnitude (0x7E + 1 is NaN: 480 does not exist). */
    if (away && !ref_deviates(KVC_DEV_FP8_TRUNCATION) && fp8_tie_rounded_down(x)) code = (uint8_t)((code & 0x80u) | ((code & 0x7Fu) + 1u));
    if (ref_deviates(KVC_DEV_FP8_SUBNORMALS_FLUSHED) && fabsf(x) < 0x1p-6f) code &= 0x80u;
    if (ref_deviates(KVC_DEV_FP8_NEGATIVE_ZERO_FLUSHED) && code == 0x80u) code = 0;
    if (ref_deviates(KVC_DEV_FP8_NAN_SIGN_KEPT) && code == KVC_FP8_NAN && (kvc_f32_bits(x) >> 31)) code = 0xFFu;
    return code;
}

float ref_deviant_exp(float x) {
    /* log2(e) as fp32; the product is rounded before exp2 (GPU ex2 style). */
    if (ref_deviates(KVC_DEV_EXP_VIA_EXP2)) return exp2f(x * 1.44269504f);
    float nearest = kvc_expf_cr(x);
    if (!ref_deviates(KVC_DEV_EXP_OTHER_FAITHFUL) || isnan(x)) return nearest;
    /* Which side of e^x the nearest value lies on: binary64's exp is
     * far closer to e^x than half an fp32 step, and equal to the nearest
     * value only where e^x is one (x = 0, or an underflow to 0). */
    double exact = exp((double)x);
    if ((double)nearest == exact) return nearest;
    return nextafterf(nearest, (double)nearest < exact ? INFINITY : 0.0f);
}

/* ---- the wrong versions of the numbered steps --------------------------- */

/* max(a, b) as x86's maxps computes it: the second operand unless a > b. */
static float max_x86(float a, float b) { return a > b ? a : b; }

float ref_deviant_window_max(const float *window_score, int entries, float contract) {
    if (!ref_deviates(KVC_DEV_MAX_X86_ORDER)) return contract;
    float m = window_score[0];
    for (int w = 1; w < entries; w++) m = max_x86(m, window_score[w]);
    return m;
}

void ref_deviant_window(const float **window_kv, const float **window_score, int entries) {
    static _Thread_local float kv[256], score[256];
    for (int w = 0; w < entries; w++) {
        kv[w] = (*window_kv)[entries - 1 - w];
        score[w] = (*window_score)[entries - 1 - w];
    }
    *window_kv = kv;
    *window_score = score;
}

int64_t ref_deviant_window_position(const kvc_v4_compress_args *a, int64_t req, int64_t q, int64_t p) {
    if (ref_deviates(KVC_DEV_WINDOW_LATE)) return q + 1 > p ? -1 : q + 1;
    if (!ref_deviates(KVC_DEV_WINDOW_EARLY)) return q;
    /* The entry before position 0 does not exist: the shifted window has
     * one entry fewer there (it never reads position 0 twice). */
    if (q - 1 < 0) return -1;
    /* Position p - coff*R lies outside the validated window: read it only
     * when its block-table entry names a page of the state cache. */
    int64_t bs = a->state_cache.page_rows, column = (q - 1) / bs;
    if (column >= a->max_blocks) return -1;
    int32_t block = a->block_table[req * a->max_blocks + column];
    return block >= 0 && block < a->state_cache.num_pages ? q - 1 : -1;
}

float ref_deviant_sum_of_squares(const float *v, int n, float contract) {
    float s = 0.0f;
    if (ref_deviates(KVC_DEV_SUMSQ_SEQUENTIAL))
        for (int d = 0; d < n; d++) s = fmaf(v[d], v[d], s);
    else if (ref_deviates(KVC_DEV_SUMSQ_REVERSED))
        for (int d = n - 1; d >= 0; d--) s = fmaf(v[d], v[d], s);
    else if (ref_deviates(KVC_DEV_SUMSQ_PAIRWISE)) {
        float squares[512];
        for (int d = 0; d < n; d++) squares[d] = v[d] * v[d];
        for (int width = n / 2; width >= 1; width /= 2)
            for (int d = 0; d < width; d++) squares[d] = squares[d] + squares[d + width];
        s = squares[0];
    } else
        s = contract;
    return s;
}

float ref_deviant_inverse_rms(float sum_of_squares, int head_dim, float eps, float contract) {
    float mean = sum_of_squares / (float)head_dim;
    if (ref_deviates(KVC_DEV_EPS_AFTER_SQRT)) return 1.0f / (sqrtf(mean) + eps);
    if (ref_deviates(KVC_DEV_RSQRT_ROUNDED_ONCE)) return (float)(1.0 / sqrt((double)(mean + eps)));
    return contract;
}

void ref_deviant_rope_halves(float *rope_dims, const float *cos_sin_row) {
    int half = KVC_ROPE_DIMS / 2;
    for (int i = 0; i < half; i++) {
        float c = cos_sin_row[i], s = cos_sin_row[half + i], x0 = rope_dims[i], x1 = rope_dims[half + i];
        rope_dims[i] = fmaf(x0, c, -(x1 * s));
        rope_dims[half + i] = fmaf(x1, c, x0 * s);
    }
}

/* floor(log2(q)) and log2(q) rounded to nearest, for finite q > 0. */
static int exponent_floor(float q) {
    uint32_t u = kvc_f32_bits(q), exp_field = u >> 23;
    return exp_field ? (int)exp_field - 127 : -149 + 31 - __builtin_clz(u & 0x7FFFFFu);
}

kvc_block_scale ref_deviant_block_scale(const float *y, int n, kvc_block_scale contract) {
    int drops_nan = ref_deviates(KVC_DEV_BLOCK_MAX_DROPS_NAN), floor_after = ref_deviates(KVC_DEV_SCALE_FLOOR_AFTER_DIVISION);
    int exponent_floored = ref_deviates(KVC_DEV_SCALE_EXPONENT_FLOOR), exponent_rounded = ref_deviates(KVC_DEV_SCALE_EXPONENT_ROUND);
    int x86 = ref_deviates(KVC_DEV_MAX_X86_ORDER);
    if (!drops_nan && !floor_after && !exponent_floored && !exponent_rounded && !x86) return contract;
    float a = floor_after ? 0.0f : 1e-4f;
    for (int j = 0; j < n; j++)
        a = drops_nan ? (fabsf(y[j]) > a ? fabsf(y[j]) : a) : x86 ? max_x86(a, fabsf(y[j])) : kvc_max_nan(a, fabsf(y[j]));
    /* x86's order can drop the floor with a NaN (max(NaN, 0) = 0): a zero
     * magnitude has no exponent, so the variant keeps the floor there. */
    if (x86 && a == 0.0f && !floor_after) a = 1e-4f;
    float q = a / KVC_FP8_MAX;
    if (floor_after) q = kvc_max_nan(q, 1e-4f);
    kvc_block_scale scale = kvc_block_scale_from_quotient(q);
    if (scale.kind == KVC_SCALE_FINITE && exponent_floored) scale.scale_exp = exponent_floor(q);
    if (scale.kind == KVC_SCALE_FINITE && exponent_rounded) scale.scale_exp = (int)floor(log2((double)q) + 0.5);
    return scale;
}

uint8_t ref_deviant_plain_fp8(float x, uint16_t rounded, float scale, float inverse_scale) {
    float v = ref_deviates(KVC_DEV_PLAIN_FP8_SKIPS_BF16) ? x : kvc_f32_from_bf16(rounded);
    return ref_deviant_fp8_code(ref_deviates(KVC_DEV_PLAIN_FP8_DIVIDES) ? v / scale : v * inverse_scale);
}

float ref_deviant_canonical_f32(float x) {
    return kvc_f32_is_nan(x) && ref_deviates(KVC_DEV_NAN_ALL_ONES) ? kvc_f32_from_bits(0x7FFFFFFFu) : kvc_canonical_f32(x);
}

float ref_deviant_reciprocal(float scale, float contract) {
    if (!ref_deviates(KVC_DEV_PLAIN_FP8_APPROXIMATE_RECIPROCAL)) return contract;
    /* 1 - r * scale, exact for a faithful r: its sign says on which side
     * of the exact quotient r lies; the other neighbour is across it (for
     * a quotient past the fp32 range, r = inf and the other is FLT_MAX). */
    float residual = fmaf(-contract, scale, 1.0f);
    if (residual == 0.0f) return contract;   /* 1 / scale is exact: the only faithful result */
    return nextafterf(contract, residual > 0.0f ? INFINITY : 0.0f);
}

void ref_deviant_rotate_nope(float *x) {
    /* Step 7's rotation of every NoPE pair with cos 1 and sin 0, the
     * same fmas (and the same other deviations) as the RoPE dims. */
    float identity[KVC_ROPE_DIMS];
    for (int i = 0; i < KVC_ROPE_DIMS / 2; i++) identity[i] = 1.0f, identity[KVC_ROPE_DIMS / 2 + i] = 0.0f;
    for (int d = 0; d < KVC_V41_HEAD_DIM - KVC_ROPE_DIMS; d += KVC_ROPE_DIMS) ref_rope(x + d, identity);
}

/* slot >= 0: the stages skip negative slots before they ask. */
static int row_inside(int64_t slot, const kvc_paged_cache *cache) { return slot < cache->num_pages * cache->page_rows; }

/* A token that closes only under closing-test-off-by-one carries metadata
 * no validation looked at: it is computed only when every row it reads or
 * writes lies inside its buffer (what else such a kernel does is not
 * defined). */
int ref_deviant_insert_token_in_bounds(const kvc_v41_insert_args *a, int64_t t) {
    return row_inside(a->slot_mapping[t], &a->kv_cache) && kvc_rope_row(a->positions[t], a->compress_ratio) < a->cos_sin_rows;
}

int ref_deviant_compress_token_in_bounds(const kvc_v4_compress_args *a, int64_t t) {
    int64_t p = a->positions[t], req = a->token_to_req[t], window = (int64_t)kvc_v4_coff(a->compress_ratio) * a->compress_ratio;
    if (!row_inside(a->kv_slot_mapping[t], &a->kv_cache) || req < 0 || req >= a->num_requests ||
        kvc_rope_row(p, a->compress_ratio) >= a->cos_sin_rows)
        return 0;
    for (int64_t q = p - window + 1 > 0 ? p - window + 1 : 0; q <= p; q++) {
        int64_t column = q / a->state_cache.page_rows;
        if (column >= a->max_blocks) return 0;
        int32_t block = a->block_table[req * a->max_blocks + column];
        if (block < 0 || block >= a->state_cache.num_pages) return 0;
    }
    return 1;
}

/* ---- deviations that change the batch a stage sees ------------------------ */

/* The active deviations, saved while `d` is switched off for a run of the
 * reference on the batch as the deviating kernel sees it. */
#define ACTIVE_WIDTH ((int)(sizeof ref_active_deviations / sizeof *ref_active_deviations))
typedef struct {
    kvc_deviation_id active[ACTIVE_WIDTH];
} active_set;

static active_set switch_off(kvc_deviation_id d) {
    active_set saved;
    memcpy(saved.active, ref_active_deviations, sizeof saved.active);
    int kept = 0;
    for (int i = 0; i < ACTIVE_WIDTH; i++)
        if (saved.active[i] != d) ref_active_deviations[kept++] = saved.active[i];
    while (kept < ACTIVE_WIDTH) ref_active_deviations[kept++] = KVC_DEV_NONE;
    return saved;
}

static void restore(const active_set *saved) { memcpy(ref_active_deviations, saved->active, sizeof saved->active); }

/* positions-int32: positions as a kernel reading their low 32 bits sees
 * them.  The stage runs on them; a batch they make invalid (a position of
 * 2^31 or more turns negative) is rejected as the contract rejects it. */
static int64_t *int32_positions(const int64_t *positions, int64_t count) {
    int64_t *seen = malloc((size_t)(count > 0 ? count : 1) * sizeof *seen);
    if (!seen) return NULL;
    for (int64_t t = 0; t < count; t++) seen[t] = (int32_t)(uint32_t)(uint64_t)positions[t];
    return seen;
}

#define RUN_WITH_INT32_POSITIONS(type, args, call)                                                                                 \
    do {                                                                                                                           \
        int64_t *positions = int32_positions((args)->positions, (args)->num_tokens);                                               \
        if (!positions) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory truncating positions");                                 \
        type seen = *(args);                                                                                                       \
        seen.positions = positions;                                                                                                \
        active_set saved = switch_off(KVC_DEV_POSITIONS_INT32);                                                                    \
        int rc = call;                                                                                                             \
        restore(&saved);                                                                                                           \
        free(positions);                                                                                                           \
        return rc;                                                                                                                 \
    } while (0)

int ref_deviant_positions_v4_save(const kvc_v4_save_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v4_save_args, a, ref_v4_save_partial_states(&seen, err));
}
int ref_deviant_positions_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v4_compress_args, a, ref_v4_compress(&seen, err));
}
int ref_deviant_positions_v41_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v41_norm_args, a, ref_v41_save_compress_norm(&seen, err));
}
int ref_deviant_positions_v41_insert(const kvc_v41_insert_args *a, int quant, kvc_error *err) {
    RUN_WITH_INT32_POSITIONS(kvc_v41_insert_args, a, quant ? ref_v41_rope_quant_insert(&seen, err) : ref_v41_rope_plain_insert(&seen, err));
}

int ref_deviant_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    /* The batch as the deviating kernel sees it: a closing token with a
     * kv slot but a negative state slot looks valid (slot 0).  When that
     * batch is not one the contract accepts, the variant cannot say
     * what such a kernel would read: it runs the batch unchanged. */
    int64_t *slots = malloc((size_t)(a->num_tokens > 0 ? a->num_tokens : 1) * sizeof *slots);
    if (!slots) return kvc_fail(err, KVC_ERR_NOMEM, "out of memory seeing the slots as state-slot-ignored does");
    for (int64_t t = 0; t < a->num_tokens; t++) slots[t] = a->slot_mapping[t] < 0 && a->kv_slot_mapping[t] >= 0 ? 0 : a->slot_mapping[t];
    kvc_v4_compress_args seen = *a;
    seen.slot_mapping = slots;
    kvc_error ignored = {0};
    active_set saved = switch_off(KVC_DEV_STATE_SLOT_IGNORED);   /* the other deviations stay on */
    int rc = ref_v4_compress(kvc_validate_v4_compress(&seen, &ignored) ? a : &seen, err);
    restore(&saved);
    free(slots);
    return rc;
}

/* ---- the catalogue ---------------------------------------------------------- */

typedef struct {
    const char *name, *spec, *text;
} deviation_entry;

static const deviation_entry catalogue[] = {
#define KVC_DEVIATION_ENTRY(id, name, spec, text) {name, spec, text},
    KVC_DEVIATION_LIST(KVC_DEVIATION_ENTRY)
#undef KVC_DEVIATION_ENTRY
};
#define CATALOGUE_SIZE ((int)(sizeof catalogue / sizeof *catalogue))

int kvc_deviation_count(void) { return CATALOGUE_SIZE; }

static int in_catalogue(int index) { return index >= 0 && index < CATALOGUE_SIZE; }
const char *kvc_deviation_name(int index) { return in_catalogue(index) ? catalogue[index].name : NULL; }
const char *kvc_deviation_spec(int index) { return in_catalogue(index) ? catalogue[index].spec : NULL; }
const char *kvc_deviation_description(int index) { return in_catalogue(index) ? catalogue[index].text : NULL; }

int kvc_deviation_find(const char *name) {
    for (int i = 0; i < CATALOGUE_SIZE; i++)
        if (strcmp(catalogue[i].name, name) == 0) return i;
    return -1;
}

void kvc_deviation_activate_set(const int *ids, int count, int previous[KVC_DIAGNOSIS_DEPTH]) {
    if (previous)
        for (int k = 0; k < KVC_DIAGNOSIS_DEPTH; k++) previous[k] = (int)ref_active_deviations[k] - 1;
    int on = 0;
    for (int k = 0; k < count && on < REF_DEVIATION_SLOTS; k++)
        if (in_catalogue(ids[k])) ref_active_deviations[on++] = (kvc_deviation_id)(ids[k] + 1);
    while (on < REF_DEVIATION_SLOTS) ref_active_deviations[on++] = KVC_DEV_NONE;
}

void kvc_deviation_activate(int first, int second, int previous[2]) {
    int pair[2] = {first, second}, before[KVC_DIAGNOSIS_DEPTH];
    kvc_deviation_activate_set(pair, 2, before);
    if (previous) previous[0] = before[0], previous[1] = before[1];
}

/* ---- one variant backend per deviation ------------------------------------ */

/* A variant's stage: the reference's, with its deviation on for the call. */
#define DEVIATED_CALL(index, call)                                                                                                 \
    do {                                                                                                                           \
        int previous[KVC_DIAGNOSIS_DEPTH], one = index;                                                                            \
        kvc_deviation_activate_set(&one, 1, previous);                                                                             \
        int rc = call;                                                                                                             \
        kvc_deviation_activate_set(previous, KVC_DIAGNOSIS_DEPTH, NULL);                                                           \
        return rc;                                                                                                                 \
    } while (0)

static int deviated_v4_save(int i, const kvc_v4_save_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v4_save_partial_states(a, e)); }
static int deviated_v4_compress(int i, const kvc_v4_compress_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v4_compress(a, e)); }
static int deviated_v41_norm(int i, const kvc_v41_norm_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_save_compress_norm(a, e)); }
static int deviated_v41_quant(int i, const kvc_v41_insert_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_rope_quant_insert(a, e)); }
static int deviated_v41_plain(int i, const kvc_v41_insert_args *a, kvc_error *e) { DEVIATED_CALL(i, ref_v41_rope_plain_insert(a, e)); }

/* The backend table has no context pointer: each deviation gets its own
 * five one-line stage functions. */
#define KVC_DEVIATION_STAGES(id, name, spec, text)                                                                                 \
    static int id##_save(const kvc_v4_save_args *a, kvc_error *e) { return deviated_v4_save(KVC_DEV_##id - 1, a, e); }            \
    static int id##_compress(const kvc_v4_compress_args *a, kvc_error *e) { return deviated_v4_compress(KVC_DEV_##id - 1, a, e); } \
    static int id##_norm(const kvc_v41_norm_args *a, kvc_error *e) { return deviated_v41_norm(KVC_DEV_##id - 1, a, e); }          \
    static int id##_quant(const kvc_v41_insert_args *a, kvc_error *e) { return deviated_v41_quant(KVC_DEV_##id - 1, a, e); }      \
    static int id##_plain(const kvc_v41_insert_args *a, kvc_error *e) { return deviated_v41_plain(KVC_DEV_##id - 1, a, e); }
KVC_DEVIATION_LIST(KVC_DEVIATION_STAGES)
#undef KVC_DEVIATION_STAGES

static const kvc_backend variants[] = {
#define KVC_DEVIATION_BACKEND(id, name, spec, text)                                                                                \
    {"deviation:" name, id##_save, id##_compress, id##_norm, id##_quant, id##_plain},
    KVC_DEVIATION_LIST(KVC_DEVIATION_BACKEND)
#undef KVC_DEVIATION_BACKEND
};

const kvc_backend *kvc_deviation_backend(int index) { return in_catalogue(index) ? &variants[index] : NULL; }

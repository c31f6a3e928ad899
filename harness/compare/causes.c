/* The cause classifier: see causes.h.  Each rule reads the two sides'
 * bytes (and, for the rules about metadata, the case's inputs); none
 * looks at where a case came from. */
#include "harness/compare/causes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"

static const struct {
    const char *slug, *name;
} causes[KVC_CAUSE_COUNT] = {
    [KVC_CAUSE_SCALE_FLOOR] = {"scale-floor", "scale floor on small blocks (upstream floors a/448 at 1e-4: byte 114)"},
    [KVC_CAUSE_SCALE_FOLLOWS] = {"scale-follows", "code of a block whose scale differs"},
    [KVC_CAUSE_NAN] = {"nan-other", "NaN handling"},
    [KVC_CAUSE_SUBNORMAL_FLUSH] = {"subnormal-flush", "subnormal flushed to zero upstream"},
    [KVC_CAUSE_LAST_BIT] = {"last-bit", "last-bit difference (1 step: exp, rsqrt, summation order, unfused RoPE)"},
    [KVC_CAUSE_MULTI_STEP] = {"multi-step", "multi-step difference"},
    [KVC_CAUSE_ROW_WRITTEN] = {"row-written", "row written upstream, untouched by the contract"},
    [KVC_CAUSE_ROW_SKIPPED] = {"row-skipped", "row left untouched upstream, written by the contract"},
    [KVC_CAUSE_STAGE_ERROR] = {"stage-error", "case rejected or not runnable by the reference"},
    [KVC_CAUSE_NAN_TO_448] = {"nan-to-448", "NaN reaching the fp8 clamp (codes +-448, block scale from the finite values)"},
    [KVC_CAUSE_NAN_ALL_ONES] = {"nan-all-ones", "NaN bit pattern 0x7fff / 0x7fffffff (contract: canonical 0x7fc0 / 0x7fc00000)"},
    [KVC_CAUSE_NAN_PAYLOAD] = {"nan-payload", "NaN sign or payload kept (contract: canonical 0x7fc0 / 0x7fc00000)"},
    [KVC_CAUSE_NOPE_PAIR_ROTATED] = {"nope-pair-rotated", "NoPE pair rotated in the plain insert (a NaN/inf spreads to its neighbour)"},
    [KVC_CAUSE_RING_AFTER_PADDING] = {"ring-after-padding", "V4.1 ring rows not stored after a padding first token"},
    [KVC_CAUSE_NEG_STATE_SLOT] = {"neg-state-slot-written", "kv row written for a closing token whose state slot is -1"},
    [KVC_CAUSE_SIGNED_ZERO] = {"signed-zero", "+0 against -0"},
};
const char *kvc_parity_cause_name(kvc_parity_cause cause) { return causes[cause].name; }
const char *kvc_cause_slug(kvc_parity_cause cause) { return causes[cause].slug; }

static const char *const region_names[KVC_PREGION_COUNT] = {"NoPE code", "scale", "RoPE value", "NoPE bf16", "state row", "latent"};
static const char *const region_units[KVC_PREGION_COUNT] = {"fp8 steps", "scale steps", "bf16 ulps / fp8 steps", "bf16 ulps",
                                                            "fp32 ulps", "bf16 ulps"};
const char *kvc_parity_region_name(kvc_parity_region r) { return region_names[r]; }
const char *kvc_parity_region_unit(kvc_parity_region r) { return region_units[r]; }

/* ---- bit patterns ---------------------------------------------------- */

static int fp8_is_nan(uint8_t b) { return (b & 0x7F) == 0x7F; }
static int fp8_is_448(uint8_t b) { return (b & 0x7F) == 0x7E; }
static int bf16_is_nan(uint16_t b) { return (b & 0x7FFF) > 0x7F80; }
static int bf16_is_nonfinite(uint16_t b) { return (b & 0x7F80) == 0x7F80; }
static int bf16_is_subnormal(uint16_t b) { return (b & 0x7F80) == 0 && (b & 0x7F) != 0; }
static int f32_is_nan(uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

static int64_t f32_distance(uint32_t a, uint32_t b) {
    if (f32_is_nan(a) || f32_is_nan(b)) return f32_is_nan(a) && f32_is_nan(b) ? 0 : -1;
    int64_t oa = (a & 0x80000000u) ? -(int64_t)(a & 0x7FFFFFFFu) : (int64_t)(a & 0x7FFFFFFFu);
    int64_t ob = (b & 0x80000000u) ? -(int64_t)(b & 0x7FFFFFFFu) : (int64_t)(b & 0x7FFFFFFFu);
    return llabs(oa - ob);
}

/* Both zero, of other signs (sign_bit: the format's sign bit). */
static int signed_zero(uint32_t a, uint32_t b, uint32_t sign_bit) { return a != b && ((a | b) & ~sign_bit) == 0; }

/* Different bytes at distance 0 are +0 and -0: one step apart here,
 * so that a sign of zero is never counted as identical. */
static int64_t bytes_distance(int64_t distance, int bytes_differ) { return bytes_differ && distance == 0 ? 1 : distance; }

/* Both NaN with other bits: which pattern the other side wrote. */
static kvc_parity_cause nan_bits_cause(int all_ones) { return all_ones ? KVC_CAUSE_NAN_ALL_ONES : KVC_CAUSE_NAN_PAYLOAD; }

/* ---- the walk ---------------------------------------------------------- */

typedef struct {
    const kvc_case *c;
    const uint8_t *input, *contract, *other;   /* input may be NULL */
    kvc_difference_fn fn;
    void *context;
} walk;

static void emit_at(const walk *w, int is_element, kvc_parity_region region, int64_t distance, int differs, kvc_parity_cause cause,
                    const char *where, const char *detail, int dim) {
    kvc_difference d = {.is_element = is_element, .region = region, .distance = distance, .differs = differs, .cause = cause,
                        .where = where, .detail = detail ? detail : "", .dim = dim};
    w->fn(w->context, &d);
}

static void emit(const walk *w, int is_element, kvc_parity_region region, int64_t distance, int differs, kvc_parity_cause cause,
                 const char *where, const char *detail) {
    emit_at(w, is_element, region, distance, differs, cause, where, detail, -1);
}

/* What distinguishes a value's difference once NaN rules are settled. */
static kvc_parity_cause step_cause(int64_t distance) { return distance == 1 ? KVC_CAUSE_LAST_BIT : KVC_CAUSE_MULTI_STEP; }

/* Facts about the element's block and inputs that some rules need. */
typedef struct {
    int scale_differs;          /* the block's scale differs */
    int contract_block_nan;     /* the contract's block scale is NaN, the other's finite */
    int neighbour_nonfinite;    /* plain insert NoPE: the pair neighbour's input is NaN/inf */
    int dim;                    /* the element's dim in its row (kvc_difference.dim) */
} element_context;

static void fp8_code(const walk *w, kvc_parity_region region, uint8_t contract, uint8_t other, const element_context *e,
                     const char *where) {
    int nan_bits = fp8_is_nan(contract) && fp8_is_nan(other) && contract != other;
    int64_t distance = nan_bits ? -1 : bytes_distance(kvc_fp8_distance(other, contract), other != contract);
    if (distance == 0) { emit_at(w, 1, region, 0, 0, KVC_CAUSE_COUNT, where, NULL, e->dim); return; }
    kvc_parity_cause cause;
    if (fp8_is_nan(contract) && (fp8_is_448(other) || (!fp8_is_nan(other) && e->contract_block_nan))) cause = KVC_CAUSE_NAN_TO_448;
    else if (e->scale_differs) cause = KVC_CAUSE_SCALE_FOLLOWS;
    else if (!fp8_is_nan(contract) && (fp8_is_448(other) || fp8_is_nan(other)) && e->neighbour_nonfinite) cause = KVC_CAUSE_NOPE_PAIR_ROTATED;
    else if (nan_bits) cause = KVC_CAUSE_NAN_PAYLOAD;   /* fp8 has one NaN per sign: the sign was kept */
    else if (distance < 0) cause = KVC_CAUSE_NAN;
    else if (signed_zero(contract, other, 0x80)) cause = KVC_CAUSE_SIGNED_ZERO;
    else cause = step_cause(distance);
    emit_at(w, 1, region, distance, 1, cause, where, NULL, e->dim);
}

static void bf16_value(const walk *w, kvc_parity_region region, uint16_t contract, uint16_t other, const element_context *e,
                       const char *where) {
    int nan_bits = bf16_is_nan(contract) && bf16_is_nan(other) && contract != other;
    int64_t distance = nan_bits ? -1 : bytes_distance(kvc_bf16_distance(other, contract), other != contract);
    if (distance == 0) { emit_at(w, 1, region, 0, 0, KVC_CAUSE_COUNT, where, NULL, e->dim); return; }
    kvc_parity_cause cause;
    if (nan_bits) cause = nan_bits_cause(other == 0x7FFF);
    else if (!bf16_is_nan(contract) && bf16_is_nan(other) && e->neighbour_nonfinite) cause = KVC_CAUSE_NOPE_PAIR_ROTATED;
    else if ((other & 0x7FFF) == 0 && bf16_is_subnormal(contract)) cause = KVC_CAUSE_SUBNORMAL_FLUSH;
    else if (distance < 0) cause = KVC_CAUSE_NAN;
    else if (signed_zero(contract, other, 0x8000)) cause = KVC_CAUSE_SIGNED_ZERO;
    else cause = step_cause(distance);
    emit_at(w, 1, region, distance, 1, cause, where, NULL, e->dim);
}

/* UE8M0 scale byte of a D = 512 block; returns 1 when it differs. */
static int ue8m0_scale(const walk *w, uint8_t contract, uint8_t other, const char *where) {
    int64_t distance = kvc_ue8m0_distance(other, contract);
    if (distance == 0) { emit(w, 1, KVC_PREGION_SCALE, 0, 0, KVC_CAUSE_COUNT, where, NULL); return 0; }
    char detail[64];
    snprintf(detail, sizeof detail, "upstream byte %d, contract %d", other, contract);
    kvc_parity_cause cause;
    /* The contract's byte <= 113 means its e <= -14, i.e. the block
     * magnitude is at most 448*2^-14; the port's max(a/448, 1e-4) makes
     * e = ceil(log2(1e-4)) = -13, byte 114, for every such block. */
    if (other == 114 && contract >= 105 && contract <= 113) cause = KVC_CAUSE_SCALE_FLOOR;
    /* 255: the block held a NaN or inf; a finite scale means the NaN was dropped by the block maximum. */
    else if (contract == 255) cause = KVC_CAUSE_NAN_TO_448;
    else if (distance < 0) cause = KVC_CAUSE_NAN;
    else cause = step_cause(distance);
    emit(w, 1, KVC_PREGION_SCALE, distance, 1, cause, where, detail);
    return 1;
}

/* ---- metadata lookups for the rules about rows ------------------------ */

static const int64_t *int64_tensor(const kvc_case *c, const char *name, int64_t *count) {
    const kvc_array *a = kvc_case_get(c, name);
    if (!a || a->dtype != KVC_DT_I8) return NULL;
    *count = a->count;
    return a->data;
}

/* The last token whose `slot_name` entry is `slot`, or -1. */
static int64_t token_with_slot(const kvc_case *c, const char *slot_name, int64_t slot) {
    int64_t n = 0;
    const int64_t *slots = int64_tensor(c, slot_name, &n);
    for (int64_t t = n - 1; slots && t >= 0; t--)
        if (slots[t] == slot) return t;
    return -1;
}

/* V4.1 R=2: the ring row `slot` belongs to a request whose first token in
 * the batch is padding (slot -1). */
static int ring_owner_starts_with_padding(const kvc_case *c, int64_t slot) {
    if (c->stage != KVC_STAGE_V41_SAVE_COMPRESS_NORM && c->stage != KVC_STAGE_V41_FORWARD) return 0;
    const kvc_array *starts = kvc_case_get(c, "query_start_loc");
    int64_t t = token_with_slot(c, "slot_mapping", slot), n_slots = 0;
    const int64_t *slots = int64_tensor(c, "slot_mapping", &n_slots);
    if (t < 0 || !starts || starts->dtype != KVC_DT_I4) return 0;
    const int32_t *start = starts->data;
    for (int64_t req = 0; req + 1 < starts->count; req++)
        if (start[req] <= t && t < start[req + 1]) return start[req] < n_slots && slots[start[req]] < 0;
    return 0;
}

/* V4: the kv row `slot` is named by a token whose state slot is -1. */
static int written_for_negative_state_slot(const kvc_case *c, int64_t slot) {
    int64_t n = 0, t = token_with_slot(c, "kv_slot_mapping", slot);
    const int64_t *state_slots = int64_tensor(c, "slot_mapping", &n);
    return t >= 0 && state_slots && t < n && state_slots[t] < 0;
}

/* A row either side wrote: 1 (after reporting it) when only one did. */
static int row_ownership(const walk *w, const char *name, int64_t offset, size_t bytes, int64_t slot, const char *where) {
    if (!w->input || memcmp(w->other + offset, w->contract + offset, bytes) == 0) return 0;
    int other_wrote = memcmp(w->input + offset, w->other + offset, bytes) != 0;
    int contract_wrote = memcmp(w->input + offset, w->contract + offset, bytes) != 0;
    if (other_wrote == contract_wrote) return 0;
    kvc_parity_cause cause = other_wrote ? KVC_CAUSE_ROW_WRITTEN : KVC_CAUSE_ROW_SKIPPED;
    if (other_wrote && strcmp(name, "kv_cache") == 0 && written_for_negative_state_slot(w->c, slot)) cause = KVC_CAUSE_NEG_STATE_SLOT;
    if (!other_wrote && strcmp(name, "state_cache") == 0 && ring_owner_starts_with_padding(w->c, slot)) cause = KVC_CAUSE_RING_AFTER_PADDING;
    emit(w, 0, KVC_PREGION_COUNT, 0, 1, cause, where, NULL);
    return 1;
}

/* ---- layouts ----------------------------------------------------------- */

typedef struct {
    int64_t pages, page_rows;
} pages;

static void walk_ds_mla(const walk *w, pages p) {
    int64_t page_bytes = p.page_rows * 584;
    const uint8_t *up = w->other, *ref = w->contract;
    for (int64_t page = 0; page < p.pages; page++)
        for (int64_t r = 0; r < p.page_rows; r++) {
            int64_t token = page * page_bytes + r * 576, scales = page * page_bytes + p.page_rows * 576 + r * 8;
            if (memcmp(up + token, ref + token, 576) == 0 && memcmp(up + scales, ref + scales, 8) == 0) continue;
            char where[160], at[200];
            snprintf(where, sizeof where, "page %lld row %lld", (long long)page, (long long)r);
            if (row_ownership(w, "kv_cache", token, 576, page * p.page_rows + r, where)) continue;
            for (int block = 0; block < 7; block++) {
                snprintf(at, sizeof at, "%s block %d", where, block);
                element_context e = {.scale_differs = ue8m0_scale(w, ref[scales + block], up[scales + block], at),
                                     .contract_block_nan = ref[scales + block] == 255 && up[scales + block] != 255};
                for (int j = 0; j < 64; j++) {
                    snprintf(at, sizeof at, "%s nope[%d]", where, 64 * block + j);
                    e.dim = 64 * block + j;
                    fp8_code(w, KVC_PREGION_NOPE_CODE, ref[token + 64 * block + j], up[token + 64 * block + j], &e, at);
                }
            }
            if (up[scales + 7] != ref[scales + 7]) {
                snprintf(at, sizeof at, "%s pad byte", where);
                emit(w, 1, KVC_PREGION_SCALE, -1, 1, KVC_CAUSE_MULTI_STEP, at, NULL);
            }
            for (int i = 0; i < 64; i++) {
                snprintf(at, sizeof at, "%s rope[%d]", where, i);
                element_context e = {.dim = 448 + i};
                bf16_value(w, KVC_PREGION_ROPE, kvc_load_u16(ref + token + 448 + 2 * i), kvc_load_u16(up + token + 448 + 2 * i), &e, at);
            }
        }
}

static int64_t pow2_exponent_distance(float a, float b) {
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) return kvc_f32_bits(a) == kvc_f32_bits(b) ? 0 : -1;
    int ea, eb;
    frexp(a, &ea);
    frexp(b, &eb);
    return a == b ? 0 : (ea == eb ? 1 : llabs((int64_t)ea - eb));
}

static void walk_indexer(const walk *w, pages p) {
    int64_t page_bytes = p.page_rows * 132;
    const uint8_t *up = w->other, *ref = w->contract;
    for (int64_t page = 0; page < p.pages; page++)
        for (int64_t r = 0; r < p.page_rows; r++) {
            int64_t token = page * page_bytes + r * 128, scale = page * page_bytes + p.page_rows * 128 + r * 4;
            if (memcmp(up + token, ref + token, 128) == 0 && memcmp(up + scale, ref + scale, 4) == 0) continue;
            char where[160], at[200];
            snprintf(where, sizeof where, "page %lld row %lld", (long long)page, (long long)r);
            if (row_ownership(w, "kv_cache", token, 128, page * p.page_rows + r, where)) continue;
            float su, sr;
            memcpy(&su, up + scale, 4);
            memcpy(&sr, ref + scale, 4);
            int64_t distance = pow2_exponent_distance(su, sr);
            element_context e = {.scale_differs = distance != 0, .contract_block_nan = isnan(sr) && isfinite(su)};
            snprintf(at, sizeof at, "%s scale %g vs %g", where, (double)su, (double)sr);
            /* The fp32 scale of max(a/448, 1e-4) is 2^-13 for every block the contract scales below it. */
            kvc_parity_cause cause = e.contract_block_nan ? KVC_CAUSE_NAN_TO_448 : distance < 0 ? KVC_CAUSE_NAN
                                     : su == 0x1p-13f && sr < su ? KVC_CAUSE_SCALE_FLOOR : step_cause(distance);
            emit(w, 1, KVC_PREGION_SCALE, distance, distance != 0, distance ? cause : KVC_CAUSE_COUNT, at, NULL);
            for (int j = 0; j < 128; j++) {
                snprintf(at, sizeof at, "%s code[%d]", where, j);
                e.dim = j;
                fp8_code(w, KVC_PREGION_NOPE_CODE, ref[token + j], up[token + j], &e, at);
            }
        }
}

/* rope_plain_insert: the input value paired with dim d of the row `slot` is NaN or inf. */
static int pair_neighbour_nonfinite(const kvc_case *c, int64_t slot, int d) {
    if (c->stage != KVC_STAGE_V41_ROPE_PLAIN_INSERT || d >= 448) return 0;
    const kvc_array *latent = kvc_case_get(c, "latent");
    int64_t t = token_with_slot(c, "slot_mapping", slot);
    if (!latent || latent->dtype != KVC_DT_U2 || t < 0 || (t + 1) * 512 > latent->count) return 0;
    return bf16_is_nonfinite(((const uint16_t *)latent->data)[t * 512 + (d ^ 1)]);
}

/* Rows of 512 bf16 (plain cache, latent) or 512 fp8 (plain fp8 cache). */
static void walk_rows(const walk *w, const char *name, int64_t rows, int element_bytes, int is_latent) {
    int64_t row_bytes = 512 * element_bytes;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * row_bytes;
        if (memcmp(w->other + o, w->contract + o, (size_t)row_bytes) == 0) continue;
        char where[160], at[200];
        snprintf(where, sizeof where, "row %lld", (long long)r);
        if (row_ownership(w, name, o, (size_t)row_bytes, r, where)) continue;
        for (int d = 0; d < 512; d++) {
            snprintf(at, sizeof at, "%s dim %d", where, d);
            kvc_parity_region region = is_latent ? KVC_PREGION_LATENT : d >= 448 ? KVC_PREGION_ROPE
                                       : element_bytes == 2 ? KVC_PREGION_NOPE_BF16 : KVC_PREGION_NOPE_CODE;
            element_context e = {.neighbour_nonfinite = !is_latent && pair_neighbour_nonfinite(w->c, r, d), .dim = d};
            if (element_bytes == 2) bf16_value(w, region, kvc_load_u16(w->contract + o + 2 * d), kvc_load_u16(w->other + o + 2 * d), &e, at);
            else fp8_code(w, region, w->contract[o + d], w->other[o + d], &e, at);
        }
    }
}

static void walk_state(const walk *w, int64_t rows, int64_t row_floats) {
    int64_t row_bytes = row_floats * 4;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * row_bytes;
        if (memcmp(w->other + o, w->contract + o, (size_t)row_bytes) == 0) continue;
        char where[160], at[200];
        snprintf(where, sizeof where, "state slot %lld", (long long)r);
        if (row_ownership(w, "state_cache", o, (size_t)row_bytes, r, where)) continue;
        for (int64_t i = 0; i < row_floats; i++) {
            uint32_t a, b;   /* a: the other side, b: the contract */
            memcpy(&a, w->other + o + 4 * i, 4);
            memcpy(&b, w->contract + o + 4 * i, 4);
            snprintf(at, sizeof at, "%s column %lld", where, (long long)i);
            int nan_bits = f32_is_nan(a) && f32_is_nan(b) && a != b;
            int64_t distance = nan_bits ? -1 : bytes_distance(f32_distance(a, b), a != b);
            kvc_parity_cause cause = KVC_CAUSE_COUNT;
            if (nan_bits) cause = nan_bits_cause(a == 0x7FFFFFFFu);
            else if ((a & 0x7FFFFFFFu) == 0 && (b & 0x7F800000u) == 0 && (b & 0x7FFFFFu) != 0) cause = KVC_CAUSE_SUBNORMAL_FLUSH;
            else if (distance < 0) cause = KVC_CAUSE_NAN;
            else if (signed_zero(a, b, 0x80000000u)) cause = KVC_CAUSE_SIGNED_ZERO;
            else if (distance) cause = step_cause(distance);
            emit_at(w, 1, KVC_PREGION_STATE, distance, distance != 0, cause, at, NULL, (int)i);
        }
    }
}

int kvc_classify_output(const kvc_case *c, const char *name, const kvc_array *contract, const kvc_array *other, kvc_difference_fn fn,
                        void *context) {
    kvc_array *input_array = kvc_case_get(c, name);
    walk w = {.c = c, .contract = contract->data, .other = other->data, .fn = fn, .context = context};
    if (input_array && input_array->count == other->count && input_array->dtype == other->dtype) w.input = input_array->data;
    int64_t bytes = other->count * kvc_dtype_size(other->dtype);
    if (memcmp(other->data, contract->data, (size_t)bytes) == 0) return 0;
    int64_t last = other->shape[other->ndim - 1], rows = other->count / last;
    if (strcmp(name, "latent") == 0) walk_rows(&w, name, rows, 2, 1);
    else if (strcmp(name, "state_cache") == 0) walk_state(&w, rows, last);
    else if (c->cache_dtype == KVC_CACHE_FP8_DS_MLA) walk_ds_mla(&w, (pages){other->shape[0], other->shape[1]});
    else if (c->cache_dtype == KVC_CACHE_FP8_INDEXER) walk_indexer(&w, (pages){other->shape[0], other->shape[1]});
    else walk_rows(&w, name, other->count / 512, c->cache_dtype == KVC_CACHE_BF16 ? 2 : 1, 0);
    return 1;
}

/* ---- counts ------------------------------------------------------------ */

typedef struct {
    int64_t *counts, total;
} tally;

static void count_cause(void *p, const kvc_difference *d) {
    tally *t = p;
    if (!d->differs) return;
    t->counts[d->cause]++;
    t->total++;
}

static const kvc_array *output_named(const kvc_run_result *r, const char *name) {
    for (int i = 0; i < r->num_outputs; i++)
        if (strcmp(r->outputs[i].name, name) == 0) return &r->outputs[i].array;
    return NULL;
}

/* Counts the outputs of `contract` named `only` (NULL: every output). */
static int64_t count_causes(const kvc_case *c, const kvc_run_result *contract, const kvc_run_result *other, const char *only,
                            int64_t counts[KVC_CAUSE_COUNT]) {
    tally t = {.counts = counts};
    memset(counts, 0, KVC_CAUSE_COUNT * sizeof *counts);
    for (int i = 0; i < contract->num_outputs; i++) {
        if (only && strcmp(contract->outputs[i].name, only) != 0) continue;
        const kvc_array *ours = &contract->outputs[i].array, *theirs;
        if (other) theirs = output_named(other, contract->outputs[i].name);
        else {
            char name[64];
            snprintf(name, sizeof name, "%.40s.out", contract->outputs[i].name);
            theirs = kvc_case_get(c, name);
        }
        if (!theirs || theirs->count != ours->count || theirs->dtype != ours->dtype) continue;
        kvc_classify_output(c, contract->outputs[i].name, ours, theirs, count_cause, &t);
    }
    return t.total;
}

int64_t kvc_cause_counts(const kvc_case *c, const kvc_run_result *contract, const kvc_run_result *other, int64_t counts[KVC_CAUSE_COUNT]) {
    return count_causes(c, contract, other, NULL, counts);
}

int64_t kvc_output_cause_counts(const kvc_case *c, const char *name, const kvc_run_result *contract, const kvc_run_result *other,
                                int64_t counts[KVC_CAUSE_COUNT]) {
    return count_causes(c, contract, other, name, counts);
}

/* ---- classes of failures ----------------------------------------------- */

#define CAUSE(k) (1u << (k))
#define ROWS_WRITTEN (CAUSE(KVC_CAUSE_ROW_WRITTEN) | CAUSE(KVC_CAUSE_NEG_STATE_SLOT))
#define NAN_BITS (CAUSE(KVC_CAUSE_NAN_ALL_ONES) | CAUSE(KVC_CAUSE_NAN_PAYLOAD))
#define NAN_CHANGES (NAN_BITS | CAUSE(KVC_CAUSE_NAN) | CAUSE(KVC_CAUSE_NAN_TO_448))

/* In order: rows written that must stay (when nothing else differs: a
 * wrong value that happens to equal the old row looks untouched), the
 * 1e-4 floor applied after the /448 (with the codes that follow the
 * scale), only NaN changes with a NaN lost to fp8, only NaN bits, only
 * signed zeros, only single steps (NaN bits, signed zeros and the codes
 * of a block whose scale is one step off allowed: a last bit of the
 * block's magnitude moves its scale), and then any other mix: "wrong
 * values", a class too, so that one value bug gives one signature
 * whichever elements a case happens to show. */
const char *kvc_cause_class(const int64_t counts[KVC_CAUSE_COUNT]) {
    uint32_t found = 0;
    for (int k = 0; k < KVC_CAUSE_COUNT; k++)
        if (counts[k]) found |= CAUSE(k);
    if (!found) return "";
    if ((found & ~ROWS_WRITTEN) == 0) return "untouched row written";
    if ((found & CAUSE(KVC_CAUSE_SCALE_FLOOR)) && (found & ~(CAUSE(KVC_CAUSE_SCALE_FLOOR) | CAUSE(KVC_CAUSE_SCALE_FOLLOWS))) == 0)
        return "scale floor";
    if ((found & CAUSE(KVC_CAUSE_NAN_TO_448)) && (found & ~NAN_CHANGES) == 0) return "NaN to fp8";
    if ((found & ~NAN_BITS) == 0) return "NaN bit pattern";
    if (found == CAUSE(KVC_CAUSE_SIGNED_ZERO)) return "signed zero";
    if ((found & CAUSE(KVC_CAUSE_LAST_BIT)) &&
        (found & ~(CAUSE(KVC_CAUSE_LAST_BIT) | CAUSE(KVC_CAUSE_SIGNED_ZERO) | NAN_BITS | CAUSE(KVC_CAUSE_SCALE_FOLLOWS))) == 0)
        return "last bit";
    return "wrong values";
}

void kvc_case_expected_view(const kvc_case *c, const kvc_run_result *like, kvc_run_result *view) {
    memset(view, 0, sizeof *view);
    for (int i = 0; i < like->num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.out", like->outputs[i].name);
        const kvc_array *expected = kvc_case_get(c, name);
        if (!expected) continue;
        kvc_named_array *out = &view->outputs[view->num_outputs++];
        snprintf(out->name, sizeof out->name, "%s", like->outputs[i].name);
        out->array = *expected;
    }
}

void kvc_cause_summary(const int64_t counts[KVC_CAUSE_COUNT], char *out, size_t size) {
    int used[KVC_CAUSE_COUNT] = {0};
    size_t n = 0;
    out[0] = 0;
    for (;;) {
        int best = -1;
        for (int k = 0; k < KVC_CAUSE_COUNT; k++)
            if (counts[k] && !used[k] && (best < 0 || counts[k] > counts[best])) best = k;
        if (best < 0 || n >= size) return;
        used[best] = 1;
        int written = snprintf(out + n, size - n, "%s%s x%lld", n ? ", " : "", kvc_cause_slug(best), (long long)counts[best]);
        if (written < 0) return;
        n += (size_t)written;
    }
}

/* kvcmp report parity: replay upstream cases through the reference and
 * classify every element where the upstream bytes differ, by cause. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "harness/report/report.h"
#include "harness/report/oracle.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"

static const char *const cause_names[KVC_CAUSE_COUNT] = {
    "scale floor on small blocks (upstream floors a/448 at 1e-4: byte 114)",
    "code of a block whose scale differs",
    "NaN handling",
    "subnormal flushed to zero upstream",
    "last-bit difference (1 step)",
    "multi-step difference",
    "row written upstream, untouched by the contract",
    "row left untouched upstream, written by the contract",
    "case rejected or not runnable by the reference",
};
const char *kvc_parity_cause_name(kvc_parity_cause cause) { return cause_names[cause]; }

static const char *const region_names[KVC_PREGION_COUNT] = {"NoPE code", "scale", "RoPE value", "NoPE bf16", "state row", "latent"};
static const char *const region_units[KVC_PREGION_COUNT] = {"fp8 steps", "scale steps", "bf16 ulps / fp8 steps", "bf16 ulps",
                                                            "fp32 ulps", "bf16 ulps"};
const char *kvc_parity_region_name(kvc_parity_region r) { return region_names[r]; }
const char *kvc_parity_region_unit(kvc_parity_region r) { return region_units[r]; }

/* 0, 1, 2, then (2^(k-2), 2^(k-1)] for k = 3..9, > 256, and NaN last. */
int kvc_parity_dist_bin(int64_t distance) {
    if (distance < 0) return KVC_PARITY_DIST_BINS - 1;
    if (distance <= 2) return (int)distance;
    for (int k = 3; k <= 9; k++)
        if (distance <= ((int64_t)1 << (k - 1))) return k;
    return KVC_PARITY_DIST_BINS - 2;
}

void kvc_parity_dist_label(int bin, char *out, size_t size) {
    if (bin <= 2) snprintf(out, size, "%d", bin);
    else if (bin == KVC_PARITY_DIST_BINS - 1) snprintf(out, size, "NaN");
    else if (bin == KVC_PARITY_DIST_BINS - 2) snprintf(out, size, ">256");
    else snprintf(out, size, "%d-%d", (1 << (bin - 2)) + 1, 1 << (bin - 1));
}

/* ---- groups -------------------------------------------------------- */

static void stage_key(const kvc_case *c, char *out, size_t size) {
    int v41 = c->stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    if (c->stage == KVC_STAGE_V41_ROPE_PLAIN_INSERT)
        snprintf(out, size, "%s %s R=%d", kvc_stage_name(c->stage), c->has_cache_dtype ? kvc_cache_dtype_name(c->cache_dtype) : "?",
                 c->compress_ratio);
    else if (v41) snprintf(out, size, "%s R=%d", kvc_stage_name(c->stage), c->compress_ratio);
    else snprintf(out, size, "%s D=%d R=%d", kvc_stage_name(c->stage), c->head_dim, c->compress_ratio);
}

static kvc_parity_group *group_for(kvc_parity_report *r, const char *source, const char *stage) {
    for (int i = 0; i < r->num_groups; i++)
        if (strcmp(r->groups[i].source, source) == 0 && strcmp(r->groups[i].stage, stage) == 0) return &r->groups[i];
    if (r->num_groups == r->capacity) {
        int capacity = r->capacity ? 2 * r->capacity : 16;
        kvc_parity_group *grown = realloc(r->groups, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        r->groups = grown;
        r->capacity = capacity;
    }
    kvc_parity_group *g = &r->groups[r->num_groups++];
    memset(g, 0, sizeof *g);
    snprintf(g->source, sizeof g->source, "%s", source);
    snprintf(g->stage, sizeof g->stage, "%s", stage);
    return g;
}

/* ---- the element walk ---------------------------------------------- */

typedef struct {
    kvc_parity_group *group;
    const char *dir;
    int differs;              /* any byte of the case differs */
} walk;

static void add_cause(walk *w, kvc_parity_cause cause, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_cause(walk *w, kvc_parity_cause cause, const char *fmt, ...) {
    kvc_parity_group *g = w->group;
    g->causes[cause]++;
    if (g->example[cause][0]) return;
    int n = snprintf(g->example[cause], sizeof g->example[cause], "%s: ", w->dir);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof g->example[cause]) vsnprintf(g->example[cause] + n, sizeof g->example[cause] - (size_t)n, fmt, ap);
    va_end(ap);
}

static void count(walk *w, kvc_parity_region region, int64_t distance) {
    w->group->elements[region]++;
    if (distance == 0) w->group->identical[region]++;
    w->group->distance_hist[region][kvc_parity_dist_bin(distance)]++;
}

static int bf16_is_nan(uint16_t b) { return (b & 0x7FFF) > 0x7F80; }
static int bf16_is_subnormal(uint16_t b) { return (b & 0x7F80) == 0 && (b & 0x7F) != 0; }

/* A value element (code or bf16) that is not a scale. */
static void classify_value(walk *w, kvc_parity_region region, int64_t distance, int nan_bits_differ, int flushed, int scale_differs,
                           const char *where) {
    count(w, region, nan_bits_differ ? -1 : distance);
    if (distance == 0 && !nan_bits_differ) return;
    if (scale_differs) add_cause(w, KVC_CAUSE_SCALE_FOLLOWS, "%s", where);
    else if (distance < 0 || nan_bits_differ) add_cause(w, KVC_CAUSE_NAN, "%s", where);
    else if (flushed) add_cause(w, KVC_CAUSE_SUBNORMAL_FLUSH, "%s", where);
    else if (distance == 1) add_cause(w, KVC_CAUSE_LAST_BIT, "%s", where);
    else add_cause(w, KVC_CAUSE_MULTI_STEP, "%s (%lld steps)", where, (long long)distance);
}

static void classify_bf16(walk *w, kvc_parity_region region, uint16_t upstream, uint16_t ref, const char *where) {
    int nan_bits = bf16_is_nan(upstream) && bf16_is_nan(ref) && upstream != ref;
    int flushed = (upstream & 0x7FFF) == 0 && bf16_is_subnormal(ref);
    classify_value(w, region, kvc_bf16_distance(upstream, ref), nan_bits, flushed, 0, where);
}

/* UE8M0 scale byte of a D = 512 block. */
static int classify_ue8m0(walk *w, uint8_t upstream, uint8_t ref, const char *where) {
    int64_t distance = kvc_ue8m0_distance(upstream, ref);
    count(w, KVC_PREGION_SCALE, distance);
    if (distance == 0) return 0;
    /* The contract's byte <= 113 means its e <= -14, i.e. the block
     * magnitude is at most 448*2^-14; the port's max(a/448, 1e-4) makes
     * e = ceil(log2(1e-4)) = -13, byte 114, for every such block. */
    if (upstream == 114 && ref >= 105 && ref <= 113)
        add_cause(w, KVC_CAUSE_SCALE_FLOOR, "%s: upstream byte %d, contract %d", where, upstream, ref);
    else if (distance < 0) add_cause(w, KVC_CAUSE_NAN, "%s: upstream byte %d, contract %d", where, upstream, ref);
    else if (distance == 1) add_cause(w, KVC_CAUSE_LAST_BIT, "%s", where);
    else add_cause(w, KVC_CAUSE_MULTI_STEP, "%s (%lld steps)", where, (long long)distance);
    return 1;
}

/* A row either side wrote: decide whether only one of them did. */
static int row_ownership(walk *w, const uint8_t *input, const uint8_t *upstream, const uint8_t *ref, size_t bytes, const char *where) {
    if (!input || memcmp(upstream, ref, bytes) == 0) return 0;
    int upstream_wrote = memcmp(input, upstream, bytes) != 0, ref_wrote = memcmp(input, ref, bytes) != 0;
    if (upstream_wrote && !ref_wrote) { add_cause(w, KVC_CAUSE_ROW_WRITTEN, "%s", where); return 1; }
    if (!upstream_wrote && ref_wrote) { add_cause(w, KVC_CAUSE_ROW_SKIPPED, "%s", where); return 1; }
    return 0;
}

typedef struct {
    const uint8_t *input, *upstream, *ref;   /* input may be NULL */
    int64_t pages, page_rows;
} paged_view;

static void walk_ds_mla(walk *w, const paged_view *v) {
    int64_t page_bytes = v->page_rows * 584;
    for (int64_t page = 0; page < v->pages; page++)
        for (int64_t r = 0; r < v->page_rows; r++) {
            int64_t token = page * page_bytes + r * 576, scales = page * page_bytes + v->page_rows * 576 + r * 8;
            const uint8_t *up = v->upstream, *ref = v->ref;
            if (memcmp(up + token, ref + token, 576) == 0 && memcmp(up + scales, ref + scales, 8) == 0) continue;
            char where[160];
            snprintf(where, sizeof where, "page %lld row %lld", (long long)page, (long long)r);
            if (row_ownership(w, v->input ? v->input + token : NULL, up + token, ref + token, 576, where)) continue;
            for (int block = 0; block < 7; block++) {
                char at[200];
                snprintf(at, sizeof at, "%s block %d", where, block);
                int scale_differs = classify_ue8m0(w, up[scales + block], ref[scales + block], at);
                for (int j = 0; j < 64; j++) {
                    int64_t o = token + 64 * block + j;
                    int nan_bits = (up[o] & 0x7F) == 0x7F && (ref[o] & 0x7F) == 0x7F && up[o] != ref[o];
                    snprintf(at, sizeof at, "%s nope[%d]", where, 64 * block + j);
                    classify_value(w, KVC_PREGION_NOPE_CODE, kvc_fp8_distance(up[o], ref[o]), nan_bits, 0, scale_differs, at);
                }
            }
            if (up[scales + 7] != ref[scales + 7]) { count(w, KVC_PREGION_SCALE, -1); add_cause(w, KVC_CAUSE_MULTI_STEP, "%s pad byte", where); }
            for (int i = 0; i < 64; i++) {
                char at[200];
                snprintf(at, sizeof at, "%s rope[%d]", where, i);
                classify_bf16(w, KVC_PREGION_ROPE, kvc_load_u16(up + token + 448 + 2 * i), kvc_load_u16(ref + token + 448 + 2 * i), at);
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

static void walk_indexer(walk *w, const paged_view *v) {
    int64_t page_bytes = v->page_rows * 132;
    for (int64_t page = 0; page < v->pages; page++)
        for (int64_t r = 0; r < v->page_rows; r++) {
            int64_t token = page * page_bytes + r * 128, scale = page * page_bytes + v->page_rows * 128 + r * 4;
            const uint8_t *up = v->upstream, *ref = v->ref;
            if (memcmp(up + token, ref + token, 128) == 0 && memcmp(up + scale, ref + scale, 4) == 0) continue;
            char where[160], at[200];
            snprintf(where, sizeof where, "page %lld row %lld", (long long)page, (long long)r);
            if (row_ownership(w, v->input ? v->input + token : NULL, up + token, ref + token, 128, where)) continue;
            float su, sr;
            memcpy(&su, up + scale, 4);
            memcpy(&sr, ref + scale, 4);
            int64_t distance = pow2_exponent_distance(su, sr);
            count(w, KVC_PREGION_SCALE, distance);
            if (distance) {
                snprintf(at, sizeof at, "%s scale %g vs %g", where, (double)su, (double)sr);
                add_cause(w, distance < 0 ? KVC_CAUSE_NAN : distance == 1 ? KVC_CAUSE_LAST_BIT : KVC_CAUSE_MULTI_STEP, "%s", at);
            }
            for (int j = 0; j < 128; j++) {
                int nan_bits = (up[token + j] & 0x7F) == 0x7F && (ref[token + j] & 0x7F) == 0x7F && up[token + j] != ref[token + j];
                snprintf(at, sizeof at, "%s code[%d]", where, j);
                classify_value(w, KVC_PREGION_NOPE_CODE, kvc_fp8_distance(up[token + j], ref[token + j]), nan_bits, 0, distance != 0, at);
            }
        }
}

/* Rows of 512 bf16 (plain cache, latent) or 512 fp8 (plain fp8 cache). */
static void walk_rows(walk *w, const uint8_t *input, const uint8_t *up, const uint8_t *ref, int64_t rows, int element_bytes,
                      int is_latent) {
    int64_t row_bytes = 512 * element_bytes;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * row_bytes;
        if (memcmp(up + o, ref + o, (size_t)row_bytes) == 0) continue;
        char where[160], at[200];
        snprintf(where, sizeof where, "row %lld", (long long)r);
        if (row_ownership(w, input ? input + o : NULL, up + o, ref + o, (size_t)row_bytes, where)) continue;
        for (int d = 0; d < 512; d++) {
            snprintf(at, sizeof at, "%s dim %d", where, d);
            kvc_parity_region region = is_latent ? KVC_PREGION_LATENT : d >= 448 ? KVC_PREGION_ROPE
                                       : element_bytes == 2 ? KVC_PREGION_NOPE_BF16 : KVC_PREGION_NOPE_CODE;
            if (element_bytes == 2) {
                classify_bf16(w, region, kvc_load_u16(up + o + 2 * d), kvc_load_u16(ref + o + 2 * d), at);
            } else {
                uint8_t a = up[o + d], b = ref[o + d];
                classify_value(w, region, kvc_fp8_distance(a, b), (a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F && a != b, 0, 0, at);
            }
        }
    }
}

static int64_t f32_distance(uint32_t a, uint32_t b) {
    int a_nan = (a & 0x7FFFFFFFu) > 0x7F800000u, b_nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
    if (a_nan || b_nan) return a_nan && b_nan ? 0 : -1;
    int64_t oa = (a & 0x80000000u) ? -(int64_t)(a & 0x7FFFFFFFu) : (int64_t)(a & 0x7FFFFFFFu);
    int64_t ob = (b & 0x80000000u) ? -(int64_t)(b & 0x7FFFFFFFu) : (int64_t)(b & 0x7FFFFFFFu);
    return llabs(oa - ob);
}

static void walk_state(walk *w, const uint8_t *input, const uint8_t *up, const uint8_t *ref, int64_t rows, int64_t row_floats) {
    int64_t row_bytes = row_floats * 4;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * row_bytes;
        if (memcmp(up + o, ref + o, (size_t)row_bytes) == 0) continue;
        char where[160], at[200];
        snprintf(where, sizeof where, "state slot %lld", (long long)r);
        if (row_ownership(w, input ? input + o : NULL, up + o, ref + o, (size_t)row_bytes, where)) continue;
        for (int64_t i = 0; i < row_floats; i++) {
            uint32_t a, b;
            memcpy(&a, up + o + 4 * i, 4);
            memcpy(&b, ref + o + 4 * i, 4);
            int nan_bits = f32_distance(a, b) == 0 && a != b;
            snprintf(at, sizeof at, "%s column %lld", where, (long long)i);
            int flushed = (a & 0x7FFFFFFFu) == 0 && (b & 0x7F800000u) == 0 && (b & 0x7FFFFFu) != 0;
            classify_value(w, KVC_PREGION_STATE, f32_distance(a, b), nan_bits, flushed, 0, at);
        }
    }
}

static void walk_output(walk *w, const kvc_case *c, const char *name, const kvc_array *upstream, const kvc_array *ref) {
    kvc_array *input_array = kvc_case_get(c, name);
    const uint8_t *input = input_array && input_array->count == upstream->count && input_array->dtype == upstream->dtype
                               ? input_array->data : NULL;
    const uint8_t *up = upstream->data, *rf = ref->data;
    int64_t bytes = upstream->count * kvc_dtype_size(upstream->dtype);
    w->group->bytes += bytes;
    for (int64_t i = 0; i < bytes; i++) w->group->bytes_identical += up[i] == rf[i];
    if (memcmp(up, rf, (size_t)bytes) == 0) return;
    w->differs = 1;
    int64_t last = upstream->shape[upstream->ndim - 1], rows = upstream->count / last;
    if (strcmp(name, "latent") == 0) walk_rows(w, input, up, rf, rows, 2, 1);
    else if (strcmp(name, "state_cache") == 0) walk_state(w, input, up, rf, rows, last);
    else if (c->cache_dtype == KVC_CACHE_FP8_DS_MLA || c->cache_dtype == KVC_CACHE_FP8_INDEXER) {
        paged_view v = {input, up, rf, upstream->shape[0], upstream->shape[1]};
        if (c->cache_dtype == KVC_CACHE_FP8_DS_MLA) walk_ds_mla(w, &v);
        else walk_indexer(w, &v);
    } else walk_rows(w, input, up, rf, upstream->count / 512, c->cache_dtype == KVC_CACHE_BF16 ? 2 : 1, 0);
}

void kvc_parity_add_case(kvc_parity_report *report, const kvc_case *c, const char *dir) {
    char source[64], stage[64];
    kvc_case_source_label(c, source, sizeof source);
    stage_key(c, stage, sizeof stage);
    kvc_parity_group *g = group_for(report, source, stage);
    if (!g) return;
    walk w = {.group = g, .dir = dir};
    g->cases++;
    report->cases++;
    kvc_run_result result;
    if (kvc_run_case(&kvc_reference_backend, c, NULL, &result)) {
        add_cause(&w, KVC_CAUSE_STAGE_ERROR, "%s", result.error.message);
        kvc_run_result_free(&result);
        return;
    }
    for (int i = 0; i < result.num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.out", result.outputs[i].name);
        kvc_array *expected = kvc_case_get(c, name);
        if (!expected || expected->count != result.outputs[i].array.count || expected->dtype != result.outputs[i].array.dtype) continue;
        walk_output(&w, c, result.outputs[i].name, expected, &result.outputs[i].array);
    }
    kvc_run_result_free(&result);
    if (!w.differs) { g->cases_identical++; report->cases_identical++; }
}

int kvc_parity_add_path(kvc_parity_report *report, const char *path) {
    char **dirs;
    int n = kvc_find_cases(path, &dirs);
    if (n == 0) {
        fprintf(stderr, "kvcmp report parity: no case directory (with case.json) under %s\n", path);
        return -1;
    }
    if (report->num_paths < 8) snprintf(report->paths[report->num_paths++], sizeof report->paths[0], "%s", path);
    for (int i = 0; i < n; i++) {
        kvc_case c;
        char error[512];
        if (kvc_case_load(dirs[i], &c, error, sizeof error)) {
            fprintf(stderr, "kvcmp report parity: %s\n", error);
            continue;
        }
        kvc_parity_add_case(report, &c, dirs[i]);
        kvc_case_free(&c);
    }
    kvc_free_case_list(dirs, n);
    return 0;
}

void kvc_parity_free(kvc_parity_report *report) {
    free(report->groups);
    memset(report, 0, sizeof *report);
}

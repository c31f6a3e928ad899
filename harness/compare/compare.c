/* Classified byte comparison: see compare.h. */
#include "kvcmp/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"

static const char *const region_names[KVC_REGION_COUNT] = {
    "NoPE code", "scale byte", "RoPE value", "NoPE value", "state row", "latent value", "untouched byte",
};
const char *kvc_region_name(kvc_region region) { return region_names[region]; }

#define NAN_DISTANCE INT64_MAX

/* Distances in steps of each format: the shared format distances (common/formats.h), with "exactly one side
 * is NaN" as an infinite distance. */
static int64_t steps_or_nan(int64_t distance) { return distance < 0 ? NAN_DISTANCE : distance; }
static int64_t fp8_steps(uint8_t a, uint8_t b) { return steps_or_nan(kvc_fp8_distance(a, b)); }
static int64_t bf16_steps(uint16_t a, uint16_t b) { return steps_or_nan(kvc_bf16_distance(a, b)); }
static int64_t f32_steps(uint32_t a, uint32_t b) {
    int a_nan = (a & 0x7FFFFFFFu) > 0x7F800000u, b_nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
    if (a_nan || b_nan) return a_nan && b_nan ? 0 : NAN_DISTANCE;
    int64_t oa = a & 0x80000000u ? -(int64_t)(a & 0x7FFFFFFFu) : (a & 0x7FFFFFFFu);
    int64_t ob = b & 0x80000000u ? -(int64_t)(b & 0x7FFFFFFFu) : (b & 0x7FFFFFFFu);
    return llabs(oa - ob);
}
static int64_t ue8m0_steps(uint8_t a, uint8_t b) { return steps_or_nan(kvc_ue8m0_distance(a, b)); }
/* The indexer scale is a power of two: one step is one binade. */
static int64_t pow2_scale_steps(uint32_t a, uint32_t b) {
    if ((a & 0x807FFFFFu) == 0 && (b & 0x807FFFFFu) == 0 && (a >> 23) != 255 && (b >> 23) != 255)
        return llabs((int64_t)(a >> 23) - (int64_t)(b >> 23));
    return a == b ? 0 : NAN_DISTANCE;
}

/* One element of an output tensor.  `where` is only formatted for the
 * element that is reported (describe = 1): formatting every element would
 * dominate the cost of comparing large caches. */
typedef struct {
    kvc_region region;
    int width;           /* bytes */
    int64_t steps;
    int describe;
    char where[160];
} element;

#define WHERE(e, ...) do { if ((e)->describe) snprintf((e)->where, sizeof (e)->where, __VA_ARGS__); } while (0)

typedef struct {
    const kvc_case *c;
    const char *name;
    const uint8_t *input, *expected, *got;   /* input may be NULL */
    int64_t bytes;
    int64_t row_bytes;     /* granularity of the "untouched" test */
    int64_t page_rows, page_bytes;
    kvc_policy policy;
    kvc_compare_report *report;
} tensor_compare;

static int64_t tolerance(kvc_policy policy, kvc_region region) {
    if (policy == KVC_POLICY_EXACT) return 0;
    return region == KVC_REGION_NOPE_CODE || region == KVC_REGION_SCALE_BYTE || region == KVC_REGION_ROPE_VALUE ? 1 : 0;
}

/* Which element byte offset `off` of a paged byte cache belongs to. */
static void classify_ds_mla(const tensor_compare *tc, int64_t off, element *e, const uint8_t *a, const uint8_t *b) {
    int64_t page = off / tc->page_bytes, in_page = off % tc->page_bytes, data = tc->page_rows * KVC_FP8_DS_MLA_TOKEN_BYTES;
    if (in_page < data) {
        int64_t row = in_page / KVC_FP8_DS_MLA_TOKEN_BYTES, col = in_page % KVC_FP8_DS_MLA_TOKEN_BYTES;
        if (col < 448) {
            e->region = KVC_REGION_NOPE_CODE; e->width = 1; e->steps = fp8_steps(a[0], b[0]);
            WHERE(e, "page %lld row %lld nope[%lld]", (long long)page, (long long)row, (long long)col);
        } else {
            e->region = KVC_REGION_ROPE_VALUE; e->width = 2;
            e->steps = bf16_steps(kvc_load_u16(a), kvc_load_u16(b));
            WHERE(e, "page %lld row %lld rope[%lld]", (long long)page, (long long)row, (long long)(col - 448) / 2);
        }
    } else {
        int64_t row = (in_page - data) / 8, col = (in_page - data) % 8;
        e->region = KVC_REGION_SCALE_BYTE; e->width = 1;
        e->steps = col == 7 ? (a[0] == b[0] ? 0 : NAN_DISTANCE) : ue8m0_steps(a[0], b[0]);
        WHERE(e, "page %lld row %lld scale[%lld]", (long long)page, (long long)row, (long long)col);
    }
}

static void classify_indexer(const tensor_compare *tc, int64_t off, element *e, const uint8_t *a, const uint8_t *b) {
    int64_t page = off / tc->page_bytes, in_page = off % tc->page_bytes, data = tc->page_rows * KVC_FP8_INDEXER_TOKEN_BYTES;
    if (in_page < data) {
        e->region = KVC_REGION_NOPE_CODE; e->width = 1; e->steps = fp8_steps(a[0], b[0]);
        WHERE(e, "page %lld row %lld code[%lld]", (long long)page,
                 (long long)(in_page / 128), (long long)(in_page % 128));
    } else {
        uint32_t ua, ub;
        memcpy(&ua, a, 4); memcpy(&ub, b, 4);
        e->region = KVC_REGION_SCALE_BYTE; e->width = 4; e->steps = pow2_scale_steps(ua, ub);
        WHERE(e, "page %lld row %lld scale (fp32)", (long long)page, (long long)((in_page - data) / 4));
    }
}

static void classify(const tensor_compare *tc, int64_t off, element *e) {
    const uint8_t *a = tc->expected + off, *b = tc->got + off;
    const kvc_case *c = tc->c;
    if (strcmp(tc->name, "kv_cache") == 0) {
        if (c->cache_dtype == KVC_CACHE_FP8_DS_MLA) { classify_ds_mla(tc, off, e, a, b); return; }
        if (c->cache_dtype == KVC_CACHE_FP8_INDEXER) { classify_indexer(tc, off, e, a, b); return; }
        int bf16 = c->cache_dtype == KVC_CACHE_BF16;
        int64_t width = bf16 ? 2 : 1, dim = (off / width) % 512, row = off / width / 512;
        e->width = (int)width;
        e->region = dim < 448 ? (bf16 ? KVC_REGION_NOPE_VALUE : KVC_REGION_NOPE_CODE) : KVC_REGION_ROPE_VALUE;
        e->steps = bf16 ? bf16_steps(kvc_load_u16(a), kvc_load_u16(b)) : fp8_steps(a[0], b[0]);
        WHERE(e, "row %lld dim %lld", (long long)row, (long long)dim);
        return;
    }
    if (strcmp(tc->name, "latent") == 0) {
        e->region = KVC_REGION_LATENT; e->width = 2; e->steps = bf16_steps(kvc_load_u16(a), kvc_load_u16(b));
        WHERE(e, "token %lld dim %lld", (long long)(off / 1024), (long long)(off % 1024) / 2);
        return;
    }
    uint32_t ua, ub;
    memcpy(&ua, a, 4); memcpy(&ub, b, 4);
    e->region = KVC_REGION_STATE_ROW; e->width = 4; e->steps = f32_steps(ua, ub);
    WHERE(e, "slot %lld column %lld", (long long)(off / tc->row_bytes),
             (long long)(off % tc->row_bytes) / 4);
}

/* A row is untouched when the expected output equals the input there. */
static int row_untouched(const tensor_compare *tc, int64_t off) {
    if (!tc->input) return 0;
    if (tc->page_bytes && tc->name[0] == 'k' && (tc->c->cache_dtype == KVC_CACHE_FP8_DS_MLA || tc->c->cache_dtype == KVC_CACHE_FP8_INDEXER)) {
        int64_t page = off / tc->page_bytes, in_page = off % tc->page_bytes;
        int ds = tc->c->cache_dtype == KVC_CACHE_FP8_DS_MLA;
        int64_t token_bytes = ds ? 576 : 128, scale_bytes = ds ? 8 : 4, data = tc->page_rows * token_bytes;
        int64_t row = in_page < data ? in_page / token_bytes : (in_page - data) / scale_bytes;
        int64_t base = page * tc->page_bytes;
        int64_t t0 = base + row * token_bytes, s0 = base + data + row * scale_bytes;
        return memcmp(tc->input + t0, tc->expected + t0, (size_t)token_bytes) == 0 &&
               memcmp(tc->input + s0, tc->expected + s0, (size_t)scale_bytes) == 0;
    }
    int64_t start = off / tc->row_bytes * tc->row_bytes;
    return memcmp(tc->input + start, tc->expected + start, (size_t)tc->row_bytes) == 0;
}

/* Elements start at multiples of their width (1, 2 or 4 bytes) and of
 * every layout boundary, so equal 4 KiB blocks can be skipped whole. */
#define SKIP_BLOCK 4096

static void report_element(tensor_compare *tc, int64_t off, element *e) {
    kvc_compare_report *r = tc->report;
    if (row_untouched(tc, off)) { e->region = KVC_REGION_UNTOUCHED; e->steps = NAN_DISTANCE; }
    r->differing[e->region]++;
    if (e->steps > r->max_steps[e->region]) r->max_steps[e->region] = e->steps;
    if (tc->policy != KVC_POLICY_EXACT && e->steps <= tolerance(tc->policy, e->region)) return;
    r->failing[e->region]++;
    if (r->has_first) return;
    element described = *e;
    described.describe = 1;
    classify(tc, off, &described);
    char ref_hex[16] = "", got_hex[16] = "";
    for (int i = e->width - 1; i >= 0; i--) {
        snprintf(ref_hex + strlen(ref_hex), 4, "%02x", tc->expected[off + i]);
        snprintf(got_hex + strlen(got_hex), 4, "%02x", tc->got[off + i]);
    }
    snprintf(r->first, sizeof r->first, "%s %s (%s) expected=0x%s got=0x%s", tc->name, described.where,
             region_names[e->region], ref_hex, got_hex);
    snprintf(r->first_tensor, sizeof r->first_tensor, "%s", tc->name);
    r->first_offset = off;
    r->first_width = e->width;
    r->first_region = e->region;
    r->has_first = 1;
}

static void compare_tensor(tensor_compare *tc) {
    tc->report->bytes_compared += tc->bytes;
    for (int64_t block = 0; block < tc->bytes; block += SKIP_BLOCK) {
        int64_t end = block + SKIP_BLOCK < tc->bytes ? block + SKIP_BLOCK : tc->bytes;
        if (memcmp(tc->expected + block, tc->got + block, (size_t)(end - block)) == 0) continue;
        element e = {0};
        for (int64_t off = block; off < end; off += e.width) {
            classify(tc, off, &e);
            if (memcmp(tc->expected + off, tc->got + off, (size_t)e.width) != 0) report_element(tc, off, &e);
        }
    }
}

static void setup(tensor_compare *tc, const kvc_case *c, const char *name, const kvc_array *expected, const kvc_array *got,
                  kvc_policy policy, kvc_compare_report *report) {
    memset(tc, 0, sizeof *tc);
    tc->c = c;
    tc->name = name;
    tc->expected = expected->data;
    tc->got = got->data;
    tc->bytes = expected->count * kvc_dtype_size(expected->dtype);
    kvc_array *input = kvc_case_get(c, name);
    if (input && input->count == expected->count && input->dtype == expected->dtype) tc->input = input->data;
    int64_t last = expected->ndim ? expected->shape[expected->ndim - 1] : 1;
    tc->row_bytes = last * kvc_dtype_size(expected->dtype);
    if (expected->ndim == 3) {
        tc->page_rows = expected->shape[1];
        tc->page_bytes = expected->shape[1] * tc->row_bytes;
    }
    tc->policy = policy;
    tc->report = report;
}

static int shapes_match(const kvc_array *a, const kvc_array *b) {
    return a->dtype == b->dtype && a->count == b->count;
}

void kvc_compare_outputs(const kvc_case *c, const kvc_run_result *result, kvc_policy policy, kvc_compare_report *report) {
    memset(report, 0, sizeof *report);
    for (int i = 0; i < result->num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.40s.out", result->outputs[i].name);
        kvc_array *expected = kvc_case_get(c, name);
        if (!expected || !shapes_match(expected, &result->outputs[i].array)) {
            report->missing_expected = 1;
            snprintf(report->missing_name, sizeof report->missing_name, "%s", name);
            continue;
        }
        tensor_compare tc;
        setup(&tc, c, result->outputs[i].name, expected, &result->outputs[i].array, policy, report);
        compare_tensor(&tc);
    }
}

void kvc_compare_results(const kvc_case *c, const kvc_run_result *expected, const kvc_run_result *got, kvc_policy policy,
                         kvc_compare_report *report) {
    memset(report, 0, sizeof *report);
    for (int i = 0; i < expected->num_outputs && i < got->num_outputs; i++) {
        tensor_compare tc;
        setup(&tc, c, expected->outputs[i].name, &expected->outputs[i].array, &got->outputs[i].array, policy, report);
        compare_tensor(&tc);
    }
    if (expected->num_outputs != got->num_outputs) report->missing_expected = 1;
}

int kvc_report_failed(const kvc_compare_report *report) {
    if (report->missing_expected) return 1;
    for (int i = 0; i < KVC_REGION_COUNT; i++)
        if (report->failing[i]) return 1;
    return 0;
}

int kvc_report_differs(const kvc_compare_report *report) {
    for (int i = 0; i < KVC_REGION_COUNT; i++)
        if (report->differing[i]) return 1;
    return report->missing_expected;
}

void kvc_report_summary(const kvc_compare_report *report, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    if (report->missing_expected) n += (size_t)snprintf(out + n, size - n, "expected tensor %s missing or misshapen; ", report->missing_name);
    for (int i = 0; i < KVC_REGION_COUNT && n < size; i++) {
        if (!report->differing[i]) continue;
        char steps[32];
        if (report->max_steps[i] == NAN_DISTANCE) snprintf(steps, sizeof steps, "NaN/untouched");
        else snprintf(steps, sizeof steps, "max %lld step%s", (long long)report->max_steps[i], report->max_steps[i] == 1 ? "" : "s");
        n += (size_t)snprintf(out + n, size - n, "%s%s x%lld (%s%s)", n ? ", " : "", region_names[i], (long long)report->differing[i],
                              steps, report->failing[i] ? "" : ", within tolerance");
    }
}

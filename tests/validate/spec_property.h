/* Property tests of the shared validator (common/validate.c) against the
 * second reading of SPEC.md 8 in spec_rules.h: random stage arguments,
 * valid ones and ones broken at the bounds of each rule (both sides of
 * each inclusive and exclusive bound), through both.  The validator must
 * accept exactly what the rules accept, and refuse the rest with a status
 * the rules give.
 *
 * Used by tests/validate/test_spec_rules.c and by the self-check driver
 * of the shared-code mutants (harness/mutants/self_check.c), so nothing
 * here depends on Criterion: each entry point returns the number of
 * disagreements and describes the first in `why`.  Everything is static:
 * a file uses what it needs. */
#ifndef KVCMP_TESTS_SPEC_PROPERTY_H
#define KVCMP_TESTS_SPEC_PROPERTY_H

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/validate_parts.h"
#include "kvcmp/rng.h"
#include "kvcmp/validate.h"
#include "tests/validate/spec_rules.h"

/* ---- bookkeeping ------------------------------------------------------ */

#define PROP_MAX_BUFFERS 32
#define PROP_MAX_BOUNDS 256

typedef struct {
    kvc_rng rng;
    void *buffers[PROP_MAX_BUFFERS];
    int num_buffers;
    char applied[256];           /* the perturbations of the current case */
    int frozen;                  /* a change after which no other is drawn (sizes, pointers, shapes) */
    /* Totals over a run, so a caller can check the run is not vacuous. */
    int64_t cases, accepted, status[KVC_ERR_METADATA + 1];
    int num_bounds;
    struct { char name[40]; int64_t hits; } bounds[PROP_MAX_BOUNDS];
    int64_t disagreements;
    char why[1200];
} prop_run;

static inline void prop_note(prop_run *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void prop_note(prop_run *p, const char *fmt, ...) {
    size_t n = strlen(p->applied);
    if (n + 2 >= sizeof p->applied) return;
    if (n) p->applied[n++] = ' ', p->applied[n] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->applied + n, sizeof p->applied - n, fmt, ap);
    va_end(ap);
}

/* A named bound was drawn: counted, and noted in the case's description. */
static inline void prop_bound(prop_run *p, const char *name) {
    prop_note(p, "%s", name);
    for (int i = 0; i < p->num_bounds; i++)
        if (strcmp(p->bounds[i].name, name) == 0) { p->bounds[i].hits++; return; }
    if (p->num_bounds == PROP_MAX_BOUNDS) return;
    snprintf(p->bounds[p->num_bounds].name, sizeof p->bounds[0].name, "%s", name);
    p->bounds[p->num_bounds++].hits = 1;
}

static inline int64_t prop_bound_hits(const prop_run *p, const char *name) {
    for (int i = 0; i < p->num_bounds; i++)
        if (strcmp(p->bounds[i].name, name) == 0) return p->bounds[i].hits;
    return 0;
}

/* Zeroed memory of at least `bytes` (and 64 more: misaligned pointers
 * and pointers one past a tensor stay inside), freed after the case. */
static inline void *prop_alloc(prop_run *p, int64_t bytes) {
    if (p->num_buffers == PROP_MAX_BUFFERS) abort();
    void *b = calloc((size_t)(bytes > 0 ? bytes : 0) + 64, 1);
    if (!b) abort();
    p->buffers[p->num_buffers++] = b;
    return b;
}

static inline void prop_release(prop_run *p) {
    for (int i = 0; i < p->num_buffers; i++) free(p->buffers[i]);
    p->num_buffers = 0;
    p->applied[0] = 0;
    p->frozen = 0;
}

static inline int64_t prop_range(prop_run *p, int64_t lo, int64_t hi) { return kvc_rng_range(&p->rng, lo, hi); }
static inline int prop_chance(prop_run *p, int num, int den) { return kvc_rng_chance(&p->rng, num, den); }
#define PROP_PICK(p, array) ((array)[kvc_rng_below(&(p)->rng, (int64_t)(sizeof(array) / sizeof((array)[0])))])

static inline void prop_shuffle(prop_run *p, int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = kvc_rng_below(&p->rng, i + 1), x = v[i];
        v[i] = v[j];
        v[j] = x;
    }
}

/* A pointer to an address, never dereferenced: the validator compares
 * addresses only. */
static inline void *prop_address(uintptr_t a) { return (void *)a; }

/* Both verdicts of one case: 1 (and `why` filled, once) when they disagree. */
static inline int prop_judge(prop_run *p, const char *stage, int fields, int real, const kvc_error *err, unsigned model) {
    p->cases++;
    if (real == KVC_OK) p->accepted++;
    else if (real > 0 && real <= KVC_ERR_METADATA) p->status[real]++;
    int agree = real == KVC_OK ? model == 0 : real <= KVC_ERR_METADATA && (model & SPEC_BIT(real)) != 0;
    if (agree && real != KVC_OK && err->message[0] == 0) agree = 0;   /* a refusal names what it refuses */
    if (agree) return 0;
    if (p->disagreements++ == 0) {
        char statuses[80] = "";
        for (int code = KVC_ERR_PARAM; code <= KVC_ERR_METADATA; code++)
            if (model & SPEC_BIT(code)) snprintf(statuses + strlen(statuses), sizeof statuses - strlen(statuses), " %s", kvc_status_name(code));
        snprintf(p->why, sizeof p->why, "%s%s: common/validate.c says %s (%s), SPEC.md 8's rules say%s; case: %s", stage,
                 fields ? " (fields)" : "", kvc_status_name(real), real ? err->message : "", model ? statuses : " ok", p->applied);
    }
    return 1;
}

/* ---- drawn values at the bounds ---------------------------------------- */

#define PROP_2_40 ((int64_t)1 << 40)

/* A position for a token: ordinary, or one of section 8's bounds. */
static inline int64_t prop_edge_position(prop_run *p) {
    switch (prop_range(p, 0, 7)) {
    case 0: prop_bound(p, "position=-1"); return -1;
    case 1: prop_bound(p, "position=INT64_MIN"); return INT64_MIN;
    case 2: prop_bound(p, "position=2^40-1"); return PROP_2_40 - 1;
    case 3: prop_bound(p, "position=2^40"); return PROP_2_40;
    case 4: prop_bound(p, "position=2^40+1"); return PROP_2_40 + 1;
    case 5: prop_bound(p, "position=INT64_MAX"); return INT64_MAX;
    case 6: prop_bound(p, "position=0"); return 0;
    default: prop_bound(p, "position=2^40-2"); return PROP_2_40 - 2;
    }
}

static inline float prop_edge_eps(prop_run *p) {
    switch (prop_range(p, 0, 9)) {
    case 0: prop_bound(p, "eps=1"); return 1.0f;
    case 1: prop_bound(p, "eps=next-above-1"); return nextafterf(1.0f, 2.0f);
    case 2: prop_bound(p, "eps=next-below-1"); return nextafterf(1.0f, 0.0f);
    case 3: prop_bound(p, "eps=0"); return 0.0f;
    case 4: prop_bound(p, "eps=-0"); return -0.0f;
    case 5: prop_bound(p, "eps=-denorm"); return -FLT_TRUE_MIN;
    case 6: prop_bound(p, "eps=denorm"); return FLT_TRUE_MIN;
    case 7: prop_bound(p, "eps=nan"); return NAN;
    case 8: prop_bound(p, "eps=inf"); return INFINITY;
    default: prop_bound(p, "eps=-1"); return -1.0f;
    }
}

static inline float prop_edge_fp8_scale(prop_run *p) {
    switch (prop_range(p, 0, 8)) {
    case 0: prop_bound(p, "fp8_scale=0"); return 0.0f;
    case 1: prop_bound(p, "fp8_scale=-0"); return -0.0f;
    case 2: prop_bound(p, "fp8_scale=denorm"); return FLT_TRUE_MIN;
    case 3: prop_bound(p, "fp8_scale=FLT_MAX"); return FLT_MAX;
    case 4: prop_bound(p, "fp8_scale=inf"); return INFINITY;
    case 5: prop_bound(p, "fp8_scale=nan"); return NAN;
    case 6: prop_bound(p, "fp8_scale=-denorm"); return -FLT_TRUE_MIN;
    case 7: prop_bound(p, "fp8_scale=-inf"); return -INFINITY;
    default: prop_bound(p, "fp8_scale=1"); return 1.0f;
    }
}

/* ---- paged caches ------------------------------------------------------ */

/* A cache of `pages` pages of `rows` rows, `padding` bytes between pages. */
static inline kvc_paged_cache prop_cache(prop_run *p, int64_t pages, int64_t rows, int64_t row_bytes, int64_t padding) {
    kvc_paged_cache c = {.num_pages = pages, .page_rows = rows, .page_bytes = rows * row_bytes, .page_stride = rows * row_bytes + padding};
    c.data = prop_alloc(p, pages > 0 ? (pages - 1) * c.page_stride + c.page_bytes : 0);
    return c;
}

static inline int64_t prop_padding(prop_run *p, int64_t align) {
    static const int64_t paddings[] = {0, 0, 4, 64, 100, 8};
    int64_t pad = PROP_PICK(p, paddings);
    return pad % align ? pad + 1 : pad;
}

/* One geometry rule of a cache broken, or met exactly at its bound. */
static inline void prop_break_cache(prop_run *p, kvc_paged_cache *c, int64_t row_bytes, int64_t align, const char *name) {
    char bound[40];
    switch (prop_range(p, 0, 11)) {
    case 0: c->num_pages = -1; snprintf(bound, sizeof bound, "%s:num_pages=-1", name); break;
    case 1: c->page_rows = 0; c->page_bytes = 0; snprintf(bound, sizeof bound, "%s:page_rows=0", name); break;
    case 2: c->page_bytes += prop_chance(p, 1, 2) ? row_bytes : -1; snprintf(bound, sizeof bound, "%s:page_bytes-wrong", name); break;
    case 3: c->page_stride = c->page_bytes - align; snprintf(bound, sizeof bound, "%s:stride=page_bytes-1", name); break;
    case 4: c->page_stride = c->page_bytes; snprintf(bound, sizeof bound, "%s:stride=page_bytes", name); break;
    case 5:
        if (align == 1) { c->page_stride = c->page_bytes + 1; snprintf(bound, sizeof bound, "%s:stride+1", name); }
        else { c->page_stride += align / 2; snprintf(bound, sizeof bound, "%s:stride-misaligned", name); }
        break;
    case 6:
        if (align == 1) { snprintf(bound, sizeof bound, "%s:data-any-byte", name); c->data = (uint8_t *)c->data + 1; }
        else { snprintf(bound, sizeof bound, "%s:data-misaligned", name); c->data = (uint8_t *)c->data + align / 2; }
        break;
    case 7: c->data = NULL; snprintf(bound, sizeof bound, "%s:data=NULL", name); break;
    case 8: c->num_pages = 0; snprintf(bound, sizeof bound, "%s:num_pages=0", name); break;
    case 9:   /* 2^56 bytes exactly (two pages 2^55 apart), then one stride step past */
        c->num_pages = 2;
        c->page_stride = ((int64_t)1 << 55) + (prop_chance(p, 1, 2) ? 0 : align);
        snprintf(bound, sizeof bound, "%s:span=2^56%s", name, c->page_stride == (int64_t)1 << 55 ? "" : "+");
        break;
    case 10:   /* the page size limit, with no pages (no rows to track) */
        c->num_pages = 0;
        c->page_rows = SPEC_IMPLEMENTATION_MAX_PAGE_ROWS + (prop_chance(p, 1, 2) ? 0 : 1);
        c->page_bytes = c->page_rows * row_bytes;
        c->page_stride = c->page_bytes;
        snprintf(bound, sizeof bound, "%s:page_rows=2^24%s", name, c->page_rows == SPEC_IMPLEMENTATION_MAX_PAGE_ROWS ? "" : "+1");
        break;
    default: c->page_rows = -3; c->page_bytes = -3 * row_bytes; snprintf(bound, sizeof bound, "%s:page_rows<0", name); break;
    }
    prop_bound(p, bound);
}

/* An output placed against an input: ending exactly where it starts or
 * starting exactly where it ends (both allowed), or overlapping it by one
 * aligned element (a conflict). */
static inline void *prop_place_against(prop_run *p, const void *input, int64_t input_bytes, int64_t output_bytes, int64_t align) {
    uintptr_t in = (uintptr_t)input;
    switch (prop_range(p, 0, 3)) {
    case 0: prop_bound(p, "overlap:ends-at-input"); return prop_address(in - (uintptr_t)output_bytes);
    case 1: prop_bound(p, "overlap:one-element-before"); return prop_address(in - (uintptr_t)output_bytes + (uintptr_t)align);
    case 2: prop_bound(p, "overlap:starts-after-input"); return prop_address(in + (uintptr_t)input_bytes);
    default: prop_bound(p, "overlap:last-element"); return prop_address(in + (uintptr_t)input_bytes - (uintptr_t)align);
    }
}

/* ---- v4.save_partial_states ---------------------------------------------- */

typedef struct { kvc_v4_save_args a; } prop_save;

static inline void prop_make_save(prop_run *p, kvc_v4_save_args *a) {
    memset(a, 0, sizeof *a);
    a->compress_ratio = prop_chance(p, 1, 2) ? 4 : 128;
    a->head_dim = prop_chance(p, 1, 2) ? 128 : 512;
    int64_t W = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim, T = prop_range(p, 0, 8);
    a->num_tokens = T;
    int64_t bs = prop_range(p, 1, 5), pages = (T + bs - 1) / bs + prop_range(p, 0, 2);
    a->state_cache = prop_cache(p, pages, bs, 2 * W * 4, prop_padding(p, 4));
    int64_t rows = pages * bs, *perm = prop_alloc(p, (rows + 1) * 8);
    for (int64_t i = 0; i < rows; i++) perm[i] = i;
    prop_shuffle(p, perm, rows);
    float *kv = prop_alloc(p, T * W * 4), *score = prop_alloc(p, T * W * 4);
    int64_t *positions = prop_alloc(p, T * 8), *slots = prop_alloc(p, T * 8);
    for (int64_t t = 0; t < T; t++) {
        positions[t] = prop_chance(p, 1, 4) ? PROP_2_40 - prop_range(p, 0, 300) : prop_range(p, 0, 600);
        slots[t] = prop_chance(p, 1, 6) ? -prop_range(p, 1, 3) : perm[t];
        if (slots[t] < 0 && prop_chance(p, 1, 2)) positions[t] = prop_chance(p, 1, 2) ? -7 : INT64_MAX;   /* padding: never checked */
    }
    a->kv = kv;
    a->score = score;
    a->ape = prop_alloc(p, (int64_t)a->compress_ratio * W * 4);
    a->positions = positions;
    a->slot_mapping = slots;
}

static inline void prop_break_save(prop_run *p, kvc_v4_save_args *a) {
    if (p->frozen) return;
    int safe = 0;
    int64_t T = a->num_tokens, W = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    int64_t *positions = (int64_t *)a->positions, *slots = (int64_t *)a->slot_mapping;
    int64_t rows = a->state_cache.num_pages * a->state_cache.page_rows;
    switch (prop_range(p, 0, 8)) {
    case 0: {
        static const int32_t ratios[] = {0, 1, 2, 3, 5, 8, 64, 127, 129, 256, -4};
        a->compress_ratio = PROP_PICK(p, ratios);
        prop_bound(p, "ratio-unsupported");
        break;
    }
    case 1: {
        static const int32_t dims[] = {0, 64, 127, 129, 256, 511, 513, 1024, -512};
        a->head_dim = PROP_PICK(p, dims);
        prop_bound(p, "head_dim-unsupported");
        break;
    }
    case 2:
        if (prop_chance(p, 1, 2)) { a->num_tokens = -1; prop_bound(p, "num_tokens=-1"); }
        else { a->num_tokens = PROP_2_40 + 1; prop_bound(p, "num_tokens=2^40+1"); }
        break;
    case 3: prop_break_cache(p, &a->state_cache, 2 * W * 4, 4, "state_cache"); break;
    case 4: {
        int which = (int)prop_range(p, 0, 4);
        if (which == 0) a->kv = NULL; else if (which == 1) a->score = NULL; else if (which == 2) a->ape = NULL;
        else if (which == 3) a->positions = NULL; else a->slot_mapping = NULL;
        prop_bound(p, which == 2 ? "null:ape" : "null:token-tensor");
        break;
    }
    case 5: {
        if (T == 0) break;
        int64_t t = prop_range(p, 0, T - 1);
        positions[t] = prop_edge_position(p);
        break;
    }
    case 6: {
        safe = 1;
        if (T == 0) break;
        int64_t t = prop_range(p, 0, T - 1);
        switch (prop_range(p, 0, 3)) {
        case 0: slots[t] = rows - 1; prop_bound(p, "slot=rows-1"); break;
        case 1: slots[t] = rows; prop_bound(p, "slot=rows"); break;
        case 2: slots[t] = INT64_MIN; prop_bound(p, "slot=INT64_MIN"); break;
        default: slots[t] = slots[prop_range(p, 0, T - 1)]; prop_bound(p, "slot=another-token's"); break;
        }
        break;
    }
    default: {
        const void *inputs[] = {a->kv, a->score, a->ape, a->positions, a->slot_mapping};
        int64_t sizes[] = {T * W * 4, T * W * 4, a->compress_ratio * W * 4, T * 8, T * 8};
        int i = (int)prop_range(p, 0, 4);
        safe = 1;
        int64_t span = a->state_cache.num_pages > 0 ? (a->state_cache.num_pages - 1) * a->state_cache.page_stride + a->state_cache.page_bytes : 0;
        a->state_cache.data = prop_place_against(p, inputs[i], sizes[i], span, 4);
        break;
    }
    }
    if (!safe) p->frozen = 1;
}

/* ---- v4.compress --------------------------------------------------------- */

static inline void prop_make_compress(prop_run *p, kvc_v4_compress_args *a) {
    memset(a, 0, sizeof *a);
    int32_t R = prop_chance(p, 2, 3) ? 4 : 128, D = prop_chance(p, 1, 2) ? 128 : 512;
    a->compress_ratio = R;
    a->head_dim = D;
    a->eps = prop_chance(p, 1, 2) ? 1e-6f : 0.0f;
    int64_t W = (int64_t)kvc_v4_coff(R) * D, window = (int64_t)kvc_v4_coff(R) * R;
    int64_t bs = prop_range(p, 1, 4), NR = prop_range(p, 1, 3), T = 0;
    int64_t starts[3], counts[3], max_blocks = 1;
    for (int64_t r = 0; r < NR; r++) {
        counts[r] = prop_range(p, 1, 5);
        starts[r] = R == 4 ? prop_range(p, 0, 24) : 128 * prop_range(p, 0, 1) + 127 - prop_range(p, 0, counts[r] - 1);
        int64_t last = starts[r] + counts[r] - 1;
        if (last / bs + 1 > max_blocks) max_blocks = last / bs + 1;
        T += counts[r];
    }
    int64_t padding = prop_range(p, 0, 2);
    T += padding;
    max_blocks += prop_range(p, 0, 1);
    int64_t state_pages = prop_range(p, 1, 6);
    a->state_cache = prop_cache(p, state_pages, bs, 2 * W * 4, prop_padding(p, 4));
    int32_t *table = prop_alloc(p, NR * max_blocks * 4);
    for (int64_t i = 0; i < NR * max_blocks; i++) table[i] = (int32_t)prop_range(p, 0, state_pages - 1);
    int64_t kb = prop_range(p, 1, 4), kv_pages = T / kb + 1 + prop_range(p, 0, 1);
    int64_t row_bytes = D == 512 ? 584 : 132, kv_rows = kv_pages * kb;
    a->kv_cache = prop_cache(p, kv_pages, kb, row_bytes, prop_padding(p, 1));
    int64_t *perm = prop_alloc(p, (kv_rows + 1) * 8);
    for (int64_t i = 0; i < kv_rows; i++) perm[i] = i;
    prop_shuffle(p, perm, kv_rows);
    int64_t *positions = prop_alloc(p, T * 8), *slots = prop_alloc(p, T * 8), *kv_slots = prop_alloc(p, T * 8);
    int32_t *t2r = prop_alloc(p, T * 4);
    int64_t t = 0, next_row = 0, cos_rows = 0;
    for (int64_t r = 0; r < NR; r++)
        for (int64_t i = 0; i < counts[r]; i++, t++) {
            int64_t q = starts[r] + i;
            positions[t] = q;
            int closes = (q + 1) % R == 0;
            slots[t] = prop_chance(p, 1, 10) ? -1 : (int64_t)table[r * max_blocks + q / bs] * bs + q % bs;
            if (closes) {
                kv_slots[t] = prop_chance(p, 1, 10) ? -1 : perm[next_row++];
                t2r[t] = (int32_t)r;
                if ((q / R) * R + 1 > cos_rows) cos_rows = (q / R) * R + 1;
            } else {
                /* Non-closing tokens: any rows, any token_to_req (SPEC.md 8:
                 * upstream leaves their metadata unset). */
                kv_slots[t] = prop_chance(p, 1, 2) ? -1 : prop_range(p, 0, 2 * kv_rows);
                t2r[t] = prop_chance(p, 1, 2) ? (int32_t)r : (int32_t)prop_range(p, INT32_MIN, INT32_MAX);
            }
        }
    for (; t < T; t++) {   /* padding after the requests */
        positions[t] = prop_range(p, -5, 5);
        slots[t] = -1;
        kv_slots[t] = prop_chance(p, 1, 2) ? -1 : prop_range(p, 0, kv_rows);
        t2r[t] = (int32_t)prop_range(p, -3, 7);
    }
    (void)window;
    a->num_tokens = T;
    a->block_table = table;
    a->num_requests = NR;
    a->max_blocks = max_blocks;
    a->token_to_req = t2r;
    a->positions = positions;
    a->slot_mapping = slots;
    a->kv_slot_mapping = kv_slots;
    a->norm_weight = prop_alloc(p, D * 4);
    a->cos_sin_rows = cos_rows + prop_range(p, 0, 2);
    a->cos_sin = a->cos_sin_rows ? prop_alloc(p, a->cos_sin_rows * 256) : NULL;
}

/* A token that writes: a closing token with both slots. */
static inline int64_t prop_closing_writer(prop_run *p, const kvc_v4_compress_args *a) {
    int64_t found[64], n = 0;
    for (int64_t t = 0; t < a->num_tokens && n < 64; t++)
        if (a->slot_mapping[t] >= 0 && a->kv_slot_mapping[t] >= 0 && a->positions[t] >= 0 && a->positions[t] < PROP_2_40 &&
            (a->positions[t] + 1) % a->compress_ratio == 0)
            found[n++] = t;
    return n ? found[kvc_rng_below(&p->rng, n)] : -1;
}

static inline void prop_break_compress(prop_run *p, kvc_v4_compress_args *a) {
    if (p->frozen) return;
    int safe = 0;
    int64_t T = a->num_tokens, D = a->head_dim, W = (int64_t)kvc_v4_coff(a->compress_ratio) * D;
    int64_t *positions = (int64_t *)a->positions, *slots = (int64_t *)a->slot_mapping, *kv_slots = (int64_t *)a->kv_slot_mapping;
    int32_t *t2r = (int32_t *)a->token_to_req, *table = (int32_t *)a->block_table;
    int64_t w = prop_closing_writer(p, a);
    switch (prop_range(p, 0, 14)) {
    case 0: a->compress_ratio = prop_chance(p, 1, 2) ? 2 : 64; prop_bound(p, "ratio-unsupported"); break;
    case 1: a->head_dim = prop_chance(p, 1, 2) ? 256 : 129; prop_bound(p, "head_dim-unsupported"); break;
    case 2: a->eps = prop_edge_eps(p); safe = 1; break;
    case 3: prop_break_cache(p, &a->state_cache, 2 * W * 4, 4, "state_cache"); break;
    case 4: prop_break_cache(p, &a->kv_cache, D == 512 ? 584 : 132, 1, "kv_cache"); break;
    case 5: {   /* positions: a writer's, or a non-closing token's with both slots */
        if (T == 0) break;
        int64_t t = prop_range(p, 0, T - 1);
        if (prop_chance(p, 1, 2) && kv_slots[t] < 0) kv_slots[t] = prop_range(p, 0, 3);
        positions[t] = prop_edge_position(p);
        break;
    }
    case 6:
        safe = 1;
        if (w < 0) break;
        switch (prop_range(p, 0, 3)) {
        case 0: kv_slots[w] = a->kv_cache.num_pages * a->kv_cache.page_rows; prop_bound(p, "kv_slot=rows"); break;
        case 1: kv_slots[w] = a->kv_cache.num_pages * a->kv_cache.page_rows - 1; prop_bound(p, "kv_slot=rows-1"); break;
        case 2: slots[w] = a->state_cache.num_pages * a->state_cache.page_rows; prop_bound(p, "state_slot=rows"); break;
        default: slots[w] = a->state_cache.num_pages * a->state_cache.page_rows - 1; prop_bound(p, "state_slot=rows-1"); break;
        }
        break;
    case 7:
        safe = 1;
        if (w < 0) break;
        switch (prop_range(p, 0, 3)) {
        case 0: t2r[w] = (int32_t)a->num_requests; prop_bound(p, "token_to_req=num_requests"); break;
        case 1: t2r[w] = -1; prop_bound(p, "token_to_req=-1"); break;
        case 2: t2r[w] = (int32_t)a->num_requests - 1; prop_bound(p, "token_to_req=num_requests-1"); break;
        default: t2r[w] = INT32_MIN; prop_bound(p, "token_to_req=INT32_MIN"); break;
        }
        break;
    case 8: {   /* a slotted non-closing token's token_to_req is never read */
        safe = 1;
        for (int64_t t = 0; t < T; t++)
            if (slots[t] >= 0 && positions[t] >= 0 && positions[t] < PROP_2_40 && (positions[t] + 1) % a->compress_ratio != 0) {
                if (kv_slots[t] < 0) kv_slots[t] = 0;
                t2r[t] = prop_chance(p, 1, 2) ? -1 : (int32_t)a->num_requests + (int32_t)prop_range(p, 0, 1000);
                prop_bound(p, "token_to_req-unset-non-closing");
                break;
            }
        break;
    }
    case 9: {   /* the cos_sin table one row short, or exactly long enough */
        int64_t needed = 0;
        safe = 1;
        for (int64_t t = 0; t < T; t++)
            if (slots[t] >= 0 && kv_slots[t] >= 0 && positions[t] >= 0 && positions[t] < PROP_2_40 &&
                (positions[t] + 1) % a->compress_ratio == 0 && (positions[t] / a->compress_ratio) * a->compress_ratio + 1 > needed)
                needed = (positions[t] / a->compress_ratio) * a->compress_ratio + 1;
        if (needed == 0) break;
        a->cos_sin_rows = needed - (prop_chance(p, 1, 2) ? 1 : 0);
        prop_bound(p, a->cos_sin_rows == needed ? "cos_sin_rows=needed" : "cos_sin_rows=needed-1");
        break;
    }
    case 10: {   /* a block-table entry a window reads */
        safe = 1;
        if (w < 0 || t2r[w] < 0 || t2r[w] >= a->num_requests) break;
        int64_t column = positions[w] / a->state_cache.page_rows;
        if (column >= a->max_blocks) break;
        int32_t *entry = table + t2r[w] * a->max_blocks + column;
        switch (prop_range(p, 0, 2)) {
        case 0: *entry = (int32_t)a->state_cache.num_pages; prop_bound(p, "block_table=num_pages"); break;
        case 1: *entry = (int32_t)a->state_cache.num_pages - 1; prop_bound(p, "block_table=num_pages-1"); break;
        default: *entry = -1; prop_bound(p, "block_table=-1"); break;
        }
        break;
    }
    case 11: {   /* max_blocks: exactly the last column a window reads, or one short */
        safe = 1;
        if (w < 0) break;
        int64_t last = 0;
        for (int64_t t = 0; t < T; t++)
            if (slots[t] >= 0 && kv_slots[t] >= 0 && positions[t] >= 0 && positions[t] < PROP_2_40 &&
                (positions[t] + 1) % a->compress_ratio == 0 && positions[t] / a->state_cache.page_rows > last)
                last = positions[t] / a->state_cache.page_rows;
        int64_t columns = last + (prop_chance(p, 1, 2) ? 1 : 0);
        if (columns > a->max_blocks) break;
        /* A narrower table is the same buffer read with a smaller stride. */
        a->max_blocks = columns;
        prop_bound(p, columns == last + 1 ? "max_blocks=last-column+1" : "max_blocks=last-column");
        break;
    }
    case 12: {
        int which = (int)prop_range(p, 0, 6);
        const void **ptrs[] = {(const void **)&a->positions, (const void **)&a->slot_mapping, (const void **)&a->kv_slot_mapping,
                               (const void **)&a->token_to_req, (const void **)&a->block_table, (const void **)&a->norm_weight,
                               (const void **)&a->cos_sin};
        *ptrs[which] = NULL;
        prop_bound(p, which == 5 ? "null:norm_weight" : which == 4 ? "null:block_table" : which == 6 ? "null:cos_sin" : "null:token-tensor");
        break;
    }
    case 13:
        if (prop_chance(p, 1, 2)) {
            int64_t *table_count = prop_chance(p, 1, 2) ? &a->num_requests : &a->max_blocks;
            *table_count = -1;
            prop_bound(p, "block_table-shape<0");
        } else {
            a->cos_sin_rows = prop_chance(p, 1, 2) ? -1 : PROP_2_40 + 1;
            prop_bound(p, a->cos_sin_rows < 0 ? "cos_sin_rows=-1" : "cos_sin_rows=2^40+1");
        }
        break;
    default: {
        const void *inputs[] = {a->state_cache.data, a->norm_weight, a->cos_sin, a->positions, a->slot_mapping, a->kv_slot_mapping,
                                a->token_to_req, a->block_table};
        int64_t state_span = (a->state_cache.num_pages - 1) * a->state_cache.page_stride + a->state_cache.page_bytes;
        int64_t sizes[] = {state_span, D * 4, a->cos_sin_rows * 256, T * 8, T * 8, T * 8, T * 4, a->num_requests * a->max_blocks * 4};
        int i = (int)prop_range(p, 0, 7);
        safe = 1;
        if (!inputs[i] || sizes[i] <= 0) break;
        int64_t span = (a->kv_cache.num_pages - 1) * a->kv_cache.page_stride + a->kv_cache.page_bytes;
        a->kv_cache.data = prop_place_against(p, inputs[i], sizes[i], span, 1);
        break;
    }
    }
    if (!safe) p->frozen = 1;
}

/* ---- v41.save_compress_norm ---------------------------------------------- */

static inline void prop_make_norm(prop_run *p, kvc_v41_norm_args *a) {
    memset(a, 0, sizeof *a);
    int32_t R = prop_chance(p, 1, 3) ? 1 : 2;
    a->compress_ratio = R;
    a->eps = prop_chance(p, 1, 2) ? 1e-6f : 1e-20f;
    int64_t T, *positions, *slots;
    if (R == 1) {
        T = prop_range(p, 0, 8);
        positions = prop_alloc(p, T * 8);
        slots = prop_alloc(p, T * 8);
        for (int64_t t = 0; t < T; t++) {
            positions[t] = prop_chance(p, 1, 4) ? PROP_2_40 - prop_range(p, 0, 3) : prop_range(p, 0, 500);
            slots[t] = prop_chance(p, 1, 5) ? -1 : prop_range(p, 0, 1 << 20);   /* R = 1: a slot only marks a token valid */
        }
        /* R = 1 ignores the ring and the request metadata: leave them unset. */
        a->num_requests = prop_range(p, -2, 2);
        a->state_cache.page_rows = prop_range(p, -1, 12);
    } else {
        static const int64_t caps[] = {8, 16, 32};
        int64_t cap = PROP_PICK(p, caps), NR = prop_range(p, 0, 3), blocks_count = NR + prop_range(p, 0, 2);
        int64_t counts[3], history[3], total = 0;
        for (int64_t r = 0; r < NR; r++) {
            counts[r] = prop_chance(p, 1, 4) ? prop_range(p, cap - 1, cap + 3) : prop_range(p, 0, 6);
            history[r] = prop_chance(p, 1, 5) ? PROP_2_40 - counts[r] + 1 - prop_range(p, 0, 3) : prop_range(p, 0, 90);
            total += counts[r];
        }
        int64_t trailing = prop_range(p, 0, 2);
        T = total + trailing;
        a->state_cache = prop_cache(p, blocks_count, cap, 4096, prop_padding(p, 4));
        int64_t *blocks = prop_alloc(p, (blocks_count + 1) * 8);
        for (int64_t i = 0; i < blocks_count; i++) blocks[i] = i;
        prop_shuffle(p, blocks, blocks_count);
        positions = prop_alloc(p, T * 8);
        slots = prop_alloc(p, T * 8);
        int32_t *t2r = prop_alloc(p, T * 4), *qsl = prop_alloc(p, (NR + 1) * 4);
        int64_t t = 0;
        qsl[0] = 0;
        for (int64_t r = 0; r < NR; r++) {
            for (int64_t i = 0; i < counts[r]; i++, t++) {
                positions[t] = history[r] + i;
                slots[t] = prop_chance(p, 1, 8) ? -prop_range(p, 1, 2) : blocks[r] * cap + positions[t] % cap;
                t2r[t] = (int32_t)r;
            }
            qsl[r + 1] = (int32_t)t;
        }
        for (; t < T; t++) {   /* padding after query_start_loc[NR]: nothing checked */
            positions[t] = prop_range(p, -3, 3);
            slots[t] = -1;
            t2r[t] = (int32_t)prop_range(p, -9, 9);
        }
        a->query_start_loc = qsl;
        a->num_requests = NR;
        a->token_to_req = t2r;
    }
    a->num_tokens = T;
    a->positions = positions;
    a->slot_mapping = slots;
    a->kv_score = prop_alloc(p, T * 512 * R * 4);
    a->latent = prop_alloc(p, T * 1024);
    a->norm_weight = prop_alloc(p, 1024);
}

/* A valid token of request r's chunk at index i from its start, or -1. */
static inline int64_t prop_chunk_token(const kvc_v41_norm_args *a, int64_t r, int from_end) {
    int64_t b = a->query_start_loc[r], e = a->query_start_loc[r + 1];
    if (e - b < 2) return -1;
    return from_end ? e - 1 : b + 1;
}

static inline void prop_break_norm(prop_run *p, kvc_v41_norm_args *a) {
    if (p->frozen) return;
    int safe = 0;
    int64_t T = a->num_tokens, NR = a->num_requests;
    int64_t *positions = (int64_t *)a->positions, *slots = (int64_t *)a->slot_mapping;
    int32_t *t2r = (int32_t *)a->token_to_req, *qsl = (int32_t *)a->query_start_loc;
    int ring = a->compress_ratio == 2;
    int64_t cap = a->state_cache.page_rows;
    int pick = (int)prop_range(p, 0, ring ? 22 : 5);
    switch (pick) {
    case 0: a->compress_ratio = prop_chance(p, 1, 2) ? 0 : 4; prop_bound(p, "ratio-unsupported"); break;
    case 1: a->eps = prop_edge_eps(p); safe = 1; break;
    case 2:
        if (prop_chance(p, 1, 2)) { a->num_tokens = -1; prop_bound(p, "num_tokens=-1"); }
        else { a->num_tokens = PROP_2_40 + 1; prop_bound(p, "num_tokens=2^40+1"); }
        break;
    case 3: {
        if (T == 0) break;
        int64_t t = prop_range(p, 0, T - 1);
        positions[t] = prop_edge_position(p);
        break;
    }
    case 4: {
        int which = (int)prop_range(p, 0, 4);
        if (which == 0) a->kv_score = NULL; else if (which == 1) a->positions = NULL; else if (which == 2) a->slot_mapping = NULL;
        else if (which == 3) a->latent = NULL; else a->norm_weight = NULL;
        prop_bound(p, which == 4 ? "null:norm_weight" : "null:token-tensor");
        break;
    }
    case 5: {   /* latent (an output) against an input */
        const void *inputs[] = {a->kv_score, a->norm_weight, a->positions, a->slot_mapping};
        int64_t sizes[] = {T * 512 * a->compress_ratio * 4, 1024, T * 8, T * 8};
        int i = (int)prop_range(p, 0, 3);
        safe = 1;
        if (T == 0) break;
        a->latent = prop_place_against(p, inputs[i], sizes[i], T * 1024, 2);
        break;
    }
    default:
        break;
    }
    if (pick < 6) { if (!safe) p->frozen = 1; return; }
    switch (pick - 6) {
    case 0: prop_break_cache(p, &a->state_cache, 4096, 4, "ring"); break;
    case 1: {
        static const int64_t caps[] = {4, 12, 7, 1, 64};
        int64_t c = PROP_PICK(p, caps);
        a->state_cache.page_rows = c;
        a->state_cache.page_bytes = c * 4096;
        a->state_cache.page_stride = c * 4096;
        prop_bound(p, c == 64 ? "cap=64" : "cap-not-power-of-two>=8");
        break;
    }
    case 2: a->num_requests = -1; prop_bound(p, "num_requests=-1"); break;
    case 3: qsl[0] = 1; prop_bound(p, "query_start_loc[0]!=0"); break;
    case 4:
        if (NR < 1) break;
        qsl[NR] = (int32_t)(T + (prop_chance(p, 1, 2) ? 1 : 0));
        prop_bound(p, qsl[NR] == T ? "query_start_loc[NR]=T" : "query_start_loc[NR]=T+1");
        break;
    case 5:
        if (NR < 2 || qsl[1] == 0) break;
        qsl[1] = qsl[2] + 1;
        prop_bound(p, "query_start_loc-not-monotone");
        break;
    case 6: {   /* a gap between a chunk's first two positions, or its last two */
        if (NR < 1) break;
        int64_t r = prop_range(p, 0, NR - 1), t = prop_chunk_token(a, r, prop_chance(p, 1, 2));
        if (t < 0) break;
        int first_pair = t == qsl[r] + 1;
        for (int64_t u = t; u < qsl[r + 1]; u++) positions[u] += cap;   /* ring rows kept */
        prop_bound(p, first_pair ? "gap:first-two-positions" : "gap:last-two-positions");
        break;
    }
    case 7: {
        if (NR < 1) break;
        int64_t r = prop_range(p, 0, NR - 1), t = prop_chunk_token(a, r, 0);
        if (t < 0) break;
        positions[t - 1] = INT64_MAX;
        prop_bound(p, "position-after-INT64_MAX");
        break;
    }
    case 8: {
        safe = 1;
        if (T == 0 || NR < 1 || qsl[NR] == 0) break;
        int64_t t = prop_range(p, 0, qsl[NR] - 1);
        t2r[t] = prop_chance(p, 1, 2) ? t2r[t] + 1 : -1;
        prop_bound(p, "token_to_req-disagrees");
        break;
    }
    case 9: {
        safe = 1;
        if (T == 0 || NR < 1 || qsl[NR] >= T) break;
        int64_t t = T - 1;
        slots[t] = positions[t] >= 0 ? positions[t] % cap : 0;
        prop_bound(p, "valid-slot-after-batch");
        break;
    }
    case 10: {
        safe = 1;
        int64_t t = -1;
        for (int64_t u = 0; u < T && t < 0; u++) if (slots[u] >= 0) t = u;
        if (t < 0) break;
        slots[t] = slots[t] / cap * cap + (slots[t] % cap + 1) % cap;
        prop_bound(p, "ring-row-not-p-mod-cap");
        break;
    }
    case 11: {
        safe = 1;
        int64_t t = -1;
        for (int64_t u = 0; u < T && t < 0; u++) if (slots[u] >= 0) t = u;
        if (t < 0) break;
        int64_t rows = a->state_cache.num_pages * cap;
        slots[t] = prop_chance(p, 1, 2) ? rows + slots[t] % cap : rows - cap + slots[t] % cap;
        prop_bound(p, slots[t] >= rows ? "ring-slot=past-cache" : "ring-slot=last-block");
        break;
    }
    case 12: {   /* two blocks in one request */
        safe = 1;
        if (NR < 1) break;
        int64_t r = prop_range(p, 0, NR - 1), t = prop_chunk_token(a, r, 1);
        if (t < 0 || slots[t] < 0) break;
        slots[t] = (slots[t] / cap + 1) % a->state_cache.num_pages * cap + slots[t] % cap;
        prop_bound(p, "two-blocks-in-a-request");
        break;
    }
    case 13: {   /* two requests in one block */
        safe = 1;
        if (NR < 2) break;
        int64_t block = -1;
        for (int64_t u = qsl[0]; u < qsl[1] && block < 0; u++) if (slots[u] >= 0) block = slots[u] / cap;
        if (block < 0) break;
        for (int64_t u = qsl[1]; u < qsl[2]; u++)
            if (slots[u] >= 0) slots[u] = block * cap + slots[u] % cap;
        prop_bound(p, "one-block-two-requests");
        break;
    }
    case 14: {
        if (prop_chance(p, 1, 2)) { a->query_start_loc = NULL; prop_bound(p, "null:query_start_loc"); }
        else { a->token_to_req = NULL; prop_bound(p, "null:token_to_req"); }
        break;
    }
    case 15: {   /* the ring (an output) against an input or the latent */
        const void *inputs[] = {a->kv_score, a->latent, a->positions, a->slot_mapping, a->token_to_req, a->query_start_loc, a->norm_weight};
        int64_t sizes[] = {T * 4096, T * 1024, T * 8, T * 8, T * 4, (NR + 1) * 4, 1024};
        int i = (int)prop_range(p, 0, 6);
        safe = 1;
        if (!inputs[i] || sizes[i] <= 0 || a->state_cache.num_pages <= 0) break;
        int64_t span = (a->state_cache.num_pages - 1) * a->state_cache.page_stride + a->state_cache.page_bytes;
        a->state_cache.data = prop_place_against(p, inputs[i], sizes[i], span, 4);
        break;
    }
    default: {   /* the request count one short: its tokens are then padding after query_start_loc[NR] */
        if (NR < 1) break;
        a->num_requests = NR - 1;
        prop_bound(p, "num_requests-one-short");
        break;
    }
    }
    if (!safe) p->frozen = 1;
}

/* ---- v41 inserts --------------------------------------------------------- */

static inline void prop_make_insert(prop_run *p, kvc_v41_insert_args *a, int quant) {
    memset(a, 0, sizeof *a);
    int32_t R = prop_chance(p, 1, 2) ? 1 : 2;
    a->compress_ratio = R;
    a->cache_dtype = quant ? KVC_CACHE_FP8_DS_MLA : prop_chance(p, 1, 2) ? KVC_CACHE_BF16 : KVC_CACHE_FP8_E4M3;
    a->fp8_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? ldexpf(1.0f, (int)prop_range(p, -10, 4)) : (float)prop_range(p, -2, 2);
    int64_t T = prop_range(p, 0, 9), kb = prop_range(p, 1, 4), pages = T / kb + 1 + prop_range(p, 0, 1), rows = pages * kb;
    int64_t align = a->cache_dtype == KVC_CACHE_BF16 ? 2 : 1;
    a->kv_cache = prop_cache(p, pages, kb, spec_row_bytes(a->cache_dtype), prop_padding(p, align));
    int64_t *perm = prop_alloc(p, (rows + 1) * 8), *positions = prop_alloc(p, T * 8), *slots = prop_alloc(p, T * 8);
    for (int64_t i = 0; i < rows; i++) perm[i] = i;
    prop_shuffle(p, perm, rows);
    int64_t next = 0, cos_rows = 0;
    for (int64_t t = 0; t < T; t++) {
        positions[t] = prop_range(p, 0, 300);
        if ((positions[t] + 1) % R == 0) {
            slots[t] = prop_chance(p, 1, 8) ? -1 : perm[next++];
            if ((positions[t] / R) * R + 1 > cos_rows) cos_rows = (positions[t] / R) * R + 1;
        } else {
            slots[t] = prop_chance(p, 1, 2) ? -1 : prop_range(p, 0, 3 * rows);   /* a non-closing token writes nothing */
        }
    }
    a->num_tokens = T;
    a->positions = positions;
    a->slot_mapping = slots;
    a->latent = prop_alloc(p, T * 1024);
    a->cos_sin_rows = cos_rows + prop_range(p, 0, 2);
    a->cos_sin = a->cos_sin_rows ? prop_alloc(p, a->cos_sin_rows * 256) : NULL;
}

static inline void prop_break_insert(prop_run *p, kvc_v41_insert_args *a, int quant) {
    if (p->frozen) return;
    int safe = 0;
    int64_t T = a->num_tokens, *positions = (int64_t *)a->positions, *slots = (int64_t *)a->slot_mapping;
    int64_t rows = a->kv_cache.num_pages * a->kv_cache.page_rows;
    int64_t align = a->cache_dtype == KVC_CACHE_BF16 ? 2 : 1;
    switch (prop_range(p, 0, 10)) {
    case 0: a->compress_ratio = prop_chance(p, 1, 2) ? 0 : 3; prop_bound(p, "ratio-unsupported"); break;
    case 1: {
        static const int dtypes[] = {KVC_CACHE_FP8_DS_MLA, KVC_CACHE_FP8_INDEXER, KVC_CACHE_BF16, KVC_CACHE_FP8_E4M3, 9};
        a->cache_dtype = (kvc_cache_dtype)PROP_PICK(p, dtypes);
        prop_bound(p, quant ? "dtype:quant" : "dtype:plain");
        break;
    }
    case 2:
        safe = 1;
        if (a->cache_dtype != KVC_CACHE_FP8_E4M3 && prop_chance(p, 1, 2)) a->cache_dtype = quant ? a->cache_dtype : KVC_CACHE_FP8_E4M3;
        if (a->cache_dtype == KVC_CACHE_FP8_E4M3) {
            int64_t pages = a->kv_cache.num_pages, kb = a->kv_cache.page_rows;
            a->kv_cache.page_bytes = kb * 512;
            a->kv_cache.page_stride = kb * 512;
            (void)pages;
        }
        a->fp8_scale = prop_edge_fp8_scale(p);
        break;
    case 3: prop_break_cache(p, &a->kv_cache, spec_row_bytes(a->cache_dtype), align, "kv_cache"); break;
    case 4: {
        if (T == 0) break;
        int64_t t = prop_range(p, 0, T - 1);
        if (slots[t] < 0) slots[t] = prop_range(p, 0, rows - 1);
        positions[t] = prop_edge_position(p);
        break;
    }
    case 5: {
        safe = 1;
        int64_t t = -1;
        for (int64_t u = 0; u < T && t < 0; u++)
            if (slots[u] >= 0 && (positions[u] + 1) % a->compress_ratio == 0) t = u;
        if (t < 0) break;
        switch (prop_range(p, 0, 2)) {
        case 0: slots[t] = rows; prop_bound(p, "slot=rows"); break;
        case 1: slots[t] = rows - 1; prop_bound(p, "slot=rows-1"); break;
        default:
            for (int64_t u = 0; u < T; u++)
                if (u != t && slots[u] >= 0 && (positions[u] + 1) % a->compress_ratio == 0) { slots[t] = slots[u]; break; }
            prop_bound(p, "slot=another-token's");
            break;
        }
        break;
    }
    case 6: {
        safe = 1;
        int64_t needed = 0;
        for (int64_t t = 0; t < T; t++)
            if (slots[t] >= 0 && (positions[t] + 1) % a->compress_ratio == 0 && (positions[t] / a->compress_ratio) * a->compress_ratio + 1 > needed)
                needed = (positions[t] / a->compress_ratio) * a->compress_ratio + 1;
        if (needed == 0) break;
        a->cos_sin_rows = needed - (prop_chance(p, 1, 2) ? 1 : 0);
        prop_bound(p, a->cos_sin_rows == needed ? "cos_sin_rows=needed" : "cos_sin_rows=needed-1");
        break;
    }
    case 7: {
        int which = (int)prop_range(p, 0, 3);
        if (which == 0) a->latent = NULL; else if (which == 1) a->positions = NULL; else if (which == 2) a->slot_mapping = NULL;
        else a->cos_sin = NULL;
        prop_bound(p, which == 3 ? "null:cos_sin" : "null:token-tensor");
        break;
    }
    case 8:
        if (prop_chance(p, 1, 2)) { a->num_tokens = prop_chance(p, 1, 2) ? -1 : PROP_2_40 + 1; prop_bound(p, "num_tokens-out-of-range"); }
        else { a->cos_sin_rows = prop_chance(p, 1, 2) ? -1 : PROP_2_40 + 1; prop_bound(p, "cos_sin_rows-out-of-range"); }
        break;
    default: {
        const void *inputs[] = {a->latent, a->cos_sin, a->positions, a->slot_mapping};
        int64_t sizes[] = {T * 1024, a->cos_sin_rows * 256, T * 8, T * 8};
        int i = (int)prop_range(p, 0, 3);
        safe = 1;
        if (!inputs[i] || sizes[i] <= 0 || a->kv_cache.num_pages <= 0) break;
        int64_t span = (a->kv_cache.num_pages - 1) * a->kv_cache.page_stride + a->kv_cache.page_bytes;
        a->kv_cache.data = prop_place_against(p, inputs[i], sizes[i], span, align);
        break;
    }
    }
    if (!safe) p->frozen = 1;
}

/* ---- the runs ------------------------------------------------------------ */

/* 0, 1 or 2 rules broken (or met at a bound) per case. */
static inline int prop_breaks(prop_run *p) { int k = (int)prop_range(p, 0, 5); return k < 2 ? 0 : k < 5 ? 1 : 2; }

static inline int64_t prop_validator_cases(prop_run *p, uint64_t seed, int64_t cases) {
    kvc_rng_seed(&p->rng, seed, 0x5bec);
    for (int64_t i = 0; i < cases; i++) {
        int stage = (int)(i % 5), breaks = prop_breaks(p);
        kvc_error err = {0};
        switch (stage) {
        case 0: {
            kvc_v4_save_args a;
            prop_make_save(p, &a);
            for (int b = 0; b < breaks; b++) prop_break_save(p, &a);
            prop_judge(p, "v4.save_partial_states", 0, kvc_validate_v4_save(&a, &err), &err, spec_v4_save(&a, 0));
            break;
        }
        case 1: {
            kvc_v4_compress_args a;
            prop_make_compress(p, &a);
            for (int b = 0; b < breaks; b++) prop_break_compress(p, &a);
            prop_judge(p, "v4.compress", 0, kvc_validate_v4_compress(&a, &err), &err, spec_v4_compress(&a, 0));
            break;
        }
        case 2: {
            kvc_v41_norm_args a;
            prop_make_norm(p, &a);
            for (int b = 0; b < breaks; b++) prop_break_norm(p, &a);
            prop_judge(p, "v41.save_compress_norm", 0, kvc_validate_v41_norm(&a, &err), &err, spec_v41_norm(&a, 0));
            break;
        }
        default: {
            int quant = stage == 3;
            kvc_v41_insert_args a;
            prop_make_insert(p, &a, quant);
            for (int b = 0; b < breaks; b++) prop_break_insert(p, &a, quant);
            prop_judge(p, quant ? "v41.rope_quant_insert" : "v41.rope_plain_insert", 0, kvc_validate_v41_insert(&a, quant, &err), &err,
                       spec_v41_insert(&a, quant, 0));
            break;
        }
        }
        prop_release(p);
    }
    return p->disagreements;
}

/* ---- the fields-only checks: counts no buffer could hold ----------------- */

/* Every pointer at its own address far from the others (2^57 apart), so
 * that sizes up to 2^56 bytes overlap nothing unless asked to. */
static inline void *prop_far(int k) { return prop_address(((uintptr_t)k + 1) << 57); }

static inline void prop_count_bound(prop_run *p, int64_t *count, const char *name) {
    char bound[40];
    switch (prop_range(p, 0, 4)) {
    case 0: *count = PROP_2_40 - 1; snprintf(bound, sizeof bound, "%s=2^40-1", name); break;
    case 1: *count = PROP_2_40; snprintf(bound, sizeof bound, "%s=2^40", name); break;
    case 2: *count = PROP_2_40 + 1; snprintf(bound, sizeof bound, "%s=2^40+1", name); break;
    case 3: *count = INT64_MAX; snprintf(bound, sizeof bound, "%s=INT64_MAX", name); break;
    default: *count = -1; snprintf(bound, sizeof bound, "%s=-1", name); break;
    }
    prop_bound(p, bound);
}

/* A cache far away, of `pages` x `rows`; span bounds drawn. */
static inline kvc_paged_cache prop_far_cache(prop_run *p, int k, int64_t row_bytes, const char *name) {
    kvc_paged_cache c = {.data = prop_far(k), .num_pages = prop_range(p, 0, 4), .page_rows = prop_range(p, 1, 16)};
    c.page_bytes = c.page_rows * row_bytes;
    c.page_stride = c.page_bytes;
    if (prop_chance(p, 1, 3)) {   /* num_pages x page_stride around 2^56 */
        char bound[40];
        c.num_pages = ((int64_t)1 << 56) / c.page_stride;
        int over = prop_chance(p, 1, 2);
        if (over) c.num_pages++;
        snprintf(bound, sizeof bound, "%s:pages-x-stride%s2^56", name, over ? ">" : "<=");
        prop_bound(p, bound);
    }
    return c;
}

static inline int64_t prop_fields_cases(prop_run *p, uint64_t seed, int64_t cases) {
    kvc_rng_seed(&p->rng, seed, 0xf1e1d5);
    for (int64_t i = 0; i < cases; i++) {
        int stage = (int)(i % 5);
        kvc_error err = {0};
        switch (stage) {
        case 0: {
            kvc_v4_save_args a = {.compress_ratio = prop_chance(p, 1, 2) ? 4 : 128, .head_dim = prop_chance(p, 1, 2) ? 128 : 512};
            int64_t W = (int64_t)kvc_v4_coff(a.compress_ratio) * a.head_dim;
            a.num_tokens = prop_range(p, 0, 9);
            if (prop_chance(p, 2, 3)) prop_count_bound(p, &a.num_tokens, "num_tokens");
            a.kv = prop_far(1); a.score = prop_far(2); a.ape = prop_far(3); a.positions = prop_far(4); a.slot_mapping = prop_far(5);
            a.state_cache = prop_far_cache(p, 6, 2 * W * 4, "state_cache");
            prop_judge(p, "v4.save_partial_states", 1, kvc_validate_v4_save_fields(&a, &err), &err, spec_v4_save(&a, 1));
            break;
        }
        case 1: {
            kvc_v4_compress_args a = {.compress_ratio = prop_chance(p, 1, 2) ? 4 : 128, .head_dim = prop_chance(p, 1, 2) ? 128 : 512};
            int64_t W = (int64_t)kvc_v4_coff(a.compress_ratio) * a.head_dim;
            a.eps = prop_chance(p, 1, 2) ? 1e-6f : prop_edge_eps(p);
            a.num_tokens = prop_range(p, 0, 9);
            a.num_requests = prop_range(p, 0, 4);
            a.max_blocks = prop_range(p, 0, 4);
            a.cos_sin_rows = prop_range(p, 0, 9);
            switch (prop_range(p, 0, 4)) {
            case 0: prop_count_bound(p, &a.num_tokens, "num_tokens"); break;
            case 1: prop_count_bound(p, &a.cos_sin_rows, "cos_sin_rows"); break;
            case 2: {   /* block-table entries: exactly 2^40, one more, or a product past int64 */
                static const int64_t shapes[][2] = {{1 << 20, 1 << 20}, {(1 << 20) + 1, 1 << 20}, {PROP_2_40, 1}, {PROP_2_40 + 1, 1},
                                                    {1, PROP_2_40 + 1}, {INT64_MAX, 2}, {(int64_t)1 << 32, (int64_t)1 << 32}};
                int k = (int)prop_range(p, 0, 6);
                a.num_requests = shapes[k][0];
                a.max_blocks = shapes[k][1];
                prop_bound(p, (__int128)a.num_requests * a.max_blocks > SPEC_MAX_COUNT ? "block_table-entries>2^40" : "block_table-entries<=2^40");
                break;
            }
            case 3:   /* SPEC.md 9.3: request counts are bounded by 2^40 too */
                a.max_blocks = 0;
                prop_count_bound(p, &a.num_requests, "num_requests");
                break;
            default: break;
            }
            a.positions = prop_far(1); a.slot_mapping = prop_far(2); a.kv_slot_mapping = prop_far(3); a.token_to_req = prop_far(4);
            a.block_table = prop_far(5); a.norm_weight = prop_far(6); a.cos_sin = prop_far(7);
            a.state_cache = prop_far_cache(p, 8, 2 * W * 4, "state_cache");
            a.kv_cache = prop_far_cache(p, 9, a.head_dim == 512 ? 584 : 132, "kv_cache");
            prop_judge(p, "v4.compress", 1, kvc_validate_v4_compress_fields(&a, &err), &err, spec_v4_compress(&a, 1));
            break;
        }
        case 2: {
            kvc_v41_norm_args a = {.compress_ratio = prop_chance(p, 1, 4) ? 1 : 2, .eps = prop_chance(p, 1, 2) ? 1e-6f : prop_edge_eps(p)};
            a.num_tokens = prop_range(p, 0, 9);
            a.num_requests = prop_range(p, 0, 3);
            if (prop_chance(p, 1, 2)) prop_count_bound(p, &a.num_tokens, "num_tokens");
            else prop_count_bound(p, &a.num_requests, "num_requests");
            a.kv_score = prop_far(1); a.positions = prop_far(2); a.slot_mapping = prop_far(3); a.norm_weight = prop_far(4);
            a.latent = prop_far(5); a.query_start_loc = prop_far(6); a.token_to_req = prop_far(7);
            static const int64_t caps[] = {8, 16, 128, 4, 12};
            int64_t cap = PROP_PICK(p, caps);
            a.state_cache = (kvc_paged_cache){.data = prop_far(8), .num_pages = prop_range(p, 0, 4), .page_rows = cap, .page_bytes = cap * 4096,
                                              .page_stride = cap * 4096};
            prop_judge(p, "v41.save_compress_norm", 1, kvc_validate_v41_norm_fields(&a, &err), &err, spec_v41_norm(&a, 1));
            break;
        }
        default: {
            int quant = stage == 3;
            kvc_v41_insert_args a = {.compress_ratio = prop_chance(p, 1, 2) ? 1 : 2};
            a.cache_dtype = quant ? KVC_CACHE_FP8_DS_MLA : prop_chance(p, 1, 2) ? KVC_CACHE_BF16 : KVC_CACHE_FP8_E4M3;
            a.fp8_scale = prop_chance(p, 1, 2) ? 0.5f : prop_edge_fp8_scale(p);
            a.num_tokens = prop_range(p, 0, 9);
            a.cos_sin_rows = prop_range(p, 0, 9);
            if (prop_chance(p, 1, 2)) prop_count_bound(p, &a.num_tokens, "num_tokens");
            else prop_count_bound(p, &a.cos_sin_rows, "cos_sin_rows");
            a.latent = prop_far(1); a.positions = prop_far(2); a.slot_mapping = prop_far(3); a.cos_sin = prop_far(4);
            a.kv_cache = prop_far_cache(p, 5, spec_row_bytes(a.cache_dtype), "kv_cache");
            prop_judge(p, quant ? "v41.rope_quant_insert" : "v41.rope_plain_insert", 1, kvc_validate_v41_insert_fields(&a, quant, &err), &err,
                       spec_v41_insert(&a, quant, 1));
            break;
        }
        }
        prop_release(p);
    }
    return p->disagreements;
}

#endif

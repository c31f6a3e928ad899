/* Where a difference arises: see locate.h. */
#include "harness/diagnose/locate.h"

#include <stdio.h>
#include <string.h>

#include "harness/compare/causes.h"
#include "kvcmp/deviations.h"

typedef struct {
    kvc_locus *l;
    int indexer;   /* an fp8_indexer cache: codes 64 .. 127 are RoPE dims */
} locate_walk;

static kvc_place place_of(const locate_walk *w, const kvc_difference *d) {
    if (!d->is_element) return KVC_PLACE_ROWS;
    switch (d->region) {
    case KVC_PREGION_NOPE_CODE: return w->indexer && d->dim >= 64 ? KVC_PLACE_ROPE : KVC_PLACE_NOPE;
    case KVC_PREGION_ROPE: return KVC_PLACE_ROPE;
    case KVC_PREGION_NOPE_BF16: return KVC_PLACE_NOPE;
    case KVC_PREGION_SCALE: return KVC_PLACE_SCALE;
    case KVC_PREGION_STATE: return KVC_PLACE_STATE;
    default: return KVC_PLACE_LATENT;
    }
}

static void on_difference(void *p, const kvc_difference *d) {
    locate_walk *w = p;
    if (!d->differs) return;
    kvc_locus *l = w->l;
    if (d->cause == KVC_CAUSE_SCALE_FOLLOWS) { l->follows++; return; }
    kvc_place place = place_of(w, d);
    l->elements[place]++;
    if (d->distance > l->max_steps[place]) l->max_steps[place] = d->distance;
    switch (d->cause) {
    case KVC_CAUSE_SIGNED_ZERO: l->signed_zero++; break;
    case KVC_CAUSE_NAN_ALL_ONES: case KVC_CAUSE_NAN_PAYLOAD: l->nan_bits++; break;
    case KVC_CAUSE_SUBNORMAL_FLUSH: l->subnormal_flush++; break;
    case KVC_CAUSE_LAST_BIT: l->last_bit++; break;
    default:
        if (d->distance < 0) l->nan_number++;
        break;
    }
}

void kvc_locate_output(const kvc_case *c, const char *name, const kvc_run_result *contract, const kvc_run_result *other, kvc_locus *l) {
    memset(l, 0, sizeof *l);
    const kvc_array *ours = NULL, *theirs = NULL;
    for (int i = 0; i < contract->num_outputs; i++)
        if (strcmp(contract->outputs[i].name, name) == 0) ours = &contract->outputs[i].array;
    for (int i = 0; i < other->num_outputs; i++)
        if (strcmp(other->outputs[i].name, name) == 0) theirs = &other->outputs[i].array;
    if (!ours || !theirs || ours->count != theirs->count || ours->dtype != theirs->dtype) return;
    locate_walk w = {.l = l, .indexer = c->cache_dtype == KVC_CACHE_FP8_INDEXER && strcmp(name, "kv_cache") == 0};
    l->scale_covers_rope = w.indexer;
    if (kvc_classify_output(c, name, ours, theirs, on_difference, &w)) l->cases = 1;
}

/* A candidate's exp may be a few ulps off, not one: the differences it
 * writes may be this many times the probe's. */
#define LAST_BIT_SPREAD 4

/* The catalogue's last bits before step 7: exp, the softmax's order,
 * the sum of squares' order, the inverse norm's rounding, the order of
 * the norm's products. */
static const char *const last_bits[] = {"exp-other-faithful", "softmax-reversed", "sumsq-reversed", "rsqrt-rounded-once",
                                        "norm-weight-first"};

void kvc_locus_probe(const kvc_case *c, const char *name, const kvc_run_result *contract, kvc_locus *l) {
    kvc_run_options options = {.canary = 0xA5, .keep_outputs_on_error = 1};
    memset(l->probe_steps, 0, sizeof l->probe_steps);
    for (size_t k = 0; k < sizeof last_bits / sizeof *last_bits; k++) {
        int set[1] = {kvc_deviation_find(last_bits[k])};
        kvc_run_result moved;
        memset(&moved, 0, sizeof moved);
        kvc_deviation_run_case_set(set, 1, c, &options, &moved);
        kvc_locus probe;
        kvc_locate_output(c, name, contract, &moved, &probe);
        for (int p = 0; p < KVC_PLACE_COUNT; p++)
            if (probe.max_steps[p] > l->probe_steps[p]) l->probe_steps[p] = probe.max_steps[p];
        kvc_run_result_free(&moved);
    }
}

int kvc_locus_within_last_bit(const kvc_locus *l) {
    if (l->nan_number || l->elements[KVC_PLACE_ROWS]) return 0;
    for (int p = 0; p < KVC_PLACE_COUNT; p++) {
        /* One step, or as far as an amplified last bit goes there. */
        int64_t allowed = l->probe_steps[p] > 1 ? LAST_BIT_SPREAD * l->probe_steps[p] : 1;
        if (l->elements[p] && l->max_steps[p] > allowed) return 0;
    }
    return 1;
}

void kvc_locus_add(kvc_locus *into, const kvc_locus *more) {
    for (int p = 0; p < KVC_PLACE_COUNT; p++) {
        into->elements[p] += more->elements[p];
        if (more->max_steps[p] > into->max_steps[p]) into->max_steps[p] = more->max_steps[p];
        if (more->probe_steps[p] > into->probe_steps[p]) into->probe_steps[p] = more->probe_steps[p];
    }
    into->follows += more->follows;
    into->last_bit += more->last_bit;
    into->signed_zero += more->signed_zero;
    into->nan_bits += more->nan_bits;
    into->nan_number += more->nan_number;
    into->subnormal_flush += more->subnormal_flush;
    into->scale_covers_rope |= more->scale_covers_rope;
    into->cases += more->cases;
}

static int has(const kvc_locus *l, kvc_place p) { return l->elements[p] > 0; }

/* A NoPE dim differs, or a scale that covers NoPE dims only. */
static int nope_differs(const kvc_locus *l) {
    return has(l, KVC_PLACE_NOPE) || (has(l, KVC_PLACE_SCALE) && !l->scale_covers_rope);
}

const char *kvc_locus_dims(const kvc_locus *l) {
    int rope = has(l, KVC_PLACE_ROPE), nope = nope_differs(l) || (has(l, KVC_PLACE_SCALE) && !rope);
    if (rope && nope) return "NoPE and RoPE dims";
    if (rope) return "RoPE dims only";
    if (nope) return "NoPE dims or scales only";
    if (has(l, KVC_PLACE_LATENT)) return "latent";
    if (has(l, KVC_PLACE_STATE)) return "state rows";
    return "";
}

static int stage_is(const char *stage, const char *name) { return stage && strcmp(stage, name) == 0; }

const char *kvc_locus_origin(const kvc_locus *l, const char *stage) {
    int rope = has(l, KVC_PLACE_ROPE), nope = has(l, KVC_PLACE_NOPE), scale = has(l, KVC_PLACE_SCALE) && (!rope || !l->scale_covers_rope);
    if (has(l, KVC_PLACE_ROWS) && !rope && !nope && !scale && !has(l, KVC_PLACE_STATE) && !has(l, KVC_PLACE_LATENT))
        return "which rows the stage writes (the closing test, the slots)";
    if (stage_is(stage, "v4.compress") || stage_is(stage, "v4.forward")) {
        if (rope && (nope || scale))
            return "before step 7, in NoPE and RoPE dims alike: the window or the pooled or normed values (steps 1-6; a last bit "
                   "there: exp, rsqrt or summation order)";
        if (rope) return "in the RoPE dims only: step 7 (RoPE) or its bf16 store, or a last bit before it that no NoPE code showed";
        if (scale && !nope) return "in the block scales: step 9's magnitude or exponent (their codes follow)";
        if (nope || scale) return "in the NoPE dims only: their bf16 rounding or the block quantisation (steps 8-9)";
    }
    if (stage_is(stage, "v41.save_compress_norm") || stage_is(stage, "v41.forward")) {
        if (has(l, KVC_PLACE_LATENT))
            return "in the latent: the pooled or normed values (SPEC 5.1 with steps 1-6; a last bit there: exp, rsqrt or summation "
                   "order)";
        if (has(l, KVC_PLACE_STATE)) return "in the ring rows: the ring store (SPEC 5.1)";
    }
    if (stage_is(stage, "v41.rope_quant_insert")) {
        if (rope && (nope || scale)) return "in NoPE and RoPE dims alike: the latent row read (which token, which row)";
        if (rope) return "in the RoPE dims only: step 7 (RoPE) or its bf16 store";
        if (nope || scale) return "in the NoPE dims only: the block quantisation (step 9)";
    }
    if (stage_is(stage, "v41.rope_plain_insert")) {
        if (nope) return "in the NoPE dims: the store's rounding of every dim (bf16, or fp8 with r = 1 / scale)";
        if (rope) return "in the RoPE dims only: step 7 (RoPE) or the rounding after it";
    }
    if (stage_is(stage, "v4.save_partial_states") && has(l, KVC_PLACE_STATE))
        return "in the state rows: the kv copy or the score + ape sum (SPEC 4.1)";
    return "";
}

static const char *const place_names[KVC_PLACE_COUNT] = {"NoPE dims", "RoPE dims", "block scales", "state rows", "latent values", "rows"};

void kvc_locus_text(const kvc_locus *l, const char *stage, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (int p = 0; p < KVC_PLACE_COUNT && n < size; p++) {
        if (!l->elements[p]) continue;
        if (p == KVC_PLACE_ROWS) {
            n += (size_t)snprintf(out + n, size - n, "%swhole rows x%lld", n ? ", " : "", (long long)l->elements[p]);
            continue;
        }
        char steps[32];
        snprintf(steps, sizeof steps, "max %lld step%s", (long long)l->max_steps[p], l->max_steps[p] == 1 ? "" : "s");
        n += (size_t)snprintf(out + n, size - n, "%s%s x%lld (%s%s", n ? ", " : "", place_names[p], (long long)l->elements[p], steps,
                              p == KVC_PLACE_SCALE && l->follows ? "" : ")");
        if (p == KVC_PLACE_SCALE && l->follows && n < size)
            n += (size_t)snprintf(out + n, size - n, "; %lld code%s follow)", (long long)l->follows, l->follows == 1 ? "" : "s");
    }
    if (!n) return;
    struct {
        int64_t count;
        const char *what;
    } kinds[] = {{l->last_bit, "last bit of a rounding"}, {l->signed_zero, "sign of a zero"}, {l->nan_bits, "NaN bits"},
                 {l->nan_number, "NaN against a number"}, {l->subnormal_flush, "subnormal flushed"}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds && n < size; k++)
        if (kinds[k].count) n += (size_t)snprintf(out + n, size - n, "; %s x%lld", kinds[k].what, (long long)kinds[k].count);
    int64_t moved = 0;
    for (int p = 0; p < KVC_PLACE_COUNT; p++)
        if (l->probe_steps[p] > moved) moved = l->probe_steps[p];
    if (moved > 1 && n < size)
        n += (size_t)snprintf(out + n, size - n, "; a last bit before step 7 moves the contract's own bytes up to %lld steps there (values "
                              "that cancel)", (long long)moved);
    const char *origin = kvc_locus_origin(l, stage);
    if (origin[0] && n < size) snprintf(out + n, size - n, "; arises %s", origin);
}

cJSON *kvc_locus_json(const kvc_locus *l, const char *stage) {
    static const char *const keys[KVC_PLACE_COUNT] = {"nope", "rope", "scale", "state", "latent", "rows"};
    cJSON *o = cJSON_CreateObject(), *places = cJSON_AddObjectToObject(o, "places");
    for (int p = 0; p < KVC_PLACE_COUNT; p++) {
        if (!l->elements[p]) continue;
        cJSON *place = cJSON_AddObjectToObject(places, keys[p]);
        cJSON_AddNumberToObject(place, "elements", (double)l->elements[p]);
        cJSON_AddNumberToObject(place, "max_steps", (double)l->max_steps[p]);
    }
    cJSON_AddNumberToObject(o, "codes_following_a_scale", (double)l->follows);
    cJSON_AddNumberToObject(o, "last_bit", (double)l->last_bit);
    cJSON_AddNumberToObject(o, "signed_zero", (double)l->signed_zero);
    cJSON_AddNumberToObject(o, "nan_bits", (double)l->nan_bits);
    cJSON_AddNumberToObject(o, "nan_against_number", (double)l->nan_number);
    cJSON_AddNumberToObject(o, "subnormal_flushed", (double)l->subnormal_flush);
    cJSON_AddNumberToObject(o, "cases", l->cases);
    cJSON_AddStringToObject(o, "dims", kvc_locus_dims(l));
    cJSON_AddStringToObject(o, "arises", kvc_locus_origin(l, stage));
    return o;
}

/* The flat C API of include/kvcmp/ffi.h: thin wrappers over case I/O,
 * the generator, the reference run, the comparison and the shrinker. */
#include "kvcmp/ffi.h"

#include "cli/commands.h"
#include "harness/options/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/run.h"
#include "kvcmp/compare.h"
#include "kvcmp/generate.h"
#include "kvcmp/shrink.h"
#include "kvcmp/validate.h"

/* The handle is the case itself (first member), so a kvc_case the
 * shrinker hands its callback can be passed on as a handle. */
struct kvc_ffi_case {
    kvc_case c;
};

_Static_assert(KVC_FFI_REGIONS >= KVC_REGION_COUNT, "kvc_ffi_report holds every region");

int kvc_ffi_abi_version(void) { return KVC_FFI_ABI_VERSION; }

static kvc_ffi_case *new_handle(char *error, size_t error_size) {
    kvc_ffi_case *h = calloc(1, sizeof *h);
    if (!h) snprintf(error, error_size, "out of memory");
    return h;
}

kvc_ffi_case *kvc_ffi_case_create(const char *stage, int32_t compress_ratio, int32_t head_dim, float eps, const char *cache_dtype,
                                  char *error, size_t error_size) {
    int s = kvc_stage_from_name(stage);
    if (s < 0) { snprintf(error, error_size, "unknown stage '%s' (e.g. v4.compress, v41.rope_quant_insert)", stage); return NULL; }
    int dtype = -1;
    if (cache_dtype && cache_dtype[0] && (dtype = kvc_cache_dtype_from_name(cache_dtype)) < 0) {
        snprintf(error, error_size, "unknown cache_dtype '%s' (fp8_ds_mla, fp8_indexer, bf16 or fp8_e4m3)", cache_dtype);
        return NULL;
    }
    kvc_ffi_case *h = new_handle(error, error_size);
    if (!h) return NULL;
    h->c.stage = (kvc_stage)s;
    h->c.compress_ratio = compress_ratio;
    h->c.head_dim = head_dim;
    h->c.eps = eps;
    h->c.has_cache_dtype = dtype >= 0;
    h->c.cache_dtype = dtype >= 0 ? (kvc_cache_dtype)dtype : KVC_CACHE_FP8_DS_MLA;
    return h;
}

kvc_ffi_case *kvc_ffi_case_load(const char *dir, char *error, size_t error_size) {
    kvc_ffi_case *h = new_handle(error, error_size);
    if (h && kvc_case_load(dir, &h->c, error, error_size)) { free(h); return NULL; }
    return h;
}

int kvc_ffi_case_save(const kvc_ffi_case *h, const char *dir, char *error, size_t error_size) {
    return kvc_case_save(dir, &h->c, error, error_size) ? -1 : 0;
}

void kvc_ffi_case_free(kvc_ffi_case *h) {
    if (!h) return;
    kvc_case_free(&h->c);
    free(h);
}

const char *kvc_ffi_case_stage(const kvc_ffi_case *h) { return kvc_stage_name(h->c.stage); }

void kvc_ffi_case_params(const kvc_ffi_case *h, int32_t *compress_ratio, int32_t *head_dim, float *eps, const char **cache_dtype) {
    *compress_ratio = h->c.compress_ratio;
    *head_dim = h->c.head_dim;
    *eps = h->c.eps;
    /* The one a V4 or quant-insert case without it gets (its head_dim's),
     * as a stage call carries it; the save stages have none. */
    kvc_stage s = h->c.stage;
    int implied = s == KVC_STAGE_V4_COMPRESS || s == KVC_STAGE_V4_FORWARD || s == KVC_STAGE_V41_ROPE_QUANT_INSERT || s == KVC_STAGE_V41_FORWARD;
    if (s == KVC_STAGE_V4_SAVE_PARTIAL_STATES || s == KVC_STAGE_V41_SAVE_COMPRESS_NORM) *cache_dtype = "";
    else if (h->c.has_cache_dtype) *cache_dtype = kvc_cache_dtype_name(h->c.cache_dtype);
    else *cache_dtype = implied ? kvc_cache_dtype_name(h->c.head_dim == 128 ? KVC_CACHE_FP8_INDEXER : KVC_CACHE_FP8_DS_MLA) : "";
}

const char *kvc_ffi_case_source(const kvc_ffi_case *h) { return h->c.source; }
const char *kvc_ffi_case_meta(const kvc_ffi_case *h) { return h->c.meta_json ? h->c.meta_json : ""; }

int kvc_ffi_case_set_source(kvc_ffi_case *h, const char *source, const char *meta_json, char *error, size_t error_size) {
    if (source) snprintf(h->c.source, sizeof h->c.source, "%s", source);
    if (meta_json) {
        char *copy = meta_json[0] ? strdup(meta_json) : NULL;
        if (meta_json[0] && !copy) { snprintf(error, error_size, "out of memory"); return -1; }
        free(h->c.meta_json);
        h->c.meta_json = copy;
    }
    return 0;
}

int kvc_ffi_tensor_count(const kvc_ffi_case *h) { return h->c.num_tensors; }

const char *kvc_ffi_tensor_name(const kvc_ffi_case *h, int index) {
    return index >= 0 && index < h->c.num_tensors ? h->c.tensors[index].name : NULL;
}

int kvc_ffi_tensor_info(const kvc_ffi_case *h, const char *name, int *dtype, int *ndim, int64_t shape[4]) {
    const kvc_array *a = kvc_case_get(&h->c, name);
    if (!a) return -1;
    *dtype = (int)a->dtype;
    *ndim = a->ndim;
    for (int i = 0; i < KVC_NPY_MAX_DIMS; i++) shape[i] = i < a->ndim ? a->shape[i] : 0;
    return 0;
}

const void *kvc_ffi_tensor_data(const kvc_ffi_case *h, const char *name, int64_t *bytes) {
    const kvc_array *a = kvc_case_get(&h->c, name);
    if (!a) return NULL;
    *bytes = a->count * kvc_dtype_size(a->dtype);
    return a->data;
}

int kvc_ffi_tensor_put(kvc_ffi_case *h, const char *name, int dtype, int ndim, const int64_t *shape, const void *data, int64_t bytes,
                       char *error, size_t error_size) {
    if (dtype < KVC_DT_F4 || dtype > KVC_DT_U1) { snprintf(error, error_size, "tensor %s: unknown dtype code %d (0..4)", name, dtype); return -1; }
    if (ndim < 1 || ndim > KVC_NPY_MAX_DIMS) { snprintf(error, error_size, "tensor %s: %d dimensions (1..4 supported)", name, ndim); return -1; }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) { snprintf(error, error_size, "tensor %s: dimension %d is %lld", name, i, (long long)shape[i]); return -1; }
    kvc_array a;
    if (kvc_array_alloc(&a, (kvc_dtype)dtype, ndim, shape)) { snprintf(error, error_size, "tensor %s: bad shape or out of memory", name); return -1; }
    int64_t want = a.count * kvc_dtype_size(a.dtype);
    if (bytes != want) {
        snprintf(error, error_size, "tensor %s: %lld bytes given, its shape and dtype need %lld", name, (long long)bytes, (long long)want);
        kvc_array_free(&a);
        return -1;
    }
    if (want) memcpy(a.data, data, (size_t)want);
    if (kvc_case_put(&h->c, name, &a)) {
        snprintf(error, error_size, "tensor %s: name too long or more than %d tensors", name, KVC_CASE_MAX_TENSORS);
        kvc_array_free(&a);
        return -1;
    }
    return 0;
}

const char *kvc_ffi_output_names(const kvc_ffi_case *h) {
    static _Thread_local char joined[128];
    const char *names[KVC_MAX_OUTPUTS];
    int n = kvc_stage_outputs(&h->c, names);
    joined[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t used = strlen(joined);
        snprintf(joined + used, sizeof joined - used, "%s%s", i ? "," : "", names[i]);
    }
    return joined;
}

kvc_ffi_case *kvc_ffi_generate(uint64_t seed, int64_t index, const char *variants, const char *families, int invalid_per_mille,
                               kvc_ffi_gen_info *info, char *error, size_t error_size) {
    return kvc_ffi_generate_pooled(seed, index, variants, families, invalid_per_mille, 0, info, error, error_size);
}

kvc_ffi_case *kvc_ffi_generate_pooled(uint64_t seed, int64_t index, const char *variants, const char *families,
                                      int invalid_per_mille, int geometry_pool, kvc_ffi_gen_info *info, char *error,
                                      size_t error_size) {
    kvc_gen_config config = {.seed = seed, .invalid_per_mille = invalid_per_mille < 0 ? KVC_GEN_DEFAULT_INVALID_PER_MILLE : invalid_per_mille,
                             .geometry_pool = geometry_pool > 0 ? geometry_pool : 0};
    char bad[128];
    memset(info, 0, sizeof *info);
    if (variants && variants[0] && !(config.variant_mask = kvc_variant_mask(variants, bad, sizeof bad))) {
        snprintf(error, error_size, "variant '%s' matches no generator variant (see kvcmp fuzz --list)", bad);
        return NULL;
    }
    if (families && families[0] && !(config.family_mask = kvc_family_mask(families, bad, sizeof bad))) {
        snprintf(error, error_size, "family '%s' matches no value family (see kvcmp fuzz --list)", bad);
        return NULL;
    }
    kvc_gen_case g;
    kvc_gen_make(&config, index, &g);
    snprintf(info->variant, sizeof info->variant, "%s", kvc_variant(g.variant)->name);
    snprintf(info->family, sizeof info->family, "%s", kvc_family_name(g.family));
    snprintf(info->invalid, sizeof info->invalid, "%s", g.invalid);
    info->history = g.history;
    kvc_gen_case_name(seed, index, g.variant, info->name, sizeof info->name);
    if (g.history) { kvc_gen_free(&g); return NULL; }
    kvc_ffi_case *h = new_handle(error, error_size);
    if (!h) { kvc_gen_free(&g); return NULL; }
    h->c = g.c;   /* the handle takes the generated case's tensors */
    return h;
}

int kvc_ffi_reference(const kvc_ffi_case *h, kvc_ffi_case **outputs, char *error, size_t error_size) {
    *outputs = NULL;
    kvc_run_result r;
    kvc_run_options o = {.page_padding = 0, .canary = 0xA5};
    int status = kvc_run_case(&kvc_reference_backend, &h->c, &o, &r);
    if (status != KVC_OK) {
        snprintf(error, error_size, "%s: %s", kvc_status_name(status), r.error.message);
        kvc_run_result_free(&r);
        return status;
    }
    kvc_ffi_case *out = new_handle(error, error_size);
    if (!out) { kvc_run_result_free(&r); return -1; }
    out->c.stage = h->c.stage;
    out->c.compress_ratio = h->c.compress_ratio;
    out->c.head_dim = h->c.head_dim;
    out->c.eps = h->c.eps;
    out->c.has_cache_dtype = h->c.has_cache_dtype;
    out->c.cache_dtype = h->c.cache_dtype;
    for (int i = 0; i < r.num_outputs; i++) {
        kvc_case_put(&out->c, r.outputs[i].name, &r.outputs[i].array);
        r.outputs[i].array.data = NULL;
    }
    r.num_outputs = 0;
    *outputs = out;
    return KVC_OK;
}

size_t kvc_ffi_report_size(void) { return sizeof(kvc_ffi_report); }
int kvc_ffi_region_count(void) { return KVC_REGION_COUNT; }
const char *kvc_ffi_region_name(int region) { return region >= 0 && region < KVC_REGION_COUNT ? kvc_region_name((kvc_region)region) : "?"; }

static int parse_policy(const char *name, kvc_policy *policy, char *error, size_t error_size) {
    if (!name || strcmp(name, "exact") == 0) *policy = KVC_POLICY_EXACT;
    else if (strcmp(name, "vllm") == 0) *policy = KVC_POLICY_VLLM;
    else { snprintf(error, error_size, "unknown policy '%s' (exact or vllm)", name); return -1; }
    return 0;
}

/* `got` as a run result in the reference's order of outputs; a missing
 * or misshapen output is named in the report. */
static int outputs_as_result(const kvc_run_result *ref, const kvc_ffi_case *got, kvc_run_result *as, kvc_ffi_report *report) {
    memset(as, 0, sizeof *as);
    for (int i = 0; i < ref->num_outputs; i++) {
        const kvc_array *want = &ref->outputs[i].array, *have = kvc_case_get(&got->c, ref->outputs[i].name);
        if (!have || have->dtype != want->dtype || have->count != want->count) {
            report->missing = 1;
            snprintf(report->missing_name, sizeof report->missing_name, "%s", ref->outputs[i].name);
            return -1;
        }
        as->outputs[i] = (kvc_named_array){.array = *have};   /* borrowed, never freed */
        snprintf(as->outputs[i].name, sizeof as->outputs[i].name, "%s", ref->outputs[i].name);
        as->num_outputs++;
    }
    return 0;
}

static void fill_report(const kvc_ffi_case *got, const kvc_compare_report *r, kvc_ffi_report *report) {
    memcpy(report->differing, r->differing, sizeof r->differing);
    memcpy(report->failing, r->failing, sizeof r->failing);
    memcpy(report->max_steps, r->max_steps, sizeof r->max_steps);
    report->bytes_compared = r->bytes_compared;
    report->failed = kvc_report_failed(r);
    report->differs = kvc_report_differs(r);
    kvc_report_summary(r, report->summary, sizeof report->summary);
    if (!r->has_first) return;
    const kvc_array *a = kvc_case_get(&got->c, r->first_tensor);
    report->has_first = 1;
    snprintf(report->first, sizeof report->first, "%s", r->first);
    snprintf(report->first_tensor, sizeof report->first_tensor, "%s", r->first_tensor);
    report->first_offset = r->first_offset;
    report->first_width = r->first_width;
    report->first_region = (int)r->first_region;
    memcpy(report->first_got, (const uint8_t *)a->data + r->first_offset, (size_t)r->first_width);
}

int kvc_ffi_compare(const kvc_ffi_case *h, const kvc_ffi_case *got, const char *policy_name, kvc_ffi_report *report, char *error,
                    size_t error_size) {
    memset(report, 0, sizeof *report);
    kvc_policy policy;
    if (parse_policy(policy_name, &policy, error, error_size)) return -1;
    kvc_run_result ref;
    kvc_run_options o = {.page_padding = 0, .canary = 0xA5};
    report->reference_status = kvc_run_case(&kvc_reference_backend, &h->c, &o, &ref);
    if (report->reference_status != KVC_OK) {
        report->failed = report->differs = 1;
        snprintf(report->summary, sizeof report->summary,
                 "the reference rejects this case (%s: %.400s); an implementation must reject it and write nothing",
                 kvc_status_name(report->reference_status), ref.error.message);
        kvc_run_result_free(&ref);
        return 0;
    }
    kvc_run_result as;
    if (outputs_as_result(&ref, got, &as, report)) {
        report->failed = report->differs = 1;
        snprintf(report->summary, sizeof report->summary, "output %s is missing or has the wrong dtype or size", report->missing_name);
    } else {
        kvc_compare_report r;
        kvc_compare_results(&h->c, &ref, &as, policy, &r);
        fill_report(got, &r, report);
        if (report->has_first) {
            const kvc_array *e = &ref.outputs[0].array;
            for (int i = 0; i < ref.num_outputs; i++)
                if (strcmp(ref.outputs[i].name, report->first_tensor) == 0) e = &ref.outputs[i].array;
            memcpy(report->first_expected, (const uint8_t *)e->data + report->first_offset, (size_t)report->first_width);
        }
    }
    kvc_run_result_free(&ref);
    return 0;
}

typedef struct {
    kvc_ffi_still_fails_fn still_fails;
    void *context;
} shrink_bridge;

static int bridge_still_fails(const kvc_case *c, void *p) {
    const shrink_bridge *b = p;
    return b->still_fails((const kvc_ffi_case *)c, b->context) == 1;
}

int kvc_ffi_shrink(kvc_ffi_case *h, kvc_ffi_still_fails_fn still_fails, void *context, double seconds, int64_t *tokens_before,
                   int64_t *tokens_after) {
    shrink_bridge b = {still_fails, context};
    kvc_shrink_stats stats;
    kvc_shrink_case(&h->c, bridge_still_fails, &b, seconds, &stats);
    if (tokens_before) *tokens_before = stats.tokens_before;
    if (tokens_after) *tokens_after = stats.tokens_after;
    return stats.accepted;
}

/* ---- commands -------------------------------------------------------- */

int kvc_ffi_command(const char *invocation, const char *name, int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {{"replay", kvc_cmd_replay}, {"gen", kvc_cmd_gen}, {"report", kvc_cmd_report}, {"bench", kvc_cmd_bench},
                    {"merge", kvc_cmd_merge}};
    kvc_set_invocation(invocation);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run(argc, argv);
    fprintf(stderr, "kvcmp: unknown command '%s' (replay, gen, report, bench; fuzz is kvc_campaign_main)\n", name);
    return 2;
}

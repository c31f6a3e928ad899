/* A small flat C API for foreign callers (Python's ctypes, a Rust or Go
 * binding): opaque case handles, tensors as raw bytes + dtype + shape,
 * and the four jobs a binding needs - generate, run the reference,
 * compare, shrink.  Only plain C types cross it (no kvcmp structs but
 * kvc_ffi_report, whose size kvc_ffi_report_size() reports so that a
 * binding can check its own copy of the layout).
 *
 * Conventions:
 * - Every function that can fail takes `char *error, size_t error_size`
 *   and writes a message naming the tensor, field or option there; it
 *   returns -1 (or NULL) on failure.
 * - Strings passed in are NUL-terminated and only read during the call.
 * - A case handle owns its tensors; data pointers it hands out stay valid
 *   until the handle is freed or the tensor is replaced.
 * - dtypes are the .npy ones of kvcmp/npy.h: 0 <f4, 1 <i8, 2 <i4, 3 <u2
 *   (bf16 bits), 4 |u1.
 *
 * The Python package python/kvcmp/ is the reference user of this API. */
#ifndef KVCMP_FFI_H
#define KVCMP_FFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_FFI_ABI_VERSION 1

typedef struct kvc_ffi_case kvc_ffi_case;

/* KVC_FFI_ABI_VERSION of the library (a binding refuses another). */
int kvc_ffi_abi_version(void);

/* ---- cases -------------------------------------------------------- */

/* An empty case of a stage ("v4.compress", ...); cache_dtype may be
 * NULL or "" for stages without one. */
kvc_ffi_case *kvc_ffi_case_create(const char *stage, int32_t compress_ratio, int32_t head_dim, float eps, const char *cache_dtype,
                                  char *error, size_t error_size);
/* Reads a case directory (case.json and NAME.npy files, SPEC.md 10). */
kvc_ffi_case *kvc_ffi_case_load(const char *dir, char *error, size_t error_size);
/* Writes dir/case.json and every tensor as dir/NAME.npy (creates dir). */
int kvc_ffi_case_save(const kvc_ffi_case *c, const char *dir, char *error, size_t error_size);
void kvc_ffi_case_free(kvc_ffi_case *c);

/* The stage name; the params: cache_dtype is the one the case runs with
 * (its head_dim's when a V4 or quant-insert case names none), "" for the
 * save stages and a plain insert without one; eps is the case's even for
 * a stage that takes none. */
const char *kvc_ffi_case_stage(const kvc_ffi_case *c);
void kvc_ffi_case_params(const kvc_ffi_case *c, int32_t *compress_ratio, int32_t *head_dim, float *eps, const char **cache_dtype);
/* case.json "source" and "meta" (JSON text, "" when absent). */
const char *kvc_ffi_case_source(const kvc_ffi_case *c);
const char *kvc_ffi_case_meta(const kvc_ffi_case *c);
int kvc_ffi_case_set_source(kvc_ffi_case *c, const char *source, const char *meta_json, char *error, size_t error_size);

/* Tensors: NAME for inputs, NAME.out for the expected results. */
int kvc_ffi_tensor_count(const kvc_ffi_case *c);
const char *kvc_ffi_tensor_name(const kvc_ffi_case *c, int index);
/* dtype, ndim and shape (up to 4 dims) of a tensor; -1 when absent. */
int kvc_ffi_tensor_info(const kvc_ffi_case *c, const char *name, int *dtype, int *ndim, int64_t shape[4]);
/* Its bytes (C order, little-endian) and their count; NULL when absent. */
const void *kvc_ffi_tensor_data(const kvc_ffi_case *c, const char *name, int64_t *bytes);
/* Adds or replaces a tensor with a copy of `bytes` bytes of data, which
 * must be exactly the product of shape times the dtype's size. */
int kvc_ffi_tensor_put(kvc_ffi_case *c, const char *name, int dtype, int ndim, const int64_t *shape, const void *data, int64_t bytes,
                       char *error, size_t error_size);

/* Names of the tensors the case's stage writes (its outputs, without
 * ".out"), comma-separated, e.g. "state_cache,kv_cache"; the text stays
 * valid until the next call of this function in the same thread. */
const char *kvc_ffi_output_names(const kvc_ffi_case *c);

/* ---- the generator ------------------------------------------------ */

typedef struct {
    char variant[64];       /* e.g. "v4.compress/d512/r4" */
    char family[32];        /* value family */
    char invalid[96];       /* corruption applied on purpose, "" = none */
    int history;            /* 1: a multi-step history variant, no case */
    char name[128];         /* its directory name, as kvcmp gen and fuzz --save write it */
} kvc_ffi_gen_info;

/* Case `index` of seed `seed`: the very case `kvcmp fuzz --seed SEED
 * [--stage VARIANTS] [--family FAMILIES] [--invalid-rate PER_MILLE]`
 * runs as its case `index`.  variants and families are comma-separated
 * name prefixes (NULL or "" = all).  invalid_per_mille < 0 means the
 * fuzzer's default.  A history variant gives NULL with info->history = 1
 * and no error. */
kvc_ffi_case *kvc_ffi_generate(uint64_t seed, int64_t index, const char *variants, const char *families, int invalid_per_mille,
                               kvc_ffi_gen_info *info, char *error, size_t error_size);
/* The same with --geometry-pool N: a campaign of a py: candidate draws its
 * page geometries from 4 fixed per seed unless told otherwise, and its
 * case `index` is this one with geometry_pool = 4. */
kvc_ffi_case *kvc_ffi_generate_pooled(uint64_t seed, int64_t index, const char *variants, const char *families,
                                      int invalid_per_mille, int geometry_pool, kvc_ffi_gen_info *info, char *error,
                                      size_t error_size);

/* ---- the reference and the comparison ----------------------------- */

/* Runs the reference on the case's inputs.  Returns the stage status
 * (0 = ok, else a kvc_status code with the message in error); on
 * success *outputs is a new case holding one tensor per output, named
 * like the inputs ("kv_cache"), in the case's layout.  -1 with *outputs
 * NULL for a malformed case. */
int kvc_ffi_reference(const kvc_ffi_case *c, kvc_ffi_case **outputs, char *error, size_t error_size);

#define KVC_FFI_REGIONS 8   /* >= KVC_REGION_COUNT; names: kvc_ffi_region_name */

typedef struct {
    int failed;                              /* beyond the policy */
    int differs;                             /* any byte differs */
    int reference_status;                    /* the reference's status on the case */
    int missing;                             /* an output was absent or misshapen */
    char missing_name[64];
    int64_t differing[KVC_FFI_REGIONS];      /* elements that differ at all, per region */
    int64_t failing[KVC_FFI_REGIONS];        /* beyond the tolerance */
    int64_t max_steps[KVC_FFI_REGIONS];      /* INT64_MAX: NaN against a number, or an untouched row written */
    int64_t bytes_compared;
    int has_first;                           /* the first failing element: */
    char first_tensor[48];                   /*   output tensor name */
    int64_t first_offset;                    /*   byte offset in it */
    int first_width;                         /*   element bytes (1, 2 or 4) */
    uint8_t first_expected[4], first_got[4]; /*   its bytes, expected = the reference */
    int first_region;
    char first[320];                         /*   "kv_cache page 0 row 3 nope[5] (NoPE code) expected=0x.. got=0x.." */
    char summary[640];                       /* "NoPE code x2 (max 1 step), ..." */
} kvc_ffi_report;

size_t kvc_ffi_report_size(void);
int kvc_ffi_region_count(void);
const char *kvc_ffi_region_name(int region);

/* Runs the reference on c and compares its outputs (expected) with the
 * tensors of `got` (named like the inputs: "kv_cache") under policy
 * "exact" or "vllm" (SPEC.md 9.12).  Returns 0 with the report filled
 * (report->failed says the verdict), or -1 for a bad policy.  When the
 * reference rejects c, nothing is compared: report->reference_status is
 * the status, report->failed is 1 (an implementation must reject such a
 * case, not produce outputs) and report->summary says why. */
int kvc_ffi_compare(const kvc_ffi_case *c, const kvc_ffi_case *got, const char *policy, kvc_ffi_report *report, char *error,
                    size_t error_size);

/* ---- shrinking ---------------------------------------------------- */

/* 1 when the candidate case (borrowed: do not free or keep it) still
 * fails the way being shrunk, 0 otherwise. */
typedef int (*kvc_ffi_still_fails_fn)(const kvc_ffi_case *candidate, void *context);

/* Shrinks c in place for at most `seconds` (fewer requests, tokens and
 * window entries, simpler values) keeping only reductions for which
 * still_fails returns 1.  Returns the number of accepted reductions;
 * tokens_before/tokens_after may be NULL. */
int kvc_ffi_shrink(kvc_ffi_case *c, kvc_ffi_still_fails_fn still_fails, void *context, double seconds, int64_t *tokens_before,
                   int64_t *tokens_after);

/* ---- commands ----------------------------------------------------- */

/* `kvcmp NAME ARGS...` (argv holds the options only) for a front end that
 * passes a command line through (`python -m kvcmp replay ...`): replay,
 * gen, report, bench or merge; the campaign is kvc_campaign_main
 * (kvcmp/campaign.h).  invocation is how __REPRO lines run kvcmp
 * ("/usr/bin/python3 -m kvcmp").  Returns the command's exit status. */
int kvc_ffi_command(const char *invocation, const char *name, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif

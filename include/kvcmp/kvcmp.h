/* kvcmp core API: stage arguments, paged caches, errors and the backend
 * table.  Every backend (reference, optimized, a mutant, an external
 * library) is a kvc_backend; the harness calls all of them the same way.
 * SPEC.md is the normative description of what each stage computes. */
#ifndef KVCMP_KVCMP_H
#define KVCMP_KVCMP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_ROPE_DIMS 64            /* the last 64 dims of a row are rotated */
#define KVC_V41_HEAD_DIM 512
#define KVC_FP8_DS_MLA_TOKEN_BYTES 576   /* 448 fp8 NoPE + 64 bf16 RoPE */
#define KVC_FP8_DS_MLA_SCALE_BYTES 8     /* 7 UE8M0 + one zero byte */
#define KVC_FP8_INDEXER_TOKEN_BYTES 128
#define KVC_FP8_INDEXER_SCALE_BYTES 4    /* one little-endian fp32 */
#define KVC_QUANT_BLOCK 64

/* Error codes; 0 is success.  Messages name the tensor and the index. */
enum kvc_status {
    KVC_OK = 0,
    KVC_ERR_PARAM = 1,       /* unsupported R, D, block size, dtype, scale */
    KVC_ERR_INDEX = 2,       /* an index tensor holds an out-of-range value */
    KVC_ERR_CONFLICT = 3,    /* two writers of one row, overlapping buffers */
    KVC_ERR_METADATA = 4,    /* metadata that disagrees with itself */
    KVC_ERR_NOMEM = 5,
    KVC_ERR_UNAVAILABLE = 6, /* backend cannot run on this machine */
    /* Only an out-of-process candidate (a Python worker) returns these;
     * the message starts with the stage and the failure's class
     * ("v4.compress: ValueError: ...", "v4.compress: signal 6: ...") and
     * the fuzzer groups failures by them. */
    KVC_ERR_CANDIDATE = 7,   /* raised an exception or returned bad outputs */
    KVC_ERR_CRASHED = 8,     /* its process died during the call */
    KVC_ERR_DEVICE_LOST = 9, /* its device is unusable (a sticky CUDA error) */
};

typedef struct {
    int code;
    char message[400];
} kvc_error;

/* A paged cache: num_pages pages, each page_rows rows (tokens) whose
 * contents occupy page_bytes bytes, pages page_stride bytes apart
 * (page_stride >= page_bytes; the gap is padding no stage may touch). */
typedef struct {
    void *data;
    int64_t num_pages;
    int64_t page_rows;
    int64_t page_bytes;
    int64_t page_stride;
} kvc_paged_cache;

typedef enum {
    KVC_CACHE_FP8_DS_MLA = 0,  /* V4 D=512, V4.1 rope_quant_insert */
    KVC_CACHE_FP8_INDEXER = 1, /* V4 D=128 */
    KVC_CACHE_BF16 = 2,        /* V4.1 rope_plain_insert, plain bf16 rows */
    KVC_CACHE_FP8_E4M3 = 3,    /* V4.1 rope_plain_insert, per-tensor scale */
} kvc_cache_dtype;

/* v4.save_partial_states: state[s] = [kv[t], score[t] + ape[p mod R]].
 * Row width W = coff*D floats for kv and for score; a state row is 2W. */
typedef struct {
    int64_t num_tokens;
    int32_t compress_ratio;   /* 4 or 128 */
    int32_t head_dim;         /* 512 or 128 */
    const float *kv;          /* [T, W] */
    const float *score;       /* [T, W] */
    const float *ape;         /* [R, W] */
    const int64_t *positions; /* [T] */
    const int64_t *slot_mapping; /* [T], negative = padding */
    kvc_paged_cache state_cache; /* rows of 2W f32 */
} kvc_v4_save_args;

/* v4.compress: softmax-pool the window of each closing token, RMSNorm,
 * RoPE, quantise and store into the compressed KV cache. */
typedef struct {
    int64_t num_tokens;
    int32_t compress_ratio;
    int32_t head_dim;
    float eps;
    kvc_paged_cache state_cache;    /* read only; page_rows = BS */
    const int32_t *block_table;     /* [num_requests, max_blocks] */
    int64_t num_requests;
    int64_t max_blocks;
    const int32_t *token_to_req;    /* [T] */
    const int64_t *positions;       /* [T] */
    const int64_t *slot_mapping;    /* [T] state slot, negative = skip */
    const int64_t *kv_slot_mapping; /* [T] output row, negative = skip */
    const float *norm_weight;       /* [D] */
    const float *cos_sin;           /* [cos_sin_rows, 64]: 32 cos, 32 sin */
    int64_t cos_sin_rows;
    kvc_paged_cache kv_cache;       /* fp8_ds_mla (D=512) or fp8_indexer */
} kvc_v4_compress_args;

/* v41.save_compress_norm: pool (R=2) or pass (R=1), RMSNorm, write the
 * bf16 latent of every valid closing token, then store the ring rows. */
typedef struct {
    int64_t num_tokens;
    int32_t compress_ratio;        /* 1 or 2 */
    float eps;
    const float *kv_score;         /* [T, 512*R] */
    const int64_t *positions;      /* [T] */
    const int64_t *slot_mapping;   /* [T] */
    const uint16_t *norm_weight;   /* [512] bf16 bits */
    uint16_t *latent;              /* [T, 512] bf16 bits, output */
    /* R = 2 only (ignored for R = 1): */
    kvc_paged_cache state_cache;   /* ring: page_rows = CAP, rows of 1024 f32 */
    const int32_t *query_start_loc; /* [num_requests + 1] */
    int64_t num_requests;
    const int32_t *token_to_req;   /* [T] */
} kvc_v41_norm_args;

/* v41.rope_quant_insert (cache_dtype fp8_ds_mla) and
 * v41.rope_plain_insert (cache_dtype bf16 or fp8_e4m3). */
typedef struct {
    int64_t num_tokens;
    int32_t compress_ratio;        /* 1 or 2 */
    kvc_cache_dtype cache_dtype;
    const uint16_t *latent;        /* [T, 512] bf16 bits */
    const int64_t *positions;      /* [T] */
    const int64_t *slot_mapping;   /* [T] output row, negative = skip */
    const float *cos_sin;
    int64_t cos_sin_rows;
    kvc_paged_cache kv_cache;
    float fp8_scale;               /* fp8_e4m3 only: finite and > 0 */
} kvc_v41_insert_args;

typedef int (*kvc_v4_save_fn)(const kvc_v4_save_args *, kvc_error *);
typedef int (*kvc_v4_compress_fn)(const kvc_v4_compress_args *, kvc_error *);
typedef int (*kvc_v41_norm_fn)(const kvc_v41_norm_args *, kvc_error *);
typedef int (*kvc_v41_insert_fn)(const kvc_v41_insert_args *, kvc_error *);

/* A backend: one function per stage, NULL where it offers none.  Each
 * function validates its arguments (kvc_validate_*) before writing. */
typedef struct kvc_backend {
    const char *name;
    kvc_v4_save_fn v4_save_partial_states;
    kvc_v4_compress_fn v4_compress;
    kvc_v41_norm_fn v41_save_compress_norm;
    kvc_v41_insert_fn v41_rope_quant_insert;
    kvc_v41_insert_fn v41_rope_plain_insert;
} kvc_backend;

extern const kvc_backend kvc_reference_backend;

/* Window geometry of V4: coff = 2 for R = 4 (overlap), 1 for R = 128. */
static inline int kvc_v4_coff(int32_t compress_ratio) {
    return compress_ratio == 4 ? 2 : 1;
}

#ifdef __cplusplus
}
#endif

#endif

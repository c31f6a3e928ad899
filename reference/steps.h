/* The reference's step table: the contract's steps (SPEC.md sections 1-5)
 * as the stages of reference/ call them.  Each stage calls its steps
 * through the table in use on its thread, ref_contract_steps
 * (reference/steps.c) unless ref_use_steps installed another; a table
 * with some steps replaced is a variant of the reference, the rest of the
 * stage unchanged.  A step works on a row, a block, a channel or a token,
 * never on one value of a row, so the table costs one indirect call per
 * row. */
#ifndef KVCMP_REFERENCE_STEPS_INTERNAL_H
#define KVCMP_REFERENCE_STEPS_INTERNAL_H

#include <stdint.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"

typedef struct ref_steps ref_steps;

struct ref_steps {
    /* SPEC.md 1, over the n values of a row. */
    void (*bf16_row)(const float *x, uint16_t *bf16, int n);                     /* bf16(x[i]) */
    void (*fp8_codes)(const float *y, float multiplier, uint8_t *codes, int n);  /* fp8(clamp(y[i] * multiplier, -448, 448)) */
    float (*canonical_f32)(float x);                                             /* a computed fp32 value as written */

    /* SPEC.md 2: whether token t closes its group, (p + 1) mod R = 0. */
    int (*v4_closes)(const kvc_v4_compress_args *a, int64_t t);
    int (*v41_norm_closes)(const kvc_v41_norm_args *a, int64_t t);
    int (*v41_insert_closes)(const kvc_v41_insert_args *a, int64_t t);

    /* SPEC.md 4.1: S1 (the kv half, W values) and S2 (the score half). */
    void (*save_kv)(float *state_kv, const float *kv, int64_t width);
    void (*save_score)(float *state_score, const float *score, const float *ape, int64_t width);

    /* SPEC.md 4.2, window: the position q that entry w of closing token
     * t's window reads (negative: no entry), and the column h where its
     * half starts. */
    int64_t (*window_position)(const kvc_v4_compress_args *a, int64_t t, int64_t w);
    int64_t (*window_half)(const kvc_v4_compress_args *a, int64_t w);
    /* Steps 1-3 for one channel: the window's valid entries, in increasing w. */
    float (*softmax_pool)(const float *window_kv, const float *window_score, int entries);
    /* Step 4, step 5, step 6. */
    float (*sum_of_squares)(const float *pooled, int head_dim);
    float (*inverse_rms)(float sum_of_squares, int head_dim, float eps);
    void (*norm_product)(const float *pooled, float inv, const float *weight, int head_dim, float *normed);
    /* Step 7: the cos_sin row of position p, the 64 dims of a head_dim-wide
     * row it rotates, the rotation with one cos_sin row. */
    int64_t (*cos_sin_row)(int64_t p, int32_t ratio, int64_t cos_sin_rows);
    float *(*rope_dims)(float *x, int head_dim);
    void (*rope)(float *rope_dims, const float *cos_sin_row);
    /* Steps 7 and 8 of the D = 512 store: nope_bf16 = the 448 NoPE values
     * rounded to bf16 and widened, the last 64 of normed rotated. */
    void (*rotate_and_round)(const ref_steps *s, float *normed, const float *cos_sin_row, float *nope_bf16);
    /* Step 9's scale of a block of n values (the D = 128 store's too). */
    kvc_block_scale (*block_scale)(const float *y, int n);

    /* SPEC.md 5.1: the ring row (p - 1) mod CAP that a chunk's first token
     * pools with, and the ring store of request req. */
    int64_t (*ring_row)(int64_t p, int64_t cap);
    void (*store_ring)(const kvc_v41_norm_args *a, int64_t req);

    /* SPEC.md 5.3: r = 1 / scale, and the row stored from the rotated x. */
    float (*reciprocal)(float scale);
    void (*plain_row)(const ref_steps *s, float *x, kvc_cache_dtype dtype, float fp8_scale, float inverse_scale, uint8_t *row);

    /* A whole stage after its validation, for a variant that sees another
     * batch than the caller passed; NULL in the contract's table: the
     * stage runs its steps on the batch as passed. */
    int (*v4_save_partial_states)(const kvc_v4_save_args *a, kvc_error *err);
    int (*v4_compress)(const kvc_v4_compress_args *a, kvc_error *err);
    int (*v41_save_compress_norm)(const kvc_v41_norm_args *a, kvc_error *err);
    int (*v41_rope_quant_insert)(const kvc_v41_insert_args *a, kvc_error *err);
    int (*v41_rope_plain_insert)(const kvc_v41_insert_args *a, kvc_error *err);
};

/* The contract: every step exactly as SPEC.md writes it. */
extern const ref_steps ref_contract_steps;

/* The table the calling thread's stages use. */
const ref_steps *ref_steps_in_use(void);

/* Installs `steps` (NULL: the contract's) for the calling thread's stage
 * calls until the next call; returns the table that was in use.  The
 * table must outlive its use. */
const ref_steps *ref_use_steps(const ref_steps *steps);

/* Step 9 for one 64-wide block, and the D = 512 store (steps 8-9), with
 * the steps of table s (include/kvcmp/reference_steps.h: the contract's). */
uint8_t ref_quantize_block_steps(const ref_steps *s, const float *y, uint8_t *codes);
void ref_store_ds_mla_steps(const ref_steps *s, const float *nope_bf16, const float *rope_rotated, uint8_t *token, uint8_t *scales);

#endif

/* Optimized v41.rope_plain_insert: as reference/v41_rope_plain_insert.c;
 * tokens are spread over the threads (each writes only its own row). */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "common/validate_parts.h"
#include "optimized/validate_tokens.h"
#include "optimized/stages.h"
#include "optimized/vector_math.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define NOPE_DIMS (HEAD_DIM - KVC_ROPE_DIMS)

/* bf16 rows: NoPE values are bf16 already, so rounding them again changes
 * only a NaN, which becomes 0x7FC0; done on the 16-bit patterns directly. */
static void store_bf16_row(uint8_t *row, const uint16_t *latent_row, const float *rope_rotated) {
    const __m512i magnitude_mask = _mm512_set1_epi16(0x7FFF), infinity = _mm512_set1_epi16(0x7F80);
    for (int d = 0; d < NOPE_DIMS; d += 32) {
        __m512i values = _mm512_loadu_si512(latent_row + d);
        __mmask32 is_nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(values, magnitude_mask), infinity);
        values = _mm512_mask_blend_epi16(is_nan, values, _mm512_set1_epi16((short)KVC_BF16_NAN));
        _mm512_storeu_si512(row + 2 * d, values);
    }
    opt_store_bf16x64(row + 2 * NOPE_DIMS, rope_rotated);
}

/* fp8 rows: fp8(clamp(bf16(x) * r)) for every dim; the NoPE values are
 * exactly their own bf16 rounding except NaN, and any NaN times r gives
 * the fp8 NaN byte, so the widened latent is used as is. */
static void store_fp8_row(uint8_t *row, const float *x, float inverse_scale) {
    __m512 r = _mm512_set1_ps(inverse_scale);
    for (int d = 0; d < HEAD_DIM; d += 16) {
        __m512 value = _mm512_loadu_ps(x + d);
        if (d >= NOPE_DIMS) value = opt_round_to_bf16x16(value);
        _mm_storeu_si128((__m128i *)(row + d), opt_fp8_from_f32x16(opt_clamp_fp8_range16(_mm512_mul_ps(value, r))));
    }
}

int opt_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    /* Section 8: the per-token checks on the threads when every token
     * passes, else the common validator's verdict (validate_tokens.h). */
    int rc = kvc_validate_v41_insert_fields(a, 0, err);
    if (rc) return rc;
    if (!opt_v41_insert_tokens_valid(a) && (rc = kvc_validate_v41_insert(a, 0, err)) != KVC_OK) return rc;
    int64_t row_bytes = kvc_cache_row_bytes(a->cache_dtype);
    /* r = 1 / scale, rounded once to fp32. */
    float inverse_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? 1.0f / a->fp8_scale : 1.0f;
    /* At least ~80 tokens per thread (stages.h).  Bit-identical at any
     * thread count: each row is written by exactly one thread (section 8
     * rejects two tokens naming one slot), from inputs no thread writes. */
    int threads = opt_threads_for(opt_v41_insert_nanoseconds(a->num_tokens));
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (t + 2 < a->num_tokens) opt_prefetch_bytes(a->latent + (t + 2) * HEAD_DIM, HEAD_DIM * 2);
        if (slot < 0 || !kvc_is_closing(a->positions[t], a->compress_ratio)) continue;
        const uint16_t *latent_row = a->latent + t * HEAD_DIM;
        float x[HEAD_DIM];
        for (int d = 0; d < HEAD_DIM; d += 16)
            _mm512_storeu_ps(x + d, opt_f32_from_bf16x16(_mm256_loadu_si256((const __m256i *)(latent_row + d))));
        int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
        opt_rope(x + NOPE_DIMS, a->cos_sin + cos_row * KVC_ROPE_DIMS);
        uint8_t *row = kvc_plain_row(&a->kv_cache, slot, row_bytes);
        if (a->cache_dtype == KVC_CACHE_BF16) store_bf16_row(row, latent_row, x + NOPE_DIMS);
        else store_fp8_row(row, x, inverse_scale);
    }
    opt_leave_vector_code();
    return KVC_OK;
}

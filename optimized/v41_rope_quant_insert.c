/* Optimized v41.rope_quant_insert: as reference/v41_rope_quant_insert.c;
 * each valid closing token writes only its own row, so tokens are spread
 * over the threads. */
#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "common/validate_parts.h"
#include "optimized/validate_tokens.h"
#include "optimized/stages.h"
#include "optimized/vector_math.h"

#define HEAD_DIM KVC_V41_HEAD_DIM
#define NOPE_DIMS (HEAD_DIM - KVC_ROPE_DIMS)

int opt_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    /* Section 8: the per-token checks on the threads when every token
     * passes, else the common validator's verdict (validate_tokens.h). */
    int rc = kvc_validate_v41_insert_fields(a, 1, err);
    if (rc) return rc;
    if (!opt_v41_insert_tokens_valid(a) && (rc = kvc_validate_v41_insert(a, 1, err)) != KVC_OK) return rc;
    /* At least ~80 tokens per thread (stages.h).  Bit-identical at any
     * thread count: each row is written by exactly one thread (section 8
     * rejects two tokens naming one slot), from inputs no thread writes. */
    int threads = opt_threads_for(opt_v41_insert_nanoseconds(a->num_tokens));
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < a->num_tokens; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0 || !kvc_is_closing(a->positions[t], a->compress_ratio)) continue;
        /* The next latent row this stage reads, fetched while this one is
         * quantised; rows of tokens that insert nothing are never read,
         * so fetching them would only add memory traffic. */
        int64_t next = t + a->compress_ratio;
        if (next < a->num_tokens && a->slot_mapping[next] >= 0 && kvc_is_closing(a->positions[next], a->compress_ratio))
            opt_prefetch_bytes(a->latent + next * HEAD_DIM, HEAD_DIM * 2);
        /* The latent is bf16 already: the NoPE dims are quantised from its
         * bits, the RoPE dims widened exactly (no second rounding). */
        const uint16_t *latent = a->latent + t * HEAD_DIM;
        float rope_dims[KVC_ROPE_DIMS];
        for (int d = 0; d < KVC_ROPE_DIMS; d += 16)
            _mm512_storeu_ps(rope_dims + d, opt_f32_from_bf16x16(_mm256_loadu_si256((const __m256i *)(latent + NOPE_DIMS + d))));
        int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
        opt_rope(rope_dims, a->cos_sin + cos_row * KVC_ROPE_DIMS);
        opt_store_ds_mla(latent, rope_dims, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
    }
    opt_leave_vector_code();
    return KVC_OK;
}

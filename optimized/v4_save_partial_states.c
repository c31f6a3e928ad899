/* Optimized v4.save_partial_states: state[s] = [kv[t], score[t] + ape].
 * Rows are independent, so tokens are spread over the threads. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "common/validate_parts.h"
#include "optimized/validate_tokens.h"
#include "optimized/stages.h"
#include "optimized/vector_math.h"

/* Above this many bytes of state rows per call the rows cannot stay in
 * cache anyway, and streaming stores skip reading the destination first
 * (a third less memory traffic).  Smaller batches (decode) use ordinary
 * stores, so that compress finds the fresh rows in cache. */
#define STREAMING_STORE_BYTES ((int64_t)8 << 20)

/* Store 16 floats; the streaming store writes the same bytes. */
static inline void store16(float *destination, __m512 value, int streaming) {
    if (streaming) _mm512_stream_ps(destination, value);
    else _mm512_storeu_ps(destination, value);
}

/* The kv half, copied bit for bit (loads and stores move bits only). */
static void copy_kv(float *destination, const float *kv, int64_t width, int streaming) {
    for (int64_t i = 0; i < width; i += 16) store16(destination + i, _mm512_loadu_ps(kv + i), streaming);
}

/* The score half: one fp32 add per element, NaN made canonical (the
 * blend writes exactly what kvc_canonical_f32 returns). */
static void add_position_embedding(float *destination, const float *score, const float *ape, int64_t width, int streaming) {
    const __m512 canonical_nan = _mm512_castsi512_ps(_mm512_set1_epi32((int)KVC_F32_NAN_BITS));
    for (int64_t i = 0; i < width; i += 16) {
        __m512 sum = _mm512_add_ps(_mm512_loadu_ps(score + i), _mm512_loadu_ps(ape + i));
        __mmask16 is_nan = _mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q);
        store16(destination + i, _mm512_mask_blend_ps(is_nan, sum, canonical_nan), streaming);
    }
}

/* Tokens [begin, end) of the call.  kv and score are read in order, which
 * the hardware prefetchers follow: a software prefetch of the next token's
 * 8 KiB, tried here before, made the 8192-token save 12-15% slower on the
 * 16-core Xeon (2026-12-02). */
static void save_tokens(const kvc_v4_save_args *a, int64_t begin, int64_t end, int64_t width, int large_batch) {
    for (int64_t t = begin; t < end; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0) continue;
        float *state_row = (float *)kvc_plain_row(&a->state_cache, slot, 2 * width * 4);
        const float *ape_row = a->ape + (a->positions[t] % a->compress_ratio) * width;
        /* Streaming stores need 64-byte alignment (rows are whole
         * multiples of 64 bytes, so only the row start matters). */
        int streaming = large_batch && ((uintptr_t)state_row & 63) == 0;
        copy_kv(state_row, a->kv + t * width, width, streaming);
        add_position_embedding(state_row + width, a->score + t * width, ape_row, width, streaming);
    }
    /* Streaming stores are weakly ordered: drain them before the threads
     * join, so every later reader sees the rows. */
    _mm_sfence();
}

int opt_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err) {
    /* Section 8: the per-token checks on the threads when every token
     * passes, else the common validator's verdict (validate_tokens.h). */
    int rc = kvc_validate_v4_save_fields(a, err);
    if (rc) return rc;
    if (!opt_v4_save_tokens_valid(a) && (rc = kvc_validate_v4_save(a, err)) != KVC_OK) return rc;
    /* width = coff * D is 128, 256, 512 or 1024: whole zmm registers. */
    int64_t width = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    int large_batch = a->num_tokens * 2 * width * 4 > STREAMING_STORE_BYTES;
    /* At least ~200 KB of rows read and written per thread (stages.h).
     * Bit-identical at any thread count: each state row is written by
     * exactly one thread (section 8 rejects two tokens naming one slot). */
    double nanoseconds = opt_v4_save_nanoseconds(a->num_tokens, width);
    int threads = opt_threads_for(nanoseconds);
    /* One thread stores every row with no team: starting even an inactive
     * parallel region costs about a microsecond (a decode's save is 64
     * rows).  A light call (a decode's) gives each thread one contiguous
     * range, as compress does, so a request's fresh row is in the cache
     * of the core that pools it (stages.h).  Otherwise dynamic chunks of
     * consecutive tokens, at least 8 per thread: with one fixed range per
     * thread the 16-thread 8192-token save waited for its slowest range
     * (0.74-0.81 ms against 0.54-0.56 on the Xeon). */
    if (threads == 1) {
        save_tokens(a, 0, a->num_tokens, width, large_batch);
    } else if (opt_split_statically(nanoseconds, threads)) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t t = 0; t < a->num_tokens; t++) save_tokens(a, t, t + 1, width, large_batch);
    } else {
        int64_t chunk = opt_chunk_for(a->num_tokens, threads, 64), chunks = (a->num_tokens + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t end = (c + 1) * chunk < a->num_tokens ? (c + 1) * chunk : a->num_tokens;
            save_tokens(a, c * chunk, end, width, large_batch);
        }
    }
    opt_leave_vector_code();
    return KVC_OK;
}

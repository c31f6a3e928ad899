/* Optimized v4.compress: the same steps as reference/v4_compress.c,
 * 16 channels per zmm register.  Channels are independent (steps 1-3), so
 * splitting them into blocks, tokens across threads, or both, changes no
 * bit: every channel sees the reference's operations in the reference's
 * order.  The window is walked one 32-channel block at a time, max pass
 * then exp pass, so the block's scores (at most 128 entries x 128 bytes =
 * 16 KiB) stay in L1 between the passes and each state row is read from
 * memory once per compressed token. */
#include <omp.h>
#include <stdlib.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "common/validate_parts.h"
#include "optimized/validate_tokens.h"
#include "optimized/stages.h"
#include "optimized/vector_math.h"

#define MAX_WINDOW 128      /* coff * R: 8 for R = 4, 128 for R = 128 */
#define MAX_HEAD_DIM 512
#define CHANNEL_BLOCK 32   /* channels pooled together: two zmm registers */
/* Whole tokens go to the threads when the busiest thread gets at most
 * 5/4 of an even share (ceil(count / threads) <= 1.25 count / threads:
 * any count from 4 per thread on, and exact multiples such as 32 R = 128
 * tokens on 16 threads); otherwise blocks of channels are spread. */
static int tokens_split_evenly(int64_t count, int threads) {
    int64_t busiest = (count + threads - 1) / threads;
    return count >= threads && 4 * busiest * threads <= 5 * count;
}

/* The valid window entries of one closing token, in increasing w: where
 * each entry's kv and score columns [h, h + D) start. */
typedef struct {
    const float *kv[MAX_WINDOW];
    const float *score[MAX_WINDOW];
    int entries;
    int prefetch_distance;   /* channels from the block in use to the one exp_pass fetches */
} window_rows;

/* The window's state rows, walked block by block: one division per
 * token instead of two per entry (the window is consecutive positions). */
static void gather_window(const kvc_v4_compress_args *a, int64_t t, window_rows *window) {
    int32_t ratio = a->compress_ratio, head_dim = a->head_dim;
    int64_t coff = kvc_v4_coff(ratio), width = coff * head_dim, row_floats = 2 * width;
    int64_t window_size = coff * ratio, p = a->positions[t], req = a->token_to_req[t];
    int64_t block_size = a->state_cache.page_rows;
    const int32_t *block_row = a->block_table + req * a->max_blocks;
    int64_t first_w = window_size - 1 - p > 0 ? window_size - 1 - p : 0;   /* entries with q < 0 are skipped */
    int64_t q = p - window_size + 1 + first_w, column = q / block_size, row = q % block_size;
    window->entries = 0;
    window->prefetch_distance = CHANNEL_BLOCK;
    for (int64_t w = first_w; w < window_size; w++) {
        const float *page = (const float *)((const uint8_t *)a->state_cache.data + block_row[column] * a->state_cache.page_stride);
        const float *state_row = page + row * row_floats;
        int64_t half = (ratio == 4 && w >= ratio) ? head_dim : 0;
        window->kv[window->entries] = state_row + half;
        window->score[window->entries] = state_row + width + half;
        window->entries++;
        if (++row == block_size) { row = 0; column++; }
    }
}

/* Step 2's exp pass over the copied scores of one channel block, and
 * step 3.  in_range: every x = score - max of the block is known to be in
 * [-87, 0], so opt_exp16_in_range may skip its per-vector range test
 * (inlined twice, with the flag a constant, by always_inline). */
static inline __attribute__((always_inline)) void exp_pass(const window_rows *window, int d, const float *scores,
                                                           __m512 max_low, __m512 max_high, int in_range, float *pooled) {
    __m512 denom_low = _mm512_setzero_ps(), denom_high = _mm512_setzero_ps();
    __m512 acc_low = _mm512_setzero_ps(), acc_high = _mm512_setzero_ps();
    for (int e = 0; e < window->entries; e++) {
        /* A later block of this row goes to L2 while this one computes:
         * the 128 rows of an R = 128 window are too many streams for the
         * hardware prefetcher.  (Prefetches never fault.) */
        int ahead = window->prefetch_distance;
        _mm_prefetch((const char *)(window->score[e] + d + ahead), _MM_HINT_T1);
        _mm_prefetch((const char *)(window->score[e] + d + ahead + 16), _MM_HINT_T1);
        _mm_prefetch((const char *)(window->kv[e] + d + ahead), _MM_HINT_T1);
        _mm_prefetch((const char *)(window->kv[e] + d + ahead + 16), _MM_HINT_T1);
        __m512 x_low = _mm512_sub_ps(_mm512_load_ps(scores + e * CHANNEL_BLOCK), max_low);
        __m512 x_high = _mm512_sub_ps(_mm512_load_ps(scores + e * CHANNEL_BLOCK + 16), max_high);
        __m512 weight_low = in_range ? opt_exp16_in_range(x_low) : opt_exp16(x_low);
        __m512 weight_high = in_range ? opt_exp16_in_range(x_high) : opt_exp16(x_high);
        /* Per entry the reference's three roundings, in its order. */
        denom_low = _mm512_add_ps(denom_low, weight_low);
        denom_high = _mm512_add_ps(denom_high, weight_high);
        acc_low = _mm512_fmadd_ps(weight_low, _mm512_loadu_ps(window->kv[e] + d), acc_low);
        acc_high = _mm512_fmadd_ps(weight_high, _mm512_loadu_ps(window->kv[e] + d + 16), acc_high);
    }
    /* Step 3. */
    _mm512_storeu_ps(pooled + d, _mm512_div_ps(acc_low, denom_low));
    _mm512_storeu_ps(pooled + d + 16, _mm512_div_ps(acc_high, denom_high));
}

/* Steps 1-3 for channels [d, d + 32).  The max pass copies the block's
 * scores into a contiguous scratch: window rows are 4 or 8 KiB apart, so
 * the same columns of 128 rows would all fall into one L1 set; the copy
 * keeps them in L1 for the exp pass. */
static void pool_channel_block(const window_rows *window, int d, float *pooled) {
    int entries = window->entries;
    float scores[MAX_WINDOW * CHANNEL_BLOCK] __attribute__((aligned(64)));
    /* Step 1, from entry 0 on like the reference; the lane-wise max keeps
     * the reference's operand order (it matters only for +0 vs -0).  The
     * minimum, alongside, bounds every x = score - max below. */
    __m512 max_low = _mm512_loadu_ps(window->score[0] + d), max_high = _mm512_loadu_ps(window->score[0] + d + 16);
    __m512 min_low = max_low, min_high = max_high;
    _mm512_store_ps(scores, max_low);
    _mm512_store_ps(scores + 16, max_high);
    for (int e = 1; e < entries; e++) {
        __m512 low = _mm512_loadu_ps(window->score[e] + d), high = _mm512_loadu_ps(window->score[e] + d + 16);
        _mm512_store_ps(scores + e * CHANNEL_BLOCK, low);
        _mm512_store_ps(scores + e * CHANNEL_BLOCK + 16, high);
        max_low = opt_max_nan16(max_low, low);
        max_high = opt_max_nan16(max_high, high);
        min_low = _mm512_min_ps(min_low, low);
        min_high = _mm512_min_ps(min_high, high);
    }
    /* If RN(max - min) <= 87 in a lane, every x = RN(score - max) there is
     * in [-87, 0]: x >= RN(min - max) = -RN(max - min) >= -87 since
     * rounding is monotone and odd.  A NaN or infinite score makes the
     * ordered compare fail (max is NaN, or max - min is inf or NaN); min's
     * own NaN handling does not matter, as any NaN score makes max NaN. */
    __mmask16 bounded = _mm512_cmp_ps_mask(_mm512_sub_ps(max_low, min_low), _mm512_set1_ps(87.0f), _CMP_LE_OQ) &
                        _mm512_cmp_ps_mask(_mm512_sub_ps(max_high, min_high), _mm512_set1_ps(87.0f), _CMP_LE_OQ);
    if (bounded == 0xFFFF) exp_pass(window, d, scores, max_low, max_high, 1, pooled);
    else exp_pass(window, d, scores, max_low, max_high, 0, pooled);
}

/* Steps 8-9, D = 512: NoPE rounded to bf16 then quantised; RoPE on the
 * un-rounded fp32 values, stored as bf16. */
static void store_main(const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int nope_dims = 512 - KVC_ROPE_DIMS;
    uint16_t nope_bf16[512 - KVC_ROPE_DIMS];
    for (int d = 0; d < nope_dims; d += 16)
        _mm256_storeu_si256((__m256i *)(nope_bf16 + d), opt_bf16_from_f32x16(_mm512_loadu_ps(normed + d)));
    int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
    opt_rope(normed + nope_dims, a->cos_sin + cos_row * KVC_ROPE_DIMS);
    int64_t slot = a->kv_slot_mapping[t];
    opt_store_ds_mla(nope_bf16, normed + nope_dims, kvc_ds_mla_token(&a->kv_cache, slot), kvc_ds_mla_scales(&a->kv_cache, slot));
}

/* D = 128 indexer: RoPE on fp32, then all 128 dims to bf16 and one block. */
static void store_indexer(const kvc_v4_compress_args *a, int64_t t, float *normed) {
    int nope_dims = 128 - KVC_ROPE_DIMS;
    int64_t cos_row = kvc_rope_row(a->positions[t], a->compress_ratio);
    opt_rope(normed + nope_dims, a->cos_sin + cos_row * KVC_ROPE_DIMS);
    float z[128];
    for (int d = 0; d < 128; d += 16) _mm512_storeu_ps(z + d, opt_round_to_bf16x16(_mm512_loadu_ps(normed + d)));
    kvc_block_scale scale = kvc_block_scale_from_quotient(opt_block_magnitude(z, 128) / KVC_FP8_MAX);
    int64_t slot = a->kv_slot_mapping[t];
    uint8_t *codes = kvc_indexer_token(&a->kv_cache, slot);
    opt_quantize_codes64(z, scale, codes);
    opt_quantize_codes64(z + 64, scale, codes + 64);
    kvc_store_f32(kvc_indexer_scale(&a->kv_cache, slot), opt_scale_value(scale));
}

/* Steps 4-9 for one token whose pooled row is complete. */
static void finish_token(const kvc_v4_compress_args *a, int64_t t, const float *pooled) {
    float normed[MAX_HEAD_DIM];
    opt_rms_norm(pooled, a->norm_weight, a->head_dim, a->eps, normed);
    if (a->head_dim == 512) store_main(a, t, normed);
    else store_indexer(a, t, normed);
}

/* 1 when closing token i + 1 is the next closing token of the same
 * request at R = 4: its window's last R entries are then its own group
 * of rows (second halves), which no earlier token read; the first R are
 * token i's group, first halves, in the pages token i reads. */
static int next_token_adds_a_group(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t i, int64_t count) {
    if (a->compress_ratio != 4 || i + 1 >= count) return 0;
    int64_t t = tokens[i], u = tokens[i + 1];
    return a->token_to_req[u] == a->token_to_req[t] && a->positions[u] == a->positions[t] + 4;
}

/* Steps 1-9 for the i-th of the closing tokens.  In a prefill the next
 * closing token's new group of rows (16 KiB at D = 512, in a page of
 * its own when blocks are shuffled) is fetched into L2 one channel block
 * per block of this token, 16 lines at a time; the hardware prefetchers
 * do not cross to that page.  On the 2-core EPYC VM (2026-12-02)
 * D = 512 R = 4 prefill took 5.7-6.2 ms against 6.5-8.2 at one thread,
 * D = 128 R = 4 1.3-1.4 against 1.7-2.3; on the 16-core Xeon 7.7-9.0
 * against 8.2-9.9 at one thread and 4.2-5.3 against 4.4-5.6 at two, even
 * from four.  A decode's next token is another request's: nothing is
 * fetched (its window was 5% slower with the fetch).  Earlier that day
 * fetching the whole next window, 512 lines in one burst or spread like
 * this, was 8-20% slower on the Xeon.  In a prefill exp_pass also
 * fetches two blocks ahead in the window instead of one (an R = 4 block
 * is 8 entries, ~70 ns of exps on the EPYC VM, less than a miss), block
 * 1 as the token starts: on the 2-core EPYC VM (2026-12-02,
 * one thread, three runs in one command) D = 512 R = 4 prefill took
 * 5.17-6.29 ms against 5.80-6.88, D = 128 R = 4 1.31-1.80 against
 * 1.32-1.81; three or four blocks ahead were slower than two, and
 * decodes were 0-5% slower with it; on the 16-core Xeon the prefills
 * moved by at most 5%, either way, at 1-16 threads.  (GCC 12 dropped
 * the next group's prefetches when they sat in a helper looping from
 * entries - min(entries, 4): keep them in this loop and check the
 * assembly after a change.)  Prefetches change no bit. */
static void compress_token(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t i, int64_t count) {
    window_rows window, next;
    float pooled[MAX_HEAD_DIM];
    gather_window(a, tokens[i], &window);
    int fetch_next_group = next_token_adds_a_group(a, tokens, i, count);
    if (fetch_next_group) {
        gather_window(a, tokens[i + 1], &next);
        window.prefetch_distance = 2 * CHANNEL_BLOCK;
    }
    for (int e = 0; e < window.entries; e++)   /* the blocks before the first that exp_pass fetches */
        for (int d = CHANNEL_BLOCK; d < window.prefetch_distance; d += 16) {
            _mm_prefetch((const char *)(window.kv[e] + d), _MM_HINT_T1);
            _mm_prefetch((const char *)(window.score[e] + d), _MM_HINT_T1);
        }
    for (int d = 0; d < a->head_dim; d += CHANNEL_BLOCK) {
        if (fetch_next_group)
            for (int e = next.entries - 4; e < next.entries; e++) {
                _mm_prefetch((const char *)(next.kv[e] + d), _MM_HINT_T1);
                _mm_prefetch((const char *)(next.kv[e] + d + 16), _MM_HINT_T1);
                _mm_prefetch((const char *)(next.score[e] + d), _MM_HINT_T1);
                _mm_prefetch((const char *)(next.score[e] + d + 16), _MM_HINT_T1);
            }
        pool_channel_block(&window, d, pooled);
    }
    finish_token(a, tokens[i], pooled);
}

/* Many closing tokens: whole tokens to each thread.  Light calls
 * (opt_split_statically) in one contiguous range per thread; others in
 * guided chunks of consecutive tokens, the first ones about count /
 * threads long, shrinking to one token at the end, so that threads that
 * start late or run slow leave no long tail (dynamic runs of 16 R = 4
 * D = 512 tokens were ~100 us each, an eighth of a 16-thread prefill).
 * One thread runs the loop with no team: starting even an inactive
 * parallel region costs about a microsecond.  Bit-identical at any
 * thread count and split: each token's row is pooled, normed and stored
 * by exactly one thread, with the reference's operations in the
 * reference's order. */
static void compress_by_token(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t count, int threads, int statically) {
    if (threads == 1) {
        for (int64_t i = 0; i < count; i++) compress_token(a, tokens, i, count);
    } else if (statically) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < count; i++) compress_token(a, tokens, i, count);
    } else {
#pragma omp parallel for schedule(guided) num_threads(threads)
        for (int64_t i = 0; i < count; i++) compress_token(a, tokens, i, count);
    }
}

/* Steps 1-3 for the item-th (token, channel block) pair. */
static void pool_pair(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t item, float *pooled_rows) {
    int blocks = a->head_dim / CHANNEL_BLOCK;
    int64_t i = item / blocks;
    window_rows window;
    gather_window(a, tokens[i], &window);
    pool_channel_block(&window, (int)(item % blocks) * CHANNEL_BLOCK, pooled_rows + i * a->head_dim);
}

/* Few closing tokens: the (token, channel block) pairs are spread over
 * the threads, pooled rows meet in one scratch array, then each token is
 * normed and stored.  Bit-identical at any thread count: each 32-channel
 * slice of a pooled row is written by exactly one thread (channels are
 * independent in steps 1-3), and the loop's barrier completes every row
 * before one thread norms it (step 4's sum in the canonical order).
 * Consecutive pairs (a token's blocks in order, so the in-window
 * prefetch of exp_pass fetches the thread's own next block): light
 * calls one static range per thread, others guided chunks.  Handed out
 * one at a time, as before, a 64-request decode sent down this path
 * took 0.105 ms at 16 threads on the 16-core Xeon against 0.038 token by
 * token: a pair is ~150 ns of work, likely less than the shared
 * counter's trips between cores. */
static void compress_by_channel_block(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t count, int threads,
                                      int statically, float *pooled_rows) {
    int64_t pairs = count * (a->head_dim / CHANNEL_BLOCK);
#pragma omp parallel num_threads(threads)
    {
        if (statically) {
#pragma omp for schedule(static)
            for (int64_t item = 0; item < pairs; item++) pool_pair(a, tokens, item, pooled_rows);
        } else {
#pragma omp for schedule(guided)
            for (int64_t item = 0; item < pairs; item++) pool_pair(a, tokens, item, pooled_rows);
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < count; i++) finish_token(a, tokens[i], pooled_rows + i * a->head_dim);
    }
}

int opt_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_validate_v4_compress_fields(a, err);
    if (rc) return rc;
    /* Section 8's per-token checks and the list of closing tokens that
     * produce a row, both on the threads (validate_tokens.h).  When a
     * token fails them, the common validator gives the reference's error
     * word for word; it passes such a batch only when the threads' check
     * ran out of memory. */
    int64_t *tokens = malloc((size_t)(a->num_tokens > 0 ? a->num_tokens : 1) * sizeof *tokens), count = 0;
    if (!tokens || !opt_v4_compress_tokens_valid(a, tokens, &count)) {
        free(tokens);
        rc = kvc_validate_v4_compress(a, err);
        return rc ? rc : kvc_fail(err, KVC_ERR_NOMEM, "out of memory for the closing-token list");
    }
    /* At least ~4 closing tokens of R = 4 D = 512 per thread (stages.h). */
    double nanoseconds = opt_v4_compress_nanoseconds(count, a->compress_ratio, a->head_dim);
    int threads = opt_threads_for(nanoseconds), statically = opt_split_statically(nanoseconds, threads);
    if (tokens_split_evenly(count, threads)) {
        compress_by_token(a, tokens, count, threads, statically);
    } else if (count > 0) {
        float *pooled_rows = malloc((size_t)(count * a->head_dim) * sizeof *pooled_rows);
        if (!pooled_rows) { free(tokens); return kvc_fail(err, KVC_ERR_NOMEM, "out of memory for pooled rows"); }
        compress_by_channel_block(a, tokens, count, threads, statically, pooled_rows);
        free(pooled_rows);
    }
    free(tokens);
    opt_leave_vector_code();
    return KVC_OK;
}

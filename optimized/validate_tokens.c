/* The per-token half of SPEC.md section 8's checks, spread over the
 * threads (validate_tokens.h).  It decides only "every token passes" or
 * "some token does not" (or memory ran out); in the second case the stage
 * runs the common validator, whose first error is the reference's.  Each
 * check below is the validator's, on the same tokens, so the two agree on
 * every batch: this one only does not say which token failed first. */
#include "optimized/validate_tokens.h"

#include <stdlib.h>

#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "optimized/stages.h"

/* ---- One writer per row, without a lock ---- */

/* Every checked token stores its index at its row's entry of `writer`,
 * then, after a barrier, reads it back: with two tokens on one row, the
 * later store overwrites the earlier, whose token reads the other's
 * index.  Entries of rows no token names are never read, so the table
 * is not initialised; relaxed atomics are plain moves that make the
 * racing stores of a conflict defined.  (The common validator clears a
 * table as large on every call.) */
static int64_t *writer_table(const kvc_paged_cache *cache) {
    int64_t rows = cache->num_pages * cache->page_rows;
    return malloc(((size_t)rows + 1) * sizeof(int64_t));   /* rows >= 0: section 8 checked the cache */
}
static void claim_row(int64_t *writer, int64_t row, int64_t t) { __atomic_store_n(&writer[row], t, __ATOMIC_RELAXED); }
static int row_kept(const int64_t *writer, int64_t row, int64_t t) { return __atomic_load_n(&writer[row], __ATOMIC_RELAXED) == t; }

/* ---- The tokens of a call, split into one contiguous range per thread ---- */

/* What a token check costs, about (a few loads and compares, a store and
 * a load of its row's entry): a pass on the threads pays for itself from
 * a few thousand tokens. */
#define NANOSECONDS_PER_CHECKED_TOKEN 5.0

/* With sleeping (passive) threads the check stays on the calling thread:
 * its region and barrier would wake every thread twice more per call,
 * which on the 16-core Xeon cost more than the whole serial check
 * (D512 R128 prefill at 16 threads 0.77-0.87 ms against 0.28-0.31). */
static int check_threads(int64_t tokens) {
    if (opt_nanoseconds_per_wake > 0) return 1;
    return opt_threads_for((double)tokens * NANOSECONDS_PER_CHECKED_TOKEN);
}

static int64_t range_start(int64_t count, int part, int parts) { return count * part / parts; }

/* section 8: a position the validator accepts. */
static int position_ok(int64_t p) { return p >= 0 && p <= KVC_MAX_POSITION; }

/* A stage's two passes over a token range: the checks, each token storing
 * its claims into `tables`; then, once every thread's stores are done,
 * whether each of its claims was kept. */
typedef struct {
    int (*check)(const void *args, int64_t begin, int64_t end, void *tables);
    int (*kept)(const void *args, int64_t begin, int64_t end, void *tables);
} token_passes;

/* 1 when every range passes both: on the calling thread when the check
 * pays for one thread, else one contiguous range per thread of a team
 * with a barrier between the passes. */
static int passes_on_threads(const token_passes *passes, const void *args, int64_t num_tokens, void *tables) {
    int threads = check_threads(num_tokens), valid = 1;
    if (threads == 1)   /* no team: even an inactive region costs a microsecond */
        return passes->check(args, 0, num_tokens, tables) && passes->kept(args, 0, num_tokens, tables);
#pragma omp parallel num_threads(threads) reduction(&& : valid)
    {
        int parts = omp_get_num_threads(), part = omp_get_thread_num();
        int64_t begin = range_start(num_tokens, part, parts), end = range_start(num_tokens, part + 1, parts);
        valid = passes->check(args, begin, end, tables);
#pragma omp barrier
        valid = valid && passes->kept(args, begin, end, tables);
    }
    return valid;
}

/* The passes of a stage whose tokens claim rows of `cache` (one writer
 * per row); 0 also when the table cannot be had. */
static int passes_claiming_rows(const token_passes *passes, const void *args, int64_t num_tokens, const kvc_paged_cache *cache) {
    int64_t *writer = writer_table(cache);
    int valid = writer && passes_on_threads(passes, args, num_tokens, writer);
    free(writer);
    return valid;
}

/* Save's tokens [begin, end): the validator's checks, each row claimed. */
static int save_tokens_ok(const void *args, int64_t begin, int64_t end, void *writer) {
    const kvc_v4_save_args *a = args;
    int64_t rows = a->state_cache.num_pages * a->state_cache.page_rows;
    for (int64_t t = begin; t < end; t++) {
        int64_t slot = a->slot_mapping[t];
        if (slot < 0) continue;
        if (!position_ok(a->positions[t]) || slot >= rows) return 0;
        claim_row(writer, slot, t);
    }
    return 1;
}

static int save_rows_kept(const void *args, int64_t begin, int64_t end, void *writer) {
    const kvc_v4_save_args *a = args;
    for (int64_t t = begin; t < end; t++)
        if (a->slot_mapping[t] >= 0 && !row_kept(writer, a->slot_mapping[t], t)) return 0;
    return 1;
}

int opt_v4_save_tokens_valid(const kvc_v4_save_args *a) {
    static const token_passes passes = {save_tokens_ok, save_rows_kept};
    return passes_claiming_rows(&passes, a, a->num_tokens, &a->state_cache);
}

/* Every window entry of closing token t resolves through the block table
 * to a page of the state cache: the validator walks the entries, this
 * the block-table columns they fall in (consecutive positions, so every
 * column from the first entry's to the last one's). */
static int window_ok(const kvc_v4_compress_args *a, int64_t t) {
    int64_t p = a->positions[t], window = (int64_t)kvc_v4_coff(a->compress_ratio) * a->compress_ratio;
    int64_t rows = a->state_cache.page_rows, first = p - window + 1 > 0 ? p - window + 1 : 0;
    int64_t last_column = p / rows;
    if (last_column >= a->max_blocks) return 0;
    const int32_t *columns = a->block_table + (int64_t)a->token_to_req[t] * a->max_blocks;
    for (int64_t column = first / rows; column <= last_column; column++)
        if (columns[column] < 0 || columns[column] >= a->state_cache.num_pages) return 0;
    return 1;
}

/* One closing token of compress, past its position check. */
static int closing_token_ok(const kvc_v4_compress_args *a, int64_t t) {
    int64_t state_rows = a->state_cache.num_pages * a->state_cache.page_rows;
    int64_t cache_rows = a->kv_cache.num_pages * a->kv_cache.page_rows;
    return a->slot_mapping[t] < state_rows && a->kv_slot_mapping[t] < cache_rows && a->token_to_req[t] >= 0 &&
           a->token_to_req[t] < a->num_requests && kvc_rope_row(a->positions[t], a->compress_ratio) < a->cos_sin_rows &&
           window_ok(a, t);
}

/* Compress's tokens [begin, end): the validator's checks, each closing
 * token's kv_cache row claimed and the token written from tokens[begin]
 * on; their number, or -1 when a token fails. */
static int64_t compress_tokens_ok(const kvc_v4_compress_args *a, int64_t begin, int64_t end, int64_t *writer, int64_t *tokens) {
    int64_t found = 0;
    for (int64_t t = begin; t < end; t++) {
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0) continue;
        if (!position_ok(a->positions[t])) return -1;
        if (!kvc_is_closing(a->positions[t], a->compress_ratio)) continue;
        if (!closing_token_ok(a, t)) return -1;
        claim_row(writer, a->kv_slot_mapping[t], t);
        tokens[begin + found++] = t;
    }
    return found;
}

static int compress_rows_kept(const kvc_v4_compress_args *a, const int64_t *tokens, int64_t count, const int64_t *writer) {
    for (int64_t i = 0; i < count; i++)
        if (!row_kept(writer, a->kv_slot_mapping[tokens[i]], tokens[i])) return 0;
    return 1;
}

int opt_v4_compress_tokens_valid(const kvc_v4_compress_args *a, int64_t *tokens, int64_t *count) {
    int64_t num_tokens = a->num_tokens;
    int threads = check_threads(num_tokens), valid = 1, parts = 1;
    int64_t *writer = writer_table(&a->kv_cache), *found = malloc((size_t)threads * sizeof *found);
    if (!writer || !found) { free(writer); free(found); return 0; }
    if (threads == 1) {   /* no team: even an inactive region costs a microsecond */
        *count = compress_tokens_ok(a, 0, num_tokens, writer, tokens);
        valid = *count >= 0 && compress_rows_kept(a, tokens, *count, writer);
        free(writer);
        free(found);
        return valid;
    }
#pragma omp parallel num_threads(threads) reduction(&& : valid)
    {
        int part = omp_get_thread_num();
        if (part == 0) parts = omp_get_num_threads();
        int64_t begin = range_start(num_tokens, part, omp_get_num_threads());
        found[part] = compress_tokens_ok(a, begin, range_start(num_tokens, part + 1, omp_get_num_threads()), writer, tokens);
#pragma omp barrier
        valid = found[part] >= 0 && compress_rows_kept(a, tokens + begin, found[part], writer);
    }
    /* The ranges' closing tokens moved together, in token order. */
    *count = 0;
    for (int part = 0; valid && part < parts; part++) {
        int64_t begin = range_start(num_tokens, part, parts);
        for (int64_t i = 0; i < found[part]; i++) tokens[(*count)++] = tokens[begin + i];
    }
    free(writer);
    free(found);
    return valid;
}

/* ---- V4.1 inserts ---- */

/* kvc_is_closing and kvc_rope_row for V4.1's R (1 or 2, checked with the
 * fields) and a position in [0, 2^40]: a bit test instead of a 64-bit
 * division, which made the check on one thread 8% of a rope_quant_insert. */
static int v41_closing(int64_t p, int32_t ratio) { return ratio == 1 || (p & 1); }
static int64_t v41_rope_row(int64_t p, int32_t ratio) { return ratio == 1 ? p : p & ~(int64_t)1; }

/* Insert's tokens [begin, end): a token with a row has a valid position;
 * a closing one names a row of kv_cache and a row of cos_sin, and claims
 * its row. */
static int insert_tokens_ok(const void *args, int64_t begin, int64_t end, void *writer) {
    const kvc_v41_insert_args *a = args;
    int64_t rows = a->kv_cache.num_pages * a->kv_cache.page_rows;
    for (int64_t t = begin; t < end; t++) {
        int64_t slot = a->slot_mapping[t], p = a->positions[t];
        if (slot < 0) continue;
        if (!position_ok(p)) return 0;
        if (!v41_closing(p, a->compress_ratio)) continue;
        if (slot >= rows || v41_rope_row(p, a->compress_ratio) >= a->cos_sin_rows) return 0;
        claim_row(writer, slot, t);
    }
    return 1;
}

static int insert_rows_kept(const void *args, int64_t begin, int64_t end, void *writer) {
    const kvc_v41_insert_args *a = args;
    for (int64_t t = begin; t < end; t++)
        if (a->slot_mapping[t] >= 0 && v41_closing(a->positions[t], a->compress_ratio) && !row_kept(writer, a->slot_mapping[t], t))
            return 0;
    return 1;
}

int opt_v41_insert_tokens_valid(const kvc_v41_insert_args *a) {
    static const token_passes passes = {insert_tokens_ok, insert_rows_kept};
    return passes_claiming_rows(&passes, a, a->num_tokens, &a->kv_cache);
}

/* ---- V4.1 save_compress_norm ---- */

/* query_start_loc's own rules (num_requests + 1 entries, on the calling
 * thread): from 0, monotone, within the batch. */
static int request_starts_ok(const kvc_v41_norm_args *a) {
    const int32_t *starts = a->query_start_loc;
    if (starts[0] != 0 || starts[a->num_requests] > a->num_tokens) return 0;
    for (int64_t r = 0; r < a->num_requests; r++)
        if (starts[r + 1] < starts[r]) return 0;
    return 1;
}

/* Where norm's tokens claim: a ring block per request, a request per block. */
typedef struct {
    int64_t *request_block, *block_owner;
} ring_claims;

/* Norm's tokens [begin, end): a token with a row has a valid position;
 * at R = 2 the request metadata's per-token rules (a padding token past
 * the last request has no row; a token's request is the one
 * query_start_loc puts it in; positions follow within a request; a row
 * lies in the ring cache at p mod CAP), each slotted token storing its
 * ring block as its request's and its request as the block's owner.  CAP
 * is a power of two (fields): mask and shift for % and /. */
static int norm_tokens_ok(const void *args, int64_t begin, int64_t end, void *tables) {
    const kvc_v41_norm_args *a = args;
    ring_claims *claims = tables;
    if (a->compress_ratio == 1) {   /* no ring, no request metadata (they may be NULL) */
        for (int64_t t = begin; t < end; t++)
            if (a->slot_mapping[t] >= 0 && !position_ok(a->positions[t])) return 0;
        return 1;
    }
    const int32_t *starts = a->query_start_loc;
    int64_t cap = a->state_cache.page_rows, rows = a->state_cache.num_pages * cap, last = starts[a->num_requests];
    int cap_bits = __builtin_ctzll((unsigned long long)cap);
    for (int64_t t = begin; t < end; t++) {
        int64_t slot = a->slot_mapping[t], p = a->positions[t];
        if (slot >= 0 && !position_ok(p)) return 0;
        if (t >= last) {
            if (slot >= 0) return 0;
            continue;
        }
        int64_t r = a->token_to_req[t];
        if (r < 0 || r >= a->num_requests || t < starts[r] || t >= starts[r + 1]) return 0;
        if (t > starts[r] && (a->positions[t - 1] == INT64_MAX || p != a->positions[t - 1] + 1)) return 0;
        if (slot < 0) continue;
        if (slot >= rows || (slot & (cap - 1)) != (p & (cap - 1))) return 0;
        claim_row(claims->request_block, r, slot >> cap_bits);
        claim_row(claims->block_owner, slot >> cap_bits, r);
    }
    return 1;
}

/* After every store: each slotted token's request kept its block (one
 * block per request) and the block kept its request (one request per
 * block). */
static int norm_blocks_kept(const void *args, int64_t begin, int64_t end, void *tables) {
    const kvc_v41_norm_args *a = args;
    const ring_claims *claims = tables;
    if (a->compress_ratio == 1) return 1;
    int64_t last = a->query_start_loc[a->num_requests];
    int cap_bits = __builtin_ctzll((unsigned long long)a->state_cache.page_rows);
    for (int64_t t = begin; t < end && t < last; t++) {
        int64_t slot = a->slot_mapping[t], r = a->token_to_req[t];
        if (slot < 0) continue;
        if (!row_kept(claims->request_block, r, slot >> cap_bits) || !row_kept(claims->block_owner, slot >> cap_bits, r)) return 0;
    }
    return 1;
}

int opt_v41_norm_tokens_valid(const kvc_v41_norm_args *a) {
    static const token_passes passes = {norm_tokens_ok, norm_blocks_kept};
    if (a->compress_ratio == 2 && !request_starts_ok(a)) return 0;
    /* Entries no token stores are never read (as writer_table). */
    int64_t requests = a->compress_ratio == 2 ? a->num_requests : 0, pages = a->compress_ratio == 2 ? a->state_cache.num_pages : 0;
    ring_claims claims = {malloc((size_t)(requests + 1) * sizeof(int64_t)), malloc((size_t)(pages + 1) * sizeof(int64_t))};
    int valid = claims.request_block && claims.block_owner && passes_on_threads(&passes, a, a->num_tokens, &claims);
    free(claims.request_block);
    free(claims.block_owner);
    return valid;
}

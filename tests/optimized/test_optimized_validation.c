/* The optimized V4 stages and V4.1 inserts check section 8's per-token rules on the
 * threads and fall back on the common validator when a token fails
 * (optimized/validate_tokens.c).  Each rule broken once, on a token in
 * the first, middle or last of three thread ranges, must give the
 * reference's status and message, word for word, with no output byte
 * written; the unbroken batch the reference's bytes.  At 1 thread (no
 * team) and at 3 (every allowed thread, whatever the batch's size). */
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/backends.h"
#include "kvcmp/layout.h"
#include "kvcmp/validate.h"
#include "optimized/optimized.h"

enum { REQUESTS = 2, CHUNK = 24, TOKENS = REQUESTS * CHUNK, BLOCK = 4, COLUMNS = CHUNK / BLOCK, PAGES = REQUESTS * COLUMNS + 1 };
enum { WIDTH = 256, ROW_FLOATS = 2 * WIDTH, COS_ROWS = 4096, CACHE_ROWS = 16 };

typedef struct {
    kvc_v4_compress_args compress;
    kvc_v4_save_args save;
    int64_t positions[TOKENS], slots[TOKENS], kv_slots[TOKENS];
    int32_t token_to_req[TOKENS], block_table[REQUESTS * COLUMNS];
    float state[PAGES * BLOCK * ROW_FLOATS], cos_sin[COS_ROWS * 64], weight[128], kv[TOKENS * WIDTH], score[TOKENS * WIDTH],
        ape[4 * WIDTH];
    uint8_t kv_cache[CACHE_ROWS * 132];
} batch;

/* A valid batch: D = 128, R = 4, two requests of 24 positions from 0 in
 * reversed blocks; closing tokens write kv_cache rows 0..11, every other
 * non-closing token names row 0 (checked for its position, never
 * written), the rest -1. */
static void make_batch(batch *b) {
    memset(b, 0, sizeof *b);
    for (int i = 0; i < PAGES * BLOCK * ROW_FLOATS; i++) b->state[i] = (float)(i % 97) / 97.0f;
    for (int i = 0; i < COS_ROWS * 64; i++) b->cos_sin[i] = (float)(i % 13) / 13.0f;
    for (int i = 0; i < 128; i++) b->weight[i] = 1.0f + (float)i / 256.0f;
    for (int i = 0; i < TOKENS * WIDTH; i++) { b->kv[i] = (float)(i % 31); b->score[i] = (float)(i % 7) / 7.0f; }
    for (int i = 0; i < REQUESTS * COLUMNS; i++) b->block_table[i] = REQUESTS * COLUMNS - 1 - i;
    kvc_v4_compress_args *a = &b->compress;
    a->num_tokens = TOKENS;
    a->compress_ratio = 4;
    a->head_dim = 128;
    a->eps = 1e-6f;
    a->state_cache = (kvc_paged_cache){.data = b->state, .num_pages = PAGES, .page_rows = BLOCK,
                                       .page_bytes = BLOCK * ROW_FLOATS * 4, .page_stride = BLOCK * ROW_FLOATS * 4};
    int64_t row_bytes = kvc_cache_row_bytes(KVC_CACHE_FP8_INDEXER);
    cr_assert_eq(row_bytes, 132);
    a->kv_cache = (kvc_paged_cache){.data = b->kv_cache, .num_pages = 1, .page_rows = CACHE_ROWS, .page_bytes = CACHE_ROWS * row_bytes,
                                    .page_stride = CACHE_ROWS * row_bytes};
    a->block_table = b->block_table;
    a->num_requests = REQUESTS;
    a->max_blocks = COLUMNS;
    a->norm_weight = b->weight;
    a->cos_sin = b->cos_sin;
    a->cos_sin_rows = COS_ROWS;
    int64_t closing = 0;
    for (int64_t t = 0; t < TOKENS; t++) {
        int64_t req = t / CHUNK, p = t % CHUNK;
        b->token_to_req[t] = (int32_t)req;
        b->positions[t] = p;
        b->slots[t] = kvc_v4_state_slot(a, req, p);
        b->kv_slots[t] = kvc_is_closing(p, 4) ? closing++ : (t % 2 ? 0 : -1);
    }
    a->positions = b->positions;
    a->slot_mapping = b->slots;
    a->kv_slot_mapping = b->kv_slots;
    a->token_to_req = b->token_to_req;
    kvc_v4_save_args *s = &b->save;
    s->num_tokens = TOKENS;
    s->compress_ratio = 4;
    s->head_dim = 128;
    s->state_cache = a->state_cache;
    s->kv = b->kv;
    s->score = b->score;
    s->ape = b->ape;
    s->positions = b->positions;
    s->slot_mapping = b->slots;
}

/* Closing tokens (position 3 mod 4) in the first, middle and last third. */
static const int64_t closing_tokens[] = {3, 23, 47};

typedef void (*breakage)(batch *b, int64_t t);
static void unbroken(batch *b, int64_t t) { (void)b; (void)t; }
static void position_negative(batch *b, int64_t t) { b->positions[t - 2] = -1; }   /* a non-closing token naming kv row 0 */
static void position_too_high(batch *b, int64_t t) { b->positions[t] = KVC_MAX_POSITION + 1; }
static void state_slot_past_cache(batch *b, int64_t t) { b->slots[t] = PAGES * BLOCK; }
static void kv_slot_past_cache(batch *b, int64_t t) { b->kv_slots[t] = CACHE_ROWS; }
static void request_negative(batch *b, int64_t t) { b->token_to_req[t] = -1; }
static void request_past_table(batch *b, int64_t t) { b->token_to_req[t] = REQUESTS; }
static void cos_sin_short(batch *b, int64_t t) { b->compress.cos_sin_rows = b->positions[t] / 4 * 4; }
static void window_past_columns(batch *b, int64_t t) { b->positions[t] = COLUMNS * BLOCK + 3; }
static void block_negative(batch *b, int64_t t) { b->block_table[b->token_to_req[t] * COLUMNS + b->positions[t] / BLOCK] = -1; }
static void block_past_cache(batch *b, int64_t t) { b->block_table[b->token_to_req[t] * COLUMNS + b->positions[t] / BLOCK] = PAGES; }
static void kv_row_shared_far(batch *b, int64_t t) { b->kv_slots[t] = b->kv_slots[t == 3 ? 47 : 3]; }
static void kv_row_shared_near(batch *b, int64_t t) { b->kv_slots[t] = b->kv_slots[t == 3 ? 7 : t - 4]; }
/* save only: a padding token's position is never checked. */
static void padding_position(batch *b, int64_t t) { b->slots[t - 1] = -1; b->positions[t - 1] = -5; }
static void state_row_shared(batch *b, int64_t t) { b->slots[t] = b->slots[t == 3 ? 47 : 3]; }

static const struct { const char *name; breakage apply; } compress_breakages[] = {
    {"unbroken", unbroken},
    {"position_negative", position_negative},
    {"position_too_high", position_too_high},
    {"state_slot_past_cache", state_slot_past_cache},
    {"kv_slot_past_cache", kv_slot_past_cache},
    {"request_negative", request_negative},
    {"request_past_table", request_past_table},
    {"cos_sin_short", cos_sin_short},
    {"window_past_columns", window_past_columns},
    {"block_negative", block_negative},
    {"block_past_cache", block_past_cache},
    {"kv_row_shared_far", kv_row_shared_far},
    {"kv_row_shared_near", kv_row_shared_near},
};

static const struct { const char *name; breakage apply; } save_breakages[] = {
    {"unbroken", unbroken},
    {"position_negative", position_negative},
    {"position_too_high", position_too_high},
    {"state_slot_past_cache", state_slot_past_cache},
    {"padding_position", padding_position},
    {"state_row_shared", state_row_shared},
};

static const kvc_backend *optimized_at(int threads) {
    char error[256];
    const kvc_backend *b = kvc_backend_by_name("opt", error, sizeof error);
    if (!b) cr_skip_test("%s", error);
    kvc_optimized_set_thread_work(0);   /* every allowed thread, however small the batch */
    omp_set_num_threads(threads);
    return b;
}

/* Status, message and every byte of `output` (size bytes) the same after
 * the reference's call and the optimized one on identical batches. */
static void expect_same(const char *what, int rc_ref, const kvc_error *ref, const void *ref_out, int rc_opt, const kvc_error *opt,
                        const void *opt_out, size_t size) {
    cr_expect_eq(rc_opt, rc_ref, "%s: status %d, the reference's %d (%s)", what, rc_opt, rc_ref, ref->message);
    cr_expect_str_eq(opt->message, ref->message, "%s: message '%s', the reference's '%s'", what, opt->message, ref->message);
    cr_expect_eq(memcmp(opt_out, ref_out, size), 0, "%s: output bytes differ from the reference's", what);
}

static void check_compress(int threads) {
    const kvc_backend *opt = optimized_at(threads);
    static batch ref_batch, opt_batch;
    int rejected = 0;
    for (size_t k = 0; k < sizeof compress_breakages / sizeof compress_breakages[0]; k++)
        for (int i = 0; i < 3; i++) {
            make_batch(&ref_batch);
            make_batch(&opt_batch);
            compress_breakages[k].apply(&ref_batch, closing_tokens[i]);
            compress_breakages[k].apply(&opt_batch, closing_tokens[i]);
            kvc_error ref_err = {0}, opt_err = {0};
            int rc_ref = kvc_reference_backend.v4_compress(&ref_batch.compress, &ref_err);
            int rc_opt = opt->v4_compress(&opt_batch.compress, &opt_err);
            char what[128];
            snprintf(what, sizeof what, "v4.compress %s at token %lld, %d threads", compress_breakages[k].name,
                     (long long)closing_tokens[i], threads);
            expect_same(what, rc_ref, &ref_err, ref_batch.kv_cache, rc_opt, &opt_err, opt_batch.kv_cache, sizeof ref_batch.kv_cache);
            rejected += rc_ref != KVC_OK;
        }
    cr_expect_eq(rejected, 3 * 12, "%d of 36 broken batches rejected by the reference: a breakage broke nothing", rejected);
}

static void check_save(int threads) {
    const kvc_backend *opt = optimized_at(threads);
    static batch ref_batch, opt_batch;
    int rejected = 0;
    for (size_t k = 0; k < sizeof save_breakages / sizeof save_breakages[0]; k++)
        for (int i = 0; i < 3; i++) {
            make_batch(&ref_batch);
            make_batch(&opt_batch);
            save_breakages[k].apply(&ref_batch, closing_tokens[i]);
            save_breakages[k].apply(&opt_batch, closing_tokens[i]);
            kvc_error ref_err = {0}, opt_err = {0};
            int rc_ref = kvc_reference_backend.v4_save_partial_states(&ref_batch.save, &ref_err);
            int rc_opt = opt->v4_save_partial_states(&opt_batch.save, &opt_err);
            char what[128];
            snprintf(what, sizeof what, "v4.save_partial_states %s at token %lld, %d threads", save_breakages[k].name,
                     (long long)closing_tokens[i], threads);
            expect_same(what, rc_ref, &ref_err, ref_batch.state, rc_opt, &opt_err, opt_batch.state, sizeof ref_batch.state);
            rejected += rc_ref != KVC_OK;
        }
    cr_expect_eq(rejected, 3 * 4, "%d of 12 broken batches rejected by the reference: a breakage broke nothing", rejected);
}

Test(optimized_validation, v4_compress_one_thread) { check_compress(1); }
Test(optimized_validation, v4_compress_three_threads) { check_compress(3); }
Test(optimized_validation, v4_save_one_thread) { check_save(1); }
Test(optimized_validation, v4_save_three_threads) { check_save(3); }

/* ---- V4.1 inserts: R = 2, 48 tokens at positions 0..47, closing tokens
 * (odd positions) write rows 0..23, every other non-closing token names
 * row 0 (its position checked, nothing written). ---- */

enum { INSERT_TOKENS = 48, INSERT_ROWS = 32, INSERT_COS_ROWS = 64, DS_MLA_ROW = 576 + 8, BF16_ROW = 1024 };

typedef struct {
    kvc_v41_insert_args args;
    int64_t positions[INSERT_TOKENS], slots[INSERT_TOKENS];
    uint16_t latent[INSERT_TOKENS * 512];
    float cos_sin[INSERT_COS_ROWS * 64];
    uint8_t kv_cache[INSERT_ROWS * BF16_ROW];
} insert_batch;

static void make_insert_batch(insert_batch *b, kvc_cache_dtype dtype) {
    memset(b, 0, sizeof *b);
    for (int i = 0; i < INSERT_TOKENS * 512; i++) b->latent[i] = (uint16_t)(0x3C00 + i % 509);   /* bf16 values near 0.008-1 */
    for (int i = 0; i < INSERT_COS_ROWS * 64; i++) b->cos_sin[i] = (float)(i % 13) / 13.0f;
    int64_t row_bytes = kvc_cache_row_bytes(dtype);
    cr_assert_eq(row_bytes, dtype == KVC_CACHE_FP8_DS_MLA ? DS_MLA_ROW : BF16_ROW);
    kvc_v41_insert_args *a = &b->args;
    a->num_tokens = INSERT_TOKENS;
    a->compress_ratio = 2;
    a->cache_dtype = dtype;
    a->kv_cache = (kvc_paged_cache){.data = b->kv_cache, .num_pages = 1, .page_rows = INSERT_ROWS, .page_bytes = INSERT_ROWS * row_bytes,
                                    .page_stride = INSERT_ROWS * row_bytes};
    a->cos_sin = b->cos_sin;
    a->cos_sin_rows = INSERT_COS_ROWS;
    int64_t closing = 0;
    for (int64_t t = 0; t < INSERT_TOKENS; t++) {
        b->positions[t] = t;
        b->slots[t] = kvc_is_closing(t, 2) ? closing++ : (t % 4 == 0 ? 0 : -1);
    }
    a->latent = b->latent;
    a->positions = b->positions;
    a->slot_mapping = b->slots;
}

/* Closing tokens (odd positions) in the first, middle and last third. */
static const int64_t insert_closing_tokens[] = {5, 23, 47};

typedef void (*insert_breakage)(insert_batch *b, int64_t t);
static void insert_unbroken(insert_batch *b, int64_t t) { (void)b; (void)t; }
static void insert_position_negative(insert_batch *b, int64_t t) { b->positions[t - 1 - (t - 1) % 4] = -1; }   /* a token naming row 0 */
static void insert_position_too_high(insert_batch *b, int64_t t) { b->positions[t] = KVC_MAX_POSITION + 1; }
static void insert_slot_past_cache(insert_batch *b, int64_t t) { b->slots[t] = INSERT_ROWS; }
static void insert_cos_sin_short(insert_batch *b, int64_t t) { b->args.cos_sin_rows = b->positions[t] / 2 * 2; }
static void insert_row_shared_far(insert_batch *b, int64_t t) { b->slots[t] = b->slots[t == 5 ? 47 : 5]; }
static void insert_row_shared_near(insert_batch *b, int64_t t) { b->slots[t] = b->slots[t - 2]; }
/* A token skipped (slot -1) or not closing is not checked for its row. */
static void insert_padding_position(insert_batch *b, int64_t t) { b->slots[t - 2] = -1; b->positions[t - 2] = -5; }

static const struct { const char *name; insert_breakage apply; int rejected; } insert_breakages[] = {
    {"unbroken", insert_unbroken, 0},
    {"position_negative", insert_position_negative, 1},
    {"position_too_high", insert_position_too_high, 1},
    {"slot_past_cache", insert_slot_past_cache, 1},
    {"cos_sin_short", insert_cos_sin_short, 1},
    {"row_shared_far", insert_row_shared_far, 1},
    {"row_shared_near", insert_row_shared_near, 1},
    {"padding_position", insert_padding_position, 0},
};

static int call_insert(const kvc_backend *b, const kvc_v41_insert_args *a, kvc_error *err) {
    return a->cache_dtype == KVC_CACHE_FP8_DS_MLA ? b->v41_rope_quant_insert(a, err) : b->v41_rope_plain_insert(a, err);
}

static void check_insert(kvc_cache_dtype dtype, int threads) {
    const kvc_backend *opt = optimized_at(threads);
    static insert_batch ref_batch, opt_batch;
    for (size_t k = 0; k < sizeof insert_breakages / sizeof insert_breakages[0]; k++)
        for (int i = 0; i < 3; i++) {
            make_insert_batch(&ref_batch, dtype);
            make_insert_batch(&opt_batch, dtype);
            insert_breakages[k].apply(&ref_batch, insert_closing_tokens[i]);
            insert_breakages[k].apply(&opt_batch, insert_closing_tokens[i]);
            kvc_error ref_err = {0}, opt_err = {0};
            int rc_ref = call_insert(&kvc_reference_backend, &ref_batch.args, &ref_err);
            int rc_opt = call_insert(opt, &opt_batch.args, &opt_err);
            char what[160];
            snprintf(what, sizeof what, "%s %s at token %lld, %d threads", dtype == KVC_CACHE_FP8_DS_MLA ? "v41.rope_quant_insert" : "v41.rope_plain_insert",
                     insert_breakages[k].name, (long long)insert_closing_tokens[i], threads);
            /* The breakage does what its name says: the reference accepts
             * or refuses the batch as the table expects. */
            cr_expect_eq(rc_ref != KVC_OK, insert_breakages[k].rejected, "%s: the reference returned %d (%s)", what, rc_ref, ref_err.message);
            expect_same(what, rc_ref, &ref_err, ref_batch.kv_cache, rc_opt, &opt_err, opt_batch.kv_cache, sizeof ref_batch.kv_cache);
        }
}

Test(optimized_validation, v41_rope_quant_insert_one_thread) { check_insert(KVC_CACHE_FP8_DS_MLA, 1); }
Test(optimized_validation, v41_rope_quant_insert_three_threads) { check_insert(KVC_CACHE_FP8_DS_MLA, 3); }
Test(optimized_validation, v41_rope_plain_insert_one_thread) { check_insert(KVC_CACHE_BF16, 1); }
Test(optimized_validation, v41_rope_plain_insert_three_threads) { check_insert(KVC_CACHE_BF16, 3); }

/* ---- V4.1 save_compress_norm: 2 requests x 24 tokens from position 0,
 * request r's ring in block r + 1 of CAP = 8 rows (block 0 unused), every
 * token naming its ring row p mod 8. ---- */

enum { NORM_REQUESTS = 2, NORM_CHUNK = 24, NORM_TOKENS = NORM_REQUESTS * NORM_CHUNK, NORM_CAP = 8, NORM_PAGES = NORM_REQUESTS + 1 };

typedef struct {
    kvc_v41_norm_args args;
    int64_t positions[NORM_TOKENS], slots[NORM_TOKENS];
    int32_t token_to_req[NORM_TOKENS], starts[NORM_REQUESTS + 1];
    float kv_score[NORM_TOKENS * 1024], ring[NORM_PAGES * NORM_CAP * 1024];
    uint16_t weight[512], latent[NORM_TOKENS * 512];
} norm_batch;

static void make_norm_batch(norm_batch *b, int32_t ratio) {
    memset(b, 0, sizeof *b);
    for (int i = 0; i < NORM_TOKENS * 1024; i++) b->kv_score[i] = (float)(i % 37) / 37.0f - 0.5f;
    for (int i = 0; i < NORM_PAGES * NORM_CAP * 1024; i++) b->ring[i] = (float)(i % 41) / 41.0f;
    for (int i = 0; i < 512; i++) b->weight[i] = (uint16_t)(0x3F80 + i % 64);   /* bf16 1.0 .. 1.5 */
    for (int64_t t = 0; t < NORM_TOKENS; t++) {
        int64_t r = t / NORM_CHUNK, p = t % NORM_CHUNK;
        b->token_to_req[t] = (int32_t)r;
        b->positions[t] = p;
        b->slots[t] = (r + 1) * NORM_CAP + p % NORM_CAP;
    }
    for (int r = 0; r <= NORM_REQUESTS; r++) b->starts[r] = r * NORM_CHUNK;
    kvc_v41_norm_args *a = &b->args;
    a->num_tokens = NORM_TOKENS;
    a->compress_ratio = ratio;
    a->eps = 1e-6f;
    a->kv_score = b->kv_score;
    a->positions = b->positions;
    a->slot_mapping = b->slots;
    a->norm_weight = b->weight;
    a->latent = b->latent;
    a->state_cache = (kvc_paged_cache){.data = b->ring, .num_pages = NORM_PAGES, .page_rows = NORM_CAP,
                                       .page_bytes = NORM_CAP * 1024 * 4, .page_stride = NORM_CAP * 1024 * 4};
    a->query_start_loc = b->starts;
    a->num_requests = NORM_REQUESTS;
    a->token_to_req = b->token_to_req;
}

typedef void (*norm_breakage)(norm_batch *b, int64_t t);
static void norm_unbroken(norm_batch *b, int64_t t) { (void)b; (void)t; }
static void norm_position_negative(norm_batch *b, int64_t t) { b->positions[t] = -1; }
static void norm_position_too_high(norm_batch *b, int64_t t) { b->positions[t] = KVC_MAX_POSITION + 1; }
static void norm_position_gap(norm_batch *b, int64_t t) { b->positions[t] += 1; }
static void norm_request_other(norm_batch *b, int64_t t) { b->token_to_req[t] = 1 - b->token_to_req[t]; }
static void norm_request_negative(norm_batch *b, int64_t t) { b->token_to_req[t] = -1; }
/* The same on a token without a row: only the request rule catches it. */
static void norm_request_other_skipped(norm_batch *b, int64_t t) {
    b->token_to_req[t] = 1 - b->token_to_req[t];
    b->slots[t] = -1;
}
static void norm_slot_past_cache(norm_batch *b, int64_t t) { b->slots[t] = NORM_PAGES * NORM_CAP; }
static void norm_ring_row_wrong(norm_batch *b, int64_t t) { b->slots[t] = b->slots[t] / NORM_CAP * NORM_CAP + (b->positions[t] + 1) % NORM_CAP; }
static void norm_block_switch(norm_batch *b, int64_t t) { b->slots[t] = b->slots[t] % NORM_CAP; }   /* block 0 */
/* t's whole request moves to the other request's block. */
static void norm_block_shared(norm_batch *b, int64_t t) {
    int64_t r = b->token_to_req[t];
    for (int64_t u = r * NORM_CHUNK; u < (r + 1) * NORM_CHUNK; u++) b->slots[u] = (2 - r) * NORM_CAP + b->positions[u] % NORM_CAP;
}
/* The last request ends a token early: token 47 is padding, with a row. */
static void norm_padding_with_row(norm_batch *b, int64_t t) { (void)t; b->starts[NORM_REQUESTS] = NORM_TOKENS - 1; }
static void norm_padding_skipped(norm_batch *b, int64_t t) {
    (void)t;
    b->starts[NORM_REQUESTS] = NORM_TOKENS - 1;
    b->slots[NORM_TOKENS - 1] = -1;
}
static void norm_starts_not_monotone(norm_batch *b, int64_t t) { (void)t; b->starts[1] = NORM_TOKENS + 1; }

static const struct { const char *name; norm_breakage apply; int rejected_r2, rejected_r1; } norm_breakages[] = {
    {"unbroken", norm_unbroken, 0, 0},
    {"position_negative", norm_position_negative, 1, 1},
    {"position_too_high", norm_position_too_high, 1, 1},
    {"position_gap", norm_position_gap, 1, 0},
    {"request_other", norm_request_other, 1, 0},
    {"request_negative", norm_request_negative, 1, 0},
    {"request_other_skipped", norm_request_other_skipped, 1, 0},
    {"slot_past_cache", norm_slot_past_cache, 1, 0},
    {"ring_row_wrong", norm_ring_row_wrong, 1, 0},
    {"block_switch", norm_block_switch, 1, 0},
    {"block_shared", norm_block_shared, 1, 0},
    {"padding_with_row", norm_padding_with_row, 1, 0},
    {"padding_skipped", norm_padding_skipped, 0, 0},
    {"starts_not_monotone", norm_starts_not_monotone, 1, 0},
};

/* Tokens in the first, middle and last third (23 and 47 end a request). */
static const int64_t norm_tokens[] = {5, 23, 47};

static void check_norm(int32_t ratio, int threads) {
    const kvc_backend *opt = optimized_at(threads);
    static norm_batch ref_batch, opt_batch;
    for (size_t k = 0; k < sizeof norm_breakages / sizeof norm_breakages[0]; k++)
        for (int i = 0; i < 3; i++) {
            make_norm_batch(&ref_batch, ratio);
            make_norm_batch(&opt_batch, ratio);
            norm_breakages[k].apply(&ref_batch, norm_tokens[i]);
            norm_breakages[k].apply(&opt_batch, norm_tokens[i]);
            kvc_error ref_err = {0}, opt_err = {0};
            int rc_ref = kvc_reference_backend.v41_save_compress_norm(&ref_batch.args, &ref_err);
            int rc_opt = opt->v41_save_compress_norm(&opt_batch.args, &opt_err);
            char what[160];
            snprintf(what, sizeof what, "v41.save_compress_norm R=%d %s at token %lld, %d threads", ratio, norm_breakages[k].name,
                     (long long)norm_tokens[i], threads);
            int rejected = ratio == 2 ? norm_breakages[k].rejected_r2 : norm_breakages[k].rejected_r1;
            cr_expect_eq(rc_ref != KVC_OK, rejected, "%s: the reference returned %d (%s)", what, rc_ref, ref_err.message);
            expect_same(what, rc_ref, &ref_err, ref_batch.latent, rc_opt, &opt_err, opt_batch.latent, sizeof ref_batch.latent);
            cr_expect_eq(memcmp(opt_batch.ring, ref_batch.ring, sizeof ref_batch.ring), 0, "%s: ring bytes differ from the reference's", what);
        }
}

Test(optimized_validation, v41_norm_r2_one_thread) { check_norm(2, 1); }
Test(optimized_validation, v41_norm_r2_three_threads) { check_norm(2, 3); }
Test(optimized_validation, v41_norm_r1_one_thread) { check_norm(1, 1); }
Test(optimized_validation, v41_norm_r1_three_threads) { check_norm(1, 3); }

/* The optimized backend against the reference, bit for bit: the vector
 * exp against kvc_expf_cr, the vector conversions against the scalar
 * ones, a differential run of every stage on random inputs (NaN, Inf,
 * subnormals, huge scores, odd page strides, 1 and 2 threads, every byte
 * of every buffer compared), decode-shaped batches (many requests, one
 * closing token each) at 1 to 16 threads, the thread counts the stages
 * pick on a many-core host, and replay of fixtures/spec-cases. */
#include "tests/test_support.h"
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"
#include "kvcmp/layout.h"
#include "harness/replay/replay.h"
#include "optimized/optimized.h"
#include "optimized/stages.h"
#include "optimized/vector_arrays.h"
#include "kvcmp/reference_steps.h"

/* ---- Random numbers (xorshift64*, seeded per test: reproducible) ---- */

typedef struct { uint64_t state; } rng;

static uint64_t next_u64(rng *r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return r->state * 0x2545F4914F6CDD1DULL;
}
static uint32_t next_u32(rng *r) { return (uint32_t)(next_u64(r) >> 32); }
/* Uniform integer in [low, high]. */
static int64_t uniform_int(rng *r, int64_t low, int64_t high) { return low + (int64_t)(next_u64(r) % (uint64_t)(high - low + 1)); }
static float uniform_float(rng *r, float low, float high) { return low + (high - low) * (float)(next_u32(r) >> 8) * 0x1p-24f; }

/* Value families: the edges the contract must survive. */
enum { FAMILY_PLAIN, FAMILY_WIDE, FAMILY_SPECIAL, FAMILY_BITS, FAMILY_COUNT };

static float random_value(rng *r, int family) {
    switch (family) {
    case FAMILY_PLAIN: return uniform_float(r, -4.0f, 4.0f);
    case FAMILY_WIDE: {
        /* Any magnitude from subnormal to overflow-prone. */
        float mantissa = uniform_float(r, 1.0f, 2.0f);
        float v = ldexpf(mantissa, (int)uniform_int(r, -150, 127));
        return (next_u32(r) & 1) ? -v : v;
    }
    case FAMILY_SPECIAL: {
        switch (uniform_int(r, 0, 19)) {
        case 0: return NAN;
        case 1: return kvc_f32_from_bits(0xFFC12345u);   /* negative NaN with payload */
        case 2: return INFINITY;
        case 3: return -INFINITY;
        case 4: return kvc_f32_from_bits((uint32_t)uniform_int(r, 1, 0x7FFFFF)); /* subnormal */
        case 5: return -0.0f;
        case 6: return uniform_float(r, -1e30f, 1e30f);  /* huge score */
        case 7: return uniform_float(r, -120.0f, 0.0f);  /* exp underflow */
        default: return uniform_float(r, -4.0f, 4.0f);
        }
    }
    default: return kvc_f32_from_bits(next_u32(r));
    }
}

static void fill_floats(rng *r, float *values, int64_t count, int family) {
    for (int64_t i = 0; i < count; i++) values[i] = random_value(r, family);
}
static void fill_bytes(rng *r, void *data, int64_t bytes) {
    uint8_t *p = data;
    for (int64_t i = 0; i < bytes; i++) p[i] = (uint8_t)next_u32(r);
}
/* A value family chosen per tensor, mostly plain data. */
static int random_family(rng *r) {
    int64_t k = uniform_int(r, 0, 9);
    return k < 5 ? FAMILY_PLAIN : k < 7 ? FAMILY_SPECIAL : k < 9 ? FAMILY_WIDE : FAMILY_BITS;
}

/* A paged cache with random contents everywhere (padding included). */
static kvc_paged_cache random_cache(rng *r, int64_t pages, int64_t rows, int64_t row_bytes, int64_t align) {
    kvc_paged_cache c;
    c.num_pages = pages;
    c.page_rows = rows;
    c.page_bytes = rows * row_bytes;
    c.page_stride = c.page_bytes + align * uniform_int(r, 0, 3);   /* odd strides when align = 1 */
    int64_t span = pages * c.page_stride;
    c.data = aligned_alloc(64, (size_t)((span + 64) / 64 * 64));
    fill_bytes(r, c.data, span);
    return c;
}
static int64_t cache_bytes(const kvc_paged_cache *c) { return c->num_pages * c->page_stride; }

/* Where two byte buffers differ first, reported in hex; 0 when equal. */
static int report_difference(const char *what, int case_index, int threads, const uint8_t *expected, const uint8_t *got,
                             int64_t bytes) {
    for (int64_t i = 0; i < bytes; i++)
        if (expected[i] != got[i]) {
            cr_log_error("FAIL %s case %d (%d threads): byte %lld expected=0x%02x got=0x%02x", what, case_index, threads,
                         (long long)i, expected[i], got[i]);
            return 1;
        }
    return 0;
}

static const kvc_backend *optimized(void) {
    char error[256];
    const kvc_backend *b = kvc_optimized_backend_get(error, sizeof error);
    cr_assert_not_null(b, "optimized backend unavailable: %s", error);
    /* Every allowed thread, however small the case: 1 vs 2 threads must split it. */
    kvc_optimized_set_thread_work(0);
    return b;
}

/* The thread counts each differential run tries (1 and 2 unless a test
 * sets more). */
static const int default_thread_counts[] = {1, 2};
static const int *thread_counts = default_thread_counts;
static int num_thread_counts = 2;

/* Run a stage on ref and on opt at each of thread_counts, each on its own
 * copy of `buffers` (the written outputs); every byte must agree. */
typedef struct {
    void *data[3];
    int64_t bytes[3];
    int count;
} output_buffers;

typedef int (*stage_runner)(const kvc_backend *backend, void *args, void *const *outputs);

static int differential(const char *what, int case_index, stage_runner run, void *args, output_buffers *outputs) {
    void *expected[3], *got[3];
    for (int i = 0; i < outputs->count; i++) {
        expected[i] = malloc((size_t)outputs->bytes[i] + 1);
        got[i] = malloc((size_t)outputs->bytes[i] + 1);
        memcpy(expected[i], outputs->data[i], (size_t)outputs->bytes[i]);
    }
    int expected_rc = run(&kvc_reference_backend, args, expected), failures = 0;
    for (int n = 0; n < num_thread_counts && !failures; n++) {
        int threads = thread_counts[n];
        for (int i = 0; i < outputs->count; i++) memcpy(got[i], outputs->data[i], (size_t)outputs->bytes[i]);
        omp_set_num_threads(threads);
        int rc = run(optimized(), args, got);
        if (rc != expected_rc) {
            cr_log_error("FAIL %s case %d: status expected=%d got=%d", what, case_index, expected_rc, rc);
            failures++;
        }
        for (int i = 0; i < outputs->count && !failures; i++)
            failures += report_difference(what, case_index, threads, expected[i], got[i], outputs->bytes[i]);
    }
    for (int i = 0; i < outputs->count; i++) { free(expected[i]); free(got[i]); }
    return failures;
}

/* ---- Vector math ------------------------------------------------------ */

/* 16 inputs through the vector exp (opt_exp16); failures counted and the first few logged. */
static int check_exp16(const float *x) {
    float got[16];
    opt_exp_array(x, got, 16);
    int failures = 0;
    for (int lane = 0; lane < 16; lane++) {
        uint32_t want = kvc_f32_bits(kvc_expf_cr(x[lane])), have = kvc_f32_bits(got[lane]);
        if (want != have) {
            failures++;
            cr_log_error("FAIL x=0x%08x lane %d expected=0x%08x got=0x%08x", kvc_f32_bits(x[lane]), lane, want, have);
        }
    }
    return failures;
}

Test(optimized, exp16_matches_expf_cr_on_a_sample, .timeout = 120) {
    rng r = {0x1234567u};
    int failures = 0;
    float x[16];
    for (int round = 0; round < 120000 && failures < 10; round++) {
        for (int lane = 0; lane < 16; lane++) {
            switch (lane % 4) {
            case 0: x[lane] = kvc_f32_from_bits(next_u32(&r) | 0x80000000u); break;  /* any x <= 0 */
            case 1: x[lane] = uniform_float(&r, -104.5f, 0.0f); break;
            case 2: x[lane] = uniform_float(&r, -1.0f, 0.0f); break;
            default: x[lane] = kvc_f32_from_bits(next_u32(&r)); break;              /* any float */
            }
        }
        failures += check_exp16(x);
    }
    cr_assert_eq(failures, 0, "%d exp lanes differ", failures);
}

Test(optimized, exp16_specials_in_every_lane) {
    const float specials[] = {
        -0.0f, 0.0f, -INFINITY, INFINITY, NAN, kvc_f32_from_bits(0xFFC12345u), -0x1p-149f, -0x1p-126f,
        -87.33654f, -87.3365479f, -87.5f, -88.7228394f, -103.972076f, -103.972084f, -103.97207f, -103.5f,
        -104.0f, -104.00001f, -1e30f, -3.4028235e38f, 88.72283f, 88.72284f, 89.0f, 1e-45f, -1e-7f, -0.5f,
    };
    int count = (int)(sizeof specials / sizeof specials[0]), failures = 0;
    rng r = {99};
    for (int s = 0; s < count; s++)
        for (int lane = 0; lane < 16; lane++) {
            float x[16];
            for (int j = 0; j < 16; j++) x[j] = uniform_float(&r, -20.0f, 0.0f);
            x[lane] = specials[s];
            failures += check_exp16(x);
        }
    /* Neighbourhoods of the subnormal thresholds, every float in a range. */
    for (uint32_t bits = kvc_f32_bits(-87.3f); bits < kvc_f32_bits(-87.3f) + 4096 * 16; bits += 16) {
        float x[16];
        for (int j = 0; j < 16; j++) x[j] = kvc_f32_from_bits(bits + (uint32_t)j);
        failures += check_exp16(x);
    }
    for (uint32_t bits = kvc_f32_bits(-103.9f); bits < kvc_f32_bits(-104.1f); bits += 16) {
        float x[16];
        for (int j = 0; j < 16; j++) x[j] = kvc_f32_from_bits(bits + (uint32_t)j);
        failures += check_exp16(x);
    }
    cr_assert_eq(failures, 0, "%d exp lanes differ", failures);
}

Test(optimized, conversions_match_scalar_on_a_sample, .timeout = 120) {
    rng r = {777};
    int failures = 0;
    for (int round = 0; round < 600000 && failures < 10; round++) {
        float x[16];
        for (int j = 0; j < 16; j++) {
            uint32_t bits = next_u32(&r);
            /* Half the lanes near the fp8 range, where its rounding lives. */
            if (j & 1) bits = (bits & 0x807FFFFFu) | ((uint32_t)uniform_int(&r, 100, 136) << 23);
            x[j] = kvc_f32_from_bits(bits);
        }
        uint16_t bf16[16];
        uint8_t fp8[16], fp8_in_range[16];
        opt_bf16_array(x, bf16, 16);
        opt_fp8_array(x, fp8, 16);
        opt_fp8_in_range_array(x, fp8_in_range, 16);
        for (int j = 0; j < 16; j++) {
            uint16_t want_bf16 = kvc_bf16_from_f32(x[j]);
            uint8_t want_fp8 = kvc_fp8_from_f32(x[j]);
            if (want_bf16 != bf16[j] && failures++ < 10)
                cr_log_error("FAIL bf16 x=0x%08x expected=0x%04x got=0x%04x", kvc_f32_bits(x[j]), want_bf16, bf16[j]);
            if (want_fp8 != fp8[j] && failures++ < 10)
                cr_log_error("FAIL fp8 x=0x%08x expected=0x%02x got=0x%02x", kvc_f32_bits(x[j]), want_fp8, fp8[j]);
            /* The shortcut is defined only on [-448, 448] (NaN compares false). */
            if (fabsf(x[j]) <= 448.0f && want_fp8 != fp8_in_range[j] && failures++ < 10)
                cr_log_error("FAIL fp8 in range x=0x%08x expected=0x%02x got=0x%02x", kvc_f32_bits(x[j]), want_fp8,
                             fp8_in_range[j]);
        }
    }
    cr_assert_eq(failures, 0, "%d conversions differ", failures);
}

/* Every bf16 pattern at every scale exponent a finite block can have
 * (e in [-22, 120]), wherever the scaled value is within the block bound
 * 448: the 16-bit path flags exactly the values below the fp8 normal range
 * and gives kvc_fp8_from_f32's code for every other one. */
Test(optimized, scaled_bf16_codes_match_scalar_for_every_pattern, .timeout = 120) {
    optimized();
    static uint16_t patterns[65536];
    static uint8_t codes[65536], below_normal[65536];
    for (int i = 0; i < 65536; i++) patterns[i] = (uint16_t)i;
    int failures = 0, checked = 0;
    for (int e = -22; e <= 120 && failures < 10; e++) {
        opt_fp8_scaled_bf16_array(patterns, e, codes, below_normal, 65536);
        float multiplier = ldexpf(1.0f, -e);
        for (int i = 0; i < 65536; i++) {
            float y = kvc_f32_from_bits((uint32_t)i << 16) * multiplier;
            if (!(fabsf(y) <= 448.0f)) continue;   /* outside any finite block, or NaN */
            checked++;
            int want_below = fabsf(y) < 0x1p-6f;
            uint8_t want = kvc_fp8_from_f32(y);
            if (below_normal[i] != want_below && failures++ < 10)
                cr_log_error("FAIL bf16=0x%04x e=%d below normal: expected=%d got=%d", i, e, want_below, below_normal[i]);
            else if (!want_below && codes[i] != want && failures++ < 10)
                cr_log_error("FAIL bf16=0x%04x e=%d expected=0x%02x got=0x%02x", i, e, want, codes[i]);
        }
    }
    cr_assert_eq(failures, 0, "%d scaled bf16 codes differ (of %d checked)", failures, checked);
    cr_assert_gt(checked, 1000000);
}

/* Whole blocks through the bf16 quantiser against the reference's step 9
 * on the widened values: ordinary blocks, blocks with values below the fp8
 * normal range (the float fallback), zeros, the 1e-4 floor, inf and NaN. */
Test(optimized, bf16_block_quantiser_matches_reference) {
    optimized();
    rng r = {2024};
    int failures = 0;
    for (int round = 0; round < 20000 && failures < 10; round++) {
        uint16_t z[64];
        float widened[64];
        int family = round % 5;
        for (int j = 0; j < 64; j++) {
            uint32_t bits = next_u32(&r);
            /* exponent fields within 2^9 of each other, so that every
             * value is in the fp8 normal range after scaling (family 0, the
             * 16-bit path), one lane far below the rest (1), zeros (2),
             * values near and below the 1e-4 floor (3), any bits including
             * inf and NaN (4); families 1-3 reach the float fallback */
            int exponent = family == 3 ? uniform_int(&r, 100, 115) : uniform_int(&r, 118, 126);
            if (family == 1 && j == 7) exponent = uniform_int(&r, 0, 110);
            if (family == 4) z[j] = (uint16_t)(bits >> 16);
            else z[j] = (uint16_t)((bits & 0x807Fu) | ((uint32_t)exponent << 7));
            if (family == 2 && (bits >> 20) % 3 == 0) z[j] = (uint16_t)(bits & 0x8000u);
            widened[j] = kvc_f32_from_bits((uint32_t)z[j] << 16);
        }
        uint8_t want_codes[64], got_codes[64];
        uint8_t want_scale = ref_quantize_block_ue8m0(widened, want_codes);
        uint8_t got_scale = opt_quantize_bf16_block_ue8m0(z, got_codes);
        if (want_scale != got_scale && failures++ < 10)
            cr_log_error("FAIL round %d scale expected=0x%02x got=0x%02x", round, want_scale, got_scale);
        for (int j = 0; j < 64; j++)
            if (want_codes[j] != got_codes[j] && failures++ < 10)
                cr_log_error("FAIL round %d code %d (bf16=0x%04x) expected=0x%02x got=0x%02x", round, j, z[j],
                             want_codes[j], got_codes[j]);
    }
    cr_assert_eq(failures, 0, "%d block results differ", failures);
}

Test(optimized, sum_of_squares_uses_the_canonical_order) {
    /* Values whose sum depends on the order: the fold must be the
     * reference's (ref_rms_norm through the reference backend is covered by
     * the differential tests; here the order itself is spelled out). */
    rng r = {4242};
    for (int round = 0; round < 2000; round++) {
        float v[512];
        for (int d = 0; d < 512; d++) v[d] = ldexpf(uniform_float(&r, -1.0f, 1.0f), (int)uniform_int(&r, -30, 30));
        float lanes[16] = {0};
        for (int d = 0; d < 512; d++) lanes[d % 16] = fmaf(v[d], v[d], lanes[d % 16]);
        for (int width = 8; width >= 1; width /= 2)
            for (int j = 0; j < width; j++) lanes[j] = lanes[j] + lanes[j + width];
        uint32_t want = kvc_f32_bits(lanes[0]), got = kvc_f32_bits(opt_sum_of_squares(v, 512));
        cr_assert_eq(got, want, "FAIL round %d expected=0x%08x got=0x%08x", round, want, got);
    }
}

/* ---- Differential: v4.save_partial_states ---------------------------- */

static int run_v4_save(const kvc_backend *backend, void *args, void *const *outputs) {
    kvc_v4_save_args a = *(kvc_v4_save_args *)args;
    kvc_error err;
    a.state_cache.data = outputs[0];
    return backend->v4_save_partial_states(&a, &err);
}

/* Token counts that exercise the 16-wide tails. */
static int64_t random_token_count(rng *r, int64_t most) {
    static const int64_t tails[] = {1, 15, 16, 17};
    return uniform_int(r, 0, 2) == 0 ? tails[uniform_int(r, 0, 3)] : uniform_int(r, 0, most);
}

/* Distinct rows 0..rows-1 for tokens, or -1 (padding) at random. */
static void random_slots(rng *r, int64_t *slots, int64_t tokens, int64_t rows) {
    for (int64_t t = 0; t < tokens; t++) {
        slots[t] = -1;
        if (uniform_int(r, 0, 7) == 0) continue;
        for (int attempt = 0; attempt < 8 && slots[t] < 0; attempt++) {
            int64_t candidate = uniform_int(r, 0, rows - 1), used = 0;
            for (int64_t u = 0; u < t; u++) used |= slots[u] == candidate;
            if (!used) slots[t] = candidate;
        }
    }
}

Test(optimized, differential_v4_save_partial_states, .timeout = 120) {
    rng r = {11};
    int failures = 0;
    for (int k = 0; k < 300 && !failures; k++) {
        kvc_v4_save_args a = {0};
        a.compress_ratio = uniform_int(&r, 0, 1) ? 4 : 128;
        a.head_dim = uniform_int(&r, 0, 1) ? 512 : 128;
        int64_t width = (int64_t)kvc_v4_coff(a.compress_ratio) * a.head_dim;
        a.num_tokens = random_token_count(&r, 40);
        int64_t T = a.num_tokens;
        float *kv = malloc((size_t)(T * width + 1) * 4), *score = malloc((size_t)(T * width + 1) * 4);
        float *ape = malloc((size_t)(a.compress_ratio * width) * 4);
        int64_t *positions = malloc((size_t)(T + 1) * 8), *slots = malloc((size_t)(T + 1) * 8);
        fill_floats(&r, kv, T * width, random_family(&r));
        fill_floats(&r, score, T * width, random_family(&r));
        fill_floats(&r, ape, a.compress_ratio * width, random_family(&r));
        for (int64_t t = 0; t < T; t++) positions[t] = uniform_int(&r, 0, 1000);
        a.state_cache = random_cache(&r, uniform_int(&r, 1, 12), uniform_int(&r, 1, 9), 2 * width * 4, 4);
        random_slots(&r, slots, T, a.state_cache.num_pages * a.state_cache.page_rows);
        a.kv = kv; a.score = score; a.ape = ape; a.positions = positions; a.slot_mapping = slots;
        output_buffers out = {{a.state_cache.data}, {cache_bytes(&a.state_cache)}, 1};
        failures += differential("v4.save_partial_states", k, run_v4_save, &a, &out);
        free(kv); free(score); free(ape); free(positions); free(slots); free(a.state_cache.data);
    }
    cr_assert_eq(failures, 0);
}

/* A batch large enough for the streaming-store path (more than 8 MiB of
 * state rows), once with 64-byte aligned rows and once misaligned. */
Test(optimized, differential_v4_save_large_batch, .timeout = 120) {
    rng r = {12};
    int failures = 0;
    for (int k = 0; k < 2 && !failures; k++) {
        kvc_v4_save_args a = {0};
        a.compress_ratio = 4;
        a.head_dim = 512;
        int64_t width = 1024, T = 1100;
        a.num_tokens = T;
        float *kv = malloc((size_t)(T * width) * 4), *score = malloc((size_t)(T * width) * 4), *ape = malloc((size_t)(4 * width) * 4);
        int64_t *positions = malloc((size_t)T * 8), *slots = malloc((size_t)T * 8);
        fill_floats(&r, kv, T * width, FAMILY_SPECIAL);
        fill_floats(&r, score, T * width, FAMILY_SPECIAL);
        fill_floats(&r, ape, 4 * width, FAMILY_PLAIN);
        kvc_paged_cache c = {0};
        c.num_pages = 300;
        c.page_rows = 4;
        c.page_bytes = 4 * 2 * width * 4;
        c.page_stride = c.page_bytes + (k == 0 ? 64 : 4);
        c.data = aligned_alloc(64, (size_t)((c.num_pages * c.page_stride + 63) / 64 * 64));
        fill_bytes(&r, c.data, c.num_pages * c.page_stride);
        a.state_cache = c;
        for (int64_t t = 0; t < T; t++) {
            positions[t] = t;
            slots[t] = t % 13 == 5 ? -1 : (1199 - t);   /* reversed rows, some padding */
        }
        a.kv = kv; a.score = score; a.ape = ape; a.positions = positions; a.slot_mapping = slots;
        output_buffers out = {{c.data}, {cache_bytes(&c)}, 1};
        failures += differential("v4.save_partial_states (large)", k, run_v4_save, &a, &out);
        free(kv); free(score); free(ape); free(positions); free(slots); free(c.data);
    }
    cr_assert_eq(failures, 0);
}

/* ---- Differential: v4.compress ----------------------------------------- */

static int run_v4_compress(const kvc_backend *backend, void *args, void *const *outputs) {
    kvc_v4_compress_args a = *(kvc_v4_compress_args *)args;
    kvc_error err;
    a.kv_cache.data = outputs[0];
    return backend->v4_compress(&a, &err);
}

/* One random compress case: requests with random context lengths,
 * shuffled physical blocks, closing and non-closing tokens. */
static int compress_case(rng *r, int k) {
    kvc_v4_compress_args a = {0};
    a.compress_ratio = uniform_int(r, 0, 2) ? 4 : 128;
    a.head_dim = uniform_int(r, 0, 1) ? 512 : 128;
    a.eps = uniform_int(r, 0, 3) ? 1e-6f : 0.0f;
    int64_t width = (int64_t)kvc_v4_coff(a.compress_ratio) * a.head_dim;
    int64_t block_size = uniform_int(r, 1, 9);
    int64_t longest = a.compress_ratio == 4 ? uniform_int(r, 1, 80) : uniform_int(r, 1, 400);
    a.num_requests = uniform_int(r, 1, 3);
    a.max_blocks = (longest + block_size - 1) / block_size;
    int64_t pages = a.num_requests * a.max_blocks + uniform_int(r, 0, 3);
    a.state_cache = random_cache(r, pages, block_size, 2 * width * 4, 4);
    /* Fill the state with one value family per half (kv, score), or with
     * a cancelling window: every row holds +-magnitude[d] and scores
     * within 1e-6 of each other, so acc cancels to ~1e-6 of its terms and
     * a product rounded before the add (no fma) shows in the output. */
    int kv_family = random_family(r), score_family = random_family(r), cancelling = uniform_int(r, 0, 3) == 0;
    float magnitude[1024];
    fill_floats(r, magnitude, width, FAMILY_PLAIN);
    for (int64_t p = 0; p < pages; p++)
        for (int64_t row = 0; row < block_size; row++) {
            float *state_row = (float *)((uint8_t *)a.state_cache.data + p * a.state_cache.page_stride) + row * 2 * width;
            if (cancelling) {
                float sign = (next_u32(r) & 1) ? -1.0f : 1.0f;
                for (int64_t d = 0; d < width; d++) {
                    state_row[d] = sign * magnitude[d];
                    state_row[width + d] = uniform_float(r, -1e-6f, 0.0f);
                }
                continue;
            }
            fill_floats(r, state_row, width, kv_family);
            fill_floats(r, state_row + width, width, score_family);
        }
    int32_t *block_table = malloc((size_t)(a.num_requests * a.max_blocks) * 4);
    int32_t *permutation = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) permutation[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        int64_t j = uniform_int(r, 0, i);
        int32_t swap = permutation[i]; permutation[i] = permutation[j]; permutation[j] = swap;
    }
    for (int64_t i = 0; i < a.num_requests * a.max_blocks; i++) block_table[i] = permutation[i];
    a.block_table = block_table;
    /* Tokens: mostly closing positions of random requests. */
    int64_t T = a.compress_ratio == 4 ? random_token_count(r, 24) : uniform_int(r, 1, 4);
    a.num_tokens = T;
    int32_t *token_to_req = malloc((size_t)(T + 1) * 4);
    int64_t *positions = malloc((size_t)(T + 1) * 8), *slots = malloc((size_t)(T + 1) * 8), *kv_slots = malloc((size_t)(T + 1) * 8);
    for (int64_t t = 0; t < T; t++) {
        token_to_req[t] = (int32_t)uniform_int(r, 0, a.num_requests - 1);
        int64_t p = uniform_int(r, 0, longest - 1);
        if (uniform_int(r, 0, 4) && p + 1 >= a.compress_ratio) p = (p + 1) / a.compress_ratio * a.compress_ratio - 1;
        positions[t] = p;
        slots[t] = uniform_int(r, 0, 9) ? kvc_v4_state_slot(&a, token_to_req[t], p) : -1;
    }
    int64_t kv_rows_per_page = uniform_int(r, 1, 5);
    kvc_cache_dtype dtype = a.head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    a.kv_cache = random_cache(r, (T + kv_rows_per_page) / kv_rows_per_page + 1, kv_rows_per_page, kvc_cache_row_bytes(dtype), 1);
    random_slots(r, kv_slots, T, a.kv_cache.num_pages * a.kv_cache.page_rows);
    float *weight = malloc((size_t)a.head_dim * 4), *cos_sin = malloc((size_t)(longest + 1) * 64 * 4);
    int weight_kind = (int)uniform_int(r, 0, 4);
    for (int d = 0; d < a.head_dim; d++)
        weight[d] = weight_kind == 0 ? random_value(r, FAMILY_SPECIAL) : weight_kind == 1 ? uniform_float(r, 0.0f, 1e-3f)
                                                                                           : uniform_float(r, 0.5f, 1.5f);
    for (int64_t i = 0; i < (longest + 1) * 64; i++) cos_sin[i] = uniform_int(r, 0, 50) ? uniform_float(r, -1.0f, 1.0f) : random_value(r, FAMILY_SPECIAL);
    a.token_to_req = token_to_req; a.positions = positions;
    a.slot_mapping = slots; a.kv_slot_mapping = kv_slots; a.norm_weight = weight;
    a.cos_sin = cos_sin; a.cos_sin_rows = longest + 1;
    output_buffers out = {{a.kv_cache.data}, {cache_bytes(&a.kv_cache)}, 1};
    int failures = differential("v4.compress", k, run_v4_compress, &a, &out);
    free(block_table); free(permutation); free(token_to_req); free(positions); free(slots); free(kv_slots);
    free(weight); free(cos_sin); free(a.state_cache.data); free(a.kv_cache.data);
    return failures;
}

Test(optimized, differential_v4_compress, .timeout = 240) {
    rng r = {22};
    int failures = 0;
    for (int k = 0; k < 400 && !failures; k++) failures += compress_case(&r, k);
    cr_assert_eq(failures, 0);
}

/* ---- Differential: v41.save_compress_norm ------------------------------ */

static int run_v41_norm(const kvc_backend *backend, void *args, void *const *outputs) {
    kvc_v41_norm_args a = *(kvc_v41_norm_args *)args;
    kvc_error err;
    a.latent = outputs[0];
    a.state_cache.data = outputs[1];
    return backend->v41_save_compress_norm(&a, &err);
}

static int norm_case(rng *r, int k) {
    kvc_v41_norm_args a = {0};
    a.compress_ratio = uniform_int(r, 0, 2) ? 2 : 1;
    a.eps = 1e-6f;
    int64_t cap = uniform_int(r, 0, 1) ? 8 : 16;
    a.num_requests = uniform_int(r, 1, 3);
    int32_t *query_start_loc = malloc((size_t)(a.num_requests + 1) * 4);
    int64_t chunk[4], start[4], total = 0;
    for (int64_t q = 0; q < a.num_requests; q++) {
        chunk[q] = random_token_count(r, 20);
        start[q] = uniform_int(r, 0, 40);
        query_start_loc[q] = (int32_t)total;
        total += chunk[q];
    }
    query_start_loc[a.num_requests] = (int32_t)total;
    int64_t trailing = uniform_int(r, 0, 2);
    int64_t T = total + trailing;
    a.num_tokens = T;
    a.state_cache = random_cache(r, a.num_requests + uniform_int(r, 0, 2), cap, 1024 * 4, 4);
    int64_t *positions = malloc((size_t)(T + 1) * 8), *slots = malloc((size_t)(T + 1) * 8);
    int32_t *token_to_req = malloc((size_t)(T + 1) * 4);
    int64_t t = 0;
    for (int64_t q = 0; q < a.num_requests; q++) {
        int64_t ring_block = (q + 1) % a.state_cache.num_pages;   /* distinct: num_pages > q */
        for (int64_t i = 0; i < chunk[q]; i++, t++) {
            positions[t] = start[q] + i;
            token_to_req[t] = (int32_t)q;
            slots[t] = uniform_int(r, 0, 9) ? ring_block * cap + positions[t] % cap : -1;
        }
    }
    for (; t < T; t++) { positions[t] = uniform_int(r, 0, 50); token_to_req[t] = -7; slots[t] = -1; }
    int64_t row_floats = 512 * a.compress_ratio;
    float *kv_score = malloc((size_t)(T * row_floats + 1) * 4);
    int kv_family = random_family(r), score_family = random_family(r);
    for (int64_t u = 0; u < T; u++) {
        fill_floats(r, kv_score + u * row_floats, 512, kv_family);
        if (a.compress_ratio == 2) fill_floats(r, kv_score + u * row_floats + 512, 512, score_family);
    }
    uint16_t weight[512];
    for (int d = 0; d < 512; d++) weight[d] = kvc_bf16_from_f32(uniform_int(r, 0, 20) ? uniform_float(r, 0.5f, 1.5f) : random_value(r, FAMILY_SPECIAL));
    uint16_t *latent = malloc((size_t)(T * 512 + 1) * 2);
    fill_bytes(r, latent, T * 1024);
    a.kv_score = kv_score; a.positions = positions; a.slot_mapping = slots; a.norm_weight = weight;
    a.query_start_loc = query_start_loc; a.token_to_req = token_to_req;
    output_buffers out = {{latent, a.state_cache.data}, {T * 1024, cache_bytes(&a.state_cache)}, 2};
    int failures = differential("v41.save_compress_norm", k, run_v41_norm, &a, &out);
    free(query_start_loc); free(positions); free(slots); free(token_to_req); free(kv_score); free(latent);
    free(a.state_cache.data);
    return failures;
}

Test(optimized, differential_v41_save_compress_norm, .timeout = 120) {
    rng r = {33};
    int failures = 0;
    for (int k = 0; k < 350 && !failures; k++) failures += norm_case(&r, k);
    cr_assert_eq(failures, 0);
}

/* ---- Differential: v41 inserts ------------------------------------------- */

static int run_v41_insert(const kvc_backend *backend, void *args, void *const *outputs) {
    kvc_v41_insert_args a = *(kvc_v41_insert_args *)args;
    kvc_error err;
    a.kv_cache.data = outputs[0];
    return a.cache_dtype == KVC_CACHE_FP8_DS_MLA ? backend->v41_rope_quant_insert(&a, &err) : backend->v41_rope_plain_insert(&a, &err);
}

static int insert_case(rng *r, int k, kvc_cache_dtype dtype) {
    kvc_v41_insert_args a = {0};
    a.compress_ratio = uniform_int(r, 0, 1) ? 2 : 1;
    a.cache_dtype = dtype;
    int64_t T = random_token_count(r, 30);
    a.num_tokens = T;
    uint16_t *latent = malloc((size_t)(T * 512 + 1) * 2);
    int family = (int)uniform_int(r, 0, 2);
    for (int64_t i = 0; i < T * 512; i++)
        latent[i] = family == 0 ? (uint16_t)next_u32(r) : kvc_bf16_from_f32(random_value(r, family == 1 ? FAMILY_PLAIN : FAMILY_SPECIAL));
    int64_t *positions = malloc((size_t)(T + 1) * 8), *slots = malloc((size_t)(T + 1) * 8);
    for (int64_t t = 0; t < T; t++) positions[t] = uniform_int(r, 0, 99);
    int64_t rows_per_page = uniform_int(r, 1, 6);
    int64_t align = dtype == KVC_CACHE_BF16 ? 2 : 1;
    a.kv_cache = random_cache(r, (T + rows_per_page) / rows_per_page + 1, rows_per_page, kvc_cache_row_bytes(dtype), align);
    random_slots(r, slots, T, a.kv_cache.num_pages * a.kv_cache.page_rows);
    float *cos_sin = malloc(100 * 64 * 4);
    for (int i = 0; i < 100 * 64; i++) cos_sin[i] = uniform_int(r, 0, 50) ? uniform_float(r, -1.0f, 1.0f) : random_value(r, FAMILY_SPECIAL);
    a.latent = latent; a.positions = positions; a.slot_mapping = slots; a.cos_sin = cos_sin; a.cos_sin_rows = 100;
    a.fp8_scale = uniform_int(r, 0, 3) ? uniform_float(r, 0.01f, 4.0f) : ldexpf(1.0f, (int)uniform_int(r, -140, 120));
    output_buffers out = {{a.kv_cache.data}, {cache_bytes(&a.kv_cache)}, 1};
    int failures = differential(dtype == KVC_CACHE_FP8_DS_MLA ? "v41.rope_quant_insert" : "v41.rope_plain_insert", k,
                                run_v41_insert, &a, &out);
    free(latent); free(positions); free(slots); free(cos_sin); free(a.kv_cache.data);
    return failures;
}

Test(optimized, differential_v41_inserts, .timeout = 120) {
    rng r = {44};
    int failures = 0;
    for (int k = 0; k < 250 && !failures; k++) {
        failures += insert_case(&r, k, KVC_CACHE_FP8_DS_MLA);
        failures += insert_case(&r, k, KVC_CACHE_BF16);
        failures += insert_case(&r, k, KVC_CACHE_FP8_E4M3);
    }
    cr_assert_eq(failures, 0);
}

/* An invalid input is the shared validator's error, nothing written. */
Test(optimized, rejects_like_the_reference) {
    rng r = {55};
    kvc_v41_insert_args a = {0};
    a.compress_ratio = 1;
    a.cache_dtype = KVC_CACHE_BF16;
    a.num_tokens = 2;
    uint16_t latent[1024] = {0};
    int64_t positions[2] = {0, 1}, slots[2] = {0, 99};   /* slot 99 is outside the cache */
    float cos_sin[2 * 64] = {0};
    a.kv_cache = random_cache(&r, 1, 4, 1024, 2);
    a.latent = latent; a.positions = positions; a.slot_mapping = slots; a.cos_sin = cos_sin; a.cos_sin_rows = 2;
    uint8_t before[4096];
    memcpy(before, a.kv_cache.data, (size_t)a.kv_cache.page_bytes);
    kvc_error expected, got;
    int expected_rc = kvc_reference_backend.v41_rope_plain_insert(&a, &expected);
    int rc = optimized()->v41_rope_plain_insert(&a, &got);
    cr_assert_eq(rc, expected_rc);
    cr_assert_neq(rc, KVC_OK);
    cr_assert_str_eq(got.message, expected.message);
    cr_assert_eq(memcmp(before, a.kv_cache.data, (size_t)a.kv_cache.page_bytes), 0, "a rejected call wrote bytes");
    free(a.kv_cache.data);
}

/* ---- Many threads: decode-shaped batches -------------------------------- */

/* Thread counts above the machine's cores as well: the split changes with
 * the count (closing tokens per thread, runs, chunks), the bytes must not. */
static const int many_thread_counts[] = {1, 2, 3, 5, 8, 16};
static void use_many_thread_counts(void) {
    thread_counts = many_thread_counts;
    num_thread_counts = (int)(sizeof many_thread_counts / sizeof many_thread_counts[0]);
}

/* A V4 decode step: 5-70 requests (R = 4) or 5-12 (R = 128), each with one
 * closing token at the end of a random context, shuffled blocks, a few
 * padding tokens after the batch. */
static int decode_compress_case(rng *r, int k) {
    kvc_v4_compress_args a = {0};
    a.compress_ratio = k % 3 == 2 ? 128 : 4;
    a.head_dim = (k / 3) % 2 ? 128 : 512;
    a.eps = 1e-6f;
    int64_t width = (int64_t)kvc_v4_coff(a.compress_ratio) * a.head_dim;
    int64_t block_size = uniform_int(r, 1, 9);
    int64_t longest = a.compress_ratio == 4 ? uniform_int(r, 4, 24) : uniform_int(r, 128, 260);
    a.num_requests = a.compress_ratio == 4 ? uniform_int(r, 5, 70) : uniform_int(r, 5, 12);
    a.max_blocks = (longest + block_size - 1) / block_size;
    int64_t pages = a.num_requests * a.max_blocks + uniform_int(r, 0, 3);
    a.state_cache = random_cache(r, pages, block_size, 2 * width * 4, 4);
    int kv_family = random_family(r), score_family = random_family(r);
    for (int64_t p = 0; p < pages; p++)
        for (int64_t row = 0; row < block_size; row++) {
            float *state_row = (float *)((uint8_t *)a.state_cache.data + p * a.state_cache.page_stride) + row * 2 * width;
            fill_floats(r, state_row, width, kv_family);
            fill_floats(r, state_row + width, width, score_family);
        }
    int32_t *block_table = malloc((size_t)(a.num_requests * a.max_blocks) * 4);
    int32_t *permutation = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) permutation[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        int64_t j = uniform_int(r, 0, i);
        int32_t swap = permutation[i]; permutation[i] = permutation[j]; permutation[j] = swap;
    }
    for (int64_t i = 0; i < a.num_requests * a.max_blocks; i++) block_table[i] = permutation[i];
    a.block_table = block_table;
    int64_t T = a.num_requests + uniform_int(r, 0, 3);
    a.num_tokens = T;
    int32_t *token_to_req = malloc((size_t)T * 4);
    int64_t *positions = malloc((size_t)T * 8), *slots = malloc((size_t)T * 8), *kv_slots = malloc((size_t)T * 8);
    for (int64_t t = 0; t < T; t++) {
        int padding = t >= a.num_requests;
        token_to_req[t] = padding ? 0 : (int32_t)t;
        /* A closing position in [R - 1, longest - 1], or any position when
         * the context is shorter than one group. */
        int64_t groups = longest / a.compress_ratio;
        positions[t] = padding ? 0 : groups > 0 ? uniform_int(r, 1, groups) * a.compress_ratio - 1 : uniform_int(r, 0, longest - 1);
        slots[t] = padding ? -1 : kvc_v4_state_slot(&a, token_to_req[t], positions[t]);
    }
    kvc_cache_dtype dtype = a.head_dim == 512 ? KVC_CACHE_FP8_DS_MLA : KVC_CACHE_FP8_INDEXER;
    a.kv_cache = random_cache(r, T / 3 + 2, 3, kvc_cache_row_bytes(dtype), 1);
    random_slots(r, kv_slots, T, a.kv_cache.num_pages * a.kv_cache.page_rows);
    for (int64_t t = a.num_requests; t < T; t++) kv_slots[t] = -1;
    float *weight = malloc((size_t)a.head_dim * 4), *cos_sin = malloc((size_t)(longest + 1) * 64 * 4);
    for (int d = 0; d < a.head_dim; d++) weight[d] = uniform_float(r, 0.5f, 1.5f);
    for (int64_t i = 0; i < (longest + 1) * 64; i++) cos_sin[i] = uniform_float(r, -1.0f, 1.0f);
    a.token_to_req = token_to_req; a.positions = positions;
    a.slot_mapping = slots; a.kv_slot_mapping = kv_slots; a.norm_weight = weight;
    a.cos_sin = cos_sin; a.cos_sin_rows = longest + 1;
    output_buffers out = {{a.kv_cache.data}, {cache_bytes(&a.kv_cache)}, 1};
    int failures = differential("v4.compress (decode)", k, run_v4_compress, &a, &out);
    free(block_table); free(permutation); free(token_to_req); free(positions); free(slots); free(kv_slots);
    free(weight); free(cos_sin); free(a.state_cache.data); free(a.kv_cache.data);
    return failures;
}

Test(optimized, decode_v4_compress_at_many_thread_counts, .timeout = 240) {
    rng r = {66};
    use_many_thread_counts();
    int failures = 0;
    for (int k = 0; k < 24 && !failures; k++) failures += decode_compress_case(&r, k);
    cr_assert_eq(failures, 0);
}

/* A V4.1 decode step: 5-70 requests of 1-3 tokens each (the first of
 * each chunk reads its ring), one ring block per request, some padding
 * tokens inside and after the batch. */
static int decode_norm_case(rng *r, int k) {
    kvc_v41_norm_args a = {0};
    a.compress_ratio = k % 4 == 3 ? 1 : 2;
    a.eps = 1e-6f;
    int64_t cap = uniform_int(r, 0, 1) ? 8 : 16;
    a.num_requests = uniform_int(r, 5, 70);
    int64_t *chunk = malloc((size_t)a.num_requests * 8), *start = malloc((size_t)a.num_requests * 8), total = 0;
    int32_t *query_start_loc = malloc((size_t)(a.num_requests + 1) * 4);
    for (int64_t q = 0; q < a.num_requests; q++) {
        chunk[q] = uniform_int(r, 0, 3) ? 1 : uniform_int(r, 2, 3);
        start[q] = uniform_int(r, 1, 60);
        query_start_loc[q] = (int32_t)total;
        total += chunk[q];
    }
    query_start_loc[a.num_requests] = (int32_t)total;
    int64_t T = total + uniform_int(r, 0, 3);
    a.num_tokens = T;
    int64_t pages = a.num_requests + uniform_int(r, 0, 2);
    a.state_cache = random_cache(r, pages, cap, 1024 * 4, 4);
    int32_t *ring_block = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++) ring_block[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        int64_t j = uniform_int(r, 0, i);
        int32_t swap = ring_block[i]; ring_block[i] = ring_block[j]; ring_block[j] = swap;
    }
    int64_t *positions = malloc((size_t)T * 8), *slots = malloc((size_t)T * 8);
    int32_t *token_to_req = malloc((size_t)T * 4);
    int64_t t = 0;
    for (int64_t q = 0; q < a.num_requests; q++)
        for (int64_t i = 0; i < chunk[q]; i++, t++) {
            positions[t] = start[q] + i;
            token_to_req[t] = (int32_t)q;
            slots[t] = uniform_int(r, 0, 9) ? ring_block[q] * cap + positions[t] % cap : -1;
        }
    for (; t < T; t++) { positions[t] = uniform_int(r, 0, 50); token_to_req[t] = -7; slots[t] = -1; }
    int64_t row_floats = 512 * a.compress_ratio;
    float *kv_score = malloc((size_t)(T * row_floats) * 4);
    int kv_family = random_family(r), score_family = random_family(r);
    for (int64_t u = 0; u < T; u++) {
        fill_floats(r, kv_score + u * row_floats, 512, kv_family);
        if (a.compress_ratio == 2) fill_floats(r, kv_score + u * row_floats + 512, 512, score_family);
    }
    uint16_t weight[512];
    for (int d = 0; d < 512; d++) weight[d] = kvc_bf16_from_f32(uniform_float(r, 0.5f, 1.5f));
    uint16_t *latent = malloc((size_t)(T * 512) * 2);
    fill_bytes(r, latent, T * 1024);
    a.kv_score = kv_score; a.positions = positions; a.slot_mapping = slots; a.norm_weight = weight;
    a.query_start_loc = query_start_loc; a.token_to_req = token_to_req;
    output_buffers out = {{latent, a.state_cache.data}, {T * 1024, cache_bytes(&a.state_cache)}, 2};
    int failures = differential("v41.save_compress_norm (decode)", k, run_v41_norm, &a, &out);
    free(chunk); free(start); free(query_start_loc); free(ring_block); free(positions); free(slots); free(token_to_req);
    free(kv_score); free(latent); free(a.state_cache.data);
    return failures;
}

Test(optimized, decode_v41_save_compress_norm_at_many_thread_counts, .timeout = 240) {
    rng r = {77};
    use_many_thread_counts();
    int failures = 0;
    for (int k = 0; k < 40 && !failures; k++) failures += decode_norm_case(&r, k);
    cr_assert_eq(failures, 0);
}

/* The other stages' random cases (the generators above) at 1 to 16 threads. */
Test(optimized, saves_and_inserts_at_many_thread_counts, .timeout = 240) {
    rng r = {88};
    use_many_thread_counts();
    int failures = 0;
    for (int k = 0; k < 40 && !failures; k++) {
        failures += insert_case(&r, k, KVC_CACHE_FP8_DS_MLA);
        failures += insert_case(&r, k, KVC_CACHE_BF16);
        failures += insert_case(&r, k, KVC_CACHE_FP8_E4M3);
        failures += compress_case(&r, k);
        failures += norm_case(&r, k);
    }
    cr_assert_eq(failures, 0);
}

/* The rule that picks a call's thread count (stages.h), on a 16-core
 * host with sleeping threads (OMP_WAIT_POLICY=passive): every prefill
 * gets (nearly) every thread; a decode gets the few that its wake-up
 * cost pays for (the 16-core Xeon measured its best at 4-5 threads, and
 * 16 slower than 1 in one run of two); a call too small to pay for a
 * second thread stays on one.  (An earlier rule, tuned on 2 cores,
 * kept a 64-request decode on 1 thread at any core count.) */
Test(optimized, many_cores_get_every_thread_when_the_work_pays) {
    optimized();
    double saved = kvc_optimized_thread_work();
    double saved_wake = opt_nanoseconds_per_wake;
    kvc_optimized_set_thread_work(opt_thread_work_for_policy("passive"));
    opt_nanoseconds_per_wake = opt_wake_cost_for_policy("passive");
    omp_set_num_threads(16);
    /* V4 decode, 64 requests x 1 closing token, and its save (64 rows). */
    int decode = opt_threads_for(opt_v4_compress_nanoseconds(64, 4, 512));
    cr_expect(decode >= 4 && decode <= 8, "a 64-request V4 decode gets %d threads", decode);
    cr_expect_geq(opt_threads_for(opt_v4_save_nanoseconds(64, 2 * 512)), 2);
    /* The prefill scenarios of the bench: 8192 tokens. */
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(8192 / 128, 128, 512)), 16);
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(8192 / 4, 4, 512)), 16);
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(8192 / 4, 4, 128)), 16);
    cr_expect_eq(opt_threads_for(opt_v4_save_nanoseconds(8192, 2 * 512)), 16);
    cr_expect_eq(opt_threads_for(opt_v41_norm_nanoseconds(8192, 2, 8)), 16);
    cr_expect_geq(opt_threads_for(opt_v41_insert_nanoseconds(8192)), 12);
    /* V4.1 decode, 64 requests x 1 token with their ring rows. */
    cr_expect_geq(opt_threads_for(opt_v41_norm_nanoseconds(64, 2, 64)), 2);
    /* One closing token of R = 4: a few microseconds, one thread. */
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(1, 4, 512)), 1);
    cr_expect_eq(opt_threads_for(opt_v41_insert_nanoseconds(2)), 1);
    /* Never more than allowed. */
    omp_set_num_threads(3);
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(8192 / 128, 128, 512)), 3);
    kvc_optimized_set_thread_work(0);
    cr_expect_eq(opt_threads_for(1.0), 3);
    kvc_optimized_set_thread_work(saved);
    opt_nanoseconds_per_wake = saved_wake;
}

/* Threads that spin between calls (OMP_WAIT_POLICY unset or active)
 * start in about a microsecond: a call worth two threads takes every
 * allowed one, so both decodes of the bench take all 16 (V4: 0.037-0.039 ms on 16 against 0.14 under the passive
 * rule; V4.1: 0.016-0.017 against 0.038), while one closing token still
 * stays on one thread. */
Test(optimized, spinning_threads_take_smaller_calls) {
    optimized();
    double saved = kvc_optimized_thread_work();
    cr_expect_eq(opt_thread_work_for_policy(NULL), OPT_NANOSECONDS_PER_SPINNING_THREAD);
    cr_expect_eq(opt_thread_work_for_policy("ACTIVE"), OPT_NANOSECONDS_PER_SPINNING_THREAD);
    cr_expect_eq(opt_thread_work_for_policy("Passive"), OPT_NANOSECONDS_PER_THREAD);
    cr_expect_eq(opt_wake_cost_for_policy(NULL), 0);
    cr_expect_eq(opt_wake_cost_for_policy("passive"), OPT_NANOSECONDS_PER_WAKE);
    double saved_wake = opt_nanoseconds_per_wake;
    kvc_optimized_set_thread_work(opt_thread_work_for_policy(NULL));
    opt_nanoseconds_per_wake = opt_wake_cost_for_policy(NULL);
    omp_set_num_threads(16);
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(64, 4, 512)), 16);
    cr_expect_eq(opt_threads_for(opt_v41_norm_nanoseconds(64, 2, 64)), 16);
    cr_expect_eq(opt_threads_for(opt_v4_compress_nanoseconds(1, 4, 512)), 1);
    /* All or one, never a team between (it would make libgomp end and
     * recreate threads): a 16-row save (about 13 us, 6 threads' worth)
     * and 4096 tokens' validation (20 us) get all 16; a call worth 1.5
     * threads stays on one. */
    cr_expect_eq(opt_threads_for(opt_v4_save_nanoseconds(16, 2 * 512)), 16);
    cr_expect_eq(opt_threads_for(20000.0), 16);
    cr_expect_eq(opt_threads_for(1.5 * OPT_NANOSECONDS_PER_SPINNING_THREAD), 1);
    omp_set_num_threads(5);
    cr_expect_eq(opt_threads_for(opt_v4_save_nanoseconds(16, 2 * 512)), 5);
    kvc_optimized_set_thread_work(saved);
    opt_nanoseconds_per_wake = saved_wake;
}

/* Light calls split statically, the same ranges in save and compress
 * (a decode's requests stay on one core); heavier ones keep chunks that
 * even out slow threads; sleeping (passive) teams always take chunks.
 * The bench's shapes on 16 spinning threads: both stages
 * of a 64-request V4 decode are light, as is a 96-token D=128 compress;
 * a 4096-token D=512 R=128 compress (32 closing tokens, ~80 us a thread)
 * and the 8192-token save and prefills are not. */
Test(optimized, light_calls_split_statically) {
    double saved_wake = opt_nanoseconds_per_wake;
    opt_nanoseconds_per_wake = opt_wake_cost_for_policy(NULL);
    cr_expect(opt_split_statically(opt_v4_compress_nanoseconds(64, 4, 512), 16));
    cr_expect(opt_split_statically(opt_v4_save_nanoseconds(64, 2 * 512), 16));
    cr_expect(opt_split_statically(opt_v4_compress_nanoseconds(96 / 4, 4, 128), 16));
    cr_expect_not(opt_split_statically(opt_v4_compress_nanoseconds(4096 / 128, 128, 512), 16));
    cr_expect_not(opt_split_statically(opt_v4_save_nanoseconds(8192, 2 * 512), 16));
    cr_expect_not(opt_split_statically(opt_v4_compress_nanoseconds(8192 / 4, 4, 512), 16));
    /* The same decode on 2 threads: compress is heavy enough for chunks. */
    cr_expect_not(opt_split_statically(opt_v4_compress_nanoseconds(64, 4, 512), 2));
    /* Sleeping threads wake one by one: the last range would end late. */
    opt_nanoseconds_per_wake = opt_wake_cost_for_policy("passive");
    cr_expect_not(opt_split_statically(opt_v4_compress_nanoseconds(64, 4, 512), 16));
    cr_expect_not(opt_split_statically(opt_v4_save_nanoseconds(64, 2 * 512), 16));
    opt_nanoseconds_per_wake = saved_wake;
}

/* ---- Replay of the shared spec cases through "opt" ------------------------ */

static void replay_spec_cases(int64_t page_padding) {
    char path[1024];
    support_corpus_path("spec-cases", path, sizeof path);
    char **dirs = NULL;
    int count = kvc_find_cases(path, &dirs);
    cr_assert_gt(count, 0, "no cases under %s", path);
    kvc_replay_options options = {.backend = optimized(), .impl_name = "opt", .policy = KVC_POLICY_EXACT,
                                  .page_padding = page_padding, .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    for (int k = 0; k < count; k++) kvc_replay_case(dirs[k], &options, &totals, NULL);
    kvc_free_case_list(dirs, count);
    cr_assert_eq(totals.failed, 0, "FAIL %d of %d spec cases differ through opt", totals.failed, count);
    cr_assert_eq(totals.passed, count);
}

Test(optimized, replay_spec_cases_exact, .timeout = 120) { replay_spec_cases(0); }
Test(optimized, replay_spec_cases_with_page_padding, .timeout = 120) { replay_spec_cases(64); }

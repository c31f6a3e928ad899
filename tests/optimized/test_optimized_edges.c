/* Edges of the optimized backend, each checked bit for bit against the
 * reference: every stage variant with the value families that reach its
 * special branches (NaN and Inf lanes, values under the scale floor, exp
 * underflow, block maxima on powers of two, fp8 ties), at 1 and 2 OpenMP
 * threads (v4.compress picks its token- or channel-parallel path from the
 * closing-token count per thread), with and without padding between
 * cache pages.  Cases come from the fuzzer's generator, so their token
 * counts leave tails after every 16-lane vector. */
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "kvcmp/run.h"
#include "optimized/optimized.h"
#include "optimized/vector_arrays.h"

static const kvc_backend *optimized_or_skip(void) {
    char error[256];
    const kvc_backend *b = kvc_backend_by_name("opt", error, sizeof error);
    if (!b) cr_skip_test("%s", error);
    /* Every allowed thread, however small the case: 1 vs 2 threads must split it. */
    kvc_optimized_set_thread_work(0);
    return b;
}

/* Runs `c` on both backends; returns 1 (after logging where) if any
 * status, message-class or output byte differs. */
static int differs(const kvc_backend *opt, const kvc_case *c, int threads, int64_t padding, const char *what) {
    kvc_run_options options = {.page_padding = padding, .canary = 0x5A, .keep_outputs_on_error = 1};
    kvc_run_result expected, got;
    omp_set_num_threads(threads);
    int rc_ref = kvc_run_case(&kvc_reference_backend, c, &options, &expected);
    int rc_opt = kvc_run_case(opt, c, &options, &got);
    int bad = 0;
    if (rc_ref != rc_opt) {
        cr_log_error("%s: status ref %d (%s), opt %d (%s)", what, rc_ref, expected.error.message, rc_opt, got.error.message);
        bad = 1;
    } else if (got.padding_touched) {
        cr_log_error("%s: %s", what, got.padding_message);
        bad = 1;
    } else {
        kvc_compare_report report;
        kvc_compare_results(c, &expected, &got, KVC_POLICY_EXACT, &report);
        if (kvc_report_differs(&report)) {
            char summary[700];
            kvc_report_summary(&report, summary, sizeof summary);
            cr_log_error("%s: %s; first: %s", what, summary, report.has_first ? report.first : "-");
            bad = 1;
        }
        /* Independently of the classifier: the raw bytes. */
        for (int i = 0; i < expected.num_outputs && i < got.num_outputs && !bad; i++) {
            const kvc_array *a = &expected.outputs[i].array, *b = &got.outputs[i].array;
            if (a->count != b->count || memcmp(a->data, b->data, (size_t)a->count * (size_t)kvc_dtype_size(a->dtype)) != 0) {
                cr_log_error("%s: %s bytes differ", what, expected.outputs[i].name);
                bad = 1;
            }
        }
    }
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    return bad;
}

/* Every single-case variant x the given families x `per_family` cases,
 * at 1 and 2 threads, padded or not; returns the number of differing runs. */
static int sweep(const kvc_backend *opt, const char *prefix, const int *families, int num_families, int per_family, uint64_t seed,
                 int *runs) {
    int failures = 0;
    for (int v = 0; v < kvc_variant_count(); v++) {
        const kvc_variant_info *info = kvc_variant(v);
        if (info->stage < 0 || strncmp(info->name, prefix, strlen(prefix)) != 0) continue;
        for (int f = 0; f < num_families; f++)
            for (int k = 0; k < per_family; k++) {
                kvc_gen_config config = {.seed = seed, .variant_mask = 1ull << v, .family_mask = 1u << families[f]};
                kvc_gen_case g;
                kvc_gen_make(&config, k, &g);
                char what[160];
                int threads = 1 + (k & 1);
                int64_t padding = (k & 2) ? 64 : 0;
                snprintf(what, sizeof what, "%s family %s case %d (%d threads, padding %lld)", info->name, kvc_family_name(families[f]),
                         k, threads, (long long)padding);
                failures += differs(opt, &g.c, threads, padding, what);
                (*runs)++;
                kvc_gen_free(&g);
            }
    }
    return failures;
}

static const int special_families[] = {KVC_FAM_NONFINITE,    KVC_FAM_TINY,         KVC_FAM_EXP_UNDERFLOW, KVC_FAM_HUGE_SCORES,
                                       KVC_FAM_POW2_EDGE,    KVC_FAM_FP8_TIES,     KVC_FAM_SMALL_WEIGHT,  KVC_FAM_CANCELLATION,
                                       KVC_FAM_HEAVY_TAIL,   KVC_FAM_ROUNDING_PROBE};
#define NUM_SPECIAL ((int)(sizeof special_families / sizeof special_families[0]))

Test(optimized_edges, v4_save_special_values, .timeout = 60) {
    const kvc_backend *opt = optimized_or_skip();
    int runs = 0, failures = sweep(opt, "v4.save_partial_states", special_families, NUM_SPECIAL, 2, 31, &runs);
    cr_expect_eq(failures, 0, "%d of %d v4.save_partial_states runs differ from the reference (see the log)", failures, runs);
}

Test(optimized_edges, v4_compress_special_values, .timeout = 120) {
    const kvc_backend *opt = optimized_or_skip();
    int runs = 0, failures = sweep(opt, "v4.compress", special_families, NUM_SPECIAL, 4, 32, &runs);
    cr_expect_eq(failures, 0, "%d of %d v4.compress runs differ from the reference (see the log)", failures, runs);
}

Test(optimized_edges, v4_forward_special_values, .timeout = 120) {
    const kvc_backend *opt = optimized_or_skip();
    int runs = 0, failures = sweep(opt, "v4.forward", special_families, NUM_SPECIAL, 2, 33, &runs);
    cr_expect_eq(failures, 0, "%d of %d v4.forward runs differ from the reference (see the log)", failures, runs);
}

Test(optimized_edges, v41_stages_special_values, .timeout = 120) {
    const kvc_backend *opt = optimized_or_skip();
    int runs = 0, failures = sweep(opt, "v41.", special_families, NUM_SPECIAL, 4, 34, &runs);
    cr_expect_eq(failures, 0, "%d of %d V4.1 runs differ from the reference (see the log)", failures, runs);
}

/* NaN in exactly one lane of one 64-value quantisation block: the block's
 * scale byte must become 0xFF and only that block's codes change. */
Test(optimized_edges, single_nan_lane_in_a_quant_block) {
    const kvc_backend *opt = optimized_or_skip();
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 35, 0, &c);
    kvc_array *latent = kvc_case_get(&c, "latent");
    kvc_array *slots = kvc_case_get(&c, "slot_mapping");
    int64_t tokens = latent->shape[0];
    int64_t written = -1;
    for (int64_t t = 0; t < tokens && written < 0; t++)
        if (((int64_t *)slots->data)[t] >= 0) written = t;
    if (written < 0) cr_skip_test("case 0 writes no row");
    /* Lanes 0, 15, 16 and 63 of block 1: first lane, end of a vector, start
     * of the next, last lane. */
    static const int lanes[] = {64, 64 + 15, 64 + 16, 64 + 63};
    for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++) {
        kvc_case probe;
        cr_assert_eq(kvc_case_copy(&probe, &c), 0);
        uint16_t *row = (uint16_t *)kvc_case_get(&probe, "latent")->data + written * 512;
        row[lanes[i]] = 0x7FC1;   /* a quiet NaN with a payload */
        char what[96];
        snprintf(what, sizeof what, "NaN at latent[%lld][%d]", (long long)written, lanes[i]);
        cr_expect_eq(differs(opt, &probe, 1, 0, what), 0, "%s: optimized differs from the reference", what);
        kvc_case_free(&probe);
    }
    kvc_case_free(&c);
}

/* The same V4 compress case at 1 and 2 threads (different work splits in
 * the optimized backend) must give the same bytes as the reference. */
Test(optimized_edges, v4_compress_thread_counts, .timeout = 60) {
    const kvc_backend *opt = optimized_or_skip();
    for (int k = 0; k < 6; k++) {
        kvc_case c;
        support_make_case(k & 1 ? "v4.compress/d128/r4" : "v4.compress/d512/r4", KVC_FAM_NORMAL, 36, k, &c);
        for (int threads = 1; threads <= 2; threads++) {
            char what[96];
            snprintf(what, sizeof what, "v4.compress case %d at %d threads", k, threads);
            cr_expect_eq(differs(opt, &c, threads, 128, what), 0, "%s differs from the reference", what);
        }
        kvc_case_free(&c);
    }
}

/* Inputs every implementation must reject, corrupted by the generator
 * (bad slots, positions, block tables, shapes of metadata): the
 * optimized backend must give the reference's status and, like it,
 * leave every output byte as it was. */
Test(optimized_edges, rejects_corrupted_inputs_like_the_reference, .timeout = 120) {
    const kvc_backend *opt = optimized_or_skip();
    int runs = 0, failures = 0, rejected = 0;
    for (int v = 0; v < kvc_variant_count(); v++) {
        if (kvc_variant(v)->stage < 0) continue;
        kvc_gen_config config = {.seed = 37, .variant_mask = 1ull << v, .invalid_per_mille = 1000};
        for (int64_t k = 0; k < 12; k++) {
            kvc_gen_case g;
            kvc_gen_make(&config, k, &g);
            char what[160];
            snprintf(what, sizeof what, "%s case %lld corrupted (%s)", kvc_variant(v)->name, (long long)k, g.invalid);
            failures += differs(opt, &g.c, 1 + (int)(k & 1), (k & 2) ? 64 : 0, what);
            kvc_run_result result;
            rejected += kvc_run_case(&kvc_reference_backend, &g.c, NULL, &result) != KVC_OK;
            kvc_run_result_free(&result);
            runs++;
            kvc_gen_free(&g);
        }
    }
    cr_expect_eq(failures, 0, "%d of %d corrupted cases treated differently from the reference (see the log)", failures, runs);
    cr_expect_geq(rejected, runs / 2, "only %d of %d corrupted cases were rejected: the corruption did not happen", rejected, runs);
}

/* The bench's bandwidth kernels on sizes that are not multiples of their
 * 128- and 64-byte steps, and on a destination that is not 64-byte
 * aligned (no streaming stores then): the sum of the 64-bit words and
 * an exact copy, compared with scalar code. */
Test(optimized_edges, stream_kernels_tails_and_alignment) {
    optimized_or_skip();
    enum { CAPACITY = 4096 };
    uint8_t *source = aligned_alloc(64, CAPACITY), *destination = aligned_alloc(64, CAPACITY + 64);
    cr_assert(source && destination);
    /* Small words (their sums stay far from 2^63): the wrap-around of
     * large sums is a separate test below. */
    for (size_t i = 0; i < CAPACITY / 8; i++) {
        uint64_t word = i * 131 + 7;
        memcpy(source + 8 * i, &word, 8);
    }
    static const size_t sizes[] = {0, 8, 56, 64, 120, 128, 136, 200, 1000, 4096};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t bytes = sizes[s];
        uint64_t want = 0;
        for (size_t i = 0; i + 8 <= bytes; i += 8) {
            uint64_t word;
            memcpy(&word, source + i, 8);
            want += word;
        }
        cr_expect_eq(opt_stream_read(source, bytes), want, "stream read of %zu bytes", bytes);
        for (size_t offset = 0; offset <= 8; offset += 8) {
            memset(destination, 0xEE, CAPACITY + 64);
            opt_stream_copy(destination + offset, source, bytes);
            cr_expect_eq(memcmp(destination + offset, source, bytes), 0, "stream copy of %zu bytes at offset %zu", bytes, offset);
            cr_expect_eq(destination[offset + bytes], 0xEE, "stream copy of %zu bytes wrote past the end", bytes);
            if (offset) cr_expect_eq(destination[offset - 1], 0xEE, "stream copy wrote before the destination");
        }
    }
    free(source);
    free(destination);
}

/* "returns the sum of the 64-bit words" (vector_arrays.h): an unsigned
 * sum, modulo 2^64, whatever the words hold.  16 words of 0xF000...0
 * sum to 0xF 0000...0 (mod 2^64: 0). */
Test(optimized_edges, stream_read_wraps_like_unsigned_addition) {
    optimized_or_skip();
    enum { WORDS = 32 };
    uint64_t *words = aligned_alloc(64, WORDS * 8);
    cr_assert_not_null(words);
    uint64_t want = 0;
    for (int i = 0; i < WORDS; i++) {
        words[i] = 0xF000000000000000ull + (uint64_t)i;
        want += words[i];
    }
    cr_expect_eq(opt_stream_read(words, WORDS * 8), want, "stream read of large words");
    free(words);
}

/* Chunking invariance through the reference: a
 * request's history fed as one prefill, as random chunks, or token by
 * token with speculative drafts (rejected ones carrying wrong data, then
 * re-sent) leaves the same latent rows and cache bytes.  Many random
 * histories per variant, and a negative control showing that the driver
 * does see a backend that loses its ring. */
#include <criterion/criterion.h>
#include <string.h>

#include "kvcmp/layout.h"
#include "kvcmp/generate.h"
#include "harness/fuzz/history.h"

/* Feed one history three ways and require equal bytes. */
static void check_history(const kvc_backend *backend, int version, int32_t ratio, int32_t head_dim, uint64_t seed) {
    kvc_rng r;
    kvc_rng_seed(&r, seed, 0);
    kvc_history h;
    int family = (int)kvc_rng_below(&r, KVC_FAM_COUNT);
    if (family == KVC_FAM_ROUNDING_PROBE) family = KVC_FAM_NORMAL;
    kvc_history_generate(&r, version, ratio, head_dim, family, &h);
    kvc_history_result prefill, other;
    kvc_error err = {0};
    cr_assert_eq(kvc_history_feed(backend, &h, KVC_FEED_PREFILL, seed, &prefill, &err), KVC_OK, "prefill rejected: %s", err.message);
    for (int mode = KVC_FEED_CHUNKS; mode <= KVC_FEED_SPECULATIVE; mode++) {
        cr_assert_eq(kvc_history_feed(backend, &h, (kvc_feed_mode)mode, seed, &other, &err), KVC_OK, "%s rejected: %s",
                     kvc_feed_mode_name((kvc_feed_mode)mode), err.message);
        char detail[600] = "";
        int differs = kvc_history_compare(&h, &prefill, &other, detail, sizeof detail);
        cr_expect_not(differs, "V%d R=%d D=%d seed %llu, %lld tokens: one prefill vs %s (%lld steps): %s", version, h.compress_ratio,
                      h.head_dim, (unsigned long long)seed, (long long)h.length, kvc_feed_mode_name((kvc_feed_mode)mode),
                      (long long)other.steps, detail);
        kvc_history_result_free(&other);
    }
    kvc_history_result_free(&prefill);
    kvc_history_free(&h);
}

Test(chunking, v41_ring_r2_many_histories) {
    for (uint64_t seed = 1; seed <= 200; seed++) check_history(&kvc_reference_backend, 41, 2, 512, seed);
}

Test(chunking, v41_r1_many_histories) {
    for (uint64_t seed = 1; seed <= 60; seed++) check_history(&kvc_reference_backend, 41, 1, 512, seed);
}

Test(chunking, v4_r4_d128_many_histories) {
    for (uint64_t seed = 1; seed <= 100; seed++) check_history(&kvc_reference_backend, 4, 4, 128, seed);
}

Test(chunking, v4_r4_d512_histories) {
    for (uint64_t seed = 100; seed <= 130; seed++) check_history(&kvc_reference_backend, 4, 4, 512, seed);
}

Test(chunking, v4_r128_d128_histories) {
    for (uint64_t seed = 200; seed <= 205; seed++) check_history(&kvc_reference_backend, 4, 128, 128, seed);
}

/* A backend that loses its ring between steps (zeroes it before every
 * call): one prefill never reads the ring, chunked feeding does. */
static int forgetful_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    if (a->compress_ratio == 2 && a->state_cache.data)
        for (int64_t page = 0; page < a->state_cache.num_pages; page++)
            memset((uint8_t *)a->state_cache.data + page * a->state_cache.page_stride, 0, (size_t)a->state_cache.page_bytes);
    return kvc_reference_backend.v41_save_compress_norm(a, err);
}

Test(chunking, driver_sees_a_lost_ring) {
    kvc_backend forgetful = kvc_reference_backend;
    forgetful.name = "forgetful";
    forgetful.v41_save_compress_norm = forgetful_norm;
    int caught = 0;
    for (uint64_t seed = 1; seed <= 20 && !caught; seed++) {
        kvc_rng r;
        kvc_rng_seed(&r, seed, 0);
        kvc_history h;
        kvc_history_generate(&r, 41, 2, 512, KVC_FAM_NORMAL, &h);
        kvc_history_result a, b;
        kvc_error err = {0};
        kvc_history_feed(&kvc_reference_backend, &h, KVC_FEED_PREFILL, seed, &a, &err);
        kvc_history_feed(&forgetful, &h, KVC_FEED_SPECULATIVE, seed, &b, &err);
        char detail[600];
        caught = kvc_history_compare(&h, &a, &b, detail, sizeof detail);
        kvc_history_result_free(&a);
        kvc_history_result_free(&b);
        kvc_history_free(&h);
    }
    cr_assert(caught, "20 speculative histories through a backend that forgets its ring all matched one prefill");
}

Test(chunking, speculative_feeding_sends_drafts_again) {
    kvc_rng r;
    kvc_rng_seed(&r, 7, 0);
    kvc_history h;
    kvc_history_generate(&r, 41, 2, 512, KVC_FAM_NORMAL, &h);
    kvc_history_result res;
    kvc_error err = {0};
    int resent = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        kvc_history_feed(&kvc_reference_backend, &h, KVC_FEED_SPECULATIVE, seed, &res, &err);
        resent |= res.tokens_sent > h.length;
        kvc_history_result_free(&res);
    }
    kvc_history_free(&h);
    cr_assert(resent, "no speculative feeding re-sent a rejected draft");
}

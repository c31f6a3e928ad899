/* The worker's memory check after every case (harness/fuzz/supervise.c:
 * kvc_own_rss_above): the peak decides when /proc is read, the current
 * size decides the answer. */
#include <pthread.h>
#include <sys/mman.h>

#include "tests/test_support.h"

#include "harness/fuzz/supervise.h"

#define MIB ((int64_t)1 << 20)

/* bytes of fresh memory, every page touched; NULL when none is left. */
static uint8_t *touched(int64_t bytes) {
    uint8_t *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    memset(p, 1, (size_t)bytes);
    return p;
}

Test(rss_check, under_a_limit_above_the_peak_nothing_is_reported) {
    cr_expect_eq(kvc_own_rss_above((int64_t)1 << 40), 0);
}

Test(rss_check, past_the_limit_the_current_size_is_reported) {
    uint8_t *block = touched(64 * MIB);
    cr_assert_not_null(block);
    int64_t now = kvc_process_rss_bytes(0), limit = now - 32 * MIB;
    int64_t got = kvc_own_rss_above(limit);
    cr_expect_gt(got, limit, "%lld bytes resident, limit %lld: reported %lld", (long long)now, (long long)limit, (long long)got);
    cr_expect_leq(got, now + 8 * MIB);
    munmap(block, 64 * MIB);
}

/* A process that grew past the limit inside a case and gave the memory
 * back is under it again: the peak alone must not fail the next case. */
Test(rss_check, a_peak_given_back_is_not_reported) {
    uint8_t *block = touched(96 * MIB);
    cr_assert_not_null(block);
    munmap(block, 96 * MIB);
    int64_t limit = kvc_process_rss_bytes(0) + 32 * MIB;
    cr_expect_eq(kvc_own_rss_above(limit), 0, "reported although %lld bytes are resident, limit %lld", (long long)kvc_process_rss_bytes(0),
                 (long long)limit);
}

static void *touch_64_mib(void *out) {
    *(uint8_t **)out = touched(64 * MIB);
    return NULL;
}

/* Memory another thread touched counts (the peak is read per thread). */
Test(rss_check, memory_of_another_thread_counts) {
    int64_t before = kvc_process_rss_bytes(0);
    uint8_t *block = NULL;
    pthread_t thread;
    cr_assert_eq(pthread_create(&thread, NULL, touch_64_mib, &block), 0);
    pthread_join(thread, NULL);
    cr_assert_not_null(block);
    cr_expect_gt(kvc_own_rss_above(before + 32 * MIB), before + 32 * MIB);
    munmap(block, 64 * MIB);
}

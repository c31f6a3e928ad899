/* The padded buffers kvc_run_case keeps from one run to the next:
 * a run sees exactly its case's pages and its own canary in
 * the padding, whatever ran before in the same buffer, and a case too
 * large to keep still runs. */
#include "tests/test_support.h"

#include "kvcmp/backends.h"
#include "kvcmp/npy.h"
#include "kvcmp/run.h"

/* What the inspecting backend expects to find in its kv_cache. */
static struct {
    const kvc_array *pages;   /* the case's kv_cache tensor */
    uint8_t canary;
    int64_t wrong_bytes, calls;
} expected;

/* A plain insert that writes nothing and counts every byte of the paged
 * cache (pages and padding) that is not what its case put there. */
static int inspect_cache(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)err;
    const kvc_paged_cache *c = &a->kv_cache;
    expected.calls++;
    for (int64_t page = 0; page < c->num_pages; page++) {
        const uint8_t *got = (const uint8_t *)c->data + page * c->page_stride;
        const uint8_t *want = (const uint8_t *)expected.pages->data + page * c->page_bytes;
        for (int64_t i = 0; i < c->page_bytes; i++) expected.wrong_bytes += got[i] != want[i];
        for (int64_t i = c->page_bytes; i < c->page_stride; i++) expected.wrong_bytes += got[i] != expected.canary;
    }
    return KVC_OK;
}

static const kvc_backend inspector = {.name = "inspector", .v41_rope_plain_insert = inspect_cache};

/* Runs `c` on the inspector with this padding and canary: every byte as
 * the case and the options say, the output the case's own cache. */
static void expect_exact_buffer(const kvc_case *c, int64_t padding, uint8_t canary, const char *what) {
    expected.pages = kvc_case_get(c, "kv_cache");
    expected.canary = canary;
    expected.wrong_bytes = 0;
    expected.calls = 0;
    kvc_run_options options = {.page_padding = padding, .canary = canary};
    kvc_run_result result;
    cr_assert_eq(kvc_run_case(&inspector, c, &options, &result), KVC_OK, "%s: %s", what, result.error.message);
    cr_expect_eq(expected.calls, 1, "%s", what);
    cr_expect_eq(expected.wrong_bytes, 0, "%s: %lld bytes of the paged cache were not the case's or the canary", what,
                 (long long)expected.wrong_bytes);
    cr_expect_not(result.padding_touched, "%s: %s", what, result.padding_message);
    cr_assert_eq(result.num_outputs, 1, "%s", what);
    size_t bytes = (size_t)expected.pages->count * 2;
    cr_expect_eq(result.outputs[0].array.count, expected.pages->count, "%s", what);
    cr_expect_eq(memcmp(result.outputs[0].array.data, expected.pages->data, bytes), 0, "%s: the output is not the case's cache", what);
    kvc_run_result_free(&result);
}

/* kv_cache replaced by one of `pages` pages (same rows per page), each
 * byte set from its index so that no two pages look alike. */
static void grow_cache(kvc_case *c, int64_t pages) {
    const kvc_array *old = kvc_case_get(c, "kv_cache");
    int64_t shape[3] = {pages, old->shape[1], old->shape[2]};
    kvc_array grown;
    cr_assert_eq(kvc_array_alloc(&grown, old->dtype, 3, shape), 0);
    uint8_t *bytes = grown.data;
    for (int64_t i = 0; i < grown.count * 2; i++) bytes[i] = (uint8_t)(i * 2654435761u >> 13);
    cr_assert_eq(kvc_case_put(c, "kv_cache", &grown), 0);
}

Test(run_case_buffers, kept_buffers_show_nothing_of_an_earlier_run, .timeout = 120) {
    kvc_case small, large;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 20, 0, &small);
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 20, 1, &large);
    int64_t page = kvc_case_get(&small, "kv_cache")->shape[1] * 1024;
    grow_cache(&large, 2 + (1 << 20) / page);    /* about 1 MiB: kept */
    /* The large case fills the kept buffer with its pages and canary
     * 0x11; the small one then uses its start with other padding. */
    expect_exact_buffer(&large, 192, 0x11, "large case, padding 192");
    expect_exact_buffer(&small, 64, 0x22, "small case after the large one, padding 64");
    expect_exact_buffer(&large, 64, 0x33, "large case again, padding 64");
    expect_exact_buffer(&small, 0, 0x44, "no padding: the buffer becomes the output");
    kvc_case_free(&small);
    kvc_case_free(&large);
}

Test(run_case_buffers, a_case_too_large_to_keep_still_runs, .timeout = 300) {
    kvc_case huge;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 21, 0, &huge);
    int64_t page = kvc_case_get(&huge, "kv_cache")->shape[1] * 1024;
    grow_cache(&huge, 1 + (33 << 20) / page);   /* past the 32 MiB kept at most */
    expect_exact_buffer(&huge, 64, 0x5A, "a cache over 32 MiB");
    /* And the reference's insert through it, against the same case unpadded. */
    kvc_run_options padded = {.page_padding = 128, .canary = 0xC3}, plain = {0};
    kvc_run_result a, b;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &huge, &padded, &a), KVC_OK, "%s", a.error.message);
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &huge, &plain, &b), KVC_OK, "%s", b.error.message);
    cr_expect_not(a.padding_touched, "%s", a.padding_message);
    cr_assert_eq(a.num_outputs, 1);
    cr_assert_eq(b.num_outputs, 1);
    cr_expect_eq(memcmp(a.outputs[0].array.data, b.outputs[0].array.data, (size_t)a.outputs[0].array.count * 2), 0,
                 "padding changed the reference's output");
    kvc_run_result_free(&a);
    kvc_run_result_free(&b);
    kvc_case_free(&huge);
}

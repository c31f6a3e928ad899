/* SPEC.md 8.1: a forward is one call, so no output of either stage may
 * overlap an output or an input of the other.  The per-stage validators
 * see only their own stage's tensors; kvc_validate_*_forward_overlaps the
 * rest, and their messages name both tensors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kvcmp/validate.h"

/* Every tensor of the fixtures lives in one arena, at its own offset: a
 * test moves one tensor onto another by changing its pointer. */
#define ARENA_BYTES (1 << 20)
static _Alignas(64) uint8_t arena[ARENA_BYTES];

enum { T = 4, NR = 2, MB = 3, COS_ROWS = 8 };

typedef struct {
    kvc_v4_save_args save;
    kvc_v4_compress_args compress;
} v4_forward;

typedef struct {
    kvc_v41_norm_args norm;
    kvc_v41_insert_args insert;
} v41_forward;

/* Disjoint tensors of a v4.forward (R = 4, D = 128: W = 256). */
static v4_forward v4_fixture(void) {
    v4_forward f;
    memset(&f, 0, sizeof f);
    f.save = (kvc_v4_save_args){.num_tokens = T, .compress_ratio = 4, .head_dim = 128};
    f.save.kv = (const float *)(arena + 0x00000);           /* T x 256 x 4 = 4 KiB */
    f.save.score = (const float *)(arena + 0x02000);
    f.save.ape = (const float *)(arena + 0x04000);          /* 4 x 256 x 4 = 4 KiB */
    f.save.positions = (const int64_t *)(arena + 0x06000);
    f.save.slot_mapping = (const int64_t *)(arena + 0x06100);
    f.save.state_cache = (kvc_paged_cache){.data = arena + 0x10000, .num_pages = 2, .page_rows = 4, .page_bytes = 4 * 2048,
                                           .page_stride = 4 * 2048 + 64};
    f.compress = (kvc_v4_compress_args){.num_tokens = T, .compress_ratio = 4, .head_dim = 128, .num_requests = NR,
                                        .max_blocks = MB, .cos_sin_rows = COS_ROWS};
    f.compress.state_cache = f.save.state_cache;
    f.compress.positions = f.save.positions;
    f.compress.slot_mapping = f.save.slot_mapping;
    f.compress.block_table = (const int32_t *)(arena + 0x06200);
    f.compress.token_to_req = (const int32_t *)(arena + 0x06300);
    f.compress.kv_slot_mapping = (const int64_t *)(arena + 0x06400);
    f.compress.norm_weight = (const float *)(arena + 0x07000);
    f.compress.cos_sin = (const float *)(arena + 0x08000);  /* 8 x 256 = 2 KiB */
    f.compress.kv_cache = (kvc_paged_cache){.data = arena + 0x20000, .num_pages = 2, .page_rows = 4, .page_bytes = 4 * 196,
                                            .page_stride = 4 * 196};
    return f;
}

/* Disjoint tensors of a v41.forward with R = 2. */
static v41_forward v41_fixture(void) {
    v41_forward f;
    memset(&f, 0, sizeof f);
    f.norm = (kvc_v41_norm_args){.num_tokens = T, .compress_ratio = 2, .num_requests = NR};
    f.norm.kv_score = (const float *)(arena + 0x00000);     /* T x 1024 x 4 = 16 KiB */
    f.norm.positions = (const int64_t *)(arena + 0x06000);
    f.norm.slot_mapping = (const int64_t *)(arena + 0x06100);
    f.norm.norm_weight = (const uint16_t *)(arena + 0x06200);
    f.norm.token_to_req = (const int32_t *)(arena + 0x06600);
    f.norm.query_start_loc = (const int32_t *)(arena + 0x06700);
    f.norm.latent = (uint16_t *)(arena + 0x08000);          /* T x 1024 = 4 KiB */
    f.norm.state_cache = (kvc_paged_cache){.data = arena + 0x10000, .num_pages = 2, .page_rows = 8, .page_bytes = 8 * 4096,
                                           .page_stride = 8 * 4096};
    f.insert = (kvc_v41_insert_args){.num_tokens = T, .compress_ratio = 2, .cache_dtype = KVC_CACHE_FP8_DS_MLA, .cos_sin_rows = COS_ROWS};
    f.insert.latent = f.norm.latent;
    f.insert.positions = f.norm.positions;
    f.insert.slot_mapping = (const int64_t *)(arena + 0x06800);   /* kv_slot_mapping */
    f.insert.cos_sin = (const float *)(arena + 0x07000);
    f.insert.kv_cache = (kvc_paged_cache){.data = arena + 0x30000, .num_pages = 2, .page_rows = 4, .page_bytes = 4 * 656,
                                          .page_stride = 4 * 656};
    return f;
}

static void expect_conflict(int rc, const kvc_error *err, const char *output, const char *other) {
    char expected[96];
    snprintf(expected, sizeof expected, "%s overlaps %s in memory", output, other);
    cr_expect_eq(rc, KVC_ERR_CONFLICT, "%s", err->message);
    cr_expect_eq(err->code, KVC_ERR_CONFLICT);
    cr_expect_str_eq(err->message, expected);
}

Test(forward_overlaps, disjoint_forwards_pass) {
    v4_forward a = v4_fixture();
    v41_forward b = v41_fixture();
    kvc_error err = {.code = -1};
    cr_expect_eq(kvc_validate_v4_forward_overlaps(&a.save, &a.compress, &err), KVC_OK, "%s", err.message);
    cr_expect_eq(err.code, KVC_OK);
    cr_expect_eq(kvc_validate_v41_forward_overlaps(&b.norm, &b.insert, &err), KVC_OK, "%s", err.message);
}

/* The state cache written by the save stage over an input only the
 * compress stage reads: neither stage's validator sees it. */
Test(forward_overlaps, v4_state_cache_over_a_compress_input) {
    v4_forward f = v4_fixture();
    kvc_error err;
    f.compress.cos_sin = (const float *)((uint8_t *)f.save.state_cache.data + 64);
    expect_conflict(kvc_validate_v4_forward_overlaps(&f.save, &f.compress, &err), &err, "state_cache", "cos_sin");
    f = v4_fixture();
    f.compress.block_table = (const int32_t *)((uint8_t *)f.save.state_cache.data + f.save.state_cache.page_bytes);   /* in the padding */
    expect_conflict(kvc_validate_v4_forward_overlaps(&f.save, &f.compress, &err), &err, "state_cache", "block_table");
}

Test(forward_overlaps, v4_kv_cache_over_a_save_input_or_the_state_cache) {
    v4_forward f = v4_fixture();
    kvc_error err;
    f.compress.kv_cache.data = (uint8_t *)f.save.ape + 4096 - 8;   /* its first bytes over ape's last */
    expect_conflict(kvc_validate_v4_forward_overlaps(&f.save, &f.compress, &err), &err, "kv_cache", "ape");
    f = v4_fixture();
    f.compress.kv_cache.data = f.save.state_cache.data;
    expect_conflict(kvc_validate_v4_forward_overlaps(&f.save, &f.compress, &err), &err, "state_cache", "kv_cache");
}

/* Two outputs of a v41.forward that no stage holds together: the ring
 * (norm) and the compressed cache (insert). */
Test(forward_overlaps, v41_kv_cache_over_the_ring) {
    v41_forward f = v41_fixture();
    kvc_error err;
    f.insert.kv_cache.data = (uint8_t *)f.norm.state_cache.data + 4096;
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "kv_cache", "state_cache");
}

Test(forward_overlaps, v41_outputs_over_the_other_stages_inputs) {
    v41_forward f = v41_fixture();
    kvc_error err;
    f.insert.slot_mapping = (const int64_t *)((uint8_t *)f.norm.state_cache.data + 128);
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "state_cache", "kv_slot_mapping");
    f = v41_fixture();
    f.insert.cos_sin = (const float *)((uint8_t *)f.norm.latent + 1024);
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "latent", "cos_sin");
    f = v41_fixture();
    f.norm.query_start_loc = (const int32_t *)((uint8_t *)f.insert.kv_cache.data + 8);
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "kv_cache", "query_start_loc");
    f = v41_fixture();
    f.norm.kv_score = (const float *)((uint8_t *)f.insert.kv_cache.data - 16 * 1024 + 4);
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "kv_cache", "kv_score");
}

/* R = 1: no ring, no token_to_req or query_start_loc; the insert's slots
 * are the norm's slot_mapping. */
Test(forward_overlaps, v41_r1_has_no_ring) {
    v41_forward f = v41_fixture();
    kvc_error err;
    f.norm.compress_ratio = f.insert.compress_ratio = 1;
    f.norm.state_cache.data = f.insert.kv_cache.data;   /* unused at R = 1 */
    f.norm.token_to_req = (const int32_t *)f.insert.kv_cache.data;
    cr_expect_eq(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), KVC_OK, "%s", err.message);
    f.insert.slot_mapping = (const int64_t *)((uint8_t *)f.insert.kv_cache.data + 64);
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "kv_cache", "slot_mapping");
}

/* A ring the norm stage has not validated yet (it runs after these
 * checks) is compared only where its geometry makes a span: its own
 * validator refuses the rest. */
Test(forward_overlaps, unvalidated_geometry_is_left_to_the_stage) {
    v41_forward f = v41_fixture();
    kvc_error err;
    f.insert.kv_cache.data = f.norm.state_cache.data;
    kvc_paged_cache ring = f.norm.state_cache;
    int64_t bad[][3] = {{0, 8 * 4096, 8 * 4096}, {2, 0, 8 * 4096}, {2, 8 * 4096, 100}, {INT64_MAX, 8 * 4096, INT64_MAX / 2},
                        {2, 8 * 4096, INT64_MAX - 100}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f.norm.state_cache = ring;
        f.norm.state_cache.num_pages = bad[i][0];
        f.norm.state_cache.page_bytes = bad[i][1];
        f.norm.state_cache.page_stride = bad[i][2];
        cr_expect_eq(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), KVC_OK, "geometry %zu: %s", i, err.message);
    }
    f.norm.state_cache = ring;
    expect_conflict(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), &err, "kv_cache", "state_cache");
}

/* Sizes the stages' validators refuse (a ratio, a head size, a count
 * past 2^40, a block table past int64) are theirs to report. */
Test(forward_overlaps, refused_sizes_are_left_to_the_stage) {
    v41_forward f = v41_fixture();
    kvc_error err;
    f.norm.query_start_loc = (const int32_t *)f.insert.kv_cache.data;
    int64_t requests[] = {-1, INT64_MAX};
    for (int i = 0; i < 2; i++) {
        f.norm.num_requests = requests[i];
        cr_expect_eq(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), KVC_OK, "%lld requests: %s", (long long)requests[i],
                     err.message);
    }
    f = v41_fixture();
    f.insert.kv_cache.data = f.norm.latent;
    f.norm.compress_ratio = f.insert.compress_ratio = 3;
    cr_expect_eq(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), KVC_OK, "%s", err.message);
    f.norm.compress_ratio = f.insert.compress_ratio = 2;
    f.norm.num_tokens = f.insert.num_tokens = (int64_t)1 << 41;
    cr_expect_eq(kvc_validate_v41_forward_overlaps(&f.norm, &f.insert, &err), KVC_OK, "%s", err.message);

    v4_forward g = v4_fixture();
    g.compress.kv_cache.data = (void *)g.save.kv;
    g.compress.compress_ratio = g.save.compress_ratio = 5;
    cr_expect_eq(kvc_validate_v4_forward_overlaps(&g.save, &g.compress, &err), KVC_OK, "%s", err.message);
    g.compress.compress_ratio = g.save.compress_ratio = 4;
    g.compress.head_dim = g.save.head_dim = 64;
    cr_expect_eq(kvc_validate_v4_forward_overlaps(&g.save, &g.compress, &err), KVC_OK, "%s", err.message);
    g = v4_fixture();
    g.compress.block_table = (const int32_t *)g.compress.kv_cache.data;
    g.compress.num_requests = INT64_MAX;
    cr_expect_eq(kvc_validate_v4_forward_overlaps(&g.save, &g.compress, &err), KVC_OK, "%s", err.message);
    g.compress.num_requests = NR;
    expect_conflict(kvc_validate_v4_forward_overlaps(&g.save, &g.compress, &err), &err, "kv_cache", "block_table");
}

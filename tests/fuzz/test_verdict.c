/* The fuzzer's verdict on one case (harness/fuzz/run.c). */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/npy.h"
#include "kvcmp/validate.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/history.h"
#include "harness/backends/plugin.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"

/* ---- the fuzzer's verdict on one case (harness/fuzz/run.c) --------------- */

/* Candidates with one planted flaw each. */
static int plain_insert_then_scribble_padding(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    ((uint8_t *)a->kv_cache.data)[a->kv_cache.page_bytes] ^= 0x01;
    return rc;
}
static int plain_insert_refusing_everything(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)a;
    return kvc_fail(err, KVC_ERR_PARAM, "test backend refuses every call");
}
static int plain_insert_writing_before_its_check(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}
/* Right at one thread, one flipped byte at more (a race, in effect). */
static int plain_insert_wrong_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_plain_insert(a, err);
    if (rc == KVC_OK && omp_get_max_threads() > 1) ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return rc;
}

static kvc_fuzz_verdict check_with(kvc_v41_insert_fn insert, const kvc_case *c, int threads, int metamorphic_per_mille) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "planted";
    candidate.v41_rope_plain_insert = insert;
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &candidate, .policy = KVC_POLICY_VLLM,
                              .threads = threads, .metamorphic_per_mille = metamorphic_per_mille};
    kvc_fuzz_verdict verdict;
    kvc_fuzz_outcome outcome = kvc_fuzz_check_case(&target, c, 3, &verdict);
    cr_expect_eq(outcome, verdict.outcome);
    return verdict;
}

static void expect_verdict(const kvc_fuzz_verdict *v, const char *kind, const char *needle) {
    cr_expect_eq(v->outcome, KVC_FUZZ_FAIL, "expected a '%s' failure, got outcome %d (%s)", kind, v->outcome, v->detail);
    cr_expect_str_eq(v->kind, kind, "detail: %s", v->detail);
    cr_expect(strstr(v->detail, needle) != NULL, "'%s' does not contain '%s'", v->detail, needle);
}

Test(fuzz_verdicts, each_planted_flaw_has_its_kind) {
    kvc_case valid, invalid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 14, 0, &valid);
    support_make_index_error_case("v41.rope_plain_insert/bf16", 14, "slot_mapping", "kv_cache", &invalid);
    kvc_fuzz_verdict v = check_with(plain_insert_then_scribble_padding, &valid, 1, 0);
    expect_verdict(&v, "padding", "kv_cache: padding byte 0 after page 0 was written");
    v = check_with(plain_insert_refusing_everything, &valid, 1, 0);
    expect_verdict(&v, "status", "reference returned ok (ok), candidate returned ");
    expect_verdict(&v, "status", "test backend refuses every call");
    v = check_with(plain_insert_writing_before_its_check, &invalid, 1, 0);
    expect_verdict(&v, "written-on-error", "candidate: kv_cache byte 0 changed although the stage returned an error");
    v = check_with(plain_insert_wrong_with_threads, &valid, 1, 1000);
    expect_verdict(&v, "threads", "1 thread(s) vs 2 thread(s): ");
    /* The same flaws are invisible where they cannot show. */
    v = check_with(plain_insert_wrong_with_threads, &valid, 1, 0);
    cr_expect_eq(v.outcome, KVC_FUZZ_PASS, "no metamorphic check, yet: %s: %s", v.kind, v.detail);
    v = check_with(plain_insert_wrong_with_threads, &valid, 2, 0);
    expect_verdict(&v, "bytes", "; first: kv_cache row 0 dim 0 ");
    kvc_case_free(&valid);
    kvc_case_free(&invalid);
}

Test(fuzz_verdicts, candidate_without_the_stage_is_skipped) {
    kvc_case c;
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 15, 0, &c);
    kvc_fuzz_verdict v = check_with(NULL, &c, 1, 0);
    cr_expect_eq(v.outcome, KVC_FUZZ_SKIP);
    cr_expect(strstr(v.detail, "candidate planted has no v41.rope_plain_insert") != NULL, "%s", v.detail);
    kvc_case_free(&c);
}

/* libFuzzer drives the generator from its input bytes (fuzz/libfuzzer_entry.c):
 * the same bytes must give the same case, and the bytes run out into
 * the seeded stream without harm. */
Test(fuzz_verdicts, generator_from_input_bytes_is_deterministic) {
    uint8_t input[64];
    for (size_t i = 0; i < sizeof input; i++) input[i] = (uint8_t)(i * 29 + 3);
    for (size_t size = 1; size <= sizeof input; size += 21) {
        kvc_gen_config config = {.seed = 0, .invalid_per_mille = 50};
        kvc_gen_case a, b;
        kvc_rng ra, rb;
        kvc_rng_seed(&ra, 0x6B76636D70ull, size);
        kvc_rng_seed(&rb, 0x6B76636D70ull, size);
        ra.bytes = rb.bytes = input;
        ra.bytes_left = rb.bytes_left = size;
        kvc_gen_make_from(&config, &ra, &a);
        kvc_gen_make_from(&config, &rb, &b);
        cr_expect_eq(a.variant, b.variant, "%zu input bytes: variant %d vs %d", size, a.variant, b.variant);
        cr_expect_eq(a.family, b.family);
        cr_expect_eq(ra.bytes_left, 0, "the generator left %zu of %zu input bytes unread", ra.bytes_left, size);
        if (!a.history) {
            cr_expect_eq(a.c.num_tensors, b.c.num_tensors);
            for (int i = 0; i < a.c.num_tensors && i < b.c.num_tensors; i++) {
                const kvc_array *x = &a.c.tensors[i].array, *y = &b.c.tensors[i].array;
                cr_expect(x->count == y->count && memcmp(x->data, y->data, (size_t)x->count * (size_t)kvc_dtype_size(x->dtype)) == 0,
                          "%zu input bytes: tensor %s differs between two generations", size, a.c.tensors[i].name);
            }
        }
        kvc_gen_free(&a);
        kvc_gen_free(&b);
    }
}

static int plain_insert_writing_then_refusing(const kvc_v41_insert_args *a, kvc_error *err) {
    ((uint8_t *)a->kv_cache.data)[0] ^= 0x01;
    return kvc_fail(err, KVC_ERR_INDEX, "test backend wrote, then refused");
}
static int plain_insert_refusing_with_threads(const kvc_v41_insert_args *a, kvc_error *err) {
    if (omp_get_max_threads() > 1) return kvc_fail(err, KVC_ERR_CONFLICT, "test backend refuses at more than one thread");
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}

/* The side the fuzzer blames is the one that wrote: a "reference" that
 * writes before refusing is named as such. */
Test(fuzz_verdicts, a_reference_that_writes_on_error_is_named) {
    kvc_case invalid;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 16, "slot_mapping", "kv_cache", &invalid);
    kvc_backend writer = kvc_reference_backend;
    writer.v41_rope_plain_insert = plain_insert_writing_then_refusing;
    kvc_fuzz_target target = {.reference = &writer, .candidate = &kvc_reference_backend, .threads = 1};
    kvc_fuzz_verdict v;
    kvc_fuzz_check_case(&target, &invalid, 4, &v);
    expect_verdict(&v, "written-on-error", "reference: kv_cache byte 0 changed although the stage returned an error");
    kvc_case_free(&invalid);
}

Test(fuzz_verdicts, status_that_depends_on_the_thread_count) {
    kvc_case valid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 17, 0, &valid);
    kvc_fuzz_verdict v = check_with(plain_insert_refusing_with_threads, &valid, 1, 1000);
    expect_verdict(&v, "threads", "2 thread(s) returned ");
    kvc_case_free(&valid);
}

/* As `kvcmp replay --page-padding 64` runs it: canary 0xA5, fixed
 * padding, no metamorphic checks even when asked for. */
Test(fuzz_verdicts, replay_conditions_skip_the_metamorphic_checks) {
    kvc_case valid;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 18, 0, &valid);
    kvc_backend candidate = kvc_reference_backend;
    candidate.v41_rope_plain_insert = plain_insert_wrong_with_threads;
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &candidate, .threads = 1,
                              .metamorphic_per_mille = 1000, .replay_padding = 64};
    kvc_fuzz_verdict v;
    cr_expect_eq(kvc_fuzz_check_case(&target, &valid, 5, &v), KVC_FUZZ_PASS, "%s: %s", v.kind, v.detail);
    target.replay_padding = 0;
    cr_expect_eq(kvc_fuzz_check_case(&target, &valid, 5, &v), KVC_FUZZ_FAIL, "the thread check did not run without replay_padding");
    kvc_case_free(&valid);
}

/* Chunked histories that diverge: the driver must find the diverging step. */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <omp.h>

#include "tests/test_support.h"
#include "tests/fuzz/planted.h"

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

/* ---- chunked histories that diverge (harness/fuzz/history.c) ------------------ */


/* Lockstep must stop at the first step that differs, describe where, and
 * hand back that step as a single case that still tells the two apart. */
static void expect_divergence(const kvc_backend *candidate, int version, int32_t ratio, int32_t head_dim, const char *where,
                              kvc_stage stage) {
    kvc_rng rng;
    kvc_rng_seed(&rng, 77, (uint64_t)version);
    kvc_history h;
    cr_assert_eq(kvc_history_generate(&rng, version, ratio, head_dim, KVC_FAM_NORMAL, &h), 0);
    char detail[600] = "";
    cr_expect_eq(kvc_history_lockstep(&kvc_reference_backend, &kvc_reference_backend, &h, KVC_FEED_CHUNKS, 5, NULL, detail, sizeof detail),
                 0, "the reference diverges from itself: %s", detail);
    kvc_case step;
    int diverged = kvc_history_lockstep(&kvc_reference_backend, candidate, &h, KVC_FEED_SPECULATIVE, 5, &step, detail, sizeof detail);
    cr_assert_eq(diverged, 1, "the planted bug went unnoticed");
    cr_expect(strstr(detail, where) != NULL, "'%s' does not name %s", detail, where);
    cr_expect(strstr(detail, "(token by token with speculative drafts, step ") != NULL, "%s", detail);
    cr_expect_eq(step.stage, stage);
    kvc_run_options options = {0};
    kvc_run_result expected, got;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &step, &options, &expected), KVC_OK, "%s", expected.error.message);
    cr_assert_eq(kvc_run_case(candidate, &step, &options, &got), KVC_OK, "%s", got.error.message);
    kvc_compare_report report;
    kvc_compare_results(&step, &expected, &got, KVC_POLICY_EXACT, &report);
    cr_expect_eq(kvc_report_failed(&report), 1, "the saved step does not reproduce the divergence");
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    kvc_case_free(&step);
    kvc_history_free(&h);
}

Test(history_divergence, v4_kv_cache_byte) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "flip-kv";
    candidate.v4_compress = compress_then_flip_a_kv_byte;
    expect_divergence(&candidate, 4, 4, 128, "kv_cache page 0 byte 0 differs", KVC_STAGE_V4_FORWARD);
}

Test(history_divergence, v41_latent_value) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "flip-latent";
    candidate.v41_save_compress_norm = norm_then_flip_a_latent_bit;
    expect_divergence(&candidate, 41, 2, 512, "latent of position ", KVC_STAGE_V41_FORWARD);
}

Test(history_divergence, candidate_lacking_a_stage_is_skipped) {
    kvc_rng rng;
    kvc_rng_seed(&rng, 78, 0);
    kvc_history h;
    cr_assert_eq(kvc_history_generate(&rng, 4, 4, 128, KVC_FAM_NORMAL, &h), 0);
    kvc_backend partial = kvc_reference_backend;
    partial.v4_compress = NULL;
    char detail[600] = "";
    cr_expect_eq(kvc_history_lockstep(&kvc_reference_backend, &partial, &h, KVC_FEED_CHUNKS, 1, NULL, detail, sizeof detail), -1);
    kvc_history_result result;
    kvc_error err = {0};
    cr_expect_eq(kvc_history_feed(&partial, &h, KVC_FEED_PREFILL, 1, &result, &err), KVC_ERR_UNAVAILABLE, "fed a backend without v4.compress");
    cr_expect(strstr(err.message, "lacks the stages of a V4 forward") != NULL, "%s", err.message);
    kvc_history_free(&h);
}

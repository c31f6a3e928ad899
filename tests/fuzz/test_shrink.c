/* Shrinking a case that shows a planted bug: the shrinker must keep the bug. */
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

/* ---- shrinking a case that shows a planted bug (harness/fuzz/shrink.c) ---- */

typedef struct {
    const kvc_backend *candidate;
} planted_bug;

/* The reference accepts the case, and the candidate's bytes differ. */
static int shows_the_planted_bug(const kvc_case *c, void *context) {
    const planted_bug *bug = context;
    kvc_run_result expected, got;
    int rc_ref = kvc_run_case(&kvc_reference_backend, c, NULL, &expected);
    int rc_cand = kvc_run_case(bug->candidate, c, NULL, &got);
    int shows = 0;
    if (rc_ref == KVC_OK && rc_cand == KVC_OK) {
        kvc_compare_report report;
        kvc_compare_results(c, &expected, &got, KVC_POLICY_EXACT, &report);
        shows = kvc_report_failed(&report);
    }
    kvc_run_result_free(&expected);
    kvc_run_result_free(&got);
    return shows;
}

Test(shrink_planted_bug, every_forward_and_compress_variant_shrinks, .timeout = 120) {
    kvc_backend flip_kv = kvc_reference_backend, flip_latent = kvc_reference_backend;
    flip_kv.v4_compress = compress_then_flip_a_kv_byte;
    flip_latent.v41_save_compress_norm = norm_then_flip_a_latent_bit;
    static const char *const variants[] = {"v4.compress/d512/r4", "v4.compress/d128/r128", "v4.forward/d128/r4", "v4.forward/d512/r128",
                                           "v41.save_compress_norm/r2", "v41.save_compress_norm/r1", "v41.forward/r2", "v41.forward/r1"};
    int shrunk = 0, tried = 0;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        for (int64_t k = 0; k < 2; k++) {
            planted_bug bug = {.candidate = variants[v][2] == '1' ? &flip_latent : &flip_kv};
            kvc_case c;
            support_make_case(variants[v], KVC_FAM_HEAVY_TAIL, 41, k, &c);
            if (!shows_the_planted_bug(&c, &bug)) {   /* e.g. a case with no token at all */
                kvc_case_free(&c);
                continue;
            }
            kvc_shrink_stats stats;
            kvc_shrink_case(&c, shows_the_planted_bug, &bug, 2.0, &stats);
            tried++;
            cr_expect(shows_the_planted_bug(&c, &bug), "%s case %lld: the shrunk case lost the bug", variants[v], (long long)k);
            cr_expect_leq(stats.tokens_after, stats.tokens_before, "%s: the shrinker grew the case", variants[v]);
            cr_expect_eq(stats.tokens_after, kvc_case_tokens(&c));
            cr_expect_geq(stats.attempts, stats.accepted);
            shrunk += stats.tokens_after < stats.tokens_before;
            kvc_case_free(&c);
        }
    cr_expect_geq(tried, 8, "only %d cases showed the planted bug", tried);
    cr_expect_geq(shrunk, tried / 2, "only %d of %d cases got smaller", shrunk, tried);
}

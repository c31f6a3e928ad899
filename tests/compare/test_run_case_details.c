/* run_case details. */
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

/* ---- run_case details -------------------------------------------------- */

/* A V4 compress case without params.cache_dtype takes its cache from
 * head_dim: fp8_indexer for D = 128, fp8_ds_mla for D = 512. */
Test(binder_errors, v4_cache_dtype_defaults_from_head_dim) {
    static const struct {
        const char *variant;
        kvc_cache_dtype dtype;
    } cases[] = {{"v4.compress/d128/r4", KVC_CACHE_FP8_INDEXER}, {"v4.compress/d512/r4", KVC_CACHE_FP8_DS_MLA}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kvc_case explicit_dtype, implicit_dtype;
        support_make_case(cases[i].variant, KVC_FAM_NORMAL, 19, 0, &explicit_dtype);
        cr_assert_eq(kvc_case_copy(&implicit_dtype, &explicit_dtype), 0);
        explicit_dtype.has_cache_dtype = 1;
        explicit_dtype.cache_dtype = cases[i].dtype;
        implicit_dtype.has_cache_dtype = 0;
        implicit_dtype.cache_dtype = (kvc_cache_dtype)(3 - (int)cases[i].dtype);   /* a wrong leftover value */
        kvc_run_result a, b;
        cr_assert_eq(kvc_run_case(&kvc_reference_backend, &explicit_dtype, NULL, &a), KVC_OK, "%s", a.error.message);
        cr_assert_eq(kvc_run_case(&kvc_reference_backend, &implicit_dtype, NULL, &b), KVC_OK, "%s", b.error.message);
        cr_expect_eq(implicit_dtype.cache_dtype, cases[i].dtype, "%s: default cache dtype", cases[i].variant);
        cr_assert_eq(a.num_outputs, b.num_outputs);
        for (int o = 0; o < a.num_outputs; o++)
            cr_expect_eq(memcmp(a.outputs[o].array.data, b.outputs[o].array.data, (size_t)a.outputs[o].array.count), 0,
                         "%s: %s differs with the default cache dtype", cases[i].variant, a.outputs[o].name);
        kvc_run_result_free(&a);
        kvc_run_result_free(&b);
        kvc_case_free(&explicit_dtype);
        kvc_case_free(&implicit_dtype);
    }
    kvc_case unknown = {.stage = KVC_STAGE_COUNT};
    const char *names[KVC_MAX_OUTPUTS];
    cr_expect_eq(kvc_stage_outputs(&unknown, names), 0, "an unknown stage has outputs");
}

/* More sources than the tally holds: the last slot takes the rest, and
 * every case is still counted. */
Test(binder_errors, replay_tally_overflows_into_the_last_source, .timeout = 60) {
    char dir[64], case_dir[128], out_path[128], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(case_dir, sizeof case_dir, "%s/case", dir);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    kvc_case c;
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 20, 0, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0);
    kvc_replay_options replay = {.backend = &kvc_reference_backend, .impl_name = "ref", .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    fflush(stdout);
    cr_assert_not_null(freopen(out_path, "w", stdout));
    int sources = KVC_REPLAY_MAX_SOURCES + 3;
    for (int i = 0; i < sources; i++) {
        snprintf(c.source, sizeof c.source, "source-%02d (test)", i);
        cr_assert_eq(kvc_case_save(case_dir, &c, error, sizeof error), 0, "%s", error);
        cr_expect_eq(kvc_replay_case(case_dir, &replay, &totals, NULL), 0);
    }
    cr_expect_eq(totals.passed, sources);
    cr_expect_eq(totals.num_sources, KVC_REPLAY_MAX_SOURCES);
    cr_expect_str_eq(totals.sources[0].source, "source-00");
    cr_expect_eq(totals.sources[KVC_REPLAY_MAX_SOURCES - 1].passed, 4, "the last slot holds its own case and the 3 beyond");
    kvc_case_free(&c);
    support_remove_tree(dir);
}

/* The optimized backend's paths (optimized/backend.c): each ISA path this
 * CPU has replays the spec cases exactly at 1 and 4 threads; one it lacks
 * is listed as skipped with the feature it needs; KVCMP_MAX_CPU_ISA caps
 * the path `opt` chooses; a wrong cap is an error that names it. */
#include <criterion/criterion.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/backends.h"
#include "harness/replay/replay.h"
#include "optimized/optimized.h"
#include "tests/test_support.h"

/* What the CPU has, asked here independently of backend.c. */
static int cpu_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
}
static int cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static const kvc_backend *path_or_skip(const char *isa, int available) {
    char error[256] = "";
    const kvc_backend *b = kvc_optimized_backend_for(isa, error, sizeof error);
    if (!available) {
        cr_assert_null(b, "the %s path was offered on a CPU without it", isa);
        cr_assert(strstr(error, "which this CPU lacks") != NULL, "%s", error);
        cr_skip_test("the %s path: %s", isa, error);
    }
    cr_assert_not_null(b, "%s", error);
    return b;
}

static void replay_through(const kvc_backend *b, const char *isa, int threads) {
    char path[1024];
    support_corpus_path("spec-cases", path, sizeof path);
    char **dirs = NULL;
    int count = kvc_find_cases(path, &dirs);
    cr_assert_gt(count, 0, "no cases under %s", path);
    kvc_optimized_set_thread_work(0);
    omp_set_num_threads(threads);
    kvc_replay_options options = {.backend = b, .impl_name = isa, .policy = KVC_POLICY_EXACT, .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    for (int k = 0; k < count; k++) kvc_replay_case(dirs[k], &options, &totals, NULL);
    kvc_free_case_list(dirs, count);
    cr_assert_eq(totals.failed, 0, "FAIL %d of %d spec cases differ through the %s path at %d threads", totals.failed, count, isa, threads);
    cr_assert_eq(totals.passed, count);
}

Test(optimized_paths, avx512_replays_the_spec_cases, .timeout = 120) {
    const kvc_backend *b = path_or_skip("avx512", cpu_has_avx512());
    cr_expect_str_eq(b->name, "opt (avx512)");
    cr_expect_str_eq(kvc_optimized_isa(b), "avx512");
    replay_through(b, "opt-avx512", 1);
    replay_through(b, "opt-avx512", 4);
}

Test(optimized_paths, avx2_replays_the_spec_cases, .timeout = 120) {
    const kvc_backend *b = path_or_skip("avx2", cpu_has_avx2());
    cr_expect_str_eq(b->name, "opt (avx2)");
    cr_expect_str_eq(kvc_optimized_isa(b), "avx2");
    replay_through(b, "opt-avx2", 1);
    replay_through(b, "opt-avx2", 4);
}

Test(optimized_paths, opt_is_the_best_path_the_cpu_has) {
    unsetenv("KVCMP_MAX_CPU_ISA");
    char error[256] = "";
    const kvc_backend *b = kvc_optimized_backend_get(error, sizeof error);
    if (cpu_has_avx512()) cr_assert_str_eq(b ? b->name : error, "opt (avx512)");
    else if (cpu_has_avx2()) cr_assert_str_eq(b ? b->name : error, "opt (avx2)");
    else {
        cr_assert_null(b);
        cr_assert(strstr(error, "this CPU has neither") != NULL, "%s", error);
    }
    cr_expect(kvc_optimized_backend_is(b) == (b != NULL));
    cr_expect_not(kvc_optimized_backend_is(&kvc_reference_backend));
}

Test(optimized_paths, the_cap_limits_opt) {
    setenv("KVCMP_MAX_CPU_ISA", "AVX2", 1);
    char error[256] = "";
    const kvc_backend *b = kvc_backend_by_name("opt", error, sizeof error);
    if (cpu_has_avx2()) cr_expect_str_eq(b ? b->name : error, "opt (avx2)");
    else cr_expect_null(b);
    setenv("KVCMP_MAX_CPU_ISA", "none", 1);
    cr_expect_null(kvc_backend_by_name("opt", error, sizeof error));
    cr_expect(strstr(error, "KVCMP_MAX_CPU_ISA=none") != NULL, "%s", error);
    cr_expect_eq(kvc_optimized_cap_invalid(error, sizeof error), 0);
    unsetenv("KVCMP_MAX_CPU_ISA");
}

Test(optimized_paths, a_wrong_cap_is_an_error_naming_it) {
    setenv("KVCMP_MAX_CPU_ISA", "avx3", 1);
    char error[256] = "";
    cr_expect_null(kvc_optimized_backend_get(error, sizeof error));
    cr_expect(strstr(error, "KVCMP_MAX_CPU_ISA='avx3'") != NULL, "%s", error);
    cr_expect_eq(kvc_optimized_cap_invalid(error, sizeof error), 1);
    unsetenv("KVCMP_MAX_CPU_ISA");
}

Test(optimized_paths, unknown_path_names_are_refused) {
    char error[256] = "";
    cr_expect_null(kvc_backend_by_name("opt-sse2", error, sizeof error));
    cr_expect(strstr(error, "no path 'sse2'") != NULL, "%s", error);
}

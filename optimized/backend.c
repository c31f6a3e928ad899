/* The optimized backend table, offered only on a CPU with the AVX-512
 * subsets its files are compiled for. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "optimized/optimized.h"
#include "optimized/stages.h"

static const kvc_backend optimized_backend = {
    .name = "opt",
    .v4_save_partial_states = opt_v4_save_partial_states,
    .v4_compress = opt_v4_compress,
    .v41_save_compress_norm = opt_v41_save_compress_norm,
    .v41_rope_quant_insert = opt_v41_rope_quant_insert,
    .v41_rope_plain_insert = opt_v41_rope_plain_insert,
};

double opt_nanoseconds_per_thread = OPT_NANOSECONDS_PER_THREAD;
double opt_nanoseconds_per_wake = OPT_NANOSECONDS_PER_WAKE;

static int sleeping_threads(const char *policy) { return policy && strcasecmp(policy, "passive") == 0; }
double opt_thread_work_for_policy(const char *policy) {
    return sleeping_threads(policy) ? OPT_NANOSECONDS_PER_THREAD : OPT_NANOSECONDS_PER_SPINNING_THREAD;
}
double opt_wake_cost_for_policy(const char *policy) { return sleeping_threads(policy) ? OPT_NANOSECONDS_PER_WAKE : 0; }

/* libgomp reads OMP_WAIT_POLICY once, at load; so does this. */
__attribute__((constructor)) static void thread_rule_for_the_wait_policy(void) {
    const char *policy = getenv("OMP_WAIT_POLICY");
    opt_nanoseconds_per_thread = opt_thread_work_for_policy(policy);
    opt_nanoseconds_per_wake = opt_wake_cost_for_policy(policy);
}

void kvc_optimized_set_thread_work(double nanoseconds) { opt_nanoseconds_per_thread = nanoseconds; }
double kvc_optimized_thread_work(void) { return opt_nanoseconds_per_thread; }

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size) {
    /* Checked before any AVX-512 instruction runs: this file only
     * dispatches, the stages execute the wide instructions. */
    __builtin_cpu_init();
    static const char *const required[] = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"};
    int available[] = {
        __builtin_cpu_supports("avx512f"), __builtin_cpu_supports("avx512bw"), __builtin_cpu_supports("avx512vl"),
        __builtin_cpu_supports("avx512dq"), __builtin_cpu_supports("fma"),
    };
    for (size_t i = 0; i < sizeof available / sizeof available[0]; i++)
        if (!available[i]) {
            if (error && error_size)
                snprintf(error, error_size, "the optimized backend needs %s, which this CPU lacks", required[i]);
            return NULL;
        }
    return &optimized_backend;
}

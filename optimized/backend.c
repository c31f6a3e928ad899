/* The optimized backend's dispatch: which ISA's kernels run (kit.h).
 * Compiled for the baseline ISA, never with AVX-512 or AVX2 flags, so
 * that nothing here executes a wide instruction before the CPU has been
 * asked (GCC may use them anywhere in a file compiled with them, even
 * inside the CPU check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "optimized/kit.h"
#include "optimized/optimized.h"
#include "optimized/stages.h"
#include "optimized/vector_arrays.h"

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
void kvc_optimized_set_team_rule(int spinning) { opt_nanoseconds_per_wake = spinning ? 0 : OPT_NANOSECONDS_PER_WAKE; }
int kvc_optimized_team_rule(void) { return opt_nanoseconds_per_wake <= 0; }
double kvc_optimized_thread_work(void) { return opt_nanoseconds_per_thread; }

/* ---- the paths, best first ---- */

typedef struct {
    const char *isa;
    const char *const *features; /* what the CPU must have, NULL-terminated */
    const opt_kit *kit;          /* NULL: not built for this architecture */
} opt_path;

static const char *const avx512_features[] = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", NULL};
static const char *const avx2_features[] = {"avx2", "fma", NULL};
static const opt_path paths[] = {
#if OPT_HAVE_AVX512
    {"avx512", avx512_features, &opt_avx512_kit},
#else
    {"avx512", avx512_features, NULL},
#endif
#if OPT_HAVE_AVX2
    {"avx2", avx2_features, &opt_avx2_kit},
#else
    {"avx2", avx2_features, NULL},
#endif
};
#define PATH_COUNT ((int)(sizeof paths / sizeof paths[0]))

static const opt_path *path_named(const char *isa) {
    for (int i = 0; i < PATH_COUNT; i++)
        if (strcasecmp(paths[i].isa, isa) == 0) return &paths[i];
    return NULL;
}

/* The first feature of p this CPU lacks, NULL when it has them all. */
static const char *missing_feature(const opt_path *p) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    for (const char *const *f = p->features; *f; f++) {
        /* __builtin_cpu_supports takes a literal: one case per name. */
        int has = strcmp(*f, "avx512f") == 0    ? __builtin_cpu_supports("avx512f")
                  : strcmp(*f, "avx512bw") == 0 ? __builtin_cpu_supports("avx512bw")
                  : strcmp(*f, "avx512vl") == 0 ? __builtin_cpu_supports("avx512vl")
                  : strcmp(*f, "avx512dq") == 0 ? __builtin_cpu_supports("avx512dq")
                  : strcmp(*f, "avx2") == 0     ? __builtin_cpu_supports("avx2")
                  : strcmp(*f, "fma") == 0      ? __builtin_cpu_supports("fma")
                                                : 0;
        if (!has) return *f;
    }
    return NULL;
#else
    return p->features[0];
#endif
}

static const opt_kit *kit_of(const opt_path *p, char *error, size_t error_size) {
    if (!p->kit) {
        if (error && error_size) snprintf(error, error_size, "the optimized backend's %s path is not in this build (x86-64 only)", p->isa);
        return NULL;
    }
    const char *missing = missing_feature(p);
    if (missing) {
        if (error && error_size) snprintf(error, error_size, "the optimized backend's %s path needs %s, which this CPU lacks", p->isa, missing);
        return NULL;
    }
    return p->kit;
}

/* The best path this CPU has at or below KVCMP_MAX_CPU_ISA. */
static const opt_kit *best_kit(char *error, size_t error_size) {
    const char *cap = getenv("KVCMP_MAX_CPU_ISA");
    int first = 0;
    if (cap && *cap) {
        if (strcasecmp(cap, "none") == 0 || strcasecmp(cap, "scalar") == 0) {
            if (error && error_size) snprintf(error, error_size, "KVCMP_MAX_CPU_ISA=%s turns the optimized backend off", cap);
            return NULL;
        }
        const opt_path *p = path_named(cap);
        if (!p) {
            if (error && error_size)
                snprintf(error, error_size, "KVCMP_MAX_CPU_ISA='%.40s' is not an ISA kvcmp knows (avx512, avx2 or none); unset it or name one", cap);
            return NULL;
        }
        first = (int)(p - paths);
    }
    char why[256] = "";
    for (int i = first; i < PATH_COUNT; i++) {
        const opt_kit *k = kit_of(&paths[i], why, sizeof why);
        if (k) return k;
    }
#if defined(__x86_64__)
    if (error && error_size)
        snprintf(error, error_size, "the optimized backend needs AVX-512 (avx512f/bw/vl/dq) or AVX2 with FMA, and this CPU has neither%s",
                 first ? " at or below KVCMP_MAX_CPU_ISA" : "");
#else
    if (error && error_size) snprintf(error, error_size, "the optimized backend is x86-64 only (AVX-512 or AVX2); this build has the reference alone");
#endif
    return NULL;
}

int kvc_optimized_cap_invalid(char *error, size_t error_size) {
    const char *cap = getenv("KVCMP_MAX_CPU_ISA");
    if (!cap || !*cap || strcasecmp(cap, "none") == 0 || strcasecmp(cap, "scalar") == 0 || path_named(cap)) return 0;
    return best_kit(error, error_size) == NULL;
}

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size) {
    const opt_kit *k = best_kit(error, error_size);
    return k ? &k->backend : NULL;
}

const kvc_backend *kvc_optimized_backend_for(const char *isa, char *error, size_t error_size) {
    const opt_path *p = path_named(isa);
    if (!p) {
        if (error && error_size) snprintf(error, error_size, "the optimized backend has no path '%.40s' (opt-avx512 or opt-avx2)", isa);
        return NULL;
    }
    const opt_kit *k = kit_of(p, error, error_size);
    return k ? &k->backend : NULL;
}

int kvc_optimized_backend_is(const kvc_backend *b) {
    for (int i = 0; b && i < PATH_COUNT; i++)
        if (paths[i].kit && b == &paths[i].kit->backend) return 1;
    return 0;
}

const char *kvc_optimized_isa(const kvc_backend *b) {
    for (int i = 0; b && i < PATH_COUNT; i++)
        if (paths[i].kit && b == &paths[i].kit->backend) return paths[i].isa;
    return NULL;
}

void kvc_optimized_describe(char *out, size_t size) {
    char why[256] = "";
    const kvc_backend *best = kvc_optimized_backend_get(why, sizeof why);
    int n = snprintf(out, size, "optimized backend: %s", best ? best->name : why);
    for (int i = 0; i < PATH_COUNT && n >= 0 && (size_t)n < size; i++) {
        char lacks[256];
        if (!kit_of(&paths[i], lacks, sizeof lacks)) n += snprintf(out + n, size - (size_t)n, "; %s", lacks);
    }
}

/* ---- the array forms (vector_arrays.h), on the best path ---- */

static const opt_kit *array_kit(void) {
    static const opt_kit *chosen; /* the same answer every time: the CPU and the cap are read once */
    const opt_kit *k = chosen ? chosen : (chosen = best_kit(NULL, 0));
    if (!k) {
        char why[256];
        best_kit(why, sizeof why);
        fprintf(stderr, "kvcmp: %s; the vector array functions need it (call kvc_optimized_backend_get first)\n", why);
        abort();
    }
    return k;
}
void opt_exp_array(const float *x, float *y, int64_t n) { array_kit()->exp_array(x, y, n); }
void opt_exp_in_range_array(const float *x, float *y, int64_t n) { array_kit()->exp_in_range_array(x, y, n); }
void opt_bf16_array(const float *x, uint16_t *y, int64_t n) { array_kit()->bf16_array(x, y, n); }
void opt_fp8_array(const float *x, uint8_t *y, int64_t n) { array_kit()->fp8_array(x, y, n); }
void opt_fp8_in_range_array(const float *x, uint8_t *y, int64_t n) { array_kit()->fp8_in_range_array(x, y, n); }
void opt_fp8_scaled_bf16_array(const uint16_t *z, int scale_exp, uint8_t *codes, uint8_t *below_normal, int64_t n) {
    array_kit()->fp8_scaled_bf16_array(z, scale_exp, codes, below_normal, n);
}
uint8_t opt_quantize_bf16_block_ue8m0(const uint16_t *z, uint8_t *codes) { return array_kit()->quantize_bf16_block_ue8m0(z, codes); }
uint64_t opt_stream_read(const void *data, size_t bytes) { return array_kit()->stream_read(data, bytes); }
void opt_stream_copy(void *destination, const void *source, size_t bytes) { array_kit()->stream_copy(destination, source, bytes); }
void opt_stream_write(void *destination, size_t bytes, int non_temporal) { array_kit()->stream_write(destination, bytes, non_temporal); }
float opt_sum_of_squares(const float *values, int count) { return array_kit()->sum_of_squares(values, count); }

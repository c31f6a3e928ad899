/* The data kvcmp bench's parts share: what a scenario is, what was
 * measured of the machine, a scenario's floors and timings, and a whole
 * run's results, which bench.c fills in and output.c writes out
 * (harness/bench/output.h). */
#ifndef KVCMP_HARNESS_BENCH_TYPES_H
#define KVCMP_HARNESS_BENCH_TYPES_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_THREAD_COUNTS 16
#define BENCH_MAX_CANDIDATES 8
/* The reference, the optimized backend, then the candidates. */
#define BENCH_MAX_IMPLS (2 + BENCH_MAX_CANDIDATES)
#define BENCH_REFERENCE 0
#define BENCH_OPTIMIZED 1

/* A scenario: a name, its --shape description, its parameters (struct
 * bench_shape, harness/bench/bench.h). */
typedef struct bench_shape bench_shape;
typedef struct {
    const char *name;
    const char *shape;
    const bench_shape *params;
} bench_scenario;

/* Streaming bandwidth in bytes per second; copy counts read + written
 * bytes.  Stores: the faster of streaming and ordinary stores. */
typedef struct {
    double read, write, copy;
    int write_non_temporal, copy_non_temporal;   /* which stores won */
} bench_bandwidth;

/* The last-level cache: the largest reading of sysfs (cpu0's
 * cache/indexN/size) and cpuid, or an assumed size (bench_llc_detect). */
typedef struct {
    size_t bytes;                     /* the size the bench uses */
    size_t sysfs_bytes, cpuid_bytes;  /* the readings, 0 when none */
    char source[64];                  /* "sysfs", "cpuid leaf 4", ..., or "assumed: ..." */
} bench_llc;

typedef struct {
    char commit[64];
    char cpu_model[128];
    int processors;
    bench_llc llc;
    size_t mem_available;
    char compiler[128];
    const char *flags;
    char transparent_huge_pages[64];
    char date[32];
    double load_average;
    const char *omp_wait_policy;
} bench_metadata;

/* A scenario's floor at a thread count: the larger of
 *  compute: the optimized backend's own time for the scenario's work on
 *    data that stays in the caches, measured on two copies of the scenario
 *    small enough for L2 (BENCH_RESIDENT_BYTES of compulsory traffic) at
 *    one thread, a fixed cost per call plus a cost per unit, the units
 *    shared perfectly among min(threads, processors) threads;
 *  memory: a walk over the scenario's compulsory bytes at the thread
 *    count, its reads in row order and then its writes (no overlap
 *    assumed), over buffers of the scenario's sizes walked again and
 *    again as the scenario is: from memory when the scenario does not fit
 *    in the last-level cache, from the cache where it does (a scenario
 *    run over and over finds its data there too). */
#define BENCH_RESIDENT_BYTES ((double)(512 << 10))

typedef struct {
    const char *unit;                       /* "tokens" or "requests" */
    int64_t units;                          /* the scenario's */
    int64_t small_units, large_units;       /* the two cache-resident copies' */
    double small_bytes, large_bytes;        /* their compulsory bytes */
    double small_seconds, large_seconds;    /* the optimized backend's min time on each, one thread */
    double fixed_seconds, unit_seconds;     /* the line through the two (bench_resident_fit) */
} bench_resident;

typedef struct {
    int threads;
    double compute_seconds, memory_seconds;
} bench_floor;
static inline double bench_floor_seconds(const bench_floor *f) {
    return f->memory_seconds > f->compute_seconds ? f->memory_seconds : f->compute_seconds;
}

/* ---- A run's results: bench.c fills them in, output.c writes them out ------- */

typedef enum { OUTPUT_REFERENCE, OUTPUT_MATCHES, OUTPUT_DIFFERS, OUTPUT_FAILED, OUTPUT_NOT_OFFERED } bench_verdict;

typedef struct {
    int present;             /* timed at this thread count */
    int runs;
    double min_seconds, median_seconds;
    bench_verdict verdict;
    int64_t differing_bytes;
    char detail[480];        /* the first difference, or the failure */
} bench_timing;

typedef struct {
    const bench_scenario *sc;
    int64_t tokens;
    double read_bytes, written_bytes;
    bench_resident resident;
    bench_floor floors[BENCH_MAX_THREAD_COUNTS];
    bench_timing timings[BENCH_MAX_IMPLS][BENCH_MAX_THREAD_COUNTS];
} bench_result;

typedef struct {
    int threads;
    bench_bandwidth dram;
    double exp_vectors_per_second;
} bench_machine;

typedef struct {
    bench_metadata metadata;
    int num_threads;
    int threads[BENCH_MAX_THREAD_COUNTS];
    size_t stream_bytes;
    const char *stream_bytes_why;   /* how the size was chosen */
    int huge_pages;
    int runs, reference_runs;
    bench_machine machine[BENCH_MAX_THREAD_COUNTS];
    int num_impls;
    const char *impl_names[BENCH_MAX_IMPLS];
    int num_results;
    bench_result *results;
} bench_run;

#endif

/* kvcmp bench, shared between its parts: the scenarios (scenarios.c),
 * the machine (machine.c), the floors (floor.c), the tables and the JSON
 * (output.c) and the command that times every implementation side by
 * side (bench.c). */
#ifndef KVCMP_HARNESS_BENCH_H
#define KVCMP_HARNESS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kvcmp/kvcmp.h"

#define BENCH_MAX_ALLOCATIONS 16
#define BENCH_MAX_OUTPUTS 2
#define BENCH_MAX_THREAD_COUNTS 16
#define BENCH_MAX_CANDIDATES 8
/* The reference, the optimized backend, then the candidates. */
#define BENCH_MAX_IMPLS (2 + BENCH_MAX_CANDIDATES)
#define BENCH_REFERENCE 0
#define BENCH_OPTIMIZED 1
#define BENCH_MAX_RUNS 1000
#define BENCH_MAX_SCENARIOS 16

/* ---- Scenarios (scenarios.c) ------------------------------------------- */

typedef enum { STAGE_V4_SAVE, STAGE_V4_COMPRESS, STAGE_V4_FORWARD, STAGE_V41_NORM, STAGE_V41_QUANT_INSERT } bench_stage;

/* A buffer a stage writes (and, for a state cache, may read back). */
typedef struct {
    const char *name;
    void *data;
    size_t bytes;
} bench_region;

typedef struct {
    bench_stage stage;
    kvc_v4_save_args save;
    kvc_v4_compress_args compress;
    kvc_v41_norm_args norm;
    kvc_v41_insert_args insert;
    int64_t tokens;          /* tokens in the batch (tokens/s counts these) */
    /* The compulsory traffic of one call: every input byte it must read
     * once, every output byte it writes. */
    double read_bytes, written_bytes;
    bench_region outputs[BENCH_MAX_OUTPUTS];
    int num_outputs;
    void *allocations[BENCH_MAX_ALLOCATIONS];
    int num_allocations;
    int huge_pages;
} scenario_data;

/* A scenario the user describes (--shape STAGE:KEY=VALUE,...). */
typedef enum { SHAPE_V4_COMPRESS, SHAPE_V4_SAVE, SHAPE_V4_DECODE, SHAPE_V41_NORM, SHAPE_V41_INSERT } bench_shape_stage;
typedef struct {
    bench_shape_stage stage;
    int64_t d, r, tokens, requests, block, padding, context, start;
} bench_shape;

typedef struct {
    const char *name;
    const char *shape;
    const bench_shape *params;
} bench_scenario;

/* Parses a --shape value; 0, or -1 with why (the whole message, naming
 * the key that is wrong).  description gets every key with its value. */
int bench_shape_parse(const char *spec, bench_shape *shape, char *description, size_t description_size, char *why, size_t size);
/* The stages and keys, for the usage text. */
extern const char bench_shape_help[];

extern const bench_scenario bench_scenarios[];
extern const int bench_num_scenarios;

/* What a scenario's work is counted in: its requests when it has several
 * (each with its own tokens), else its tokens; copies of it are made in
 * steps of `granularity` units. */
typedef struct {
    int64_t count, granularity;
    const char *name;   /* "tokens" or "requests" */
} bench_units;
bench_units bench_scenario_units(const bench_scenario *sc);
/* Builds the scenario's inputs (the same bytes on every run of the bench). */
void bench_scenario_setup(const bench_scenario *sc, int huge_pages, scenario_data *s);
/* The same with `units` of its units in place of its own count. */
void bench_scenario_setup_units(const bench_scenario *sc, int64_t units, int huge_pages, scenario_data *s);
void bench_scenario_free(scenario_data *s);
/* Whether the backend offers every stage the scenario calls. */
int bench_scenario_offered(const kvc_backend *backend, const scenario_data *s);
int bench_scenario_run(const kvc_backend *backend, const scenario_data *s, kvc_error *err);

/* ---- The machine (machine.c) ----------------------------------------------- */

/* 64-byte aligned, zeroed; 2 MiB aligned from 2 MiB on, with transparent
 * huge pages asked for (madvise) when huge_pages is set and refused
 * otherwise, so that the option decides.  Exits with a message when out
 * of memory. */
void *bench_buffer_alloc(size_t bytes, int huge_pages);

/* Streaming bandwidth in bytes per second; copy counts read + written
 * bytes.  Stores: the faster of streaming and ordinary stores. */
typedef struct {
    double read, write, copy;
    int write_non_temporal, copy_non_temporal;   /* which stores won */
} bench_bandwidth;

/* Read over read_bytes, write over write_bytes, copy copy_bytes to
 * copy_bytes (a size 0 skips that loop and reports 0), split over
 * threads[ti] threads into out[ti], best of `passes` after one warm-up. */
void bench_measure_bandwidth(const int *threads, int num_threads, size_t read_bytes, size_t write_bytes, size_t copy_bytes, int passes,
                             int huge_pages, bench_bandwidth *out);
/* Buffers for the loops over one scenario's byte counts, kept for the
 * passes interleaved with its timed runs. */
typedef struct {
    uint8_t *source, *destination;
    size_t read_bytes, write_bytes, copy_bytes;
} bench_stream_buffers;
bench_stream_buffers bench_stream_buffers_new(size_t read_bytes, size_t write_bytes, size_t copy_bytes, int huge_pages);
void bench_stream_buffers_free(bench_stream_buffers *b);
/* `passes` timed passes of every loop at `threads` (after a warm-up walk
 * when warm_up); each rate in *best rises where this one is faster. */
void bench_stream_measure(const bench_stream_buffers *b, int threads, int passes, int warm_up, bench_bandwidth *best);
/* The seconds of one walk over b's read_bytes (read, row order) and then
 * its write_bytes (written; the faster of streaming and ordinary stores)
 * at `threads` threads, best of `passes` (after a warm-up walk when
 * warm_up), each thread's rate taken from its own best pass. */
double bench_read_then_write_seconds(const bench_stream_buffers *b, int threads, int passes, int warm_up);
/* 16-lane exact exps per second at `threads` threads (the optimized
 * backend's cheapest exp, over L1-resident data), best of `passes`. */
double bench_exp_vectors_per_second(int threads, int passes);
/* The last-level cache: the largest reading of sysfs (cpu0's
 * cache/indexN/size) and cpuid (leaf 4 on Intel, 0x8000001D or else 0x80000006
 * on AMD); when both read 0 (some VMs), BENCH_ASSUMED_LLC_BYTES, large
 * rather than small, so that the bandwidth loops do not measure a cache. */
#define BENCH_ASSUMED_LLC_BYTES ((size_t)256 << 20)
#define BENCH_MIN_STREAM_BYTES ((size_t)1 << 20)
/* The default stream buffer is at most MemAvailable / this (two buffers). */
#define BENCH_STREAM_MEMORY_SHARE 8
typedef struct {
    size_t bytes;                     /* the size the bench uses */
    size_t sysfs_bytes, cpuid_bytes;  /* the readings, 0 when none */
    char source[64];                  /* "sysfs", "cpuid leaf 4", ..., or "assumed: ..." */
} bench_llc;
/* The largest data or unified cache under CACHE_DIR/index*, 0 when none. */
size_t bench_llc_sysfs_bytes(const char *cache_dir);
/* The largest data or unified cache cpuid describes, 0 when none; *leaf
 * names the leaf read. */
size_t bench_llc_cpuid_bytes(const char **leaf);
void bench_llc_choose(size_t sysfs_bytes, size_t cpuid_bytes, const char *cpuid_leaf, bench_llc *llc);
void bench_llc_detect(bench_llc *llc);
/* /proc/meminfo's MemAvailable in bytes, 0 when unknown. */
size_t bench_mem_available_bytes(void);
/* The default --stream-bytes: 4 x the last-level cache (a reading of 0:
 * 4 x BENCH_ASSUMED_LLC_BYTES), at most MemAvailable /
 * BENCH_STREAM_MEMORY_SHARE (rounded down to MiB; 0: unknown, no cap;
 * *capped says whether it cut), at least BENCH_MIN_STREAM_BYTES. */
size_t bench_default_stream_bytes(size_t llc_bytes, size_t mem_available, int *capped);

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

void bench_read_metadata(bench_metadata *m);

/* ---- Floors (floor.c) --------------------------------------------------------- */

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

/* The units of the two resident copies of a scenario of `units` units
 * (steps of granularity) and `bytes` compulsory bytes: the larger as
 * many steps as fit BENCH_RESIDENT_BYTES, at least two; the smaller half
 * of it, at least one step. */
void bench_resident_sizes(int64_t units, int64_t granularity, double bytes, int64_t *small_units, int64_t *large_units);
/* The fixed and per-unit cost through the two timings, neither below 0. */
void bench_resident_fit(bench_resident *r);
double bench_compute_floor_seconds(const bench_resident *r, int threads, int processors);
static inline double bench_floor_seconds(const bench_floor *f) {
    return f->memory_seconds > f->compute_seconds ? f->memory_seconds : f->compute_seconds;
}

/* ---- Results (bench.c) and their output (output.c) -------------------------- */

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

void bench_print_machine(const bench_run *run);
void bench_print_tables(const bench_run *run);
/* 0, or 1 with a message naming the file when it cannot be written. */
int bench_write_json(const char *path, const bench_run *run);
/* The rows of the times table as CSV, in the table's order, after this
 * header; a time column is empty where the implementation was not timed;
 * the floors are those of the row's thread count (the reference's: one
 * thread); ratio and fraction (floor over min time) are plain numbers
 * (1.25, 0.43), output the verdict
 * (reference, matches, DIFFERS, FAILED, not offered), detail what differs
 * or failed.  0, or 1 with a message naming the file. */
#define BENCH_CSV_HEADER                                                                                                         \
    "scenario,threads,implementation,min_ms,median_ms,runs,time_over_opt,compute_floor_ms,memory_floor_ms,floor_ms,fraction,output," \
    "detail"
int bench_write_csv(const char *path, const bench_run *run);

#endif

/* kvcmp bench, shared between its parts: the scenarios (scenarios.c),
 * the machine (machine.c), the floors (floor.c) and the command that
 * times every implementation side by side (bench.c); the data they
 * share with the tables and the JSON (output.c) is in bench_types.h. */
#ifndef KVCMP_HARNESS_BENCH_H
#define KVCMP_HARNESS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "harness/bench/bench_types.h"
#include "kvcmp/kvcmp.h"

#define BENCH_MAX_ALLOCATIONS 16
#define BENCH_MAX_OUTPUTS 2
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
struct bench_shape {
    bench_shape_stage stage;
    int64_t d, r, tokens, requests, block, padding, context, start;
};

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

void bench_read_metadata(bench_metadata *m);

/* ---- Floors (floor.c; what a floor is: bench_types.h) --------------------------- */

/* The units of the two resident copies of a scenario of `units` units
 * (steps of granularity) and `bytes` compulsory bytes: the larger as
 * many steps as fit BENCH_RESIDENT_BYTES, at least two; the smaller half
 * of it, at least one step. */
void bench_resident_sizes(int64_t units, int64_t granularity, double bytes, int64_t *small_units, int64_t *large_units);
/* The fixed and per-unit cost through the two timings, neither below 0. */
void bench_resident_fit(bench_resident *r);
double bench_compute_floor_seconds(const bench_resident *r, int threads, int processors);

#endif

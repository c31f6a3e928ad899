/* kvcmp bench: what this machine can do at best, measured in the same
 * run as the stages, and what the run was (commit, CPU, compiler).
 *
 * Bandwidth: streaming loops with the optimized backend's AVX-512 kernels
 * (software prefetch on reads; for stores the faster of streaming stores,
 * which skip the read for ownership, and ordinary ones, which win while a
 * buffer stays in the caches).  The exp throughput: the backend's fast
 * exact exp without its range test, the cheapest exact exp any stage
 * uses, over L1-resident data with independent iterations. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "optimized/vector_arrays.h"
#include "harness/bench/bench.h"
#include "harness/report/run_info.h"


#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define CACHE_LINE 64
/* Small buffers are walked this many bytes per timed pass in all, so
 * that the wake-up of the threads does not dominate a pass. */
#define MIN_BYTES_PER_PASS ((size_t)64 << 20)
#define EXP_FLOATS_PER_THREAD 4096
#define EXP_REPEATS 64

void *bench_buffer_alloc(size_t bytes, int huge_pages) {
    size_t alignment = bytes >= HUGE_PAGE_BYTES ? HUGE_PAGE_BYTES : CACHE_LINE;
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void *p = aligned_alloc(alignment, rounded ? rounded : alignment);
    if (!p) {
        fprintf(stderr, "kvcmp bench: out of memory (%zu bytes); run fewer scenarios (--scenario) or a smaller --stream-bytes\n", bytes);
        exit(2);
    }
    /* Before the first touch, so that the pages are (or are not) huge. */
    if (alignment == HUGE_PAGE_BYTES) madvise(p, rounded, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(p, 0, rounded ? rounded : alignment);
    return p;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Thread `thread` of `threads` owns [first, first + length) of `bytes`,
 * cut at cache lines (streaming stores need 64-byte aligned starts). */
static void thread_share(size_t bytes, int thread, int threads, size_t *first, size_t *length) {
    size_t lines = (bytes + CACHE_LINE - 1) / CACHE_LINE;
    size_t per_thread = (lines + (size_t)threads - 1) / (size_t)threads * CACHE_LINE;
    *first = per_thread * (size_t)thread;
    if (*first > bytes) *first = bytes;
    *length = *first + per_thread <= bytes ? per_thread : bytes - *first;
}

static volatile uint64_t read_sink;

typedef enum { LOOP_READ, LOOP_WRITE, LOOP_WRITE_NT, LOOP_COPY, LOOP_COPY_NT } stream_loop;

/* Seconds for one walk over `bytes` at the threads' combined best rate:
 * each thread times its own share, pass by pass (all starting together
 * after a barrier), and keeps its best; the rates add up.  On a busy
 * machine a pass in which one thread lost its core is slow for that
 * thread only, and its other passes still count; the sum can only
 * overstate what the threads do together, which keeps the bound a bound.
 * Each pass repeats the walk until MIN_BYTES_PER_PASS are covered. */
static double time_loop(stream_loop loop, int threads, uint8_t *source, uint8_t *destination, size_t bytes, int passes,
                        int warm_up) {
    int repeats = bytes >= MIN_BYTES_PER_PASS ? 1 : (int)(MIN_BYTES_PER_PASS / bytes);
    double bytes_per_second = 0;
    uint64_t sum = 0;
    omp_set_num_threads(threads);
#pragma omp parallel reduction(+ : sum, bytes_per_second)
    {
        size_t first, length;
        thread_share(bytes, omp_get_thread_num(), omp_get_num_threads(), &first, &length);
        double best = 1e30;
        for (int pass = warm_up ? 0 : 1; pass <= passes; pass++) {
#pragma omp barrier
            double start = now_seconds();
            for (int r = 0; r < repeats && length > 0; r++) {
                if (loop == LOOP_READ) sum += opt_stream_read(source + first, length);
                else if (loop == LOOP_WRITE || loop == LOOP_WRITE_NT) opt_stream_write(destination + first, length, loop == LOOP_WRITE_NT);
                else if (loop == LOOP_COPY) memcpy(destination + first, source + first, length);
                else opt_stream_copy(destination + first, source + first, length);
            }
            double seconds = (now_seconds() - start) / repeats;
            if (pass > 0 && seconds < best) best = seconds;   /* pass 0 warms up */
        }
        if (length > 0) bytes_per_second += (double)length / best;
    }
    read_sink = sum;   /* the sum is used: the read loop cannot be optimised away */
    return (double)bytes / bytes_per_second;
}

bench_stream_buffers bench_stream_buffers_new(size_t read_bytes, size_t write_bytes, size_t copy_bytes, int huge_pages) {
    bench_stream_buffers b = {NULL, NULL, read_bytes, write_bytes, copy_bytes};
    size_t source_bytes = read_bytes > copy_bytes ? read_bytes : copy_bytes;
    size_t destination_bytes = write_bytes > copy_bytes ? write_bytes : copy_bytes;
    /* Zeroed, hence touched: no page faults inside the timed loops. */
    b.source = bench_buffer_alloc(source_bytes, huge_pages);
    b.destination = bench_buffer_alloc(destination_bytes, huge_pages);
    return b;
}

void bench_stream_buffers_free(bench_stream_buffers *b) {
    free(b->source);
    free(b->destination);
    b->source = b->destination = NULL;
}

/* The faster of two store kinds: bytes per second, and whether streaming won. */
static void keep_faster_stores(double bytes_per_pass, double ordinary, double streaming, double *best, int *streaming_won) {
    double rate = bytes_per_pass / (streaming < ordinary ? streaming : ordinary);
    if (rate <= *best) return;
    *best = rate;
    *streaming_won = streaming < ordinary;
}

void bench_stream_measure(const bench_stream_buffers *b, int threads, int passes, int warm_up, bench_bandwidth *best) {
    uint8_t *source = b->source, *destination = b->destination;
    if (b->read_bytes) {
        double rate = (double)b->read_bytes / time_loop(LOOP_READ, threads, source, destination, b->read_bytes, passes, warm_up);
        if (rate > best->read) best->read = rate;
    }
    if (b->write_bytes)
        keep_faster_stores((double)b->write_bytes, time_loop(LOOP_WRITE, threads, source, destination, b->write_bytes, passes, warm_up),
                           time_loop(LOOP_WRITE_NT, threads, source, destination, b->write_bytes, passes, warm_up), &best->write,
                           &best->write_non_temporal);
    if (b->copy_bytes)
        keep_faster_stores(2.0 * (double)b->copy_bytes, time_loop(LOOP_COPY, threads, source, destination, b->copy_bytes, passes, warm_up),
                           time_loop(LOOP_COPY_NT, threads, source, destination, b->copy_bytes, passes, warm_up), &best->copy,
                           &best->copy_non_temporal);
}

void bench_measure_bandwidth(const int *threads, int num_threads, size_t read_bytes, size_t write_bytes, size_t copy_bytes, int passes,
                             int huge_pages, bench_bandwidth *out) {
    bench_stream_buffers b = bench_stream_buffers_new(read_bytes, write_bytes, copy_bytes, huge_pages);
    for (int ti = 0; ti < num_threads; ti++) {
        memset(&out[ti], 0, sizeof out[ti]);
        bench_stream_measure(&b, threads[ti], passes, 1, &out[ti]);
    }
    bench_stream_buffers_free(&b);
}

/* Per thread, as for the bandwidth: each thread's best pass, the rates added. */
double bench_exp_vectors_per_second(int threads, int passes) {
    float *x = bench_buffer_alloc((size_t)threads * EXP_FLOATS_PER_THREAD * 4, 0);
    float *y = bench_buffer_alloc((size_t)threads * EXP_FLOATS_PER_THREAD * 4, 0);
    /* Softmax arguments: spread over [-87, 0] like score - max. */
    for (size_t i = 0; i < (size_t)threads * EXP_FLOATS_PER_THREAD; i++) x[i] = -87.0f * (float)((i * 2654435761u) % 65536) / 65536.0f;
    double vectors_per_second = 0;
    omp_set_num_threads(threads);
#pragma omp parallel reduction(+ : vectors_per_second)
    {
        size_t offset = (size_t)omp_get_thread_num() * EXP_FLOATS_PER_THREAD;
        double best = 1e30;
        for (int pass = 0; pass <= passes; pass++) {
#pragma omp barrier
            double start = now_seconds();
            for (int r = 0; r < EXP_REPEATS; r++) opt_exp_in_range_array(x + offset, y + offset, EXP_FLOATS_PER_THREAD);
            double seconds = now_seconds() - start;
            if (pass > 0 && seconds < best) best = seconds;
        }
        vectors_per_second += EXP_REPEATS * (EXP_FLOATS_PER_THREAD / 16) / best;
    }
    free(x);
    free(y);
    return vectors_per_second;
}

/* "266240K" -> bytes. */
static size_t parse_cache_size(const char *text) {
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (*end == 'K') value <<= 10;
    else if (*end == 'M') value <<= 20;
    return (size_t)value;
}

/* The highest cache level of cpu0 that holds data. */
size_t bench_llc_bytes(void) {
    size_t best = 0;
    int best_level = 0;
    for (int index = 0; index < 16; index++) {
        char path[128], type[32] = "", size[32] = "";
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
        if ((f = fopen(path, "r"))) { if (fscanf(f, "%31s", type) != 1) type[0] = 0; fclose(f); }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if ((f = fopen(path, "r"))) { if (fscanf(f, "%31s", size) != 1) size[0] = 0; fclose(f); }
        if (strcmp(type, "Instruction") != 0 && level > best_level) {
            best_level = level;
            best = parse_cache_size(size);
        }
    }
    return best;
}

void bench_read_metadata(bench_metadata *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->commit, sizeof m->commit, "%s", kvc_build_commit());
    kvc_cpu_model(m->cpu_model, sizeof m->cpu_model);
    m->processors = omp_get_num_procs();
    m->llc_bytes = bench_llc_bytes();
    snprintf(m->compiler, sizeof m->compiler, "%s", kvc_build_compiler());
    m->flags = kvc_build_flags();
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    snprintf(m->transparent_huge_pages, sizeof m->transparent_huge_pages, "unknown");
    if (f) {
        if (!fgets(m->transparent_huge_pages, sizeof m->transparent_huge_pages, f)) m->transparent_huge_pages[0] = 0;
        m->transparent_huge_pages[strcspn(m->transparent_huge_pages, "\n")] = 0;
        fclose(f);
    }
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    if ((f = fopen("/proc/loadavg", "r"))) {
        if (fscanf(f, "%lf", &m->load_average) != 1) m->load_average = 0;
        fclose(f);
    }
    m->omp_wait_policy = getenv("OMP_WAIT_POLICY");
}

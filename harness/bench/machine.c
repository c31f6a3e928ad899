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

/* The scenario's compulsory traffic as one walk: each thread reads its
 * share of read_bytes in row order, then writes its share of
 * written_bytes, with streaming stores or ordinary ones; the seconds of
 * the whole at the threads' combined best rate, as in time_loop. */
static double time_read_then_write(int threads, const uint8_t *source, uint8_t *destination, size_t read_bytes, size_t written_bytes,
                                   int non_temporal, int passes, int warm_up) {
    size_t bytes = read_bytes + written_bytes;
    int repeats = bytes >= MIN_BYTES_PER_PASS ? 1 : (int)(MIN_BYTES_PER_PASS / bytes);
    double bytes_per_second = 0;
    uint64_t sum = 0;
    omp_set_num_threads(threads);
#pragma omp parallel reduction(+ : sum, bytes_per_second)
    {
        size_t read_first, read_length, write_first, write_length;
        thread_share(read_bytes, omp_get_thread_num(), omp_get_num_threads(), &read_first, &read_length);
        thread_share(written_bytes, omp_get_thread_num(), omp_get_num_threads(), &write_first, &write_length);
        double best = 1e30;
        for (int pass = warm_up ? 0 : 1; pass <= passes; pass++) {
#pragma omp barrier
            double start = now_seconds();
            for (int r = 0; r < repeats; r++) {
                sum += opt_stream_read(source + read_first, read_length);
                opt_stream_write(destination + write_first, write_length, non_temporal);
            }
            double seconds = (now_seconds() - start) / repeats;
            if (pass > 0 && seconds < best) best = seconds;   /* pass 0 warms up */
        }
        if (read_length + write_length > 0) bytes_per_second += (double)(read_length + write_length) / best;
    }
    read_sink = sum;
    return (double)bytes / bytes_per_second;
}

double bench_read_then_write_seconds(const bench_stream_buffers *b, int threads, int passes, int warm_up) {
    double ordinary = time_read_then_write(threads, b->source, b->destination, b->read_bytes, b->write_bytes, 0, passes, warm_up);
    double streaming = time_read_then_write(threads, b->source, b->destination, b->read_bytes, b->write_bytes, 1, passes, warm_up);
    return ordinary < streaming ? ordinary : streaming;
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

/* "266240K" -> bytes; 0 for anything else. */
static size_t parse_cache_size(const char *text) {
    char *end;
    if (text[0] < '0' || text[0] > '9') return 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (*end == 'K') value <<= 10;
    else if (*end == 'M') value <<= 20;
    else if (*end == 'G') value <<= 30;
    else if (*end != 0) return 0;
    return (size_t)value;
}

static int read_word(const char *dir, int index, const char *file, char *word, size_t size) {
    char path[512], format[16];
    snprintf(path, sizeof path, "%s/index%d/%s", dir, index, file);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    snprintf(format, sizeof format, "%%%zus", size - 1);
    int ok = fscanf(f, format, word) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* The largest data or unified cache under DIR/index*: the last level
 * holds the most; 0 when none reads as a size. */
size_t bench_llc_sysfs_bytes(const char *cache_dir) {
    size_t best = 0;
    for (int index = 0; index < 64; index++) {
        char type[32] = "", size[32] = "";
        if (read_word(cache_dir, index, "size", size, sizeof size)) continue;
        if (read_word(cache_dir, index, "type", type, sizeof type) == 0 && strcmp(type, "Instruction") == 0) continue;
        size_t bytes = parse_cache_size(size);
        if (bytes > best) best = bytes;
    }
    return best;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* The largest data or unified cache of a deterministic cache-parameters
 * leaf (leaf 4 on Intel, 0x8000001D on AMD: the same layout). */
static size_t cpuid_cache_leaf(unsigned leaf) {
    size_t best = 0;
    for (unsigned sub = 0; sub < 16; sub++) {
        unsigned a, b, c, d;
        __cpuid_count(leaf, sub, a, b, c, d);
        unsigned type = a & 31;
        if (type == 0) break;          /* no more caches */
        if (type == 2) continue;       /* instruction */
        size_t bytes = (size_t)((b >> 22) + 1) * (((b >> 12) & 1023) + 1) * ((b & 4095) + 1) * ((size_t)c + 1);
        if (bytes > best) best = bytes;
    }
    return best;
}

size_t bench_llc_cpuid_bytes(const char **leaf) {
    unsigned max, b, c, d, vendor[3];
    *leaf = "cpuid";
    if (!__get_cpuid(0, &max, &vendor[0], &vendor[2], &vendor[1])) return 0;
    char name[13];
    memcpy(name, vendor, 12);
    name[12] = 0;
    if (strcmp(name, "GenuineIntel") == 0) {
        *leaf = "cpuid leaf 4";
        return max >= 4 ? cpuid_cache_leaf(4) : 0;
    }
    if (strcmp(name, "AuthenticAMD") != 0 && strcmp(name, "HygonGenuine") != 0) return 0;
    unsigned max_extended = __get_cpuid_max(0x80000000u, NULL), a = 0;
    c = d = 0;
    if (max_extended >= 0x80000001u) __get_cpuid(0x80000001u, &a, &b, &c, &d);
    if (max_extended >= 0x8000001Du && (c >> 22 & 1)) {   /* TopologyExtensions */
        *leaf = "cpuid 0x8000001D";
        size_t bytes = cpuid_cache_leaf(0x8000001Du);
        if (bytes) return bytes;
    }
    if (max_extended < 0x80000006u) return 0;
    /* L2 in KiB (ECX 31:16), L3 in 512 KiB units (EDX 31:18). */
    *leaf = "cpuid 0x80000006";
    c = d = 0;
    __get_cpuid(0x80000006u, &a, &b, &c, &d);
    size_t l2 = (size_t)(c >> 16) << 10, l3 = (size_t)(d >> 18) << 19;
    return l3 > l2 ? l3 : l2;
}
#else
size_t bench_llc_cpuid_bytes(const char **leaf) {
    *leaf = "cpuid";
    return 0;
}
#endif

void bench_llc_choose(size_t sysfs_bytes, size_t cpuid_bytes, const char *cpuid_leaf, bench_llc *llc) {
    memset(llc, 0, sizeof *llc);
    llc->sysfs_bytes = sysfs_bytes;
    llc->cpuid_bytes = cpuid_bytes;
    if (sysfs_bytes == 0 && cpuid_bytes == 0) {
        llc->bytes = BENCH_ASSUMED_LLC_BYTES;
        snprintf(llc->source, sizeof llc->source, "assumed: sysfs and cpuid read 0");
    } else if (sysfs_bytes >= cpuid_bytes) {
        llc->bytes = sysfs_bytes;
        snprintf(llc->source, sizeof llc->source, "sysfs");
    } else {
        llc->bytes = cpuid_bytes;
        snprintf(llc->source, sizeof llc->source, "%s", cpuid_leaf);
    }
}

void bench_llc_detect(bench_llc *llc) {
    const char *leaf;
    size_t cpuid_bytes = bench_llc_cpuid_bytes(&leaf);
    bench_llc_choose(bench_llc_sysfs_bytes("/sys/devices/system/cpu/cpu0/cache"), cpuid_bytes, leaf, llc);
}

size_t bench_mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (size_t)kib << 10;
}

size_t bench_default_stream_bytes(size_t llc_bytes, size_t mem_available, int *capped) {
    if (llc_bytes == 0) llc_bytes = BENCH_ASSUMED_LLC_BYTES;
    size_t bytes = 4 * llc_bytes, cap = mem_available / BENCH_STREAM_MEMORY_SHARE >> 20 << 20;
    *capped = 0;
    if (mem_available && bytes > cap) {
        bytes = cap;
        *capped = 1;
    }
    if (bytes < BENCH_MIN_STREAM_BYTES) bytes = BENCH_MIN_STREAM_BYTES;
    return bytes;
}

void bench_read_metadata(bench_metadata *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->commit, sizeof m->commit, "%s", kvc_build_commit());
    kvc_cpu_model(m->cpu_model, sizeof m->cpu_model);
    m->processors = omp_get_num_procs();
    bench_llc_detect(&m->llc);
    m->mem_available = bench_mem_available_bytes();
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

/* kvcmp bench: every scenario timed for the reference, the optimized
 * backend and any --candidate libraries in one process, on the same
 * inputs, with the runs interleaved (ref opt cand opt cand ...) so that
 * a change in the machine's load hits every implementation alike.  Each
 * implementation's outputs are compared byte for byte with the
 * reference's on the timed inputs, and each time is set against the
 * scenario's floor (floor.c): the larger of its compute floor (the
 * optimized backend on cache-resident copies of the scenario) and its
 * memory floor (its compulsory bytes streamed at the machine's
 * bandwidth), both measured in the same run.  Timings are min and
 * median of the runs after one warm-up; a run is the whole stage call,
 * validation included. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvcmp/backends.h"
#include "harness/options/options.h"
#include "optimized/optimized.h"
#include "harness/bench/bench.h"
#include "harness/bench/output.h"
#include "cli/commands.h"
#include "common/atomic_file.h"

#define DEFAULT_RUNS 15
#define DEFAULT_REFERENCE_RUNS 5
#define MIN_STREAM_BYTES BENCH_MIN_STREAM_BYTES
#define DRAM_PASSES 3
#define EXP_PASSES 7
/* Timed calls on each resident copy before the scenario's runs, and
 * after each round of them. */
#define RESIDENT_RUNS 20
#define RESIDENT_RUNS_PER_ROUND 3
/* Walks of the memory floor before the runs (then one after each round). */
#define MEMORY_WALK_PASSES 5

typedef struct {
    const char *json_path, *csv_path;
    int num_only;
    const char *only[BENCH_MAX_SCENARIOS];   /* --scenario; none: all */
    int runs, reference_runs;
    int num_threads, threads[BENCH_MAX_THREAD_COUNTS];
    int num_candidates;
    const char *candidates[BENCH_MAX_CANDIDATES];
    int huge_pages;
    int64_t stream_bytes;   /* 0: 4 x the last-level cache */
    int num_shapes;          /* --shape: scenarios the user describes */
    bench_scenario shapes[BENCH_MAX_SCENARIOS];
    bench_shape shape_params[BENCH_MAX_SCENARIOS];
    char shape_descriptions[BENCH_MAX_SCENARIOS][160];
} bench_options;

/* ---- Options ------------------------------------------------------------------ */

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp bench [--candidate LIB.so]... [--threads LIST] [--scenario NAME]... [--shape SPEC]... [--runs N] [--reference-runs N]\n"
            "                   [--json FILE] [--csv FILE] [--huge-pages] [--stream-bytes BYTES]\n"
            "  --candidate LIB.so   also time this plug-in (repeatable, at most %d; see include/kvcmp/plugin.h)\n"
            "  --threads LIST       thread counts, e.g. 1,2,4 (default: 1 and the number of processors)\n"
            "  --scenario NAME      only this scenario (repeatable; default: all, or none when a --shape is given)\n"
            "  --shape SPEC         also a scenario described by STAGE:KEY=VALUE,... (repeatable; below)\n"
            "  --runs N             timed runs per implementation and thread count, after one warm-up (default %d, 1..%d)\n"
            "  --reference-runs N   timed runs of the reference, at 1 thread (default %d, 0..%d)\n"
            "  --json FILE          also write the results and the run's metadata as JSON\n"
            "  --csv FILE           also write the rows of the times table as CSV, with a header line\n"
            "  --huge-pages         ask for transparent huge pages (madvise) on the buffers (default: refused)\n"
            "  --stream-bytes BYTES buffer of the bandwidth loops (default: 4 x the last-level cache, the largest of sysfs and\n"
            "                       cpuid, %zu MiB when both read 0; at least %zu, at most 1/%d of MemAvailable)\n"
            "scenarios:\n",
            BENCH_MAX_CANDIDATES, DEFAULT_RUNS, BENCH_MAX_RUNS, DEFAULT_REFERENCE_RUNS, BENCH_MAX_RUNS, BENCH_ASSUMED_LLC_BYTES >> 20,
            MIN_STREAM_BYTES, BENCH_STREAM_MEMORY_SHARE);
    for (int i = 0; i < bench_num_scenarios; i++) fprintf(out, "  %-24s %s\n", bench_scenarios[i].name, bench_scenarios[i].shape);
    fputs(bench_shape_help, out);
}

/* --threads 1,2,4: each count a whole number in 1..1024. */
static int parse_threads(const char *value, void *target, char *why, size_t size) {
    bench_options *o = target;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", value);
    o->num_threads = 0;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int64_t threads;
        if (o->num_threads == BENCH_MAX_THREAD_COUNTS) {
            snprintf(why, size, "--threads takes at most %d counts", BENCH_MAX_THREAD_COUNTS);
            return -1;
        }
        if (kvc_parse_int64_text(item, &threads) || threads < 1 || threads > 1024) {
            snprintf(why, size, "--threads takes thread counts from 1 to 1024, not '%s'", item);
            return -1;
        }
        o->threads[o->num_threads++] = (int)threads;
    }
    if (o->num_threads == 0) { snprintf(why, size, "--threads takes a list like 1,2,4"); return -1; }
    return 0;
}

static int add_candidate(const char *value, void *target, char *why, size_t size) {
    bench_options *o = target;
    if (o->num_candidates == BENCH_MAX_CANDIDATES) {
        snprintf(why, size, "at most %d --candidate libraries", BENCH_MAX_CANDIDATES);
        return -1;
    }
    o->candidates[o->num_candidates++] = value;
    return 0;
}

static int add_scenario(const char *value, void *target, char *why, size_t size) {
    bench_options *o = target;
    if (o->num_only == BENCH_MAX_SCENARIOS) {
        snprintf(why, size, "at most %d --scenario options", BENCH_MAX_SCENARIOS);
        return -1;
    }
    o->only[o->num_only++] = value;
    return 0;
}

static int add_shape(const char *value, void *target, char *why, size_t size) {
    bench_options *o = target;
    if (o->num_shapes == BENCH_MAX_SCENARIOS) {
        snprintf(why, size, "at most %d --shape options", BENCH_MAX_SCENARIOS);
        return -1;
    }
    int i = o->num_shapes;
    if (bench_shape_parse(value, &o->shape_params[i], o->shape_descriptions[i], sizeof o->shape_descriptions[i], why, size)) return -1;
    o->shapes[i] = (bench_scenario){value, o->shape_descriptions[i], &o->shape_params[i]};
    o->num_shapes++;
    return 0;
}

static void default_options(bench_options *o) {
    memset(o, 0, sizeof *o);
    o->runs = DEFAULT_RUNS;
    o->reference_runs = DEFAULT_REFERENCE_RUNS;
    int processors = omp_get_num_procs();
    o->threads[o->num_threads++] = 1;
    if (processors > 1) o->threads[o->num_threads++] = processors;
}

/* ---- Timing --------------------------------------------------------------------- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summarize(double *seconds, int runs, bench_timing *t) {
    qsort(seconds, (size_t)runs, sizeof *seconds, compare_doubles);
    t->present = 1;
    t->runs = runs;
    t->min_seconds = seconds[0];
    t->median_seconds = runs % 2 ? seconds[runs / 2] : 0.5 * (seconds[runs / 2 - 1] + seconds[runs / 2]);
}

/* An implementation in one interleaved timing loop. */
typedef struct {
    const kvc_backend *backend;
    int threads, runs;
    bench_timing *timing;
    int warm_each;   /* an untimed call before each timed one */
    double seconds[BENCH_MAX_RUNS];
} timed_impl;

/* The cache-resident copies of a scenario that its compute floor is
 * measured on, timed before the runs and again after every round of
 * them, so that the floor sees the machine in the same moments as the
 * stages (on a shared host the load changes within seconds). */
typedef struct {
    const kvc_backend *optimized;
    scenario_data small, large;
    bench_resident *resident;   /* its times fall where a call is faster */
} resident_copies;

/* The memory floor's walk over buffers of the scenario's sizes, timed
 * like the resident copies. */
typedef struct {
    bench_stream_buffers buffers;
    int threads;
    bench_floor *floor;   /* its memory_seconds fall where a walk is faster */
} memory_walk;

static void time_memory_walk(const memory_walk *w, int passes, int warm_up) {
    double seconds = bench_read_then_write_seconds(&w->buffers, w->threads, passes, warm_up);
    if (seconds < w->floor->memory_seconds) w->floor->memory_seconds = seconds;
}

static double faster_call(const kvc_backend *backend, const scenario_data *s, double seconds) {
    kvc_error err;
    double start = now_seconds();
    bench_scenario_run(backend, s, &err);
    double took = now_seconds() - start;
    return took < seconds ? took : seconds;
}

/* `runs` timed calls on each copy at one thread, each after an untimed
 * one (the copy back in the caches whatever ran before). */
static void time_resident(resident_copies *copies, int runs) {
    kvc_error err;
    bench_resident *r = copies->resident;
    omp_set_num_threads(1);
    for (int k = 0; k < runs; k++) {
        bench_scenario_run(copies->optimized, &copies->small, &err);
        r->small_seconds = faster_call(copies->optimized, &copies->small, r->small_seconds);
        bench_scenario_run(copies->optimized, &copies->large, &err);
        r->large_seconds = faster_call(copies->optimized, &copies->large, r->large_seconds);
    }
}

static void resident_copies_new(const bench_run *run, const kvc_backend *optimized, const bench_scenario *sc, const scenario_data *s,
                                bench_resident *r, resident_copies *copies) {
    bench_units units = bench_scenario_units(sc);
    r->unit = units.name;
    r->units = units.count;
    bench_resident_sizes(units.count, units.granularity, s->read_bytes + s->written_bytes, &r->small_units, &r->large_units);
    bench_scenario_setup_units(sc, r->small_units, run->huge_pages, &copies->small);
    bench_scenario_setup_units(sc, r->large_units, run->huge_pages, &copies->large);
    r->small_bytes = copies->small.read_bytes + copies->small.written_bytes;
    r->large_bytes = copies->large.read_bytes + copies->large.written_bytes;
    r->small_seconds = r->large_seconds = 1e30;
    copies->optimized = optimized;
    copies->resident = r;
    time_resident(copies, RESIDENT_RUNS);
}

static void resident_copies_free(resident_copies *copies) {
    bench_scenario_free(&copies->small);
    bench_scenario_free(&copies->large);
}

/* One warm-up call each, then run r of every implementation before run
 * r + 1 of any, and calls on the resident copies after each round.  Each
 * timed call of a fast implementation follows an untimed one of its own,
 * so that it finds the caches as it leaves them, whichever implementation
 * (or copy) ran before; and the order rotates from round to round: on a
 * loaded host the implementation timed right after a long burst (the
 * reference's scalar run, streaming loops) was up to 2x slower. */
static void time_interleaved(timed_impl *impls, int count, const scenario_data *s, resident_copies *copies, const memory_walk *walk) {
    kvc_error err;
    int most_runs = 0;
    for (int i = 0; i < count; i++) {
        omp_set_num_threads(impls[i].threads);
        bench_scenario_run(impls[i].backend, s, &err);
        if (impls[i].runs > most_runs) most_runs = impls[i].runs;
    }
    for (int r = 0; r < most_runs; r++) {
        /* Round r starts with implementation r mod count: no one always
         * follows the resident copies or the reference. */
        for (int k = 0; k < count; k++) {
            int i = (r + k) % count;
            if (r >= impls[i].runs) continue;
            omp_set_num_threads(impls[i].threads);
            if (impls[i].warm_each) bench_scenario_run(impls[i].backend, s, &err);
            double start = now_seconds();
            bench_scenario_run(impls[i].backend, s, &err);
            impls[i].seconds[r] = now_seconds() - start;
        }
        time_resident(copies, RESIDENT_RUNS_PER_ROUND);
        time_memory_walk(walk, 1, 0);
    }
    for (int i = 0; i < count; i++) summarize(impls[i].seconds, impls[i].runs, impls[i].timing);
}

/* ---- Outputs ---------------------------------------------------------------------- */

static size_t outputs_bytes(const scenario_data *s) {
    size_t total = 0;
    for (int i = 0; i < s->num_outputs; i++) total += s->outputs[i].bytes;
    return total;
}

static void save_outputs(const scenario_data *s, uint8_t *to) {
    for (int i = 0; i < s->num_outputs; i++) to = (uint8_t *)memcpy(to, s->outputs[i].data, s->outputs[i].bytes) + s->outputs[i].bytes;
}

static void restore_outputs(const scenario_data *s, const uint8_t *from) {
    for (int i = 0; i < s->num_outputs; i++) {
        memcpy(s->outputs[i].data, from, s->outputs[i].bytes);
        from += s->outputs[i].bytes;
    }
}

/* Every output byte against the reference's: the verdict, the count of
 * differing bytes and where the first one is. */
static void compare_outputs(const scenario_data *s, const uint8_t *expected, bench_timing *t) {
    t->verdict = OUTPUT_MATCHES;
    t->differing_bytes = 0;
    for (int i = 0; i < s->num_outputs; i++) {
        const uint8_t *got = s->outputs[i].data;
        size_t bytes = s->outputs[i].bytes;
        if (memcmp(got, expected, bytes) != 0)
            for (size_t b = 0; b < bytes; b++) {
                if (got[b] == expected[b]) continue;
                if (t->differing_bytes++ == 0)
                    snprintf(t->detail, sizeof t->detail, "first at %s byte %zu: expected 0x%02x, got 0x%02x", s->outputs[i].name, b,
                             expected[b], got[b]);
            }
        expected += bytes;
    }
    if (t->differing_bytes) t->verdict = OUTPUT_DIFFERS;
}

/* The implementation's outputs from the initial contents, at `threads`. */
static int run_from_initial(const kvc_backend *backend, int threads, const scenario_data *s, const uint8_t *initial,
                            bench_timing *t) {
    kvc_error err;
    memset(&err, 0, sizeof err);
    restore_outputs(s, initial);
    omp_set_num_threads(threads);
    int rc = bench_scenario_run(backend, s, &err);
    if (rc) {
        t->verdict = OUTPUT_FAILED;
        snprintf(t->detail, sizeof t->detail, "status %d: %s", rc, err.message);
    }
    return rc;
}

/* ---- One scenario ------------------------------------------------------------------ */

/* The memory walks before the runs (more follow in time_interleaved), at
 * every thread count. */
static void start_memory_floors(const bench_run *run, const bench_stream_buffers *buffers, bench_result *r) {
    for (int ti = 0; ti < run->num_threads; ti++) {
        bench_floor *f = &r->floors[ti];
        f->threads = run->threads[ti];
        f->memory_seconds = 1e30;
        memory_walk walk = {*buffers, f->threads, f};
        time_memory_walk(&walk, MEMORY_WALK_PASSES, 1);
    }
}

/* Each compute floor from the resident copies' best times. */
static void finish_floors(const bench_run *run, bench_result *r) {
    bench_resident_fit(&r->resident);
    for (int ti = 0; ti < run->num_threads; ti++)
        r->floors[ti].compute_seconds = bench_compute_floor_seconds(&r->resident, r->floors[ti].threads, run->metadata.processors);
}

static int bench_one(const bench_run *run, const bench_options *o, const kvc_backend *const *impls, const bench_scenario *sc,
                     bench_result *r) {
    scenario_data s;
    bench_scenario_setup(sc, run->huge_pages, &s);
    memset(r, 0, sizeof *r);
    r->sc = sc;
    r->tokens = s.tokens;
    r->read_bytes = s.read_bytes;
    r->written_bytes = s.written_bytes;
    fprintf(stderr, "  %s ...\n", sc->name);
    size_t bytes = outputs_bytes(&s);
    uint8_t *initial = bench_buffer_alloc(bytes, 0), *expected = bench_buffer_alloc(bytes, 0);
    save_outputs(&s, initial);
    int reference_failed = run_from_initial(impls[BENCH_REFERENCE], 1, &s, initial, &r->timings[BENCH_REFERENCE][0]);
    int failed = reference_failed;
    save_outputs(&s, expected);
    if (!reference_failed) r->timings[BENCH_REFERENCE][0].verdict = OUTPUT_REFERENCE;
    resident_copies copies;
    resident_copies_new(run, impls[BENCH_OPTIMIZED], sc, &s, &r->resident, &copies);
    bench_stream_buffers buffers = bench_stream_buffers_new((size_t)s.read_bytes, (size_t)s.written_bytes, 0, run->huge_pages);
    start_memory_floors(run, &buffers, r);
    for (int ti = 0; ti < run->num_threads && !reference_failed; ti++) {
        timed_impl timed[BENCH_MAX_IMPLS];
        int count = 0;
        if (ti == 0 && o->reference_runs > 0)
            timed[count++] = (timed_impl){impls[BENCH_REFERENCE], 1, o->reference_runs, &r->timings[BENCH_REFERENCE][0], 0, {0}};
        for (int i = BENCH_OPTIMIZED; i < run->num_impls; i++) {
            bench_timing *t = &r->timings[i][ti];
            if (!bench_scenario_offered(impls[i], &s)) { t->verdict = OUTPUT_NOT_OFFERED; continue; }
            if (run_from_initial(impls[i], run->threads[ti], &s, initial, t)) { failed = 1; continue; }
            compare_outputs(&s, expected, t);
            failed |= t->verdict == OUTPUT_DIFFERS;
            timed[count++] = (timed_impl){impls[i], run->threads[ti], o->runs, t, 1, {0}};
        }
        memory_walk walk = {buffers, run->threads[ti], &r->floors[ti]};
        time_interleaved(timed, count, &s, &copies, &walk);
    }
    resident_copies_free(&copies);
    bench_stream_buffers_free(&buffers);
    free(initial);
    free(expected);
    finish_floors(run, r);
    bench_scenario_free(&s);
    return failed;
}

/* ---- Command ------------------------------------------------------------------------ */

static void measure_machine(bench_run *run) {
    fprintf(stderr, "kvcmp bench: measuring memory bandwidth (%zu MiB buffers) and exp throughput ...\n", run->stream_bytes >> 20);
    bench_bandwidth dram[BENCH_MAX_THREAD_COUNTS];
    bench_measure_bandwidth(run->threads, run->num_threads, run->stream_bytes, run->stream_bytes, run->stream_bytes, DRAM_PASSES,
                            run->huge_pages, dram);
    for (int ti = 0; ti < run->num_threads; ti++) {
        bench_machine *m = &run->machine[ti];
        m->threads = run->threads[ti];
        m->dram = dram[ti];
        m->exp_vectors_per_second = bench_exp_vectors_per_second(m->threads, EXP_PASSES);
    }
}

/* The implementations: the reference, the optimized backend, the candidates. */
static int load_impls(const bench_options *o, bench_run *run, const kvc_backend **impls) {
    char error[512];
    impls[BENCH_REFERENCE] = &kvc_reference_backend;
    impls[BENCH_OPTIMIZED] = kvc_optimized_backend_get(error, sizeof error);
    if (!impls[BENCH_OPTIMIZED]) {
        fprintf(stderr, "kvcmp bench: %s; the bench times every implementation beside the optimized backend\n", error);
        return 1;
    }
    run->num_impls = 2;
    for (int i = 0; i < o->num_candidates; i++) {
        const kvc_backend *b = kvc_backend_by_name(o->candidates[i], error, sizeof error);
        if (!b) {
            fprintf(stderr, "kvcmp bench: --candidate: %s\n", error);
            return 1;
        }
        impls[run->num_impls++] = b;
    }
    for (int i = 0; i < run->num_impls; i++) run->impl_names[i] = impls[i]->name;
    return 0;
}

/* Whether an output file can be written, checked before the (long) run:
 * an existing file must be writable, a new one's folder must exist and
 * be writable.  Nothing is created here. */
static int writable(const char *path, char *why, size_t size) {
    struct stat st;
    if (path[0] == 0) { snprintf(why, size, "takes a file name, not ''"); return 0; }
    if (kvc_output_target_refused(path, why, size)) return 0;
    if (lstat(path, &st) == 0) {
        if (access(path, W_OK) != 0) { snprintf(why, size, "cannot write %s: %s", path, strerror(errno)); return 0; }
        return 1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) { snprintf(why, size, "cannot write %s: its folder does not exist", path); return 0; }
    if (access(dir, W_OK | X_OK) != 0) { snprintf(why, size, "cannot write %s: %s (its folder)", path, strerror(errno)); return 0; }
    return 1;
}

static const bench_scenario *find_scenario(const char *name) {
    for (int i = 0; i < bench_num_scenarios; i++)
        if (strcmp(name, bench_scenarios[i].name) == 0) return &bench_scenarios[i];
    return NULL;
}

static int selected(const bench_options *o, const bench_scenario *sc) {
    for (int k = 0; k < o->num_only; k++)
        if (strcmp(o->only[k], sc->name) == 0) return 1;
    return o->num_only == 0 && o->num_shapes == 0;
}

int kvc_cmd_bench(int argc, char **argv) {
    static bench_options o;
    default_options(&o);
    const kvc_option options[] = {
        {"json", KVC_OPT_STRING, .target = &o.json_path},
        {"csv", KVC_OPT_STRING, .target = &o.csv_path},
        {"threads", KVC_OPT_CUSTOM, .target = &o, .parse = parse_threads},
        {"scenario", KVC_OPT_CUSTOM, .target = &o, .parse = add_scenario},
        {"shape", KVC_OPT_CUSTOM, .target = &o, .parse = add_shape},
        {"runs", KVC_OPT_INT, .target = &o.runs, .min = 1, .max = BENCH_MAX_RUNS},
        {"reference-runs", KVC_OPT_INT, .target = &o.reference_runs, .min = 0, .max = BENCH_MAX_RUNS},
        {"candidate", KVC_OPT_CUSTOM, .target = &o, .parse = add_candidate},
        {"huge-pages", KVC_OPT_FLAG, .target = &o.huge_pages},
        {"stream-bytes", KVC_OPT_INT64, .target = &o.stream_bytes, .min = (int64_t)MIN_STREAM_BYTES, .max = (int64_t)1 << 40},
        {NULL},
    };
    const kvc_command_line line = {"bench", options, usage, 0};
    int status = kvc_parse_command_line(&line, argc, argv, NULL, &(int){0});
    if (status) return status == KVC_OPTIONS_HELP ? 0 : status;
    for (int k = 0; k < o.num_only; k++)
        if (!find_scenario(o.only[k])) return kvc_usage_error(&line, "unknown scenario '%s'", o.only[k]);
    char why[512];
    if (o.json_path && !writable(o.json_path, why, sizeof why)) return kvc_usage_error(&line, "--json: %s", why);
    if (o.csv_path && !writable(o.csv_path, why, sizeof why)) return kvc_usage_error(&line, "--csv: %s", why);
    if (o.json_path && o.csv_path && strcmp(o.json_path, o.csv_path) == 0)
        return kvc_usage_error(&line, "--csv and --json name the same file '%s'", o.csv_path);
    static bench_run run;
    const kvc_backend *impls[BENCH_MAX_IMPLS];
    memset(&run, 0, sizeof run);
    if (load_impls(&o, &run, impls)) return 2;
    bench_read_metadata(&run.metadata);
    run.num_threads = o.num_threads;
    memcpy(run.threads, o.threads, sizeof run.threads);
    run.huge_pages = o.huge_pages;
    run.runs = o.runs;
    run.reference_runs = o.reference_runs;
    if (o.stream_bytes) {
        run.stream_bytes = (size_t)o.stream_bytes;
        run.stream_bytes_why = "--stream-bytes";
    } else {
        int capped;
        run.stream_bytes = bench_default_stream_bytes(run.metadata.llc.bytes, run.metadata.mem_available, &capped);
        run.stream_bytes_why = capped ? "default, capped at 1/8 of MemAvailable" : "default";
    }
    run.results = calloc((size_t)(bench_num_scenarios + o.num_shapes), sizeof *run.results);
    if (!run.results) { fprintf(stderr, "kvcmp bench: out of memory\n"); return 2; }
    measure_machine(&run);
    bench_print_machine(&run);
    int failed = 0;
    for (int i = 0; i < bench_num_scenarios; i++)
        if (selected(&o, &bench_scenarios[i])) failed |= bench_one(&run, &o, impls, &bench_scenarios[i], &run.results[run.num_results++]);
    for (int i = 0; i < o.num_shapes; i++) failed |= bench_one(&run, &o, impls, &o.shapes[i], &run.results[run.num_results++]);
    bench_print_tables(&run);
    status = failed ? 1 : 0;
    if (o.json_path && bench_write_json(o.json_path, &run)) status = 2;
    else if (o.json_path) printf("\nwrote %s\n", o.json_path);
    if (o.csv_path && bench_write_csv(o.csv_path, &run)) status = 2;
    else if (o.csv_path) printf("%swrote %s\n", o.json_path ? "" : "\n", o.csv_path);
    free(run.results);
    return status;
}

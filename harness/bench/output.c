/* kvcmp bench's tables and JSON (format kvcmp-bench/3). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "harness/bench/output.h"
#include "harness/report/run_info.h"

static double ms(double seconds) { return 1e3 * seconds; }

static const char *verdict_name(bench_verdict v) {
    switch (v) {
    case OUTPUT_REFERENCE: return "reference";
    case OUTPUT_MATCHES: return "matches";
    case OUTPUT_DIFFERS: return "DIFFERS";
    case OUTPUT_FAILED: return "FAILED";
    case OUTPUT_NOT_OFFERED: return "not offered";
    }
    return "?";
}

/* The thread-count index of one thread, or -1. */
static int one_thread_index(const bench_run *run) {
    for (int ti = 0; ti < run->num_threads; ti++)
        if (run->threads[ti] == 1) return ti;
    return -1;
}

/* The floor an implementation's time is set against: the reference runs
 * at one thread whatever the column. */
static const bench_floor *floor_for(const bench_run *run, const bench_result *r, int impl, int ti) {
    if (impl != BENCH_REFERENCE) return &r->floors[ti];
    int one = one_thread_index(run);
    return one < 0 ? NULL : &r->floors[one];
}

/* The floor holds for whatever writes the reference's bytes; an
 * implementation that differs may have skipped the work. */
static int held_to_floor(const bench_timing *t) { return t->verdict == OUTPUT_REFERENCE || t->verdict == OUTPUT_MATCHES; }

/* The optimized backend's timing that an implementation's time at `ti` is set against. */
static const bench_timing *optimized_at(const bench_result *r, int ti) {
    const bench_timing *t = &r->timings[BENCH_OPTIMIZED][ti];
    return t->present ? t : NULL;
}

void bench_print_machine(const bench_run *run) {
    const bench_metadata *m = &run->metadata;
    printf("kvcmp bench: commit %s; %s, %d processors, last-level cache %zu KiB (%s); %s\n", m->commit, m->cpu_model, m->processors,
           m->llc.bytes >> 10, m->llc.source, m->compiler);
    printf("kvcmp bench: flags %s\n", m->flags);
    printf("kvcmp bench: %s, load average %.2f at start, OMP_WAIT_POLICY=%s, huge pages %s (transparent huge pages: %s)\n", m->date,
           m->load_average, m->omp_wait_policy ? m->omp_wait_policy : "(default)", run->huge_pages ? "asked for" : "refused",
           m->transparent_huge_pages);
    printf("\nMachine: streaming loops over %zu MiB buffers (%s: %s), best of the passes; exact exp (16 lanes) over L1-resident data.\n",
           run->stream_bytes >> 20, run->stream_bytes_why,
           run->stream_bytes >= 4 * m->llc.bytes ? ">= 4 x the last-level cache" : "SMALLER than 4 x the last-level cache");
    printf("%7s %10s %15s %15s %16s\n", "threads", "read GB/s", "write GB/s", "copy GB/s", "exp ns/16 lanes");
    for (int ti = 0; ti < run->num_threads; ti++) {
        const bench_machine *b = &run->machine[ti];
        char write[32], copy[32];
        snprintf(write, sizeof write, "%.1f (%s)", b->dram.write * 1e-9, b->dram.write_non_temporal ? "nt" : "cached");
        snprintf(copy, sizeof copy, "%.1f (%s)", b->dram.copy * 1e-9, b->dram.copy_non_temporal ? "nt" : "cached");
        printf("%7d %10.1f %15s %15s %16.2f\n", b->threads, b->dram.read * 1e-9, write, copy,
               1e9 * b->threads / b->exp_vectors_per_second);
    }
    fflush(stdout);
}

static void print_timing_row(const bench_run *run, const bench_result *r, int impl, int ti) {
    const bench_timing *t = &r->timings[impl][ti];
    const bench_timing *opt = optimized_at(r, impl == BENCH_REFERENCE ? 0 : ti);
    const bench_floor *floor = floor_for(run, r, impl, ti);
    char times[48] = "-", ratio[16] = "-", fraction[16] = "-", output[240];
    int threads = impl == BENCH_REFERENCE ? 1 : run->threads[ti];
    if (t->present) {
        snprintf(times, sizeof times, "%10.3f %10.3f %5d", ms(t->min_seconds), ms(t->median_seconds), t->runs);
        if (opt) snprintf(ratio, sizeof ratio, "%.2f", t->min_seconds / opt->min_seconds);
        if (floor && held_to_floor(t)) snprintf(fraction, sizeof fraction, "%.0f%%", 100.0 * bench_floor_seconds(floor) / t->min_seconds);
    } else {
        snprintf(times, sizeof times, "%10s %10s %5s", "-", "-", "-");
    }
    if (t->verdict == OUTPUT_DIFFERS)
        snprintf(output, sizeof output, "DIFFERS (%lld bytes; %s)", (long long)t->differing_bytes, t->detail);
    else if (t->verdict == OUTPUT_FAILED)
        snprintf(output, sizeof output, "FAILED (%s)", t->detail);
    else
        snprintf(output, sizeof output, "%s", verdict_name(t->verdict));
    printf("%-24s %3d %-28.28s %s %7s %6s  %s\n", r->sc->name, threads, run->impl_names[impl], times, ratio, fraction, output);
}

static void print_times(const bench_run *run) {
    printf("\nTimes in ms, min and median of the interleaved runs after one warm-up.  t/opt: min time over the\n"
           "optimized backend's at the same thread count (above 1: slower than opt; the reference's is against opt at %d\n"
           "threads).  floor: the scenario's floor (table below) over the min time.  output: every byte written,\n"
           "compared with the reference's on the same inputs.\n",
           run->threads[0]);
    printf("%-24s %3s %-28s %10s %10s %5s %7s %6s  %s\n", "scenario", "thr", "implementation", "min", "median", "runs", "t/opt",
           "floor", "output");
    for (int i = 0; i < run->num_results; i++) {
        const bench_result *r = &run->results[i];
        print_timing_row(run, r, BENCH_REFERENCE, 0);
        for (int ti = 0; ti < run->num_threads; ti++)
            for (int impl = BENCH_OPTIMIZED; impl < run->num_impls; impl++) print_timing_row(run, r, impl, ti);
    }
}

static void print_floors(const bench_run *run) {
    printf("\nFloors per scenario: the larger (binding) of compute and memory; opt: the floor's share of opt's min time.\n"
           "compute: the optimized backend's fixed cost per call plus its cost per unit on cache-resident copies (next\n"
           "table) at one thread, the units shared among min(threads, processors).  memory: a walk reading the bytes read\n"
           "in row order, then writing the bytes written, at the thread count, over buffers of those sizes walked again\n"
           "and again (from memory past the last-level cache, from the cache within it, as the scenario's own data),\n"
           "best of the walks before the runs and after each round of them.\n");
    printf("%-24s %3s %9s %10s %11s %10s %9s %8s %6s\n", "scenario", "thr", "MB read", "MB written", "compute ms", "memory ms",
           "floor ms", "binding", "opt");
    for (int i = 0; i < run->num_results; i++) {
        const bench_result *r = &run->results[i];
        for (int ti = 0; ti < run->num_threads; ti++) {
            const bench_floor *f = &r->floors[ti];
            const bench_timing *opt = optimized_at(r, ti);
            char share[16] = "-";
            if (opt) snprintf(share, sizeof share, "%.0f%%", 100.0 * bench_floor_seconds(f) / opt->min_seconds);
            printf("%-24s %3d %9.2f %10.3f %11.4f %10.4f %9.4f %8s %6s\n", r->sc->name, f->threads, r->read_bytes * 1e-6,
                   r->written_bytes * 1e-6, ms(f->compute_seconds), ms(f->memory_seconds), ms(bench_floor_seconds(f)),
                   f->compute_seconds >= f->memory_seconds ? "compute" : "memory", share);
        }
    }
    printf("\nResident copies: the scenario with fewer units (its own shape otherwise), about %.0f KiB of compulsory\n"
           "bytes or the fewest units that make a copy; the optimized backend's min time on each at one thread.\n",
           BENCH_RESIDENT_BYTES / 1024);
    printf("%-24s %-9s %7s %7s %8s %10s %7s %8s %10s %9s %11s\n", "scenario", "unit", "units", "small", "KB", "small us", "large",
           "KB", "large us", "fixed us", "us per unit");
    for (int i = 0; i < run->num_results; i++) {
        const bench_resident *c = &run->results[i].resident;
        printf("%-24s %-9s %7lld %7lld %8.1f %10.2f %7lld %8.1f %10.2f %9.2f %11.4f\n", run->results[i].sc->name, c->unit,
               (long long)c->units, (long long)c->small_units, c->small_bytes * 1e-3, 1e6 * c->small_seconds, (long long)c->large_units,
               c->large_bytes * 1e-3, 1e6 * c->large_seconds, 1e6 * c->fixed_seconds, 1e6 * c->unit_seconds);
    }
}

static void print_scaling(const bench_run *run) {
    printf("\nScaling: min ms at each thread count (speed-up over %d thread%s).\n", run->threads[0], run->threads[0] == 1 ? "" : "s");
    printf("%-24s %-28s", "scenario", "implementation");
    for (int ti = 0; ti < run->num_threads; ti++) printf(" %12d thr", run->threads[ti]);
    printf("\n");
    for (int i = 0; i < run->num_results; i++) {
        const bench_result *r = &run->results[i];
        for (int impl = BENCH_OPTIMIZED; impl < run->num_impls; impl++) {
            printf("%-24s %-28.28s", r->sc->name, run->impl_names[impl]);
            for (int ti = 0; ti < run->num_threads; ti++) {
                const bench_timing *t = &r->timings[impl][ti], *first = &r->timings[impl][0];
                if (t->present && first->present)
                    printf(" %8.3f (%5.2fx)", ms(t->min_seconds), first->min_seconds / t->min_seconds);
                else
                    printf(" %16s", "-");
            }
            printf("\n");
        }
    }
}

void bench_print_tables(const bench_run *run) {
    print_times(run);
    print_floors(run);
    print_scaling(run);
}

/* ---- JSON ----------------------------------------------------------------------- */

static cJSON *json_metadata(const bench_run *run) {
    const bench_metadata *m = &run->metadata;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "commit", m->commit);
    cJSON_AddStringToObject(o, "date", m->date);
    cJSON_AddStringToObject(o, "cpu_model", m->cpu_model);
    cJSON_AddNumberToObject(o, "processors", m->processors);
    cJSON_AddNumberToObject(o, "last_level_cache_bytes", (double)m->llc.bytes);
    cJSON_AddStringToObject(o, "last_level_cache_source", m->llc.source);
    cJSON_AddNumberToObject(o, "last_level_cache_sysfs_bytes", (double)m->llc.sysfs_bytes);
    cJSON_AddNumberToObject(o, "last_level_cache_cpuid_bytes", (double)m->llc.cpuid_bytes);
    cJSON_AddNumberToObject(o, "mem_available_bytes", (double)m->mem_available);
    cJSON_AddStringToObject(o, "compiler", m->compiler);
    cJSON_AddStringToObject(o, "flags", m->flags);
    cJSON_AddStringToObject(o, "omp_wait_policy", m->omp_wait_policy ? m->omp_wait_policy : "default");
    cJSON_AddNumberToObject(o, "load_average_at_start", m->load_average);
    cJSON_AddBoolToObject(o, "huge_pages", run->huge_pages);
    cJSON_AddStringToObject(o, "transparent_huge_pages", m->transparent_huge_pages);
    return o;
}

static cJSON *json_bandwidth(const bench_bandwidth *b) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "read_bytes_per_s", b->read);
    cJSON_AddNumberToObject(o, "write_bytes_per_s", b->write);
    cJSON_AddBoolToObject(o, "write_non_temporal", b->write_non_temporal);
    cJSON_AddNumberToObject(o, "copy_bytes_per_s", b->copy);
    cJSON_AddBoolToObject(o, "copy_non_temporal", b->copy_non_temporal);
    return o;
}

static cJSON *json_machine(const bench_run *run) {
    cJSON *list = cJSON_CreateArray();
    for (int ti = 0; ti < run->num_threads; ti++) {
        const bench_machine *m = &run->machine[ti];
        cJSON *o = json_bandwidth(&m->dram);
        cJSON_AddNumberToObject(o, "threads", m->threads);
        cJSON_AddNumberToObject(o, "buffer_bytes", (double)run->stream_bytes);
        cJSON_AddNumberToObject(o, "exp_vectors_per_s", m->exp_vectors_per_second);
        cJSON_AddItemToArray(list, o);
    }
    return list;
}

static cJSON *json_timing(const bench_run *run, const bench_result *r, int impl, int ti) {
    const bench_timing *t = &r->timings[impl][ti];
    const bench_timing *opt = optimized_at(r, impl == BENCH_REFERENCE ? 0 : ti);
    const bench_floor *floor = floor_for(run, r, impl, ti);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "implementation", run->impl_names[impl]);
    cJSON_AddStringToObject(o, "role", impl == BENCH_REFERENCE ? "reference" : impl == BENCH_OPTIMIZED ? "optimized" : "candidate");
    cJSON_AddNumberToObject(o, "threads", impl == BENCH_REFERENCE ? 1 : run->threads[ti]);
    cJSON_AddStringToObject(o, "output", verdict_name(t->verdict));
    if (t->verdict == OUTPUT_DIFFERS) cJSON_AddNumberToObject(o, "differing_bytes", (double)t->differing_bytes);
    if (t->verdict == OUTPUT_DIFFERS || t->verdict == OUTPUT_FAILED) cJSON_AddStringToObject(o, "detail", t->detail);
    if (!t->present) return o;
    cJSON_AddNumberToObject(o, "runs", t->runs);
    cJSON_AddNumberToObject(o, "min_ms", ms(t->min_seconds));
    cJSON_AddNumberToObject(o, "median_ms", ms(t->median_seconds));
    cJSON_AddNumberToObject(o, "tokens_per_s", (double)r->tokens / t->min_seconds);
    if (opt) cJSON_AddNumberToObject(o, "time_over_optimized", t->min_seconds / opt->min_seconds);
    if (floor && held_to_floor(t)) cJSON_AddNumberToObject(o, "fraction", bench_floor_seconds(floor) / t->min_seconds);
    return o;
}

static cJSON *json_resident(const bench_resident *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "unit", c->unit);
    cJSON_AddNumberToObject(o, "units", (double)c->units);
    cJSON_AddNumberToObject(o, "small_units", (double)c->small_units);
    cJSON_AddNumberToObject(o, "small_bytes", c->small_bytes);
    cJSON_AddNumberToObject(o, "small_ms", ms(c->small_seconds));
    cJSON_AddNumberToObject(o, "large_units", (double)c->large_units);
    cJSON_AddNumberToObject(o, "large_bytes", c->large_bytes);
    cJSON_AddNumberToObject(o, "large_ms", ms(c->large_seconds));
    cJSON_AddNumberToObject(o, "fixed_ms", ms(c->fixed_seconds));
    cJSON_AddNumberToObject(o, "ms_per_unit", ms(c->unit_seconds));
    return o;
}

static cJSON *json_scenario(const bench_run *run, const bench_result *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->sc->name);
    cJSON_AddStringToObject(o, "shape", r->sc->shape);
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(o, "read_bytes", r->read_bytes);
    cJSON_AddNumberToObject(o, "written_bytes", r->written_bytes);
    cJSON_AddItemToObject(o, "resident", json_resident(&r->resident));
    cJSON *floors = cJSON_AddArrayToObject(o, "floors");
    for (int ti = 0; ti < run->num_threads; ti++) {
        const bench_floor *f = &r->floors[ti];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "threads", f->threads);
        cJSON_AddNumberToObject(item, "compute_floor_ms", ms(f->compute_seconds));
        cJSON_AddNumberToObject(item, "memory_floor_ms", ms(f->memory_seconds));
        cJSON_AddNumberToObject(item, "floor_ms", ms(bench_floor_seconds(f)));
        cJSON_AddStringToObject(item, "binding", f->compute_seconds >= f->memory_seconds ? "compute" : "memory");
        cJSON_AddItemToArray(floors, item);
    }
    cJSON *results = cJSON_AddArrayToObject(o, "results");
    cJSON_AddItemToArray(results, json_timing(run, r, BENCH_REFERENCE, 0));
    for (int ti = 0; ti < run->num_threads; ti++)
        for (int impl = BENCH_OPTIMIZED; impl < run->num_impls; impl++) cJSON_AddItemToArray(results, json_timing(run, r, impl, ti));
    return o;
}

/* The options of the run, for the shared run metadata. */
static cJSON *json_options(const bench_run *run) {
    cJSON *o = cJSON_CreateObject();
    cJSON *threads = cJSON_AddArrayToObject(o, "threads");
    for (int ti = 0; ti < run->num_threads; ti++) cJSON_AddItemToArray(threads, cJSON_CreateNumber(run->threads[ti]));
    cJSON_AddNumberToObject(o, "runs", run->runs);
    cJSON_AddNumberToObject(o, "reference_runs", run->reference_runs);
    cJSON_AddNumberToObject(o, "stream_bytes", (double)run->stream_bytes);
    cJSON_AddBoolToObject(o, "huge_pages", run->huge_pages);
    cJSON *candidates = cJSON_AddArrayToObject(o, "candidates");
    for (int i = BENCH_OPTIMIZED + 1; i < run->num_impls; i++) cJSON_AddItemToArray(candidates, cJSON_CreateString(run->impl_names[i]));
    return o;
}

int bench_write_json(const char *path, const bench_run *run) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "kvcmp-bench/3");
    cJSON_AddItemToObject(root, "run", kvc_run_info(0, 0, json_options(run)));
    cJSON_AddItemToObject(root, "metadata", json_metadata(run));
    cJSON *threads = cJSON_AddArrayToObject(root, "threads");
    for (int ti = 0; ti < run->num_threads; ti++) cJSON_AddItemToArray(threads, cJSON_CreateNumber(run->threads[ti]));
    cJSON_AddItemToObject(root, "machine", json_machine(run));
    cJSON *scenarios = cJSON_AddArrayToObject(root, "scenarios");
    for (int i = 0; i < run->num_results; i++) cJSON_AddItemToArray(scenarios, json_scenario(run, &run->results[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char error[4400];
    int rc = text ? kvc_atomic_write_text(path, text, error, sizeof error) : -1;
    free(text);
    if (rc) {
        fprintf(stderr, "kvcmp bench: %s (the table above is complete; give --json a writable path)\n", error);
        return 1;
    }
    return 0;
}

/* ---- CSV ------------------------------------------------------------------------ */

/* A field, quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *text, int last) {
    if (strpbrk(text, ",\"\r\n")) {
        fputc('"', f);
        for (const char *c = text; *c; c++) {
            if (*c == '"') fputc('"', f);
            fputc(*c, f);
        }
        fputc('"', f);
    } else {
        fputs(text, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void csv_row(FILE *f, const bench_run *run, const bench_result *r, int impl, int ti) {
    const bench_timing *t = &r->timings[impl][ti];
    const bench_timing *opt = optimized_at(r, impl == BENCH_REFERENCE ? 0 : ti);
    const bench_floor *floor = floor_for(run, r, impl, ti);
    char threads[16], min[32] = "", median[32] = "", runs[16] = "", ratio[32] = "", fraction[32] = "";
    char compute[32] = "", memory[32] = "", floor_ms[32] = "";
    snprintf(threads, sizeof threads, "%d", impl == BENCH_REFERENCE ? 1 : run->threads[ti]);
    if (floor) {
        snprintf(compute, sizeof compute, "%.6f", ms(floor->compute_seconds));
        snprintf(memory, sizeof memory, "%.6f", ms(floor->memory_seconds));
        snprintf(floor_ms, sizeof floor_ms, "%.6f", ms(bench_floor_seconds(floor)));
    }
    if (t->present) {
        snprintf(min, sizeof min, "%.6f", ms(t->min_seconds));
        snprintf(median, sizeof median, "%.6f", ms(t->median_seconds));
        snprintf(runs, sizeof runs, "%d", t->runs);
        if (opt) snprintf(ratio, sizeof ratio, "%.4f", t->min_seconds / opt->min_seconds);
        if (floor && held_to_floor(t)) snprintf(fraction, sizeof fraction, "%.4f", bench_floor_seconds(floor) / t->min_seconds);
    }
    char detail[sizeof t->detail + 64] = "";
    if (t->verdict == OUTPUT_DIFFERS) snprintf(detail, sizeof detail, "%lld bytes; %s", (long long)t->differing_bytes, t->detail);
    else if (t->verdict == OUTPUT_FAILED) snprintf(detail, sizeof detail, "%s", t->detail);
    const char *fields[] = {r->sc->name, threads, run->impl_names[impl], min, median, runs, ratio, compute, memory, floor_ms, fraction,
                            verdict_name(t->verdict), detail};
    int count = (int)(sizeof fields / sizeof fields[0]);
    for (int i = 0; i < count; i++) csv_field(f, fields[i], i == count - 1);
}

int bench_write_csv(const char *path, const bench_run *run) {
    kvc_atomic_file a;
    char error[4400];
    int rc = kvc_atomic_open(&a, path, error, sizeof error);
    if (rc == 0) {
        fputs(BENCH_CSV_HEADER "\n", a.f);
        for (int i = 0; i < run->num_results; i++) {
            const bench_result *r = &run->results[i];
            csv_row(a.f, run, r, BENCH_REFERENCE, 0);
            for (int ti = 0; ti < run->num_threads; ti++)
                for (int impl = BENCH_OPTIMIZED; impl < run->num_impls; impl++) csv_row(a.f, run, r, impl, ti);
        }
        rc = kvc_atomic_commit(&a, error, sizeof error);
    }
    if (rc) {
        fprintf(stderr, "kvcmp bench: --csv: %s (the table above is complete; give --csv a writable path)\n", error);
        return 1;
    }
    return 0;
}

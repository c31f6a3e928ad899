/* kvcmp bench's floors: what a scenario cannot go below on
 * this machine, from measurements of the same run (bench.h says how).
 *
 * Why two resident copies: a call has a cost of its own (validation, the
 * thread team) besides its work, and a copy of a scenario scaled up by
 * the ratio of units would count that cost once per copy.  The line
 * through two copies of different sizes separates the two. */
#include "harness/bench/bench.h"

static int64_t at_least(int64_t value, int64_t minimum) { return value > minimum ? value : minimum; }
static double not_below_zero(double value) { return value > 0 ? value : 0; }

void bench_resident_sizes(int64_t units, int64_t granularity, double bytes, int64_t *small_units, int64_t *large_units) {
    double unit_bytes = bytes / (double)units;
    int64_t steps = (int64_t)(BENCH_RESIDENT_BYTES / (unit_bytes * (double)granularity));
    *large_units = at_least(steps, 2) * granularity;
    *small_units = at_least(*large_units / 2 / granularity, 1) * granularity;
}

void bench_resident_fit(bench_resident *r) {
    /* Timing noise can tilt the line either way; a negative cost is no
     * floor, and zero keeps the floor below the truth. */
    double slope = (r->large_seconds - r->small_seconds) / (double)(r->large_units - r->small_units);
    r->unit_seconds = not_below_zero(slope);
    r->fixed_seconds = not_below_zero(r->small_seconds - r->unit_seconds * (double)r->small_units);
}

double bench_compute_floor_seconds(const bench_resident *r, int threads, int processors) {
    int sharing = threads < processors ? threads : processors;
    return r->fixed_seconds + r->unit_seconds * (double)r->units / (double)sharing;
}

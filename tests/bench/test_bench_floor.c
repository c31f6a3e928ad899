/* kvcmp bench's floors: the sizes of the cache-resident copies
 * a compute floor is measured on, the line through their times, the
 * compute floor at a thread count, the larger part binding, the units a
 * scenario is counted in and copies of it with fewer, and the memory
 * walk.  Times are made up here or only checked to be positive: no
 * timing is asserted. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "harness/bench/bench.h"

static const bench_scenario *scenario(const char *name) {
    for (int i = 0; i < bench_num_scenarios; i++)
        if (strcmp(bench_scenarios[i].name, name) == 0) return &bench_scenarios[i];
    cr_assert_fail("no scenario %s", name);
    return NULL;
}

Test(bench_floor, resident_sizes) {
    int64_t small, large;
    /* 8 KiB a unit, steps of 4: 512 KiB holds 16 steps. */
    bench_resident_sizes(8192, 4, 8192.0 * 8192, &small, &large);
    cr_expect_eq(large, 64);
    cr_expect_eq(small, 32);
    /* 4 KiB a unit, steps of 128: one step fits, two are taken. */
    bench_resident_sizes(8192, 128, 8192.0 * 4096, &small, &large);
    cr_expect_eq(large, 256);
    cr_expect_eq(small, 128);
    /* A unit larger than the whole budget: two units and one. */
    bench_resident_sizes(64, 1, 64e6, &small, &large);
    cr_expect_eq(large, 2);
    cr_expect_eq(small, 1);
    /* 160 KiB a unit: three fit; the smaller copy rounds down to one. */
    bench_resident_sizes(1000, 1, 1000.0 * 160 * 1024, &small, &large);
    cr_expect_eq(large, 3);
    cr_expect_eq(small, 1);
}

Test(bench_floor, line_through_the_two_copies) {
    bench_resident r = {.small_units = 2, .small_seconds = 3.0, .large_units = 6, .large_seconds = 5.0};
    bench_resident_fit(&r);
    cr_expect_eq(r.unit_seconds, 0.5);
    cr_expect_eq(r.fixed_seconds, 2.0);
    /* The larger copy faster (noise): no negative cost per unit. */
    r = (bench_resident){.small_units = 2, .small_seconds = 3.0, .large_units = 6, .large_seconds = 2.0};
    bench_resident_fit(&r);
    cr_expect_eq(r.unit_seconds, 0.0);
    cr_expect_eq(r.fixed_seconds, 3.0);
    /* A line through below zero: no negative fixed cost. */
    r = (bench_resident){.small_units = 2, .small_seconds = 1.0, .large_units = 6, .large_seconds = 5.0};
    bench_resident_fit(&r);
    cr_expect_eq(r.unit_seconds, 1.0);
    cr_expect_eq(r.fixed_seconds, 0.0);
}

Test(bench_floor, compute_floor_shares_the_units_among_the_processors) {
    bench_resident r = {.units = 100, .fixed_seconds = 2.0, .unit_seconds = 0.5};
    cr_expect_eq(bench_compute_floor_seconds(&r, 1, 4), 52.0);
    cr_expect_eq(bench_compute_floor_seconds(&r, 2, 4), 27.0);
    /* More threads than processors share no further. */
    cr_expect_eq(bench_compute_floor_seconds(&r, 8, 4), 14.5);
}

Test(bench_floor, the_larger_part_is_the_floor) {
    bench_floor memory_bound = {.threads = 1, .compute_seconds = 3.0, .memory_seconds = 5.0};
    bench_floor compute_bound = {.threads = 1, .compute_seconds = 7.0, .memory_seconds = 5.0};
    cr_expect_eq(bench_floor_seconds(&memory_bound), 5.0);
    cr_expect_eq(bench_floor_seconds(&compute_bound), 7.0);
}

Test(bench_floor, units_of_the_scenarios) {
    bench_units u = bench_scenario_units(scenario("v4-d512-r128-prefill"));
    cr_expect_eq(u.count, 8192);
    cr_expect_eq(u.granularity, 128);
    cr_expect_str_eq(u.name, "tokens");
    u = bench_scenario_units(scenario("v4-d512-r4-decode"));
    cr_expect_eq(u.count, 64);
    cr_expect_eq(u.granularity, 1);
    cr_expect_str_eq(u.name, "requests");
    u = bench_scenario_units(scenario("v41-r2-decode"));
    cr_expect_eq(u.count, 64);
    cr_expect_str_eq(u.name, "requests");
    u = bench_scenario_units(scenario("v41-r2-prefill"));
    cr_expect_eq(u.count, 8192);
    cr_expect_eq(u.granularity, 2);
    u = bench_scenario_units(scenario("v41-rope-quant-insert"));
    cr_expect_eq(u.granularity, 2);
    cr_expect_str_eq(u.name, "tokens");
    /* A --shape with several requests is counted in requests. */
    bench_shape shape;
    char description[160], why[256];
    cr_assert_eq(bench_shape_parse("v4-save:tokens=256,requests=8", &shape, description, sizeof description, why, sizeof why), 0, "%s", why);
    bench_scenario custom = {"custom", description, &shape};
    u = bench_scenario_units(&custom);
    cr_expect_eq(u.count, 8);
    cr_expect_eq(u.granularity, 1);
    cr_expect_str_eq(u.name, "requests");
    /* Long requests are counted in tokens. */
    cr_assert_eq(bench_shape_parse("v41-norm:tokens=4096,requests=2", &shape, description, sizeof description, why, sizeof why), 0, "%s", why);
    u = bench_scenario_units(&custom);
    cr_expect_eq(u.count, 4096);
    cr_expect_eq(u.granularity, 2);
    cr_expect_str_eq(u.name, "tokens");
    cr_assert_eq(bench_shape_parse("v4-compress:r=128,tokens=1024,requests=2", &shape, description, sizeof description, why, sizeof why), 0,
                 "%s", why);
    u = bench_scenario_units(&custom);
    cr_expect_eq(u.count, 1024);
    cr_expect_eq(u.granularity, 128);
}

/* A copy with fewer units: the same shape, its bytes in proportion. */
Test(bench_floor, copies_with_fewer_units, .timeout = 120) {
    scenario_data full, copy;
    const bench_scenario *prefill = scenario("v4-d512-r4-prefill");
    bench_scenario_setup(prefill, 0, &full);
    bench_scenario_setup_units(prefill, 64, 0, &copy);
    cr_expect_eq(full.tokens, 8192);
    cr_expect_eq(copy.tokens, 64);
    cr_expect_eq(copy.compress.compress_ratio, 4);
    cr_expect_eq(copy.compress.head_dim, 512);
    cr_expect_eq(copy.read_bytes * 128, full.read_bytes);
    cr_expect_eq(copy.written_bytes * 128, full.written_bytes);
    bench_scenario_free(&full);
    bench_scenario_free(&copy);
    const bench_scenario *decode = scenario("v41-r2-decode");
    bench_scenario_setup(decode, 0, &full);
    bench_scenario_setup_units(decode, 8, 0, &copy);
    cr_expect_eq(copy.norm.num_requests, 8);
    cr_expect_eq(copy.norm.num_tokens, 8, "one token per request, as in the scenario");
    cr_expect_eq(copy.read_bytes * 8, full.read_bytes);
    cr_expect_eq(copy.written_bytes * 8, full.written_bytes);
    bench_scenario_free(&full);
    bench_scenario_free(&copy);
    /* Long requests: a copy is one request of that many tokens. */
    bench_shape shape;
    char description[160], why[256];
    cr_assert_eq(bench_shape_parse("v41-norm:tokens=4096,requests=2", &shape, description, sizeof description, why, sizeof why), 0, "%s", why);
    bench_scenario custom = {"custom", description, &shape};
    bench_scenario_setup_units(&custom, 64, 0, &copy);
    cr_expect_eq(copy.norm.num_requests, 1);
    cr_expect_eq(copy.norm.num_tokens, 64);
    bench_scenario_free(&copy);
}

Test(bench_floor, memory_walk_takes_time, .timeout = 120) {
    bench_stream_buffers b = bench_stream_buffers_new(96 << 10, 32 << 10, 0, 0);
    for (int threads = 1; threads <= 2; threads++) {
        double seconds = bench_read_then_write_seconds(&b, threads, 1, threads == 1);
        cr_expect(seconds > 0 && isfinite(seconds), "%d threads: %g s", threads, seconds);
    }
    bench_stream_buffers_free(&b);
    /* One cache line read, nothing written: the second thread has no share. */
    b = bench_stream_buffers_new(64, 0, 0, 0);
    double seconds = bench_read_then_write_seconds(&b, 2, 1, 0);
    cr_expect(seconds > 0 && isfinite(seconds), "one line at 2 threads: %g s", seconds);
    bench_stream_buffers_free(&b);
}

/* kvcmp bench's view of the machine: the last-level cache from
 * sysfs and cpuid, the largest reading, an assumed large cache when every
 * source reads 0 (a VM's sysfs said 0 KiB and the bench streamed 1 MiB
 * buffers from L2), and the default stream buffer picked from it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/bench/bench.h"
#include "tests/test_support.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

Test(bench_machine, stream_bytes_from_the_cache_reading) {
    int capped;
    /* A reading of 0 is an unknown cache, taken as large: never 1 MiB. */
    size_t unknown = bench_default_stream_bytes(0, 64 * GIB, &capped);
    cr_expect_geq(unknown, 256 * MIB, "LLC 0 gave a %zu-byte stream buffer", unknown);
    cr_expect_eq(unknown, 4 * BENCH_ASSUMED_LLC_BYTES);
    cr_expect_eq(capped, 0);
    cr_expect_eq(bench_default_stream_bytes(32 * MIB, 64 * GIB, &capped), 128 * MIB);
    cr_expect_eq(capped, 0);
    /* A small cache still gets at least 1 MiB. */
    cr_expect_eq(bench_default_stream_bytes(64 << 10, 64 * GIB, &capped), MIB);
    /* MemAvailable unknown (0): no cap. */
    cr_expect_eq(bench_default_stream_bytes(260 * MIB, 0, &capped), 1040 * MIB);
    cr_expect_eq(capped, 0);
    /* Two buffers must fit: at most MemAvailable / 8, in whole MiB. */
    cr_expect_eq(bench_default_stream_bytes(0, 2 * GIB + 12345, &capped), 256 * MIB);
    cr_expect_eq(capped, 1);
    cr_expect_eq(bench_default_stream_bytes(32 * MIB, 4 * MIB, &capped), MIB, "never under 1 MiB, even when memory is short");
}

Test(bench_machine, largest_reading_wins_and_zero_is_assumed_large) {
    bench_llc llc;
    bench_llc_choose(0, 0, "cpuid 0x8000001D", &llc);
    cr_expect_eq(llc.bytes, BENCH_ASSUMED_LLC_BYTES);
    cr_expect(strstr(llc.source, "assumed") != NULL, "source '%s'", llc.source);
    bench_llc_choose(0, 32 * MIB, "cpuid 0x8000001D", &llc);
    cr_expect_eq(llc.bytes, 32 * MIB);
    cr_expect_str_eq(llc.source, "cpuid 0x8000001D");
    bench_llc_choose(260 * MIB, 32 * MIB, "cpuid leaf 4", &llc);
    cr_expect_eq(llc.bytes, 260 * MIB);
    cr_expect_str_eq(llc.source, "sysfs");
    cr_expect_eq(llc.cpuid_bytes, 32 * MIB);
    bench_llc_choose(1 * MIB, 32 * MIB, "cpuid leaf 4", &llc);
    cr_expect_str_eq(llc.source, "cpuid leaf 4");
    /* The detection on this machine: a source is named, the size is never 0. */
    bench_llc_detect(&llc);
    cr_expect_gt(llc.bytes, 0);
    cr_expect_str_neq(llc.source, "");
}

static void cache_index(const char *dir, int index, const char *level, const char *type, const char *size) {
    char path[512];
    snprintf(path, sizeof path, "%s/index%d", dir, index);
    cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/index%d/level", dir, index);
    support_write_text(path, level);
    snprintf(path, sizeof path, "%s/index%d/type", dir, index);
    support_write_text(path, type);
    if (!size) return;
    snprintf(path, sizeof path, "%s/index%d/size", dir, index);
    support_write_text(path, size);
}

/* A sysfs tree as Linux writes it: the largest data or unified cache,
 * not an instruction cache, and 0 when every size reads 0 or is missing. */
Test(bench_machine, sysfs_tree) {
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    cr_expect_eq(bench_llc_sysfs_bytes(dir), 0, "an empty tree");
    cache_index(dir, 0, "1\n", "Data\n", "48K\n");
    cache_index(dir, 1, "1\n", "Instruction\n", "4096M\n");
    cache_index(dir, 2, "2\n", "Unified\n", "2048K\n");
    cr_expect_eq(bench_llc_sysfs_bytes(dir), 2048 << 10);
    cache_index(dir, 3, "3\n", "Unified\n", "266240K\n");
    cr_expect_eq(bench_llc_sysfs_bytes(dir), (size_t)266240 << 10);
    support_remove_tree(dir);

    support_temp_dir(dir, sizeof dir);
    cache_index(dir, 0, "1\n", "Data\n", "0K\n");
    cache_index(dir, 1, "2\n", "Unified\n", NULL);
    cache_index(dir, 2, "3\n", "Unified\n", "garbage\n");
    cr_expect_eq(bench_llc_sysfs_bytes(dir), 0, "sizes of 0, missing or unreadable");
    support_remove_tree(dir);
}

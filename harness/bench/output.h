/* kvcmp bench's tables, JSON and CSV (harness/bench/output.c) of a
 * run's results (harness/bench/bench_types.h). */
#ifndef KVCMP_HARNESS_BENCH_OUTPUT_H
#define KVCMP_HARNESS_BENCH_OUTPUT_H

#include "harness/bench/bench_types.h"

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

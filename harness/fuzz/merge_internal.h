/* What kvcmp merge's files share (merge.c: the shard summaries read and
 * checked; merge_output.c: the command and the merged result it prints
 * and writes). */
#ifndef KVCMP_HARNESS_FUZZ_MERGE_INTERNAL_H
#define KVCMP_HARNESS_FUZZ_MERGE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "harness/fuzz/signature_list.h"

#define SUMMARY_FORMAT "kvcmp-fuzz-summary/1"
/* A summary is a few kB per signature and variant: anything larger is not one. */
#define MAX_SUMMARY_BYTES ((size_t)16 << 20)
/* Counts are whole numbers a double holds exactly. */
#define MAX_COUNT 9007199254740992.0
/* Shard problems listed one by one; more are counted. */
#define MAX_PROBLEMS_LISTED 20

typedef struct {
    int64_t cases, invalid, skipped, failures;
} variant_tally;

typedef struct {
    char name[64];
    variant_tally t;
} variant_row;

typedef struct {
    cJSON *campaign;                  /* the first summary's identity (shard_index removed) */
    int shard_count;
    int *shards;                      /* shard indices seen, in the order seen */
    int num_shards, shard_capacity;
    double cases, failures, skipped, workers_lost, seconds;
    double expected_cases;            /* of a campaign of --cases: the cases its shards must have run */
    int cases_campaign;               /* the campaign ran a number of cases (not --seconds) */
    int max_failures_reached;         /* a shard stopped at --max-failures */
    int interrupted;
    char broken[700];                 /* a shard's "unaccounted": its candidate broke the case protocol */
    char problems[MAX_PROBLEMS_LISTED][700];
    int num_problems;
    kvc_signature_list list;
    variant_row *variants;
    int num_variants, variant_capacity;
    cJSON *failure_list;              /* every summary's entries, for the JUnit messages */
} merged;

/* merge.c */
const char *string_of(const cJSON *object, const char *key);
double number_of(const cJSON *object, const char *key, double otherwise);
void add_problem(merged *m, const char *format, ...) __attribute__((format(printf, 2, 3)));
int add_summary(merged *m, const char *path, int first, char *error, size_t size);

#endif

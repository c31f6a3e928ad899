/* The geometry key of a stage call: what a JIT-compiling candidate
 * (Triton) may specialise on, hashed.  One key serves the Python worker's
 * compile allowance (harness/backends/pyworker.c: a first call of a key
 * may take --compile-timeout on top of --timeout) and the campaign's
 * "geometries per stage" count (harness/fuzz/worker.c, summary.c).
 *
 * The key holds the stage call, R, the head dim, the cache dtype, each
 * cache's pages, page rows (the V4.1 ring's CAP among them), page bytes
 * and page stride, the block table's columns, the cos_sin rows, which
 * pointers are NULL, and for the other integer dimensions (tokens,
 * requests) only a Triton-like class: 1, a multiple of 16, or other.
 * eps and the fp8 scale (floats) are not in it. */
#ifndef KVCMP_HARNESS_FUZZ_GEOMETRY_H
#define KVCMP_HARNESS_FUZZ_GEOMETRY_H

#include <stdint.h>

#include "kvcmp/kvcmp.h"

/* The stage calls a candidate implements (a forward case makes two). */
enum {
    KVC_CALL_V4_SAVE, KVC_CALL_V4_COMPRESS, KVC_CALL_V41_NORM, KVC_CALL_V41_QUANT_INSERT, KVC_CALL_V41_PLAIN_INSERT,
    KVC_CALL_COUNT
};
/* "v4.save_partial_states", "v4.compress", "v41.save_compress_norm",
 * "v41.rope_quant_insert", "v41.rope_plain_insert". */
const char *kvc_call_name(int call);

/* The Triton-like class of an integer argument: 1, 16 (a multiple of 16,
 * 0 included) or 0 (other). */
int kvc_geometry_int_class(int64_t value);

/* Keys (never 0). */
uint64_t kvc_geometry_v4_save(const kvc_v4_save_args *a);
uint64_t kvc_geometry_v4_compress(const kvc_v4_compress_args *a);
uint64_t kvc_geometry_v41_norm(const kvc_v41_norm_args *a);
uint64_t kvc_geometry_v41_insert(const kvc_v41_insert_args *a, int quant);

/* A backend that records the key of every call it passes on to `inner`
 * (one per process: the campaign's worker wraps its candidate).  Calls
 * are recorded while recording is on; kvc_geometry_recorded hands back
 * up to `max` distinct (call, key) pairs and their count. */
const kvc_backend *kvc_geometry_recorder(const kvc_backend *inner);
void kvc_geometry_record(int on);   /* on: also forgets what was recorded */
int kvc_geometry_recorded(int *calls, uint64_t *keys, int max);

/* Distinct keys (the campaign's parent, one set per stage call). */
typedef struct {
    uint64_t *keys;          /* open addressing, 0 = free */
    int64_t capacity, count;
} kvc_geometry_set;
void kvc_geometry_set_add(kvc_geometry_set *s, uint64_t key);
void kvc_geometry_set_free(kvc_geometry_set *s);

#endif

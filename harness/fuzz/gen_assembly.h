/* The generator's case under assembly (gen, its sizes) and the helpers that build one (gen_assembly.c). */
#ifndef KVCMP_HARNESS_FUZZ_GEN_ASSEMBLY_H
#define KVCMP_HARNESS_FUZZ_GEN_ASSEMBLY_H

#include "kvcmp/generate.h"

#include <stdint.h>

#include "kvcmp/formats.h"
#include "kvcmp/kvcmp.h"

#define MAX_TOKENS 1100   /* the large_batch dimension's save batches: past 8 MiB of state rows */
#define SMALL_TOKENS 96   /* every other case */
#define MAX_REQUESTS 16   /* a wide batch; most cases have 1 to 3 */

typedef struct {
    kvc_rng *r;
    kvc_case *c;
    int family;
    int stage;
    int32_t ratio, head_dim;
    /* tokens */
    int64_t T;
    int num_requests;
    int64_t pos[MAX_TOKENS];
    int32_t req[MAX_TOKENS];
    int64_t slot[MAX_TOKENS];
    int64_t kv_slot[MAX_TOKENS];
    int64_t start[MAX_REQUESTS], count[MAX_REQUESTS];
    unsigned dimensions;     /* KVC_DIM_* */
    float fp8_scale;         /* an adversarial per-tensor scale, or 0 */
    float fp8_probe;         /* the bf16 value whose fp8 code it splits */
    const char *rule;        /* the validation rule a corruption targets */
    kvc_rng *edge_rng;       /* the bounds' own draws (harness/fuzz/edges.c) */
    unsigned edges;          /* KVC_EDGE_* bits a corruption put there */
    int geometry_pool;       /* kvc_gen_config's */
    uint64_t seed;
    int geometry_slot;       /* with the pool: the case's slot, which fixes its page rows */
    int tier;                /* with the pool: the case's size tier (pool_tier) */
    int forward;             /* a V4.1 norm case of a forward (gen_v41_norm) */
    int64_t drawn_columns;   /* with the pool: the block-table columns and cos_sin */
    int64_t drawn_cos_rows;  /* rows drawn as without it (the corruptions' range) */
} gen;

/* Sizes a geometry pool rounds up (pooled): block-table columns, state
 * pages, kv-cache rows, cos_sin rows, V4.1 ring blocks. */
enum { Q_COLUMNS, Q_STATE_PAGES, Q_KV_ROWS, Q_COS_ROWS, Q_RING_BLOCKS, Q_COUNT };

int64_t pick_page_rows(gen *g, const int64_t *table, int n, uint64_t which);
void pool_tier(gen *g, const int *which, const int64_t *needed, int n);
int64_t rows_for(int64_t needed, int64_t per);
int64_t pooled(gen *g, int which, int64_t needed, int64_t per);
int64_t closing_upper(const gen *g);
int64_t cos_rows_upper(const gen *g);
void *tensor(gen *g, const char *name, kvc_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2);
void fill_values(gen *g, float *dst, int64_t n, int role);
void fill_bytes(gen *g, void *dst, int64_t n);
void fill_filler(gen *g, float *dst, int64_t n);
void fill_state_rows(gen *g, float *cache, int64_t rows, int64_t width, const uint8_t *read);
void shuffle(kvc_rng *r, int64_t *v, int64_t n);
void plan_requests(gen *g, int max_history, int max_chunk);
void append_padding(gen *g);
void put_positions(gen *g);
int64_t assign_output_rows(gen *g, int64_t *rows_out, int64_t *page_rows);
void put_cos_sin(gen *g);

#endif

/* Physical-block permutation: see permute.h. */
#include "harness/fuzz/permute.h"

#include <stdlib.h>
#include <string.h>

#include "kvcmp/rng.h"

typedef struct {
    const char *cache;        /* paged tensor */
    const char *slots;        /* the slot tensor naming rows of it */
    int block_table;          /* block_table names its pages */
} paged_role;

static int paged_roles(const kvc_case *c, paged_role roles[2]) {
    int n = 0, v41 = c->stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM;
    if (kvc_case_get(c, "state_cache")) roles[n++] = (paged_role){"state_cache", "slot_mapping", !v41};
    if (kvc_case_get(c, "kv_cache"))
        roles[n++] = (paged_role){"kv_cache", kvc_case_get(c, "kv_slot_mapping") ? "kv_slot_mapping" : "slot_mapping", 0};
    return n;
}

/* Page i of the original lives at page perm[i] of the permuted case. */
static void move_pages(kvc_array *a, const int64_t *perm, int back) {
    int64_t pages = a->shape[0], page_bytes = a->count / (pages ? pages : 1) * kvc_dtype_size(a->dtype);
    uint8_t *moved = malloc((size_t)(pages * page_bytes) + 1);
    for (int64_t i = 0; i < pages; i++) {
        int64_t from = back ? perm[i] : i, to = back ? i : perm[i];
        memcpy(moved + to * page_bytes, (uint8_t *)a->data + from * page_bytes, (size_t)page_bytes);
    }
    memcpy(a->data, moved, (size_t)(pages * page_bytes));
    free(moved);
}

static void permute_role(kvc_case *c, const paged_role *role, const int64_t *perm) {
    kvc_array *cache = kvc_case_get(c, role->cache);
    int64_t rows = cache->shape[1];
    move_pages(cache, perm, 0);
    kvc_array *slots = kvc_case_get(c, role->slots);
    int64_t *v = slots ? slots->data : NULL;
    for (int64_t t = 0; v && t < slots->count; t++)
        if (v[t] >= 0 && v[t] / rows < cache->shape[0]) v[t] = perm[v[t] / rows] * rows + v[t] % rows;
    kvc_array *table = role->block_table ? kvc_case_get(c, "block_table") : NULL;
    for (int64_t i = 0; table && i < table->count; i++) {
        int32_t *b = (int32_t *)table->data + i;
        if (*b >= 0 && *b < cache->shape[0]) *b = (int32_t)perm[*b];
    }
}

void kvc_permute_case_pages(kvc_case *c, uint64_t seed, kvc_page_permutation *p) {
    memset(p, 0, sizeof *p);
    paged_role roles[2];
    p->count = paged_roles(c, roles);
    kvc_rng rng;
    kvc_rng_seed(&rng, seed, 0x9A6E5);
    for (int i = 0; i < p->count; i++) {
        int64_t pages = kvc_case_get(c, roles[i].cache)->shape[0];
        p->cache[i] = roles[i].cache;
        p->perm[i] = malloc((size_t)(pages + 1) * sizeof **p->perm);
        for (int64_t k = 0; k < pages; k++) p->perm[i][k] = k;
        for (int64_t k = pages - 1; k > 0; k--) {
            int64_t j = kvc_rng_below(&rng, k + 1), x = p->perm[i][k];
            p->perm[i][k] = p->perm[i][j];
            p->perm[i][j] = x;
        }
        permute_role(c, &roles[i], p->perm[i]);
    }
}

void kvc_unpermute_outputs(kvc_run_result *r, const kvc_page_permutation *p) {
    for (int o = 0; o < r->num_outputs; o++)
        for (int i = 0; i < p->count; i++)
            if (strcmp(r->outputs[o].name, p->cache[i]) == 0) move_pages(&r->outputs[o].array, p->perm[i], 1);
}

void kvc_page_permutation_free(kvc_page_permutation *p) {
    for (int i = 0; i < p->count; i++) free(p->perm[i]);
    p->count = 0;
}

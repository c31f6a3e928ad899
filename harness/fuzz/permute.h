/* Physical-block permutation: the same logical case with its cache pages
 * moved to other physical pages (slots and block-table entries follow).
 * Every output must be the same once the pages are moved back; the
 * fuzzer's permutation check and `kvcmp replay` of a case whose
 * case.json records a permutation both use it. */
#ifndef KVCMP_FUZZ_PERMUTE_H
#define KVCMP_FUZZ_PERMUTE_H

#include <stdint.h>

#include "kvcmp/case.h"
#include "kvcmp/run.h"

typedef struct {
    int count;
    const char *cache[2];     /* "state_cache", "kv_cache" */
    int64_t *perm[2];         /* page i of the original is page perm[i] */
} kvc_page_permutation;

/* Permutes c's paged caches in place, each by a shuffle drawn from seed
 * (the same seed and page counts give the same permutation). */
void kvc_permute_case_pages(kvc_case *c, uint64_t seed, kvc_page_permutation *p);
/* Moves the pages of r's caches back where the original case has them. */
void kvc_unpermute_outputs(kvc_run_result *r, const kvc_page_permutation *p);
void kvc_page_permutation_free(kvc_page_permutation *p);

#endif

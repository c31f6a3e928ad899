/* Checks of the harness's own multi-step and permutation checks against
 * candidates and cases made for them, not against the harness itself:
 *  - the history check (harness/fuzz/history.c) must see a candidate whose
 *    V4.1 ring alone differs after chunked feeding (its latents and
 *    compressed rows never do);
 *  - the permutation (harness/fuzz/permute.c) must move pages, on caches
 *    of two pages too, with slots and block tables following them.
 * Used by tests/fuzz/test_harness_checks.c and by the self-check driver
 * of the harness mutants (harness/mutants/self_check.c): each returns 0
 * when the check holds, else 1 with why. */
#ifndef KVCMP_TESTS_HARNESS_PROPERTY_H
#define KVCMP_TESTS_HARNESS_PROPERTY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/history.h"
#include "harness/fuzz/permute.h"
#include "kvcmp/generate.h"
#include "kvcmp/run.h"
#include "tests/validate/spec_rules.h"

/* ---- the history check and the V4.1 ring ---------------------------------- */

/* The reference, then one bit flipped in the ring row of the chunk's
 * second-to-last token: stored by this step, never read by a later one
 * (the next chunk's first token reads the row of this chunk's last
 * token, and a later wrap overwrites the row before any read), so only
 * the ring differs, never a latent or a compressed row. */
static inline int harness_norm_flipping_an_unread_ring_row(const kvc_v41_norm_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_save_compress_norm(a, err);
    if (rc != KVC_OK || a->compress_ratio != 2 || a->num_requests < 1) return rc;
    int64_t b = a->query_start_loc[0], e = a->query_start_loc[1];
    if (e - b < 2 || a->slot_mapping[e - 2] < 0) return rc;
    uint8_t *row = (uint8_t *)a->state_cache.data + (size_t)spec_plain_row_offset(&a->state_cache, a->slot_mapping[e - 2], 4096);
    row[5] ^= 0x01;
    return rc;
}

static inline int harness_history_sees_the_ring(char *why, size_t size) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.name = "ring-only";
    candidate.v41_save_compress_norm = harness_norm_flipping_an_unread_ring_row;
    int checked = 0;
    for (uint64_t seed = 1; seed < 40 && checked < 3; seed++) {
        kvc_rng rng;
        kvc_rng_seed(&rng, seed, 41);
        kvc_history h;
        if (kvc_history_generate(&rng, 41, 2, 512, KVC_FAM_NORMAL, &h)) { snprintf(why, size, "no V4.1 history"); return 1; }
        if (h.length < 12) { kvc_history_free(&h); continue; }
        checked++;
        char detail[600] = "";
        int self = kvc_history_lockstep(&kvc_reference_backend, &kvc_reference_backend, &h, KVC_FEED_CHUNKS, seed, NULL, detail, sizeof detail);
        int diverged = kvc_history_lockstep(&kvc_reference_backend, &candidate, &h, KVC_FEED_CHUNKS, seed, NULL, detail, sizeof detail);
        kvc_history_free(&h);
        if (self != 0) { snprintf(why, size, "the reference diverges from itself (seed %llu)", (unsigned long long)seed); return 1; }
        if (diverged != 1) {
            snprintf(why, size, "history seed %llu fed in chunks: a candidate whose V4.1 ring alone differs passed the history check",
                     (unsigned long long)seed);
            return 1;
        }
        if (!strstr(detail, "ring page")) {
            snprintf(why, size, "history seed %llu: the divergence is not named as the ring's: %s", (unsigned long long)seed, detail);
            return 1;
        }
    }
    if (checked < 3) { snprintf(why, size, "too few histories of 12 tokens or more"); return 1; }
    return 0;
}

/* ---- the permutation moves pages ---------------------------------------- */

/* Case `index` of `variant`, never corrupted, whose `cache` has `pages` pages; 0 if none in 400. */
static inline int harness_case_with_pages(const char *variant, const char *cache, int64_t pages, kvc_case *out) {
    int v = -1;
    for (int i = 0; i < kvc_variant_count(); i++)
        if (strcmp(kvc_variant(i)->name, variant) == 0) v = i;
    if (v < 0) return 0;
    kvc_gen_config config = {.seed = 5, .variant_mask = 1ull << v, .family_mask = 1u << KVC_FAM_NORMAL};
    for (int64_t index = 0; index < 400; index++) {
        kvc_gen_case g;
        kvc_gen_make(&config, index, &g);
        kvc_array *a = kvc_case_get(&g.c, cache);
        int found = a && a->shape[0] == pages && !g.invalid[0] && kvc_case_copy(out, &g.c) == 0;
        kvc_gen_free(&g);
        if (found) return 1;
    }
    return 0;
}

static inline int64_t harness_page_bytes(const kvc_array *a) { return a->count / a->shape[0] * kvc_dtype_size(a->dtype); }

/* One permutation of c checked: every page where perm says, every slot
 * and block-table entry following its page.  1 when a page of `target` moved. */
static inline int harness_check_one_permutation(const kvc_case *c, uint64_t seed, const char *target, int *bad, char *why, size_t size) {
    kvc_case p;
    if (kvc_case_copy(&p, c)) { *bad = 1; snprintf(why, size, "out of memory"); return 0; }
    kvc_page_permutation perm;
    kvc_permute_case_pages(&p, seed, &perm);
    int moved = 0;
    for (int i = 0; i < perm.count && !*bad; i++) {
        const kvc_array *from = kvc_case_get(c, perm.cache[i]), *to = kvc_case_get(&p, perm.cache[i]);
        int64_t pages = from->shape[0], bytes = harness_page_bytes(from), rows = from->shape[1];
        for (int64_t k = 0; k < pages; k++) {
            moved |= strcmp(perm.cache[i], target) == 0 && perm.perm[i][k] != k;
            if (perm.perm[i][k] < 0 || perm.perm[i][k] >= pages ||
                memcmp((const uint8_t *)to->data + perm.perm[i][k] * bytes, (const uint8_t *)from->data + k * bytes, (size_t)bytes) != 0) {
                *bad = 1;
                snprintf(why, size, "%s page %lld is not at page %lld after the permutation", perm.cache[i], (long long)k,
                         (long long)perm.perm[i][k]);
            }
        }
        /* A cache's rows are named by its slot tensor; V4's state pages by the block table too. */
        const char *slot_name = strcmp(perm.cache[i], "kv_cache") == 0 && kvc_case_get(c, "kv_slot_mapping") ? "kv_slot_mapping" : "slot_mapping";
        const kvc_array *s0 = kvc_case_get(c, slot_name), *s1 = kvc_case_get(&p, slot_name);
        for (int64_t t = 0; t < s0->count && !*bad; t++) {
            int64_t v = ((const int64_t *)s0->data)[t], w = ((const int64_t *)s1->data)[t];
            int64_t want = v >= 0 && v / rows < pages ? perm.perm[i][v / rows] * rows + v % rows : v;
            if (w != want) {
                *bad = 1;
                snprintf(why, size, "%s[%lld] = %lld did not follow its page: %lld, not %lld", slot_name, (long long)t, (long long)v,
                         (long long)w, (long long)want);
            }
        }
        const kvc_array *b0 = kvc_case_get(c, "block_table"), *b1 = kvc_case_get(&p, "block_table");
        if (strcmp(perm.cache[i], "state_cache") != 0 || !b0 || c->stage >= KVC_STAGE_V41_SAVE_COMPRESS_NORM) continue;
        for (int64_t k = 0; k < b0->count && !*bad; k++) {
            int32_t v = ((const int32_t *)b0->data)[k], w = ((const int32_t *)b1->data)[k];
            int32_t want = v >= 0 && v < pages ? (int32_t)perm.perm[i][v] : v;
            if (w != want) {
                *bad = 1;
                snprintf(why, size, "block_table entry %lld = %d did not follow its page: %d, not %d", (long long)k, v, w, want);
            }
        }
    }
    /* Moved pages of different bytes: the case itself changed. */
    for (int i = 0; i < perm.count && moved && !*bad; i++) {
        const kvc_array *from = kvc_case_get(c, perm.cache[i]), *to = kvc_case_get(&p, perm.cache[i]);
        int64_t bytes = harness_page_bytes(from);
        int any = 0;
        for (int64_t k = 0; k < from->shape[0]; k++)
            any |= perm.perm[i][k] != k && memcmp((const uint8_t *)from->data + k * bytes,
                                                  (const uint8_t *)from->data + perm.perm[i][k] * bytes, (size_t)bytes) != 0;
        if (any && memcmp(from->data, to->data, (size_t)(bytes * from->shape[0])) == 0) {
            *bad = 1;
            snprintf(why, size, "%s: pages moved, yet the permuted cache holds the original bytes", perm.cache[i]);
        }
    }
    /* The reference's outputs, moved back, are the original run's. */
    kvc_run_options o = {.canary = 0xA5};
    kvc_run_result a, b;
    int rc_a = kvc_run_case(&kvc_reference_backend, c, &o, &a), rc_b = kvc_run_case(&kvc_reference_backend, &p, &o, &b);
    if (!*bad && (rc_a != KVC_OK || rc_b != KVC_OK)) {
        *bad = 1;
        snprintf(why, size, "the reference refused the case (%d) or its permutation (%d): %s", rc_a, rc_b, rc_a ? a.error.message : b.error.message);
    }
    if (!*bad) {
        kvc_unpermute_outputs(&b, &perm);
        for (int k = 0; k < a.num_outputs && !*bad; k++)
            if (memcmp(a.outputs[k].array.data, b.outputs[k].array.data,
                       (size_t)a.outputs[k].array.count * (size_t)kvc_dtype_size(a.outputs[k].array.dtype)) != 0) {
                *bad = 1;
                snprintf(why, size, "%s differs once its pages are moved back", a.outputs[k].name);
            }
    }
    kvc_run_result_free(&a);
    kvc_run_result_free(&b);
    kvc_page_permutation_free(&perm);
    kvc_case_free(&p);
    return moved;
}

/* On caches of two pages (half of all shuffles keep them in place) and
 * of more: some of 16 seeds must move pages, and every permutation must
 * move slots, block tables and outputs with them. */
static inline int harness_permutation_moves_pages(char *why, size_t size) {
    struct { const char *variant, *cache; int64_t pages; } shapes[] = {
        {"v41.rope_plain_insert/bf16", "kv_cache", 2},
        {"v4.forward/d128/r4", "state_cache", 2},
        {"v41.save_compress_norm/r2", "state_cache", 2},
        {"v41.rope_plain_insert/fp8", "kv_cache", 3},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        kvc_case c;
        if (!harness_case_with_pages(shapes[s].variant, shapes[s].cache, shapes[s].pages, &c)) {
            snprintf(why, size, "no %s case with a %lld-page %s", shapes[s].variant, (long long)shapes[s].pages, shapes[s].cache);
            return 1;
        }
        int moved = 0, bad = 0;
        for (uint64_t seed = 1; seed <= 16 && !bad; seed++)
            moved += harness_check_one_permutation(&c, seed, shapes[s].cache, &bad, why, size);
        kvc_case_free(&c);
        if (bad) return 1;
        if (moved < 4) {
            snprintf(why, size, "%s with a %lld-page %s: only %d of 16 permutations moved a page", shapes[s].variant,
                     (long long)shapes[s].pages, shapes[s].cache, moved);
            return 1;
        }
    }
    return 0;
}

#endif

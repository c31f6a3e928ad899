/* Checks of the harness's own multi-step and permutation checks against
 * candidates and cases made for them, not against the harness itself:
 *  - the history check (harness/fuzz/history.c) must see a candidate whose
 *    V4.1 ring alone differs after chunked feeding (its latents and
 *    compressed rows never do);
 *  - the permutation (harness/fuzz/permute.c) must move pages, on caches
 *    of two pages too, with slots and block tables following them;
 *  - the generator must draw V4.1 ring chunks longer than CAP as a
 *    regular share of its ring cases, some with padding among their last
 *    CAP rows (SPEC.md 5.1 ring store);
 *  - the wait policy a case records must be the OMP_WAIT_POLICY the
 *    process was started under (as /proc/self/environ holds it);
 *  - a history drawn under a geometry pool must be sized for the next
 *    power of two of its length, its page rows and padding from the pool.
 * Used by tests/fuzz/test_harness_checks.c and by the self-check driver
 * of the harness mutants (harness/mutants/self_check.c): each returns 0
 * when the check holds, else 1 with why. */
#ifndef KVCMP_TESTS_HARNESS_PROPERTY_H
#define KVCMP_TESTS_HARNESS_PROPERTY_H

#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "harness/fuzz/history.h"
#include "harness/fuzz/permute.h"
#include "harness/fuzz/run.h"
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

/* ---- V4.1 ring chunks past CAP ------------------------------------------- */

/* Of 400 v41.save_compress_norm/r2 cases: those where a request's chunk
 * (query_start_loc) is longer than the ring's CAP (state_cache rows per
 * page), and those of them with a padding slot among the chunk's last CAP
 * tokens.  One ring case in four is drawn past CAP: at least one in eight
 * must be, and a fair share of them padded. */
static inline int harness_ring_chunks_past_cap(char *why, size_t size) {
    int v = -1;
    for (int i = 0; i < kvc_variant_count(); i++)
        if (strcmp(kvc_variant(i)->name, "v41.save_compress_norm/r2") == 0) v = i;
    if (v < 0) { snprintf(why, size, "no variant v41.save_compress_norm/r2"); return 1; }
    kvc_gen_config config = {.seed = 3, .variant_mask = 1ull << v, .family_mask = 1u << KVC_FAM_NORMAL};
    int cases = 0, past = 0, padded = 0;
    for (int64_t index = 0; index < 400; index++) {
        kvc_gen_case g;
        kvc_gen_make(&config, index, &g);
        const kvc_array *qsl = kvc_case_get(&g.c, "query_start_loc"), *slots = kvc_case_get(&g.c, "slot_mapping"),
                        *ring = kvc_case_get(&g.c, "state_cache");
        if (qsl && slots && ring && !g.invalid[0]) {
            cases++;
            int64_t cap = ring->shape[1];
            int is_past = 0, is_padded = 0;
            for (int64_t q = 0; q + 1 < qsl->count; q++) {
                int64_t b = ((const int32_t *)qsl->data)[q], e = ((const int32_t *)qsl->data)[q + 1];
                if (e - b <= cap) continue;
                is_past = 1;
                for (int64_t t = e - cap; t < e; t++) is_padded |= ((const int64_t *)slots->data)[t] < 0;
            }
            past += is_past;
            padded += is_padded;
        }
        kvc_gen_free(&g);
    }
    if (cases < 300) { snprintf(why, size, "only %d of 400 generated cases are valid ring cases", cases); return 1; }
    if (past * 8 < cases) {
        snprintf(why, size, "only %d of %d V4.1 ring cases feed a chunk longer than CAP (one in four is drawn so)", past, cases);
        return 1;
    }
    if (padded * 3 < past) {
        snprintf(why, size, "only %d of the %d chunks past CAP hold a padding slot among their last CAP tokens", padded, past);
        return 1;
    }
    return 0;
}

/* ---- the wait policy recorded ----------------------------------------------- */

/* OMP_WAIT_POLICY as the process was started (its initial environment,
 * which setenv does not change): "active", "passive" or "default". */
static inline const char *harness_wait_policy_at_exec(void) {
    FILE *f = fopen("/proc/self/environ", "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *policy = "default";
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, "OMP_WAIT_POLICY=", 16) == 0) {
            const char *value = buf + i + 16;
            policy = strcasecmp(value, "active") == 0 ? "active" : strcasecmp(value, "passive") == 0 ? "passive" : "default";
        }
    return policy;
}

/* What kvcmp fuzz records per case (case.json meta replay
 * "omp_wait_policy", the REPRO prefix, the coverage) is the policy
 * libgomp read at load.  Meaningful when the process was started under
 * OMP_WAIT_POLICY=active or passive (the self-check program restarts
 * itself under active). */
static inline int harness_wait_policy_recorded(char *why, size_t size) {
    const char *want = harness_wait_policy_at_exec(), *got = kvc_wait_policy_at_load();
    if (!want) { snprintf(why, size, "cannot read /proc/self/environ"); return 1; }
    if (!got || strcmp(got, want) != 0) {
        snprintf(why, size, "started under OMP_WAIT_POLICY %s, yet the policy recorded is %s", want, got ? got : "(null)");
        return 1;
    }
    return 0;
}

/* ---- histories under a geometry pool ---------------------------------------- */

static inline int64_t harness_power_of_two_at_least(int64_t n) {
    int64_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

/* Histories of both versions drawn under a pool: the caches, block table
 * and cos_sin sized for P, the next power of two of the length, no spare
 * pages; two histories of different streams under the same pool seed
 * share page rows and padding.  Some lengths must not be powers of two,
 * and a pooled history fed in chunks must agree with its prefill. */
static inline int harness_history_pooled_sizes(char *why, size_t size) {
    static const int versions[] = {4, 41};
    int uneven = 0, fed = 0;
    for (int vi = 0; vi < 2; vi++)
        for (uint64_t seed = 1; seed <= 24; seed++) {
            kvc_rng r, pool, r2, pool2;
            kvc_rng_seed(&r, seed, 7);
            kvc_rng_seed(&pool, 1000 + seed, 8);
            kvc_rng_seed(&r2, seed + 500, 7);
            kvc_rng_seed(&pool2, 1000 + seed, 8);
            kvc_history h, h2;
            if (kvc_history_generate_pooled(&r, versions[vi], 0, 0, KVC_FAM_NORMAL, &pool, &h)) {
                snprintf(why, size, "no pooled history");
                return 1;
            }
            if (kvc_history_generate_pooled(&r2, versions[vi], 0, 0, KVC_FAM_NORMAL, &pool2, &h2)) {
                kvc_history_free(&h);
                snprintf(why, size, "no pooled history");
                return 1;
            }
            int64_t L = h.length, P = harness_power_of_two_at_least(L), R = h.compress_ratio, KB = h.kv_block_size;
            uneven += P != L;
            int64_t want_rows = (P / R) * R + R + 1, want_kv_pages = (P / R + 1 + KB - 1) / KB;
            int bad = 0;
            if (h.cos_sin_rows != want_rows)
                bad = snprintf(why, size, "V%d history of length %lld under a pool: %lld cos_sin rows, not %lld", versions[vi], (long long)L,
                               (long long)h.cos_sin_rows, (long long)want_rows);
            else if (h.kv_pages != want_kv_pages)
                bad = snprintf(why, size, "V%d history of length %lld under a pool (KB %lld): %lld compressed pages, not %lld", versions[vi],
                               (long long)L, (long long)KB, (long long)h.kv_pages, (long long)want_kv_pages);
            else if (versions[vi] == 4) {
                int64_t want_columns = (P + h.state_block_size - 1) / h.state_block_size;
                if (h.block_columns != want_columns || h.state_pages != want_columns)
                    bad = snprintf(why, size, "V4 history of length %lld under a pool (BS %lld): %lld block columns and %lld state pages, not %lld",
                                   (long long)L, (long long)h.state_block_size, (long long)h.block_columns, (long long)h.state_pages,
                                   (long long)want_columns);
            }
            if (!bad && (h.state_block_size != h2.state_block_size || h.kv_block_size != h2.kv_block_size || h.page_padding != h2.page_padding))
                bad = snprintf(why, size, "two V%d histories under the same pool seed differ in page rows or padding", versions[vi]);
            if (!bad && seed <= 2) {
                char detail[600] = "";
                kvc_history_result once, chunked;
                kvc_error err = {0};
                memset(&once, 0, sizeof once);
                memset(&chunked, 0, sizeof chunked);
                if (kvc_history_feed(&kvc_reference_backend, &h, KVC_FEED_PREFILL, seed, &once, &err) != KVC_OK ||
                    kvc_history_feed(&kvc_reference_backend, &h, KVC_FEED_CHUNKS, seed, &chunked, &err) != KVC_OK)
                    bad = snprintf(why, size, "the reference refused a pooled V%d history: %s", versions[vi], err.message);
                else if (kvc_history_compare(&h, &once, &chunked, detail, sizeof detail) != 0)
                    bad = snprintf(why, size, "a pooled V%d history fed in chunks differs from its prefill: %s", versions[vi], detail);
                kvc_history_result_free(&once);
                kvc_history_result_free(&chunked);
                fed++;
            }
            kvc_history_free(&h);
            kvc_history_free(&h2);
            if (bad) return 1;
        }
    if (uneven < 8) { snprintf(why, size, "only %d of 48 pooled histories have a length that is not a power of two", uneven); return 1; }
    if (fed < 4) { snprintf(why, size, "too few pooled histories fed"); return 1; }
    return 0;
}

#endif

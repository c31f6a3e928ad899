/* The harness tests itself: its comparison must see every byte,
 * its generator must reach every dimension at fixed seeds, its shrinker
 * must keep the failure it was given and stop only where one more step
 * loses it.  Each test fails on a harness that skips a byte, never draws
 * a dimension, accepts another failure or steps coarsely. */
#include <math.h>
#include <omp.h>

#include "tests/test_support.h"

#include "harness/fuzz/dimensions.h"
#include "harness/fuzz/run.h"
#include "harness/fuzz/signature.h"
#include "harness/replay/conditions.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "kvcmp/formats.h"
#include "kvcmp/reference.h"
#include "kvcmp/shrink.h"
#include "kvcmp/validate.h"

/* ---- the comparison sees every byte --------------------------------- */

static void copy_result(const kvc_run_result *from, kvc_run_result *to) {
    memset(to, 0, sizeof *to);
    for (int i = 0; i < from->num_outputs; i++) {
        const kvc_array *a = &from->outputs[i].array;
        snprintf(to->outputs[i].name, sizeof to->outputs[i].name, "%s", from->outputs[i].name);
        cr_assert_eq(kvc_array_alloc(&to->outputs[i].array, a->dtype, a->ndim, a->shape), 0);
        memcpy(to->outputs[i].array.data, a->data, (size_t)a->count * (size_t)kvc_dtype_size(a->dtype));
        to->num_outputs++;
    }
}

static int64_t output_bytes(const kvc_run_result *r) {
    int64_t bytes = 0;
    for (int i = 0; i < r->num_outputs; i++) bytes += r->outputs[i].array.count * kvc_dtype_size(r->outputs[i].array.dtype);
    return bytes;
}

/* The first valid case of `variant` whose outputs take at most max_bytes. */
static void small_case(const char *variant, int64_t max_bytes, kvc_case *c, kvc_run_result *expected) {
    for (int64_t i = 0; i < 400; i++) {
        support_make_case(variant, KVC_FAM_NORMAL, 21, i, c);
        if (kvc_run_case(&kvc_reference_backend, c, NULL, expected) == KVC_OK && output_bytes(expected) <= max_bytes) return;
        kvc_run_result_free(expected);
        kvc_case_free(c);
    }
    cr_assert_fail("no case of %s with at most %lld output bytes", variant, (long long)max_bytes);
}

/* Flip one bit of every output byte in turn: each flip must fail the
 * exact comparison, located at that byte, with every byte counted. */
Test(harness_self, comparison_reports_every_flipped_byte, .timeout = 120) {
    static const char *const variants[] = {"v41.rope_plain_insert/fp8", "v41.rope_plain_insert/bf16", "v41.rope_quant_insert",
                                           "v4.compress/d128/r4", "v4.save_partial_states/d128/r4", "v41.save_compress_norm/r1"};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        kvc_case c;
        kvc_run_result expected, got;
        small_case(variants[v], 8192, &c, &expected);
        copy_result(&expected, &got);
        int64_t flips = 0;
        for (int i = 0; i < got.num_outputs; i++) {
            kvc_array *a = &got.outputs[i].array;
            int64_t bytes = a->count * kvc_dtype_size(a->dtype);
            for (int64_t k = 0; k < bytes; k++, flips++) {
                ((uint8_t *)a->data)[k] ^= 0x01;
                kvc_compare_report report;
                kvc_compare_results(&c, &expected, &got, KVC_POLICY_EXACT, &report);
                ((uint8_t *)a->data)[k] ^= 0x01;
                cr_assert(kvc_report_failed(&report), "%s: flipping byte %lld of %s was not reported", variants[v], (long long)k,
                          got.outputs[i].name);
                cr_assert_str_eq(report.first_tensor, got.outputs[i].name, "%s byte %lld", variants[v], (long long)k);
                cr_assert(report.first_offset <= k && k < report.first_offset + report.first_width,
                          "%s: byte %lld of %s reported at %lld (+%d)", variants[v], (long long)k, got.outputs[i].name,
                          (long long)report.first_offset, report.first_width);
                cr_assert_eq(report.bytes_compared, output_bytes(&expected), "%s: %lld of %lld bytes compared", variants[v],
                             (long long)report.bytes_compared, (long long)output_bytes(&expected));
            }
        }
        cr_expect_gt(flips, 0, "%s: no output byte", variants[v]);
        kvc_compare_report same;
        kvc_compare_results(&c, &expected, &got, KVC_POLICY_EXACT, &same);
        cr_expect_not(kvc_report_failed(&same), "%s: identical outputs reported as different", variants[v]);
        kvc_run_result_free(&expected);
        kvc_run_result_free(&got);
        kvc_case_free(&c);
    }
}

/* ---- the generator reaches every dimension -------------------------- */

/* Within the first 1200 cases of seed 1 (the mutant check's seed), every
 * family, every variant, every dimension and positions with bit 31 set
 * (and past 2^32) occur, as the coverage tally counts them. */
Test(harness_self, generator_reaches_every_dimension_at_a_fixed_seed, .timeout = 240) {
    kvc_gen_config config = {.seed = 1};
    kvc_coverage_tally *tally = calloc(1, sizeof *tally);
    int64_t families[KVC_FAM_COUNT] = {0}, variants[64] = {0};
    for (int64_t i = 0; i < 1200; i++) {
        kvc_gen_case g;
        kvc_gen_make(&config, i, &g);
        variants[g.variant]++;
        if (!g.history) {
            families[g.family]++;
            kvc_case_coverage k;
            kvc_case_coverage_of(&g, &k);
            kvc_coverage_add(tally, &k);
        }
        kvc_gen_free(&g);
    }
    for (int f = 0; f < KVC_FAM_COUNT; f++) cr_expect_gt(families[f], 0, "family %s never drawn", kvc_family_name(f));
    for (int v = 0; v < kvc_variant_count(); v++) cr_expect_gt(variants[v], 0, "variant %s never drawn", kvc_variant(v)->name);
    for (int d = 0; d < KVC_DIM_COUNT; d++) cr_expect_gt(tally->dimensions[d], 0, "dimension %s never reached", kvc_dimension_name(d));
    cr_expect_gt(tally->positions[4], 0, "no position in [2^31, 2^32): bit 31 never set");
    cr_expect_gt(tally->positions[5], 0, "no position past 2^32");
    cr_expect_gt(tally->closing[5], 0, "no call with 16+ closing tokens");
    free(tally);
}

/* The aliased-buffers check (SPEC.md 8.1) is a condition of the check,
 * drawn from each case's salt: within the first 1200 cases of seed 1
 * (salts as worker.c's case_salt makes them) it is drawn, for a small share. */
Test(harness_self, aliased_buffers_drawn_at_a_fixed_seed) {
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &kvc_reference_backend, .threads = 1};
    int drawn = 0;
    for (uint64_t index = 0; index < 1200; index++) {
        kvc_fuzz_conditions k;
        kvc_fuzz_draw_conditions(&target, 1 * 0x9E3779B97F4A7C15ull + index, &k);
        drawn += k.alias_seed != 0;
    }
    cr_expect(drawn > 0 && drawn < 120, "%d of 1200 cases draw aliased buffers", drawn);
}

/* The candidate's page padding: whole lines mostly, and strides that are
 * not a multiple of 64 (SPEC.md 3), always a multiple of 4 (SPEC.md 8). */
Test(harness_self, page_paddings_include_odd_strides) {
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &kvc_reference_backend, .threads = 1};
    int odd = 0, lines = 0;
    for (uint64_t salt = 0; salt < 400; salt++) {
        kvc_fuzz_conditions k;
        kvc_fuzz_draw_conditions(&target, salt, &k);
        cr_assert(k.page_padding > 0 && k.page_padding % 4 == 0, "padding %lld", (long long)k.page_padding);
        odd += k.page_padding % 64 != 0;
        lines += k.page_padding % 64 == 0;
    }
    cr_expect_gt(odd, 0, "no odd page stride in 400 draws");
    cr_expect_gt(lines, odd, "odd strides outnumber whole lines");
}

/* Replay takes every padding the fuzzer draws: a saved case's recorded
 * padding of 36 bytes reads back, one of 34 is refused. */
Test(harness_self, replay_reads_odd_page_paddings) {
    kvc_case c = {0};
    kvc_replay_conditions k;
    char error[256];
    c.meta_json = strdup("{\"replay\":{\"page_padding\":36}}");
    cr_expect_eq(kvc_replay_conditions_read(&c, &k, error, sizeof error), 0, "%s", error);
    cr_expect_eq(k.page_padding, 36);
    free(c.meta_json);
    c.meta_json = strdup("{\"replay\":{\"page_padding\":34}}");
    cr_expect_neq(kvc_replay_conditions_read(&c, &k, error, sizeof error), 0);
    cr_expect(strstr(error, "multiple of 4") != NULL, "%s", error);
    free(c.meta_json);
}

/* ---- what each blind-spot dimension promises ------------------------ */

static int find_dimension(unsigned bit, const char *variant, int family, kvc_gen_case *out) {
    kvc_gen_config config = {.seed = 3};
    if (variant) config.variant_mask = kvc_variant_mask(variant, (char[64]){0}, 64);
    if (family >= 0) config.family_mask = 1u << family;
    for (int64_t i = 0; i < 4000; i++) {
        kvc_gen_make(&config, i, out);
        if (!out->history && (out->dimensions & bit)) return 1;
        kvc_gen_free(out);
    }
    return 0;
}

static int reference_runs(const kvc_case *c, kvc_run_result *r) { return kvc_run_case(&kvc_reference_backend, c, NULL, r); }

static int is_nan_or_plus_inf(float x) { return isnan(x) || (isinf(x) && x > 0); }

/* isolated_edges: no NaN or +inf in any input, -inf scores and -0 kv
 * present, and the written latents carry no NaN but signed zeros: the
 * edge reaches an output instead of drowning in a NaN token. */
Test(harness_self, isolated_edges_reach_the_output_without_nan) {
    kvc_gen_case g;
    cr_assert(find_dimension(KVC_DIM_ISOLATED_EDGES, "v41.save_compress_norm/r2", KVC_FAM_ISOLATED_EDGES, &g));
    int minus_inf = 0, minus_zero = 0;
    static const char *const f32_inputs[] = {"kv_score", "state_cache"};
    for (int n = 0; n < 2; n++) {
        kvc_array *a = kvc_case_get(&g.c, f32_inputs[n]);
        for (int64_t i = 0; i < a->count; i++) {
            float x = ((float *)a->data)[i];
            cr_assert_not(is_nan_or_plus_inf(x), "%s[%lld] = %a", f32_inputs[n], (long long)i, (double)x);
            minus_inf += isinf(x) != 0;
            minus_zero += kvc_f32_bits(x) == 0x80000000u;
        }
    }
    cr_expect_gt(minus_inf, 0, "no -inf score");
    cr_expect_gt(minus_zero, 0, "no -0 kv");
    kvc_run_result r;
    cr_assert_eq(reference_runs(&g.c, &r), KVC_OK);
    kvc_array *latent = &r.outputs[0].array, *before = kvc_case_get(&g.c, "latent");
    cr_assert_str_eq(r.outputs[0].name, "latent");
    int64_t written = 0, zeros = 0;
    for (int64_t i = 0; i < latent->count; i++) {
        uint16_t v = ((uint16_t *)latent->data)[i];
        if (v == ((uint16_t *)before->data)[i]) continue;
        written++;
        cr_assert((v & 0x7FFF) <= 0x7F80, "latent value %lld is NaN", (long long)i);
        zeros += (v & 0x7FFF) == 0;
    }
    cr_expect_gt(written, 0, "no latent written");
    cr_expect_gt(zeros, 0, "no signed zero in the written latents");
    kvc_run_result_free(&r);
    kvc_gen_free(&g);
}

/* cross_magnitude: scores whose exp underflows (below -80) paired with kv
 * past 2^100, and no block of the written rows goes non-finite. */
Test(harness_self, cross_magnitude_pairs_underflow_with_huge_kv) {
    kvc_gen_case g;
    cr_assert(find_dimension(KVC_DIM_CROSS_MAGNITUDE, "v4.compress/d512/r4", KVC_FAM_CROSS_MAGNITUDE, &g));
    kvc_array *state = kvc_case_get(&g.c, "state_cache");
    int64_t half = state->shape[2] / 2, paired = 0;
    for (int64_t row = 0; row < state->shape[0] * state->shape[1]; row++)
        for (int64_t i = 0; i < half; i++) {
            float kv = ((float *)state->data)[row * 2 * half + i], score = ((float *)state->data)[row * 2 * half + half + i];
            cr_assert(isfinite(kv) && isfinite(score), "row %lld: kv %a score %a", (long long)row, (double)kv, (double)score);
            paired += score < -80.0f && fabsf(kv) >= 0x1p100f;
        }
    cr_expect_gt(paired, 0, "no underflowing score next to a kv past 2^100");
    kvc_run_result r;
    cr_assert_eq(reference_runs(&g.c, &r), KVC_OK);
    kvc_run_result_free(&r);
    kvc_gen_free(&g);
}

Test(harness_self, padding_slots_other_than_minus_one_are_accepted) {
    kvc_gen_case g;
    cr_assert(find_dimension(KVC_DIM_PADDING_SLOTS, NULL, -1, &g));
    int64_t other = 0;
    static const char *const names[] = {"slot_mapping", "kv_slot_mapping"};
    for (int n = 0; n < 2; n++) {
        kvc_array *a = kvc_case_get(&g.c, names[n]);
        for (int64_t t = 0; a && t < a->count; t++) other += ((int64_t *)a->data)[t] < -1;
    }
    cr_expect_gt(other, 0, "no slot below -1");
    kvc_run_result r;
    cr_expect_eq(reference_runs(&g.c, &r), KVC_OK, "%s: %s", kvc_variant(g.variant)->name, r.error.message);
    kvc_run_result_free(&r);
    kvc_gen_free(&g);
}

Test(harness_self, large_rings_and_batches) {
    kvc_gen_case g;
    cr_assert(find_dimension(KVC_DIM_LARGE_RING, NULL, -1, &g));
    int64_t cap = kvc_case_get(&g.c, "state_cache")->shape[1];
    cr_expect(cap == 64 || cap == 128, "CAP %lld", (long long)cap);
    kvc_run_result r;
    cr_expect_eq(reference_runs(&g.c, &r), KVC_OK);
    kvc_run_result_free(&r);
    kvc_gen_free(&g);
    cr_assert(find_dimension(KVC_DIM_LARGE_BATCH, "v4.compress", -1, &g));
    cr_expect_gt(kvc_case_tokens(&g.c), 96);
    kvc_gen_free(&g);
    /* The D = 512, R = 4 save: past the optimized backend's 8 MiB
     * streaming-store threshold (rows of 2 x 2 x 512 fp32). */
    cr_assert(find_dimension(KVC_DIM_LARGE_BATCH, "v4.save_partial_states/d512/r4", -1, &g));
    cr_expect_gt(kvc_case_tokens(&g.c) * 2 * 1024 * 4, (int64_t)8 << 20);
    kvc_gen_free(&g);
}

/* ---- the shrinker keeps the failure and stops only at a minimum ------ */

/* A candidate wrong only for written tokens at positions >= 64 (one latent
 * bit), and one that rejects every call of a single token: the second
 * failure is easier to reach, but it is another signature. */
static int wrong_from_64(const kvc_v41_norm_args *a, kvc_error *err) {
    if (a->num_tokens == 1) return kvc_fail(err, KVC_ERR_PARAM, "planted: one token is refused");
    int rc = kvc_reference_backend.v41_save_compress_norm(a, err);
    for (int64_t t = 0; rc == KVC_OK && t < a->num_tokens; t++)
        if (a->slot_mapping[t] >= 0 && a->positions[t] >= 64) a->latent[t * 512] ^= 0x0001;
    return rc;
}

typedef struct {
    kvc_fuzz_target target;
    char key[sizeof(((kvc_fuzz_signature *)0)->key)];
} planted_failure;

/* The fuzzer's own predicate: the check fails with the same signature. */
static int same_failure(const kvc_case *c, void *context) {
    planted_failure *p = context;
    kvc_fuzz_verdict v;
    if (kvc_fuzz_check_case(&p->target, c, 5, &v) != KVC_FUZZ_FAIL) return 0;
    kvc_fuzz_signature s;
    kvc_fuzz_signature_of(c, &v, &s);
    return strcmp(s.key, p->key) == 0;
}

/* Removes token t of a V4.1 R = 1 case (no requests to keep consistent). */
static void remove_token(kvc_case *c, int64_t t) {
    static const char *const per_token[] = {"positions", "slot_mapping", "kv_score", "latent"};
    int64_t T = kvc_case_tokens(c);
    for (int i = 0; i < 4; i++) {
        kvc_array *a = kvc_case_get(c, per_token[i]);
        int64_t row = a->count / T * kvc_dtype_size(a->dtype);
        memmove((uint8_t *)a->data + t * row, (uint8_t *)a->data + (t + 1) * row, (size_t)((T - t - 1) * row));
        a->shape[0]--;
        a->count = a->shape[0] * (row / kvc_dtype_size(a->dtype));
    }
}

Test(harness_self, shrinker_keeps_the_signature_and_stops_at_a_minimum, .timeout = 120) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.v41_save_compress_norm = wrong_from_64;
    planted_failure p = {.target = {.reference = &kvc_reference_backend, .candidate = &candidate, .threads = 1}};
    kvc_case c;
    int found = 0;
    for (int64_t i = 0; i < 200 && !found; i++) {
        support_make_case("v41.save_compress_norm/r1", KVC_FAM_NORMAL, 9, i, &c);
        kvc_fuzz_verdict v;
        if (kvc_case_tokens(&c) >= 4 && kvc_fuzz_check_case(&p.target, &c, 5, &v) == KVC_FUZZ_FAIL && strcmp(v.kind, "bytes") == 0) {
            kvc_fuzz_signature s;
            kvc_fuzz_signature_of(&c, &v, &s);
            snprintf(p.key, sizeof p.key, "%s", s.key);
            found = 1;
        } else {
            kvc_case_free(&c);
        }
    }
    cr_assert(found, "no case shows the planted wrong latent");
    kvc_shrink_stats stats;
    kvc_shrink_case(&c, same_failure, &p, 20.0, &stats);
    cr_assert(same_failure(&c, &p), "the shrunk case lost its signature %s", p.key);
    /* One token would be a status failure: two stay, one of them written
     * at position exactly 64 (63 is right). */
    cr_expect_eq(kvc_case_tokens(&c), 2, "shrunk to %lld tokens", (long long)kvc_case_tokens(&c));
    int64_t *pos = kvc_case_get(&c, "positions")->data, *slot = kvc_case_get(&c, "slot_mapping")->data, lowest_wrong = -1;
    for (int64_t t = 0; t < kvc_case_tokens(&c); t++)
        if (slot[t] >= 0 && pos[t] >= 64 && (lowest_wrong < 0 || pos[t] < lowest_wrong)) lowest_wrong = pos[t];
    cr_expect_eq(lowest_wrong, 64, "the failing token sits at position %lld, not 64", (long long)lowest_wrong);
    /* Minimal: removing any token, or moving the positions one step
     * lower, loses the signature. */
    for (int64_t t = 0; t < kvc_case_tokens(&c); t++) {
        kvc_case smaller;
        cr_assert_eq(kvc_case_copy(&smaller, &c), 0);
        remove_token(&smaller, t);
        cr_expect_not(same_failure(&smaller, &p), "token %lld could still be removed", (long long)t);
        kvc_case_free(&smaller);
    }
    kvc_case lower;
    cr_assert_eq(kvc_case_copy(&lower, &c), 0);
    int64_t *p_lower = kvc_case_get(&lower, "positions")->data, *s_lower = kvc_case_get(&lower, "slot_mapping")->data;
    int moved = 1;
    for (int64_t t = 0; t < kvc_case_tokens(&lower); t++)
        if (s_lower[t] >= 0) moved &= p_lower[t]-- > 0;
    if (moved) cr_expect_not(same_failure(&lower, &p), "every position could still go one step lower");
    kvc_case_free(&lower);
    kvc_case_free(&c);
}

/* ---- the candidate-side thread override ----------------------------- */

/* What a plug-in with its own thread heuristic would read: the override
 * must equal the thread count the harness set for that very call. */
static int override_seen = 0, override_matched = 0;
static int insert_reading_the_override(const kvc_v41_insert_args *a, kvc_error *err) {
    const char *forced = getenv("KVCMP_CANDIDATE_THREADS");
    override_seen++;
    override_matched += forced && atoi(forced) == omp_get_max_threads();
    return kvc_reference_backend.v41_rope_plain_insert(a, err);
}

Test(harness_self, candidate_calls_carry_the_thread_override) {
    kvc_backend candidate = kvc_reference_backend;
    candidate.v41_rope_plain_insert = insert_reading_the_override;
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &candidate, .threads = 1, .vary_threads = 1,
                              .metamorphic_per_mille = 1000};
    for (int64_t i = 0; i < 12; i++) {
        kvc_case c;
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 4, i, &c);
        kvc_fuzz_verdict v;
        cr_expect_eq(kvc_fuzz_check_case(&target, &c, (uint64_t)i, &v), KVC_FUZZ_PASS, "%s", v.detail);
        kvc_case_free(&c);
    }
    cr_expect_gt(override_seen, 12, "the thread check never called the candidate again");
    cr_expect_eq(override_matched, override_seen, "%d of %d calls saw KVCMP_CANDIDATE_THREADS equal to their thread count",
                 override_matched, override_seen);
}

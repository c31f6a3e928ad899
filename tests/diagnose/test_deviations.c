/* The catalogue of deviations (harness/diagnose/deviations.c), the diagnosis of
 * a failing case (harness/diagnose/diagnose.c) and the signatures it
 * names (harness/fuzz/signature_list.c).
 *
 * The closing test: every deviation, planted as the
 * candidate (`--candidate deviation:NAME`, the reference with that one
 * switch on), is found by a short default campaign at a fixed seed and
 * listed as exactly one signature, explained by its own name. */
#include <cjson/cJSON.h>
#include <libgen.h>
#include <sys/wait.h>

#include "tests/test_support.h"

#include <criterion/parameterized.h>

#include "cli/commands.h"
#include "harness/diagnose/diagnose.h"
#include "harness/fuzz/run.h"
#include "harness/fuzz/signature.h"
#include "harness/fuzz/signature_list.h"
#include "kvcmp/backends.h"
#include "kvcmp/deviations.h"

/* ---- the catalogue ------------------------------------------------------ */

Test(deviations, every_entry_has_a_unique_name_a_spec_place_and_a_sentence) {
    int n = kvc_deviation_count();
    cr_assert_geq(n, 30);
    for (int i = 0; i < n; i++) {
        const char *name = kvc_deviation_name(i);
        cr_assert_not_null(name);
        cr_expect_eq(kvc_deviation_find(name), i, "%s is found at another index", name);
        cr_expect_eq(strncmp(kvc_deviation_spec(i), "SPEC ", 5), 0, "%s: spec place '%s'", name, kvc_deviation_spec(i));
        cr_expect_gt(strlen(kvc_deviation_description(i)), 20u, "%s has no sentence", name);
        const kvc_backend *b = kvc_deviation_backend(i);
        cr_assert_not_null(b);
        char expected[128];
        snprintf(expected, sizeof expected, "deviation:%s", name);
        cr_expect_str_eq(b->name, expected);
    }
    cr_expect_null(kvc_deviation_name(n));
    cr_expect_null(kvc_deviation_spec(-1));
    cr_expect_null(kvc_deviation_description(n));
    cr_expect_null(kvc_deviation_backend(-1));
    cr_expect_eq(kvc_deviation_find("no-such-deviation"), -1);
}

Test(deviations, fuzz_list_prints_the_catalogue) {
    char *list[] = {"--list"};
    captured_run run = support_capture(kvc_cmd_fuzz, 1, list);
    cr_expect_eq(run.status, 0);
    cr_expect(strstr(run.out, "deviations (what a signature is explained by; --candidate deviation:NAME plants one):\n") != NULL, "%s", run.out);
    for (int i = 0; i < kvc_deviation_count(); i++) {
        char line[400];
        snprintf(line, sizeof line, "  %-32s %-18s %s\n", kvc_deviation_name(i), kvc_deviation_spec(i), kvc_deviation_description(i));
        cr_expect(strstr(run.out, line) != NULL, "--list lacks %s", kvc_deviation_name(i));
    }
    support_free_run(&run);
}

Test(deviations, backend_by_name) {
    char error[256] = "";
    const kvc_backend *b = kvc_backend_by_name("deviation:bf16-half-away", error, sizeof error);
    cr_assert_not_null(b, "%s", error);
    cr_expect_eq(b, kvc_deviation_backend(kvc_deviation_find("bf16-half-away")));
    cr_expect_null(kvc_backend_by_name("deviation:bf16-sideways", error, sizeof error));
    cr_expect(strstr(error, "unknown deviation 'bf16-sideways' (kvcmp fuzz --list names them)") != NULL, "%s", error);
}

Test(deviations, activate_shifts_a_lone_second_and_reports_the_previous_pair) {
    int previous[2];
    kvc_deviation_activate(-1, 3, NULL);
    kvc_deviation_activate(5, 7, previous);
    cr_expect_eq(previous[0], 3);
    cr_expect_eq(previous[1], -1);
    kvc_deviation_activate(-1, -1, previous);
    cr_expect_eq(previous[0], 5);
    cr_expect_eq(previous[1], 7);
    kvc_deviation_activate(-1, -1, previous);
    cr_expect_eq(previous[0], -1);
}

Test(deviations, activate_set_turns_on_the_first_four_valid_and_reports_the_previous_set) {
    int ids[] = {-1, 2, kvc_deviation_count(), 5, 7, -7, 9, 11}, previous[KVC_DIAGNOSIS_DEPTH], pair[2];
    kvc_deviation_activate_set(ids, 8, NULL);
    /* The pair call sees the first two of the four. */
    kvc_deviation_activate(1, -1, pair);
    cr_expect_eq(pair[0], 2);
    cr_expect_eq(pair[1], 5);
    kvc_deviation_activate_set(NULL, 0, previous);
    cr_expect_eq(previous[0], 1);
    cr_expect_eq(previous[1], -1);
    kvc_deviation_activate_set(ids, 8, NULL);
    kvc_deviation_activate_set(ids, 1, previous);
    cr_expect_eq(previous[0], 2);
    cr_expect_eq(previous[1], 5);
    cr_expect_eq(previous[2], 7);
    cr_expect_eq(previous[3], 9);
    /* ids[0] alone is outside the catalogue: the contract. */
    kvc_deviation_activate_set(NULL, 0, previous);
    for (int k = 0; k < KVC_DIAGNOSIS_DEPTH; k++) cr_expect_eq(previous[k], -1);
}

/* ---- diagnosis of one case ---------------------------------------------- */

/* The reference's run of c with deviations first and second on: a
 * candidate with those bugs. */
static void planted_run(int first, int second, const kvc_case *c, kvc_run_result *r) {
    kvc_run_options options = {.canary = 0xA5};
    memset(r, 0, sizeof *r);
    cr_assert_eq(kvc_deviation_run_case(first, second, c, &options, r), KVC_OK, "%s", r->error.message);
}

/* The first normal case of seed 1 of the bf16 plain insert whose bytes
 * bf16-truncation changes (which index that is follows the generator's
 * draws, so the tests look for it instead of naming one). */
static int64_t first_case_truncation_changes(kvc_case *c) {
    int truncation = kvc_deviation_find("bf16-truncation");
    for (int64_t index = 0; index < 50; index++) {
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 1, index, c);
        kvc_run_result contract, planted;
        planted_run(-1, -1, c, &contract);
        planted_run(truncation, -1, c, &planted);
        int differ = 0;
        for (int i = 0; i < contract.num_outputs && !differ; i++)
            differ = memcmp(contract.outputs[i].array.data, planted.outputs[i].array.data, (size_t)contract.outputs[i].array.count * (size_t)kvc_dtype_size(contract.outputs[i].array.dtype)) != 0;
        kvc_run_result_free(&contract);
        kvc_run_result_free(&planted);
        if (differ) return index;
        kvc_case_free(c);
    }
    cr_assert_fail("bf16-truncation changes none of the first 50 cases");
    return -1;
}

static int explains(const kvc_diagnosis *d, const char *name) {
    for (int i = 0; i < d->count; i++) {
        char text[200];
        kvc_diagnosis_name(d, i, text, sizeof text);
        if (strcmp(text, name) == 0) return 1;
    }
    return 0;
}

Test(diagnose, a_single_deviation_is_named_and_the_contract_explains_nothing) {
    kvc_case c;
    first_case_truncation_changes(&c);
    kvc_run_options options = {.canary = 0xA5};
    int truncation = kvc_deviation_find("bf16-truncation");
    kvc_run_result candidate;
    planted_run(truncation, -1, &c, &candidate);
    kvc_diagnosis d;
    cr_assert_geq(kvc_diagnose(&c, &options, &candidate, 0, &d), 1);
    cr_expect(explains(&d, "bf16-truncation"));
    cr_expect_eq(d.singles_run, kvc_deviation_count());
    cr_expect_eq(d.pairs_run, 0);
    char text[300];
    kvc_diagnosis_text(&d, 0, text, sizeof text);
    cr_expect(strstr(text, "(SPEC 1 bf16)") != NULL, "%s", text);
    kvc_run_result_free(&candidate);
    /* The contract's own bytes: no deviation explains a difference that is not there. */
    planted_run(-1, -1, &c, &candidate);
    cr_expect_eq(kvc_diagnose(&c, &options, &candidate, 0, &d), 0);
    kvc_diagnosis_name(&d, 0, text, sizeof text);
    cr_expect_str_eq(text, "");
    kvc_diagnosis_text(&d, -1, text, sizeof text);
    cr_expect_str_eq(text, "");
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

Test(diagnose, two_bugs_at_once_are_named_as_a_pair_within_the_time_allowed) {
    kvc_case c;
    /* R = 2: a closing position p is odd, so its RoPE row p - 1 differs from p. */
    for (int64_t index = 0;; index++) {
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 1, index, &c);
        if (c.compress_ratio == 2) break;
        kvc_case_free(&c);
        cr_assert_lt(index, 50, "no R = 2 case among the first 50");
    }
    kvc_run_options options = {.canary = 0xA5};
    kvc_run_result candidate;
    planted_run(kvc_deviation_find("bf16-truncation"), kvc_deviation_find("rope-row-p"), &c, &candidate);
    kvc_diagnosis d;
    cr_assert_geq(kvc_diagnose(&c, &options, &candidate, 0, &d), 1);
    cr_expect(explains(&d, "rope-row-p+bf16-truncation") || explains(&d, "bf16-truncation+rope-row-p"));
    cr_expect_gt(d.pairs_run, 0);
    cr_expect_eq(d.compositions_run, 0);
    cr_expect_eq(d.out_of_time, 0);
    char text[300];
    kvc_diagnosis_text(&d, 0, text, sizeof text);
    cr_expect(strstr(text, " + ") && strstr(text, "(SPEC 4.2 step 7)") && strstr(text, "(SPEC 1 bf16)"), "%s", text);
    /* No time for pairs: said so, and nothing named. */
    cr_expect_eq(kvc_diagnose(&c, &options, &candidate, 1e-9, &d), 0);
    cr_expect_eq(d.out_of_time, 1);
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

/* ---- compositions of three or four ------------------------------------------ */

/* The reference's run of c with the deviations of set on. */
static void planted_set(const int *set, int size, const kvc_case *c, kvc_run_result *r) {
    kvc_run_options options = {.canary = 0xA5};
    memset(r, 0, sizeof *r);
    cr_assert_eq(kvc_deviation_run_case_set(set, size, c, &options, r), KVC_OK, "%s", r->error.message);
}

static int same_bytes(const kvc_run_result *a, const kvc_run_result *b) {
    if (a->num_outputs != b->num_outputs) return 0;
    for (int i = 0; i < a->num_outputs; i++)
        if (memcmp(a->outputs[i].array.data, b->outputs[i].array.data,
                   (size_t)a->outputs[i].array.count * (size_t)kvc_dtype_size(a->outputs[i].array.dtype)) != 0)
            return 0;
    return 1;
}

/* The first R = 2 bf16 plain insert case of seed 1: its closing
 * positions are odd, so rope-row-p changes its RoPE dims. */
static void r2_plain_insert_case(kvc_case *c) {
    for (int64_t index = 0;; index++) {
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 1, index, c);
        if (c->compress_ratio == 2) return;
        kvc_case_free(c);
        cr_assert_lt(index, 50, "no R = 2 case among the first 50");
    }
}

static int find(const char *name) {
    int i = kvc_deviation_find(name);
    cr_assert_geq(i, 0, "no deviation %s", name);
    return i;
}

Test(diagnose, three_bugs_at_once_are_named_as_that_triple) {
    kvc_case c;
    r2_plain_insert_case(&c);
    kvc_run_options options = {.canary = 0xA5};
    int triple[3] = {find("bf16-truncation"), find("rope-row-p"), find("rope-inverse")};
    kvc_run_result candidate;
    planted_set(triple, 3, &c, &candidate);
    kvc_diagnosis d;
    cr_assert_eq(kvc_diagnose(&c, &options, &candidate, 0, &d), 1);
    char text[300];
    kvc_diagnosis_name(&d, 0, text, sizeof text);
    cr_expect_str_eq(text, "rope-inverse+rope-row-p+bf16-truncation");
    cr_expect_gt(d.pairs_run, 0);
    cr_expect_gt(d.compositions_run, 0);
    cr_expect_eq(d.out_of_time, 0);
    kvc_diagnosis_text(&d, 0, text, sizeof text);
    cr_expect_str_eq(text, "rope-inverse (SPEC 4.2 step 7) + rope-row-p (SPEC 4.2 step 7) + bf16-truncation (SPEC 1 bf16)");
    kvc_diagnose_clause(&c, &options, &candidate, 0, text, sizeof text);
    cr_expect_str_eq(text, "explained by: rope-inverse (SPEC 4.2 step 7) + rope-row-p (SPEC 4.2 step 7) + bf16-truncation (SPEC 1 bf16)");
    /* A short buffer holds the start of the name, and nothing past it. */
    char small[12] = "xxxxxxxxxxx";
    kvc_diagnosis_name(&d, 0, small, 9);
    cr_expect_str_eq(small, "rope-inv");
    cr_expect_eq(small[10], 'x');
    kvc_diagnosis_text(&d, 0, small, 9);
    cr_expect_str_eq(small, "rope-inv");
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

/* Whether each of the n deviations, alone, changes case c's bytes. */
static int each_changes_the_case(const int *ids, int n, const kvc_case *c) {
    kvc_run_result contract, alone;
    planted_set(NULL, 0, c, &contract);
    int all = 1;
    for (int i = 0; i < n && all; i++) {
        planted_set(&ids[i], 1, c, &alone);
        all = !same_bytes(&contract, &alone);
        kvc_run_result_free(&alone);
    }
    kvc_run_result_free(&contract);
    return all;
}

/* RoPE's rotation, its bf16 store, the block scale and the fp8 codes: on
 * a case where each changes the bytes its own way (not every case lets
 * each of them show), the fourth slot included. */
Test(diagnose, four_bugs_in_four_steps_are_named_as_that_set) {
    kvc_case c;
    kvc_run_options options = {.canary = 0xA5};
    int four[4] = {find("fp8-truncation"), find("scale-exponent-floor"), find("bf16-truncation"), find("rope-inverse")};
    for (int64_t index = 0;; index++) {
        cr_assert_lt(index, 100, "no case among the first 100 is changed by each of the four alone");
        support_make_case("v4.compress/d512/r4", KVC_FAM_NORMAL, 1, index, &c);
        if (each_changes_the_case(four, 4, &c)) break;
        kvc_case_free(&c);
    }
    kvc_run_result candidate;
    planted_set(four, 4, &c, &candidate);
    kvc_diagnosis d;
    cr_assert_eq(kvc_diagnose(&c, &options, &candidate, 0, &d), 1);
    char text[300];
    kvc_diagnosis_name(&d, 0, text, sizeof text);
    cr_expect_str_eq(text, "rope-inverse+bf16-truncation+fp8-truncation+scale-exponent-floor");
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

/* state-slot-ignored reruns the stage on the batch its kernel sees, with
 * itself switched off: the other deviations of the set stay on. */
Test(deviations, a_set_with_state_slot_ignored_keeps_the_others_on) {
    int ignored = find("state-slot-ignored"), truncation = find("fp8-truncation");
    kvc_case c;
    kvc_run_result contract, alone, both, other;
    for (int64_t index = 0;; index++) {
        cr_assert_lt(index, 400, "state-slot-ignored changes none of the first 400 cases");
        support_make_case("v4.compress/d128/r4", KVC_FAM_NORMAL, 1, index, &c);
        planted_set(NULL, 0, &c, &contract);
        planted_set(&ignored, 1, &c, &alone);
        if (!same_bytes(&contract, &alone)) break;
        kvc_run_result_free(&contract);
        kvc_run_result_free(&alone);
        kvc_case_free(&c);
    }
    int set[4] = {truncation, ignored, find("rope-inverse"), find("scale-exponent-floor")}, previous[KVC_DIAGNOSIS_DEPTH];
    planted_set(&truncation, 1, &c, &other);
    cr_assert(!same_bytes(&contract, &other), "fp8-truncation changes nothing here");
    planted_set(set, 2, &c, &both);
    cr_expect(!same_bytes(&both, &alone), "fp8-truncation was switched off with state-slot-ignored");
    cr_expect(!same_bytes(&both, &other), "state-slot-ignored had no effect with fp8-truncation");
    kvc_run_result_free(&both);
    /* The set active before the run is active after it. */
    kvc_deviation_activate_set(set, 4, NULL);
    planted_set(set, 2, &c, &both);
    kvc_deviation_activate_set(NULL, 0, previous);
    for (int k = 0; k < KVC_DIAGNOSIS_DEPTH; k++) cr_expect_eq(previous[k], set[k]);
    kvc_run_result_free(&both);
    kvc_run_result_free(&other);
    kvc_run_result_free(&alone);
    kvc_run_result_free(&contract);
    kvc_case_free(&c);
}

Test(diagnose, a_byte_no_composition_writes_leaves_the_case_unexplained) {
    kvc_case c;
    r2_plain_insert_case(&c);
    kvc_run_options options = {.canary = 0xA5};
    int triple[3] = {find("bf16-truncation"), find("rope-row-p"), find("rope-inverse")};
    kvc_run_result candidate;
    planted_set(triple, 3, &c, &candidate);
    /* One more bit flipped in the first byte of the first output. */
    ((uint8_t *)candidate.outputs[0].array.data)[0] ^= 0x40;
    kvc_diagnosis d;
    cr_expect_eq(kvc_diagnose(&c, &options, &candidate, 0, &d), 0);
    cr_expect_gt(d.compositions_run, 0);
    cr_expect_eq(d.out_of_time, 0);
    char text[300];
    kvc_diagnose_clause(&c, &options, &candidate, 0, text, sizeof text);
    cr_expect_str_eq(text, "unexplained by the deviation catalogue");
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

Test(diagnose, a_member_the_others_mask_is_not_needed) {
    kvc_case c;
    r2_plain_insert_case(&c);
    kvc_run_options options = {.canary = 0xA5};
    /* bf16-truncation decides every finite bf16 rounding: bf16-half-away
     * with it changes nothing. */
    int masked[3] = {find("bf16-half-away"), find("bf16-truncation"), find("rope-row-p")};
    kvc_run_result candidate, without;
    planted_set(masked, 3, &c, &candidate);
    planted_set(masked + 1, 2, &c, &without);
    cr_assert(same_bytes(&candidate, &without), "half-away is not masked by truncation here");
    cr_expect_eq(kvc_diagnose_unneeded_member(&c, &options, &candidate, masked, 3), 0);
    cr_expect_eq(kvc_diagnose_unneeded_member(&c, &options, &candidate, masked + 1, 2), -1);
    kvc_run_result_free(&without);
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

/* A state-saving case with one signalling NaN in a saved kv row: only
 * save-kv-nan-canonical (which rewrites it) changes its outputs. */
static void one_nan_save_case(kvc_case *c) {
    support_make_case("v4.save_partial_states/d128/r4", KVC_FAM_NORMAL, 1, 0, c);
    kvc_array *kv = kvc_case_get(c, "kv"), *slots = kvc_case_get(c, "slot_mapping");
    cr_assert(kv && slots && kv->dtype == KVC_DT_F4);
    int64_t t = 0;
    while (t < slots->count && ((int64_t *)slots->data)[t] < 0) t++;
    cr_assert_lt(t, slots->count, "no token is saved");
    uint32_t signalling = 0x7F800001u;
    memcpy((float *)kv->data + t * kv->shape[1], &signalling, sizeof signalling);
    kvc_run_result contract, variant;
    planted_set(NULL, 0, c, &contract);
    int changing = 0;
    for (int i = 0; i < kvc_deviation_count(); i++) {
        planted_set(&i, 1, c, &variant);
        if (!same_bytes(&contract, &variant)) {
            changing++;
            cr_expect_str_eq(kvc_deviation_name(i), "save-kv-nan-canonical");
        }
        kvc_run_result_free(&variant);
    }
    cr_assert_eq(changing, 1);
    kvc_run_result_free(&contract);
}

Test(diagnose, out_of_time_before_the_compositions_is_said) {
    kvc_case c;
    one_nan_save_case(&c);
    kvc_run_options options = {.canary = 0xA5};
    kvc_run_result candidate;
    planted_set(NULL, 0, &c, &candidate);
    ((uint8_t *)candidate.outputs[0].array.data)[0] ^= 0x40;
    /* One changing deviation: no pair to try, straight to the search. */
    kvc_diagnosis d;
    cr_expect_eq(kvc_diagnose(&c, &options, &candidate, 1e-9, &d), 0);
    cr_expect_eq(d.pairs_run, 0);
    cr_expect_eq(d.compositions_run, 0);
    cr_expect_eq(d.out_of_time, 1);
    char text[300];
    kvc_diagnose_clause(&c, &options, &candidate, 1e-9, text, sizeof text);
    cr_expect_str_eq(text, "unexplained by the deviation catalogue, out of time: compositions not all tried");
    /* With time, every composition from that one deviation is tried. */
    cr_expect_eq(kvc_diagnose(&c, &options, &candidate, 0, &d), 0);
    cr_expect_gt(d.compositions_run, 0);
    cr_expect_eq(d.out_of_time, 0);
    kvc_run_result_free(&candidate);
    kvc_case_free(&c);
}

Test(diagnose, a_status_difference_is_compared_by_status) {
    kvc_case c;
    first_case_truncation_changes(&c);
    kvc_run_options options = {.canary = 0xA5};
    kvc_run_result rejected = {.status = KVC_ERR_PARAM};
    kvc_diagnosis d;
    /* Every variant runs this case: none is a candidate that rejects it. */
    cr_expect_eq(kvc_diagnose(&c, &options, &rejected, 0, &d), 0);
    kvc_case_free(&c);
}

Test(diagnose, only_byte_and_status_failures_are_diagnosed) {
    kvc_case c;
    first_case_truncation_changes(&c);
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = kvc_deviation_backend(kvc_deviation_find("bf16-truncation")),
                              .threads = 1};
    kvc_fuzz_verdict v;
    memset(&v, 0, sizeof v);
    snprintf(v.kind, sizeof v.kind, "threads");
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    kvc_fuzz_signature_diagnose(&target, &c, &v, 1, &s);
    cr_expect_eq(s.diagnosed, 0);
    snprintf(v.kind, sizeof v.kind, "bytes");
    kvc_fuzz_signature_diagnose(&target, &c, &v, 1, &s);
    cr_expect_eq(s.diagnosed, 1);
    cr_expect(strstr(s.explained_by, "bf16-truncation") != NULL, "%s", s.explained_by);
    kvc_case_free(&c);
}

/* ---- signatures grouped by what explains them ------------------------------ */

static kvc_fuzz_signature raw(const char *stage, const char *key, const char *regions) {
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    snprintf(s.stage, sizeof s.stage, "%s", stage);
    snprintf(s.check, sizeof s.check, "bytes");
    snprintf(s.key, sizeof s.key, "%s", key);
    snprintf(s.regions, sizeof s.regions, "%s", regions);
    return s;
}

/* A failure's diagnosis as a worker proves it: on the minimal case and
 * the case it was shrunk from. */
static kvc_fuzz_signature diagnosis(const char *explained_by) {
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    s.diagnosed = 1;
    s.proof_cases = 2;
    snprintf(s.check, sizeof s.check, "bytes");
    snprintf(s.explained_by, sizeof s.explained_by, "%s", explained_by);
    return s;
}

/* The end of a campaign with no passing case sampled. */
static void prove(kvc_signature_list *list) {
    kvc_gen_config gen = {.seed = 1};
    kvc_signature_list_prove(list, &gen, 1, 3);
}

Test(signature_groups, failures_explained_by_a_shared_deviation_are_one_signature) {
    kvc_signature_list list = {0};
    kvc_fuzz_signature a = raw("v4.compress", "v4.compress bytes: last bit", "NoPE code"),
                       b = raw("v41.save_compress_norm", "v41.save_compress_norm bytes: last bit", "latent value"),
                       u = raw("v4.compress", "v4.compress bytes: wrong values", "scale byte");
    kvc_signature_list_get(&list, &a, 3)->count += 2;
    kvc_signature_list_get(&list, &b, 1)->count += 1;
    kvc_signature_list_get(&list, &u, 5)->count += 4;
    cr_expect_eq(kvc_signature_list_distinct(&list), 3);
    kvc_fuzz_signature da = diagnosis("bf16-truncation,bf16-half-away"), db = diagnosis("bf16-half-away"), none = diagnosis("");
    kvc_signature_list_explain(&list, a.key, &da);
    kvc_signature_list_explain(&list, b.key, &db);
    kvc_signature_list_explain(&list, u.key, &none);
    /* Grouped once proven, at the end of the campaign. */
    cr_expect_eq(kvc_signature_list_distinct(&list), 3);
    prove(&list);
    cr_expect_eq(kvc_signature_list_distinct(&list), 2);
    kvc_signature_entry *e = kvc_signature_list_find(&list, b.key);
    cr_assert_eq(e, kvc_signature_list_find(&list, a.key));
    cr_expect_str_eq(e->signature.key, "explained by bf16-half-away");
    cr_expect_str_eq(e->signature.explained_by, "bf16-half-away");
    /* bf16-truncation wrote a's bytes but not b's. */
    cr_expect_str_eq(e->signature.refuted, "bf16-truncation");
    cr_expect_eq(e->proof_failing, 4);
    cr_expect_eq(e->count, 3);
    cr_expect_eq(e->first_case, 1);
    cr_expect_str_eq(e->stages, "v4.compress+v41.save_compress_norm");
    cr_expect_str_eq(e->signature.regions, "NoPE code+latent value");
    /* A later failure of a merged byte class counts towards the group. */
    kvc_signature_list_get(&list, &b, 9)->count++;
    cr_expect_eq(e->count, 4);

    char path[] = "/tmp/kvcmp-groups-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    kvc_signature_list_print(f, &list);
    fflush(f);
    char *text = support_read_file(path);
    cr_expect(strstr(text, "distinct failures (signatures): 2\n") != NULL, "%s", text);
    cr_expect(strstr(text, "the first 3 of each byte class, before and after shrinking") != NULL, "%s", text);
    cr_expect(strstr(text, "[1] explained by bf16-half-away  (4 failures; stages: v4.compress+v41.save_compress_norm;") != NULL, "%s", text);
    cr_expect(strstr(text, "      explained by: bf16-half-away (SPEC 1 bf16); held on 4 failing cases and 0 passing ones\n") != NULL, "%s",
              text);
    cr_expect(strstr(text, "      refuted: bf16-truncation (SPEC 1 bf16): ") != NULL, "%s", text);
    cr_expect(strstr(text, "[2] v4.compress bytes: wrong values  (4 failures; regions: scale byte)\n      unexplained: ") != NULL, "%s", text);
    free(text);
    fclose(f);
    unlink(path);

    cJSON *array = kvc_signature_list_json(&list);
    cr_assert_eq(cJSON_GetArraySize(array), 2);
    cJSON *first = cJSON_GetArrayItem(array, 0), *second = cJSON_GetArrayItem(array, 1);
    cJSON *names = cJSON_GetObjectItem(first, "explained_by");
    cr_assert_eq(cJSON_GetArraySize(names), 1);
    cr_expect_str_eq(cJSON_GetArrayItem(names, 0)->valuestring, "bf16-half-away");
    cJSON *proof = cJSON_GetObjectItem(first, "explanation_proof");
    cr_expect_eq(cJSON_GetObjectItem(proof, "cases_checked")->valuedouble, 4);
    cr_expect_eq(cJSON_GetObjectItem(proof, "cases_held")->valuedouble, 4);
    cr_expect_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(proof, "refuted"), 0)->valuestring, "bf16-truncation");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(second, "explained_by")), 0);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(second, "diagnosed")));
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(second, "explanation_proof"), "cases_held")->valuedouble, 0);
    cJSON_Delete(array);
    kvc_signature_list_free(&list);
}

Test(signature_groups, one_failure_no_name_writes_leaves_its_signature_unexplained) {
    kvc_signature_list list = {0};
    kvc_fuzz_signature a = raw("v41.rope_plain_insert", "v41.rope_plain_insert bytes: last bit", "RoPE value");
    kvc_signature_list_get(&list, &a, 0)->count += 3;
    kvc_fuzz_signature fits = diagnosis("plain-fp8-skips-bf16"), none = diagnosis("");
    /* The first failure's diagnosis fits; the second failure's bytes no deviation writes. */
    kvc_signature_list_explain(&list, a.key, &fits);
    cr_expect_str_eq(kvc_signature_list_find(&list, a.key)->signature.key, "explained by plain-fp8-skips-bf16");
    kvc_signature_list_explain(&list, a.key, &none);
    kvc_signature_entry *e = kvc_signature_list_find(&list, a.key);
    cr_expect_str_eq(e->signature.explained_by, "");
    cr_expect_str_eq(e->signature.refuted, "plain-fp8-skips-bf16");
    cr_expect_str_eq(e->signature.key, "v41.rope_plain_insert bytes: last bit");
    /* A name refuted once does not come back with a later failure it fits. */
    kvc_signature_list_explain(&list, a.key, &fits);
    cr_expect_str_eq(e->signature.explained_by, "");
    cr_expect_eq(e->proof_failing, 6);
    kvc_signature_list_free(&list);
}

Test(signature_groups, a_byte_failure_kept_without_a_diagnosis_leaves_it_unproven) {
    kvc_signature_list list = {0};
    kvc_fuzz_signature a = raw("v4.compress", "v4.compress bytes: wrong values in NoPE and RoPE dims", "NoPE code");
    kvc_signature_list_get(&list, &a, 0)->count += 2;
    kvc_fuzz_signature named = diagnosis("rope-row-p"), undiagnosed = raw("v4.compress", a.key, "NoPE code");
    kvc_signature_list_explain(&list, a.key, &named);
    kvc_signature_list_explain(&list, a.key, &undiagnosed);
    prove(&list);
    kvc_signature_entry *e = kvc_signature_list_find(&list, a.key);
    cr_expect_str_eq(e->signature.explained_by, "");
    cr_expect_str_eq(e->signature.refuted, "rope-row-p");
    cr_expect_eq(e->unproven, 1);
    kvc_signature_list_free(&list);
}

Test(signature_groups, the_passing_sample_keeps_the_lowest_indices_of_each_variant) {
    static kvc_signature_list list;
    memset(&list, 0, sizeof list);
    for (int64_t index = 40; index >= 0; index -= 3) kvc_signature_list_passed(&list, 2, index);
    kvc_signature_list_passed(&list, -1, 0);
    kvc_signature_list_passed(&list, KVC_SAMPLED_VARIANTS, 0);
    cr_assert_eq(list.passing_count[2], KVC_PASSING_SAMPLE);
    for (int k = 0; k < KVC_PASSING_SAMPLE; k++) cr_expect_eq(list.passing[2][k], 1 + 3 * k);
    cr_expect_eq(list.passing_count[1], 0);
}

/* The first normal case of seed 1 of the bf16 plain insert (alone in
 * the campaign's mix) whose bytes `name` changes, or does not change. */
static int64_t plain_insert_case(const char *name, int changes) {
    kvc_gen_config gen = {.seed = 1, .variant_mask = 1ull << support_variant_index("v41.rope_plain_insert/bf16")};
    int set[1] = {find(name)};
    for (int64_t index = 0; index < 200; index++) {
        kvc_gen_case g;
        cr_assert_eq(kvc_gen_make(&gen, index, &g), 0);
        kvc_run_result contract, planted;
        planted_set(NULL, 0, &g.c, &contract);
        planted_set(set, 1, &g.c, &planted);
        int differ = !same_bytes(&contract, &planted);
        kvc_run_result_free(&contract);
        kvc_run_result_free(&planted);
        kvc_gen_free(&g);
        if (differ == changes) return index;
    }
    cr_assert_fail("no case among the first 200 that %s %s", name, changes ? "changes" : "leaves");
    return -1;
}

Test(signature_groups, a_name_that_changes_a_passing_case_is_refuted) {
    int variant = support_variant_index("v41.rope_plain_insert/bf16");
    kvc_gen_config gen = {.seed = 1, .variant_mask = 1ull << variant};
    for (int changes = 0; changes <= 1; changes++) {
        static kvc_signature_list list;
        memset(&list, 0, sizeof list);
        kvc_fuzz_signature a = raw("v41.rope_plain_insert", "v41.rope_plain_insert bytes: last bit", "RoPE value");
        kvc_signature_list_get(&list, &a, 0)->count++;
        kvc_fuzz_signature named = diagnosis("bf16-truncation");
        kvc_signature_list_explain(&list, a.key, &named);
        /* The candidate passed a case that bf16-truncation changes (or not). */
        kvc_signature_list_passed(&list, variant, plain_insert_case("bf16-truncation", changes));
        kvc_signature_list_prove(&list, &gen, 1, 3);
        kvc_signature_entry *e = kvc_signature_list_find(&list, a.key);
        cr_expect_str_eq(e->signature.explained_by, changes ? "" : "bf16-truncation");
        cr_expect_str_eq(e->signature.refuted, changes ? "bf16-truncation" : "");
        cr_expect_eq(e->proof_passing, 1);
        kvc_signature_list_free(&list);
    }
    /* Under another policy a pass need not be the contract's bytes: no passing case is checked. */
    static kvc_signature_list list;
    memset(&list, 0, sizeof list);
    kvc_fuzz_signature a = raw("v41.rope_plain_insert", "k", "RoPE value"), named = diagnosis("bf16-truncation");
    kvc_signature_list_get(&list, &a, 0)->count++;
    kvc_signature_list_explain(&list, a.key, &named);
    kvc_signature_list_passed(&list, variant, plain_insert_case("bf16-truncation", 1));
    kvc_signature_list_prove(&list, &gen, 0, 3);
    cr_expect_str_eq(kvc_signature_list_find(&list, a.key)->signature.explained_by, "bf16-truncation");
    cr_expect_eq(kvc_signature_list_find(&list, a.key)->proof_passing, 0);
    kvc_signature_list_free(&list);
}

Test(signature_groups, a_later_entry_merges_into_the_first_listed_one) {
    kvc_signature_list list = {0};
    kvc_fuzz_signature a = raw("v4.compress", "k-a", ""), b = raw("v4.compress", "k-b", "RoPE value"), c = raw("v4.compress", "k-c", "");
    kvc_signature_list_get(&list, &a, 7)->count++;
    kvc_signature_list_get(&list, &b, 2)->count++;
    kvc_signature_list_get(&list, &c, 4)->count++;
    kvc_signature_list_saved(kvc_signature_list_find(&list, b.key), 2, 5, "dir-b", "replay dir-b");
    /* b is explained first, then a (listed before it) by the same deviation:
     * once proven, b's failures, its minimal case included, move to a. */
    kvc_fuzz_signature d = diagnosis("rope-row-p"), pair = diagnosis("rope-row-p+bf16-truncation");
    kvc_signature_list_explain(&list, b.key, &d);
    kvc_signature_list_explain(&list, a.key, &d);
    kvc_signature_list_explain(&list, c.key, &pair);
    prove(&list);
    kvc_signature_entry *e = kvc_signature_list_find(&list, b.key);
    cr_expect_eq(e, &list.entries[0]);
    cr_expect_eq(e->count, 2);
    cr_expect_eq(e->first_case, 2);
    cr_expect_eq(e->minimal_case, 2);
    cr_expect_str_eq(e->minimal_saved, "dir-b");
    cr_expect_eq(kvc_signature_list_distinct(&list), 2);
    /* Compacted, the merged entry is gone and the listed ones stay. */
    kvc_signature_list_compact(&list);
    cr_expect_eq(list.count, 2);
    cr_expect_str_eq(list.entries[0].signature.key, "explained by rope-row-p");
    cr_expect_str_eq(list.entries[1].signature.key, "explained by rope-row-p+bf16-truncation");
    char text[300];
    kvc_explanation_text("rope-row-p+bf16-truncation,no-such-deviation", text, sizeof text);
    cr_expect_str_eq(text, "rope-row-p+bf16-truncation (SPEC 4.2 step 7;SPEC 1 bf16), no-such-deviation (?)");
    kvc_signature_list_free(&list);
}

/* ---- every deviation, planted, found and named by a campaign ---------------- */

/* The kvcmp of the test binary's own build (BUILD/asan/unit-tests runs
 * BUILD/kvcmp): the campaigns run optimised, as a user runs them. */
static void kvcmp_binary(char *out, size_t size) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = 0;
    snprintf(out, size, "%s/kvcmp", dirname(dirname(self)));
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds it)", out);
}

ParameterizedTestParameters(planted_deviation, is_one_signature_explained_by_its_name) {
    static int indices[128];
    int n = kvc_deviation_count();
    for (int i = 0; i < n; i++) indices[i] = i;
    return cr_make_param_array(int, indices, (size_t)n);
}

/* The default mix of stages and value families, seed 1, 400 cases. */
ParameterizedTest(int *index, planted_deviation, is_one_signature_explained_by_its_name, .timeout = 120) {
    const char *name = kvc_deviation_name(*index);
    char binary[4096], dir[64], out[128], json[160], candidate[128], log[160];
    kvcmp_binary(binary, sizeof binary);
    support_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(json, sizeof json, "%s/summary.json", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(candidate, sizeof candidate, "deviation:%s", name);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        char *argv[] = {binary, "fuzz", "--candidate", candidate, "--seed", "1", "--cases", "400", "--jobs", "2", "--shrink-seconds", "2",
                        "--quiet", "--out", out, "--json", json, NULL};
        execv(binary, argv);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    char *output = support_read_file(log);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s: kvcmp fuzz did not report failures (status %d):\n%s", name, status, output);
    char *text = support_read_file(json);
    cJSON *summary = cJSON_Parse(text);
    cr_assert_not_null(summary);
    cJSON *signatures = cJSON_GetObjectItem(summary, "signatures");
    cr_expect_eq(cJSON_GetArraySize(signatures), 1, "%s: %d signatures:\n%s", name, cJSON_GetArraySize(signatures), output);
    cJSON *names = cJSON_GetObjectItem(cJSON_GetArrayItem(signatures, 0), "explained_by");
    int own = 0;
    for (int i = 0; i < cJSON_GetArraySize(names); i++) own |= strcmp(cJSON_GetArrayItem(names, i)->valuestring, name) == 0;
    cr_expect(own, "%s: not explained by its own name:\n%s", name, output);
    char line[200];
    snprintf(line, sizeof line, "%s (%s)", name, kvc_deviation_spec(*index));
    const char *explained = strstr(output, "      explained by: ");
    cr_expect(explained && strstr(explained, line), "%s: the summary lacks 'explained by: ... %s':\n%s", name, line, output);
    cJSON_Delete(summary);
    free(text);
    free(output);
    support_remove_tree(dir);
}

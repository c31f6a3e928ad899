/* An explanation is a claim to prove (harness/fuzz/signature.c
 * kvc_fuzz_signature_prove): a deviation names a shrunk failure only
 * when, planted alone, it writes the candidate's bytes on the minimal
 * case and on the case it was shrunk from. */
#include "tests/test_support.h"

#include "harness/diagnose/diagnose.h"
#include "harness/fuzz/signature.h"
#include "kvcmp/deviations.h"
#include "kvcmp/reference.h"

/* ---- a candidate with one bug on small calls and another on larger ones ---- */

static int64_t small_calls;   /* calls of at most this many tokens have the first bug */

static int two_faced_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    int set[1] = {kvc_deviation_find(a->num_tokens <= small_calls ? "bf16-truncation" : "rope-inverse")}, previous[KVC_DIAGNOSIS_DEPTH];
    kvc_deviation_activate_set(set, 1, previous);
    int rc = ref_v41_rope_plain_insert(a, err);
    kvc_deviation_activate_set(previous, KVC_DIAGNOSIS_DEPTH, NULL);
    return rc;
}

static const kvc_backend two_faced = {.name = "two-faced test candidate", .v41_rope_plain_insert = two_faced_insert};

static int same_bytes(const kvc_run_result *a, const kvc_run_result *b) {
    if (a->status != b->status || a->num_outputs != b->num_outputs) return 0;
    for (int i = 0; i < a->num_outputs; i++)
        if (memcmp(a->outputs[i].array.data, b->outputs[i].array.data,
                   (size_t)a->outputs[i].array.count * (size_t)kvc_dtype_size(a->outputs[i].array.dtype)) != 0)
            return 0;
    return 1;
}

/* The first normal bf16 plain insert case of seed 1 whose bytes the
 * deviation changes, among those with fewer (more) than `tokens` tokens. */
static void case_changed_by(const char *name, int64_t tokens, int fewer, kvc_case *c) {
    int set[1] = {kvc_deviation_find(name)};
    kvc_run_options options = {.canary = 0xA5};
    for (int64_t index = 0; index < 300; index++) {
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 1, index, c);
        kvc_array *latent = kvc_case_get(c, "latent");
        int64_t n = latent ? latent->shape[0] : 0;
        if (fewer ? n < tokens : n > tokens) {
            kvc_run_result contract, planted;
            kvc_deviation_run_case_set(NULL, 0, c, &options, &contract);
            kvc_deviation_run_case_set(set, 1, c, &options, &planted);
            int differ = contract.status == KVC_OK && !same_bytes(&contract, &planted);
            kvc_run_result_free(&contract);
            kvc_run_result_free(&planted);
            if (differ) return;
        }
        kvc_case_free(c);
    }
    cr_assert_fail("no case of %s %lld tokens that %s changes", fewer ? "fewer than" : "more than", (long long)tokens, name);
}

static int64_t tokens_of(const kvc_case *c) { return kvc_case_get(c, "latent")->shape[0]; }

static kvc_fuzz_verdict failed_bytes(void) {
    kvc_fuzz_verdict v;
    memset(&v, 0, sizeof v);
    v.outcome = KVC_FUZZ_FAIL;
    snprintf(v.kind, sizeof v.kind, "bytes");
    v.conditions.canary = 0xA5;
    v.conditions.threads = 1;
    return v;
}

Test(proof, a_name_that_fits_the_minimal_case_alone_is_refuted) {
    kvc_case minimal, unshrunk;
    case_changed_by("bf16-truncation", 4, 1, &minimal);
    case_changed_by("rope-inverse", tokens_of(&minimal), 0, &unshrunk);
    small_calls = tokens_of(&minimal);
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &two_faced, .threads = 1};
    kvc_fuzz_verdict before = failed_bytes(), after = failed_bytes();
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    /* The minimal case alone is bf16-truncation's bytes. */
    kvc_fuzz_signature_diagnose(&target, &minimal, &after, 0, &s);
    cr_expect_str_eq(s.explained_by, "bf16-truncation");
    /* Proven on the case it came from too: neither bug is the whole candidate. */
    memset(&s, 0, sizeof s);
    kvc_fuzz_signature_prove(&target, &unshrunk, &before, &minimal, &after, 0, &s);
    cr_expect_eq(s.diagnosed, 1);
    cr_expect_str_eq(s.explained_by, "");
    cr_expect(strstr(s.refuted, "bf16-truncation") != NULL, "refuted: %s", s.refuted);
    cr_expect(strstr(s.refuted, "rope-inverse") != NULL, "refuted: %s", s.refuted);
    cr_expect_eq(s.proof_cases, 2);
    kvc_case_free(&minimal);
    kvc_case_free(&unshrunk);
}

Test(proof, one_bug_on_both_cases_is_named_and_proven_on_both) {
    kvc_case minimal, unshrunk;
    case_changed_by("rope-inverse", 4, 1, &minimal);
    case_changed_by("rope-inverse", tokens_of(&minimal), 0, &unshrunk);
    small_calls = 0;   /* rope-inverse on every call */
    kvc_fuzz_target target = {.reference = &kvc_reference_backend, .candidate = &two_faced, .threads = 1};
    kvc_fuzz_verdict before = failed_bytes(), after = failed_bytes();
    kvc_fuzz_signature s;
    memset(&s, 0, sizeof s);
    kvc_fuzz_signature_prove(&target, &unshrunk, &before, &minimal, &after, 0, &s);
    cr_expect_str_eq(s.explained_by, "rope-inverse");
    cr_expect_eq(s.proof_cases, 2);
    /* Without the unshrunk case: the minimal one alone. */
    memset(&s, 0, sizeof s);
    kvc_fuzz_signature_prove(&target, NULL, &before, &minimal, &after, 0, &s);
    cr_expect_str_eq(s.explained_by, "rope-inverse");
    cr_expect_eq(s.proof_cases, 1);
    /* A failure that is not a byte or status one is not diagnosed. */
    memset(&s, 0, sizeof s);
    snprintf(after.kind, sizeof after.kind, "threads");
    kvc_fuzz_signature_prove(&target, &unshrunk, &before, &minimal, &after, 0, &s);
    cr_expect_eq(s.diagnosed, 0);
    kvc_case_free(&minimal);
    kvc_case_free(&unshrunk);
}

Test(proof, an_explanation_holds_only_on_the_exact_bytes) {
    kvc_case c;
    case_changed_by("bf16-truncation", 1000, 1, &c);
    kvc_run_options options = {.canary = 0xA5};
    int truncation[1] = {kvc_deviation_find("bf16-truncation")}, both[2] = {truncation[0], kvc_deviation_find("rope-inverse")}, set[4];
    kvc_run_result planted;
    kvc_deviation_run_case_set(truncation, 1, &c, &options, &planted);
    cr_expect(kvc_explanation_holds(&c, &options, &planted, truncation, 1));
    cr_expect(!kvc_explanation_holds(&c, &options, &planted, both, 2));
    cr_expect(!kvc_explanation_holds(&c, &options, &planted, NULL, 0));
    ((uint8_t *)planted.outputs[0].array.data)[0] ^= 1;
    cr_expect(!kvc_explanation_holds(&c, &options, &planted, truncation, 1));
    kvc_run_result_free(&planted);
    cr_expect_eq(kvc_explanation_parse("bf16-truncation+rope-inverse", set), 2);
    cr_expect_eq(set[0], both[0]);
    cr_expect_eq(set[1], both[1]);
    cr_expect_eq(kvc_explanation_parse("bf16-truncation+no-such", set), -1);
    cr_expect_eq(kvc_explanation_parse("", set), -1);
    cr_expect_eq(kvc_explanation_parse("a+b+c+d+e", set), -1);
    kvc_case_free(&c);
}

/* The aliased-buffers check of the fuzzer (SPEC.md 8.1): a small share of
 * accepted cases run once more with an output placed over another tensor
 * of the call; a candidate that writes through the overlap, or rejects it
 * after writing, fails as "aliasing", replay reproduces it from case.json,
 * a py: candidate (copies in shared memory) skips it, and the coverage
 * report counts both. */
#include <cjson/cJSON.h>

#include "tests/test_support.h"

#include "harness/fuzz/dimensions.h"
#include "harness/fuzz/run.h"
#include "harness/replay/conditions.h"
#include "kvcmp/reference.h"
#include "kvcmp/validate.h"

/* Like a stage without the overlap check: a call the validator refuses
 * only for its overlap is run anyway, writing its first bytes. */
static int save_through_overlap(const kvc_v4_save_args *a, kvc_error *err) {
    int rc = ref_v4_save_partial_states(a, err);
    if (rc != KVC_ERR_CONFLICT) return rc;
    memset(a->state_cache.data, 0x5A, 16);
    err->code = KVC_OK;
    return KVC_OK;
}

/* Refuses the overlap, but only after writing into it. */
static int save_then_refuse(const kvc_v4_save_args *a, kvc_error *err) {
    int rc = ref_v4_save_partial_states(a, err);
    if (rc == KVC_ERR_CONFLICT) memset(a->state_cache.data, 0x5A, 16);
    return rc;
}

static const kvc_backend writes_through = {.name = "writes through aliased buffers", .v4_save_partial_states = save_through_overlap};
static const kvc_backend writes_then_refuses = {.name = "writes, then refuses", .v4_save_partial_states = save_then_refuse};
static const kvc_backend python_like = {.name = "py:candidate.py:run", .v4_save_partial_states = save_through_overlap};

static void save_case(kvc_case *c) { support_make_case("v4.save_partial_states/d128/r4", KVC_FAM_NORMAL, 11, 0, c); }

/* The first salt whose conditions draw the aliased-buffers check. */
static uint64_t aliased_salt(const kvc_fuzz_target *t, int want) {
    for (uint64_t salt = 0; salt < 10000; salt++) {
        kvc_fuzz_conditions k;
        kvc_fuzz_draw_conditions(t, salt, &k);
        if ((k.alias_seed != 0) == want) return salt;
    }
    cr_assert_fail("no salt in 10000");
    return 0;
}

Test(aliasing, a_small_share_of_checks_draws_it) {
    kvc_fuzz_target t = {.reference = &kvc_reference_backend, .candidate = &kvc_reference_backend, .threads = 1};
    int drawn = 0;
    for (uint64_t salt = 0; salt < 4000; salt++) {
        kvc_fuzz_conditions k;
        kvc_fuzz_draw_conditions(&t, salt, &k);
        drawn += k.alias_seed != 0;
    }
    cr_expect(drawn > 40 && drawn < 240, "%d of 4000 checks aliased", drawn);
    t.replay_padding = 64;   /* replay's wrap check runs the case as replay does: no extra runs */
    kvc_fuzz_conditions k;
    kvc_fuzz_draw_conditions(&t, aliased_salt(&(kvc_fuzz_target){.threads = 1}, 1), &k);
    cr_expect_eq(k.alias_seed, 0);
}

Test(aliasing, the_check_judges_the_candidate) {
    kvc_case c;
    save_case(&c);
    kvc_run_options o = {.page_padding = 64, .canary = 0x11};
    char detail[600] = "";
    for (uint64_t seed = 1; seed <= 6; seed++) {
        cr_expect_eq(kvc_fuzz_check_aliased(&kvc_reference_backend, &c, &o, seed, detail, sizeof detail), 0, "%s", detail);
        cr_expect_eq(kvc_fuzz_check_aliased(&writes_through, &c, &o, seed, detail, sizeof detail), 1);
        cr_expect(strstr(detail, "the candidate returned ok (it ran the call)") && strstr(detail, "in one allocation"), "%s", detail);
        cr_expect(strstr(detail, "changed from 0x") != NULL, "the written byte is named: %s", detail);
        cr_expect_eq(kvc_fuzz_check_aliased(&writes_then_refuses, &c, &o, seed, detail, sizeof detail), 1);
        cr_expect(strstr(detail, "rejected the aliased call but wrote into it") != NULL, "%s", detail);
    }
    kvc_case_free(&c);
}

Test(aliasing, a_campaign_check_fails_as_aliasing) {
    kvc_case c;
    save_case(&c);
    kvc_fuzz_target t = {.reference = &kvc_reference_backend, .candidate = &writes_through, .threads = 1};
    kvc_fuzz_verdict v;
    /* Without the draw the candidate is the reference. */
    cr_expect_eq(kvc_fuzz_check_case(&t, &c, aliased_salt(&t, 0), &v), KVC_FUZZ_PASS, "%s", v.detail);
    cr_expect_eq(v.conditions.aliased, 0);
    uint64_t salt = aliased_salt(&t, 1);
    cr_assert_eq(kvc_fuzz_check_case(&t, &c, salt, &v), KVC_FUZZ_FAIL);
    cr_expect_str_eq(v.kind, "aliasing");
    cr_expect_eq(v.conditions.aliased, 1);
    cr_expect(strstr(v.detail, "SPEC.md 8.1") != NULL, "%s", v.detail);
    /* The reference passes its own check. */
    t.candidate = &kvc_reference_backend;
    cr_expect_eq(kvc_fuzz_check_case(&t, &c, salt, &v), KVC_FUZZ_PASS, "%s", v.detail);
    cr_expect_eq(v.conditions.aliased, 1);
    /* A py: candidate's tensors are copies: skipped, and said so. */
    t.candidate = &python_like;
    cr_expect_eq(kvc_fuzz_check_case(&t, &c, salt, &v), KVC_FUZZ_PASS, "%s", v.detail);
    cr_expect_eq(v.conditions.aliased, 0);
    cr_expect_eq(v.conditions.alias_unavailable, 1);
    cr_expect_eq(kvc_backend_takes_aliased_memory(&python_like), 0);
    cr_expect_eq(kvc_backend_takes_aliased_memory(&writes_through), 1);
    kvc_case_free(&c);
}

/* A saved failure's case.json carries the seed; replay runs the check. */
Test(aliasing, replay_reads_and_runs_the_recorded_seed) {
    kvc_case c;
    save_case(&c);
    char error[256];
    kvc_replay_conditions k;
    c.meta_json = strdup("{\"replay\":{\"page_padding\":64,\"threads\":[1],\"alias_seed\":\"0x2b\"}}");
    cr_assert_eq(kvc_replay_conditions_read(&c, &k, error, sizeof error), 0, "%s", error);
    cr_expect_eq(k.aliased, 1);
    cr_expect_eq(k.alias_seed, 0x2b);
    char note[96];
    kvc_replay_conditions_describe(&k, note, sizeof note);
    cr_expect_str_eq(note, " (case.json replay: threads 1; aliased buffers)");
    kvc_run_options run = {.page_padding = 64, .canary = 0xA5, .keep_outputs_on_error = 1};
    kvc_run_result first;
    cr_assert_eq(kvc_run_case(&writes_through, &c, &run, &first), KVC_OK);
    char detail[700] = "";
    cr_expect_eq(kvc_replay_check_conditions(&writes_through, &c, &run, &k, &first, KVC_POLICY_EXACT, detail, sizeof detail), 1);
    cr_expect(strstr(detail, "in one allocation") != NULL, "%s", detail);
    cr_expect_eq(kvc_replay_check_conditions(&kvc_reference_backend, &c, &run, &k, &first, KVC_POLICY_EXACT, detail, sizeof detail), 0,
                 "%s", detail);
    cr_expect_eq(kvc_replay_check_conditions(&python_like, &c, &run, &k, &first, KVC_POLICY_EXACT, detail, sizeof detail), 0,
                 "a py: candidate cannot take it: %s", detail);
    kvc_run_result_free(&first);
    const char *bad[] = {"{\"replay\":{\"alias_seed\":43}}", "{\"replay\":{\"alias_seed\":\"0\"}}", "{\"replay\":{\"alias_seed\":\"x\"}}"};
    for (int i = 0; i < 3; i++) {
        free(c.meta_json);
        c.meta_json = strdup(bad[i]);
        cr_expect_neq(kvc_replay_conditions_read(&c, &k, error, sizeof error), 0, "%s", bad[i]);
        cr_expect(strstr(error, "\"alias_seed\" must be a string holding a non-zero number") != NULL, "%s", error);
    }
    free(c.meta_json);
    c.meta_json = strdup("{\"replay\":{\"alias_seed\":\"7\"}}");
    cr_assert_eq(kvc_replay_conditions_read(&c, &k, error, sizeof error), 0, "%s", error);
    kvc_replay_conditions_describe(&k, note, sizeof note);
    cr_expect_str_eq(note, " (case.json replay: aliased buffers)");
    kvc_case_free(&c);
}

/* Outputs from copies (outside outputs, a py: candidate) say that the
 * recorded check did not run. */
Test(aliasing, replay_says_when_the_check_cannot_run) {
    kvc_case c = {0};
    char detail[600] = "bit-exact";
    c.meta_json = strdup("{\"replay\":{\"alias_seed\":\"0x9\"}}");
    kvc_replay_note_unrun_alias(&c, 1, detail, sizeof detail);
    cr_expect_str_eq(detail, "bit-exact");
    kvc_replay_note_unrun_alias(&c, 0, detail, sizeof detail);
    cr_expect_str_eq(detail, "bit-exact (case.json's aliased-buffers check did not run: these outputs came from copies of the tensors, "
                             "which cannot overlap; replay with an in-process --impl to run it)");
    const char *without[] = {"{\"replay\":{\"threads\":[2]}}", "{\"replay\":{\"alias_seed\":1}}"};
    for (int i = 0; i < 2; i++) {
        free(c.meta_json);
        c.meta_json = strdup(without[i]);
        snprintf(detail, sizeof detail, "bit-exact");
        kvc_replay_note_unrun_alias(&c, 0, detail, sizeof detail);
        cr_expect_str_eq(detail, "bit-exact", "%s", without[i]);
    }
    free(c.meta_json);
}

Test(aliasing, coverage_counts_checked_and_skipped) {
    kvc_coverage_tally *t = calloc(1, sizeof *t);
    kvc_case_coverage checked = {.max_position = -1, .aliased = 1}, skipped = {.max_position = -1, .alias_unavailable = 1};
    kvc_case_coverage plain = {.max_position = -1};
    kvc_coverage_add(t, &checked);
    kvc_coverage_add(t, &plain);
    kvc_coverage_add(t, &plain);
    kvc_coverage_add(t, &plain);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    kvc_coverage_print(f, t);
    fclose(f);
    cr_expect(strstr(text, "  aliased buffers        1 (25.0%): an output placed over another tensor of the call") != NULL, "%s", text);
    cr_expect(strstr(text, "skipped in") == NULL, "%s", text);
    free(text);
    kvc_coverage_add(t, &skipped);
    f = open_memstream(&text, &size);
    kvc_coverage_print(f, t);
    fclose(f);
    cr_expect(strstr(text, "skipped in 1 cases: the candidate gets copies of its tensors (a py: candidate's shared memory)") != NULL,
              "%s", text);
    free(text);
    cJSON *j = kvc_coverage_json(t);
    cJSON *aliased = cJSON_GetObjectItem(j, "aliased_buffers");
    cr_expect_eq(cJSON_GetObjectItem(aliased, "checked")->valueint, 1);
    cr_expect_eq(cJSON_GetObjectItem(aliased, "skipped")->valueint, 1);
    cJSON_Delete(j);
    free(t);
}

/* The binder's aliased buffers (kvc_run_options.alias_seed, SPEC.md 8.1):
 * one output and another tensor of the call placed overlapping in one
 * allocation, every alignment rule kept, and the reference rejecting
 * every such call of every stage as a conflict with nothing written. */
#include "tests/test_support.h"

#include "kvcmp/run.h"
#include "kvcmp/validate.h"

typedef struct {
    char first[64], second[64];
    long long first_start, first_end, second_start, second_end;
} placement;

/* "OUT (bytes a..b) and OTHER (bytes c..d) in one allocation" */
static void read_placement(const char *message, placement *p) {
    int n = sscanf(message, "%63s (bytes %lld..%lld) and %63s (bytes %lld..%lld) in one allocation", p->first, &p->first_start,
                   &p->first_end, p->second, &p->second_start, &p->second_end);
    cr_assert_eq(n, 6, "alias message: %s", message);
}

static int is_output(const kvc_case *c, const char *name) {
    const char *names[KVC_MAX_OUTPUTS];
    int n = kvc_stage_outputs(c, names);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

/* A case of the variant the reference accepts, with at least one token. */
static void accepted_case(const char *variant, kvc_case *c) {
    for (int64_t index = 0; index < 40; index++) {
        support_make_case(variant, KVC_FAM_NORMAL, 5, index, c);
        kvc_run_result r;
        int rc = kvc_run_case(&kvc_reference_backend, c, NULL, &r);
        cr_assert_eq(r.aliased, 0, "aliased without an alias seed");
        kvc_run_result_free(&r);
        if (rc == KVC_OK && kvc_case_get(c, "positions")->count > 0) return;
        kvc_case_free(c);
    }
    cr_assert_fail("%s: no accepted case in 40", variant);
}

/* Every output the run handed back still holds the case's bytes. */
static void expect_outputs_unchanged(const kvc_case *c, const kvc_run_result *r, const char *what) {
    for (int i = 0; i < r->num_outputs; i++) {
        kvc_array *before = kvc_case_get(c, r->outputs[i].name);
        const kvc_array *after = &r->outputs[i].array;
        cr_assert(before && before->count == after->count, "%s: output %s", what, r->outputs[i].name);
        cr_expect(memcmp(before->data, after->data, (size_t)after->count * (size_t)kvc_dtype_size(after->dtype)) == 0, "%s: %s written",
                  what, r->outputs[i].name);
    }
}

Test(run_case_aliased, every_stage_rejects_overlapping_buffers_as_a_conflict, .timeout = 240) {
    int output_first = 0, other_first = 0, two_outputs = 0, inside_padding = 0;
    for (int v = 0; v < kvc_variant_count(); v++) {
        if (kvc_variant(v)->stage < 0) continue;
        kvc_case c;
        accepted_case(kvc_variant(v)->name, &c);
        for (uint64_t seed = 1; seed <= 12; seed++) {
            kvc_run_options o = {.page_padding = 64 * (int64_t)(seed % 3), .canary = 0x3C, .keep_outputs_on_error = 1, .alias_seed = seed};
            kvc_run_result r;
            int rc = kvc_run_case(&kvc_reference_backend, &c, &o, &r);
            char what[400];
            snprintf(what, sizeof what, "%s, alias seed %llu (%s)", kvc_variant(v)->name, (unsigned long long)seed, r.alias_message);
            cr_assert_eq(r.aliased, 1, "%s: not aliased", what);
            cr_expect_eq(rc, KVC_ERR_CONFLICT, "%s: %s %s", what, kvc_status_name(rc), r.error.message);
            cr_expect_eq(r.alias_written, 0, "%s", what);
            cr_expect_eq(r.padding_touched, 0, "%s", what);
            expect_outputs_unchanged(&c, &r, what);
            placement p;
            read_placement(r.alias_message, &p);
            /* One starts the allocation, the other a 64-byte line inside it. */
            cr_expect(p.first_start % 64 == 0 && p.second_start % 64 == 0, "%s", what);
            cr_expect(p.first_start == 0 || p.second_start == 0, "%s", what);
            cr_expect(p.first_start < p.second_end && p.second_start < p.first_end, "%s: no overlap", what);
            cr_expect(is_output(&c, p.first), "%s: %s is no output", what, p.first);
            cr_expect_str_neq(p.first, p.second, "%s", what);
            /* The message names both tensors, in either order. */
            char one[140], other[140];
            snprintf(one, sizeof one, "%s overlaps %s", p.first, p.second);
            snprintf(other, sizeof other, "%s overlaps %s", p.second, p.first);
            cr_expect(strstr(r.error.message, one) || strstr(r.error.message, other), "%s: message %s", what, r.error.message);
            output_first += p.first_start == 0;
            other_first += p.second_start == 0 && p.first_start > 0;
            two_outputs += is_output(&c, p.second);
            inside_padding += o.page_padding > 0;
            kvc_run_result_free(&r);
        }
        kvc_case_free(&c);
    }
    cr_expect_gt(output_first, 0);
    cr_expect_gt(other_first, 0, "the other tensor never came first");
    cr_expect_gt(two_outputs, 0, "two outputs never overlapped");
    cr_expect_gt(inside_padding, 0);
}

/* v41.forward R = 2 has three outputs; its kv_cache and ring belong to
 * different stages, and only the forward's own check sees them meet. */
Test(run_case_aliased, v41_forward_ring_under_the_kv_cache) {
    kvc_case c;
    accepted_case("v41.forward/r2", &c);
    int found = 0;
    for (uint64_t seed = 1; seed < 400 && !found; seed++) {
        kvc_run_options o = {.canary = 0xA5, .keep_outputs_on_error = 1, .alias_seed = seed};
        kvc_run_result r;
        int rc = kvc_run_case(&kvc_reference_backend, &c, &o, &r);
        placement p;
        read_placement(r.alias_message, &p);
        int ring_and_cache = (strcmp(p.first, "kv_cache") == 0 && strcmp(p.second, "state_cache") == 0) ||
                             (strcmp(p.first, "state_cache") == 0 && strcmp(p.second, "kv_cache") == 0);
        if (ring_and_cache) {
            found = 1;
            cr_expect_eq(rc, KVC_ERR_CONFLICT, "%s", r.error.message);
            cr_expect_str_eq(r.error.message, "kv_cache overlaps state_cache in memory");
            expect_outputs_unchanged(&c, &r, "v41.forward/r2");
        }
        kvc_run_result_free(&r);
    }
    cr_expect(found, "no seed below 400 put the ring and the kv cache together");
    kvc_case_free(&c);
}

static void empty_first_dimension(kvc_case *c, const char *name) {
    kvc_array *a = kvc_case_get(c, name);
    a->count = 0;
    a->shape[0] = 0;
}

/* A call with nothing that can overlap (no token: the latent and the
 * index tensors are empty) runs as without the seed. */
Test(run_case_aliased, nothing_to_overlap_runs_unaliased) {
    kvc_case c;
    accepted_case("v41.save_compress_norm/r1", &c);
    const char *token_tensors[] = {"positions", "slot_mapping", "kv_score", "latent"};
    for (int i = 0; i < 4; i++) empty_first_dimension(&c, token_tensors[i]);
    kvc_run_options o = {.canary = 0xA5, .alias_seed = 99};
    kvc_run_result r;
    cr_expect_eq(kvc_run_case(&kvc_reference_backend, &c, &o, &r), KVC_OK, "%s", r.error.message);
    cr_expect_eq(r.aliased, 0, "%s", r.alias_message);
    kvc_run_result_free(&r);
    kvc_case_free(&c);
    /* An insert of no token with an empty cos_sin table: the kv cache alone. */
    accepted_case("v41.rope_plain_insert/bf16", &c);
    const char *insert_tensors[] = {"positions", "slot_mapping", "latent", "cos_sin"};
    for (int i = 0; i < 4; i++) empty_first_dimension(&c, insert_tensors[i]);
    cr_expect_eq(kvc_run_case(&kvc_reference_backend, &c, &o, &r), KVC_OK, "%s", r.error.message);
    cr_expect_eq(r.aliased, 0, "%s", r.alias_message);
    kvc_run_result_free(&r);
    kvc_case_free(&c);
}

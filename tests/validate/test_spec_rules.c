/* The shared validator against a second reading of SPEC.md 8
 * (tests/validate/spec_rules.h): both backends call common/validate.c,
 * so no differential campaign can see a wrong rule there; this can.
 * Random arguments, valid and broken at each rule's bounds, must get the
 * same verdict from both. */
#include <criterion/criterion.h>

#include "tests/validate/spec_property.h"

/* The bounds a run must have drawn, so that a change to the drawing that
 * loses one fails here instead of passing silently. */
static void expect_drawn(const prop_run *p, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++) cr_expect(prop_bound_hits(p, names[i]) > 0, "the run never drew %s", names[i]);
}

Test(spec_rules, validator_agrees_with_the_rules_on_random_arguments, .timeout = 240) {
    static prop_run p;
    memset(&p, 0, sizeof p);
    int64_t bad = prop_validator_cases(&p, 20261129, 100000);
    cr_assert_eq(bad, 0, "%lld of %lld cases disagree; first: %s", (long long)bad, (long long)p.cases, p.why);
    /* Not vacuous: both verdicts, every status, every bound. */
    cr_expect(p.accepted > p.cases / 5, "only %lld of %lld cases accepted", (long long)p.accepted, (long long)p.cases);
    for (int code = KVC_ERR_PARAM; code <= KVC_ERR_METADATA; code++)
        cr_expect(p.status[code] > 20, "%s returned %lld times", kvc_status_name(code), (long long)p.status[code]);
    static const char *const bounds[] = {
        "position=-1", "position=2^40-1", "position=2^40", "position=2^40+1", "position=INT64_MAX", "eps=1", "eps=next-above-1",
        "eps=-0", "eps=nan", "fp8_scale=0", "fp8_scale=-0", "fp8_scale=denorm", "fp8_scale=FLT_MAX", "fp8_scale=inf",
        "slot=rows-1", "slot=rows", "kv_slot=rows-1", "kv_slot=rows", "state_slot=rows", "token_to_req=num_requests",
        "token_to_req=num_requests-1", "token_to_req-unset-non-closing", "cos_sin_rows=needed", "cos_sin_rows=needed-1",
        "block_table=num_pages", "block_table=num_pages-1", "max_blocks=last-column", "max_blocks=last-column+1",
        "query_start_loc[NR]=T", "query_start_loc[NR]=T+1", "gap:first-two-positions", "gap:last-two-positions",
        "position-after-INT64_MAX", "ring-row-not-p-mod-cap", "two-blocks-in-a-request", "one-block-two-requests",
        "cap-not-power-of-two>=8", "ring:span=2^56", "ring:span=2^56+", "kv_cache:stride=page_bytes", "state_cache:stride=page_bytes-1",
        "overlap:ends-at-input", "overlap:one-element-before", "overlap:starts-after-input", "overlap:last-element",
        "valid-slot-after-batch", "num_tokens=2^40+1", "null:ape", "null:norm_weight",
    };
    expect_drawn(&p, bounds, sizeof bounds / sizeof *bounds);
}

/* The count and span bounds (2^40 counts, 2^56-byte caches) through the
 * validators' field checks, with pointers that are never read. */
Test(spec_rules, field_checks_agree_at_the_count_bounds, .timeout = 120) {
    static prop_run p;
    memset(&p, 0, sizeof p);
    int64_t bad = prop_fields_cases(&p, 20261130, 20000);
    cr_assert_eq(bad, 0, "%lld of %lld cases disagree; first: %s", (long long)bad, (long long)p.cases, p.why);
    cr_expect(p.accepted > p.cases / 5, "only %lld of %lld cases accepted", (long long)p.accepted, (long long)p.cases);
    static const char *const bounds[] = {
        "num_tokens=2^40-1", "num_tokens=2^40", "num_tokens=2^40+1", "num_tokens=INT64_MAX", "cos_sin_rows=2^40",
        "cos_sin_rows=2^40+1", "num_requests=2^40", "num_requests=2^40+1", "block_table-entries<=2^40", "block_table-entries>2^40",
        "state_cache:pages-x-stride<=2^56", "state_cache:pages-x-stride>2^56", "kv_cache:pages-x-stride<=2^56",
        "kv_cache:pages-x-stride>2^56",
    };
    expect_drawn(&p, bounds, sizeof bounds / sizeof *bounds);
}

/* The layout helpers both backends share (include/kvcmp/layout.h)
 * against SPEC.md 3 and 5.1 as tests/validate/spec_rules.h reads them:
 * a wrong page address or ring store there is wrong on both sides of
 * every differential comparison, so only a second reading can see it. */
#include <criterion/criterion.h>

#include "tests/layout/layout_property.h"

Test(layout_rules, every_row_of_every_format_where_spec_3_puts_it) {
    layout_run run = {0};
    int64_t bad = layout_addressing_cases(&run, 20261129, 400);
    cr_assert_eq(bad, 0, "%lld of %lld checks disagree; first: %s", (long long)bad, (long long)run.checks, run.why);
    cr_expect(run.checks > 10000, "only %lld checks", (long long)run.checks);
}

Test(layout_rules, v4_state_slot_through_the_block_table) {
    layout_run run = {0};
    int64_t bad = layout_state_slot_cases(&run, 20261129, 5000);
    cr_assert_eq(bad, 0, "%lld of %lld checks disagree; first: %s", (long long)bad, (long long)run.checks, run.why);
}

Test(layout_rules, ring_store_keeps_the_last_cap_rows_padding_included, .timeout = 120) {
    layout_run run = {0};
    int64_t bad = layout_ring_store_cases(&run, 20261129, 600);
    cr_assert_eq(bad, 0, "%lld of %lld rings disagree; first: %s", (long long)bad, (long long)run.checks, run.why);
    cr_expect(run.long_chunks_padded_at_end > 20, "only %lld chunks longer than CAP with padding in their last CAP rows",
              (long long)run.long_chunks_padded_at_end);
}

/* The history and permutation checks, the ring draw, the wait policy
 * recorded and the pooled histories judged by candidates and cases made
 * for them (tests/fuzz/harness_property.h), not by their own plantings. */
#include <criterion/criterion.h>

#include "tests/fuzz/harness_property.h"

Test(harness_checks, history_check_sees_a_ring_that_alone_differs, .timeout = 120) {
    char why[700] = "";
    cr_assert_eq(harness_history_sees_the_ring(why, sizeof why), 0, "%s", why);
}

Test(harness_checks, permutation_moves_pages_of_two_page_caches, .timeout = 120) {
    char why[700] = "";
    cr_assert_eq(harness_permutation_moves_pages(why, sizeof why), 0, "%s", why);
}

Test(harness_checks, ring_chunks_past_cap_are_a_regular_draw, .timeout = 120) {
    char why[700] = "";
    cr_assert_eq(harness_ring_chunks_past_cap(why, sizeof why), 0, "%s", why);
}

/* Meaningful under OMP_WAIT_POLICY=active or passive at start (the self
 * checks restart under active); otherwise "default" is expected. */
Test(harness_checks, wait_policy_recorded_is_the_one_at_load, .timeout = 30) {
    char why[700] = "";
    cr_assert_eq(harness_wait_policy_recorded(why, sizeof why), 0, "%s", why);
}

Test(harness_checks, pooled_histories_are_sized_for_a_power_of_two, .timeout = 120) {
    char why[700] = "";
    cr_assert_eq(harness_history_pooled_sizes(why, sizeof why), 0, "%s", why);
}

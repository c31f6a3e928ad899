/* The history and permutation checks judged by candidates and cases made
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

/* Paths in reports: relative to where the command ran. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness/report/paths.h"

static const char *relative(const char *path) {
    static char out[PATH_MAX];
    kvc_relative_path(path, out, sizeof out);
    return out;
}

Test(report_paths, absolute_paths_become_relative_to_the_current_directory) {
    char here[PATH_MAX], path[PATH_MAX + 64];
    cr_assert_not_null(getcwd(here, sizeof here));
    cr_expect_str_eq(relative(here), ".");
    snprintf(path, sizeof path, "%s/fixtures/x/", here);
    cr_expect_str_eq(relative(path), "fixtures/x");
    /* A sibling whose name starts like the current directory's. */
    char *slash = strrchr(here, '/');
    cr_assert_not_null(slash);
    snprintf(path, sizeof path, "%.*s/%sx", (int)(slash - here), here, slash + 1);
    char expected[PATH_MAX + 8];
    snprintf(expected, sizeof expected, "../%sx", slash + 1);
    cr_expect_str_eq(relative(path), expected);
    snprintf(path, sizeof path, "%.*s/shared/upstream-fuzz", (int)(slash - here), here);
    cr_expect_str_eq(relative(path), "../shared/upstream-fuzz");
    snprintf(path, sizeof path, "%.*s", (int)(slash - here), here);
    cr_expect_str_eq(relative(path), "..");
    /* The root, as many levels up as the current directory is deep. */
    int depth = 0;
    for (const char *p = here; *p; p++) depth += *p == '/';
    char ups[PATH_MAX] = "";
    for (int i = 0; i < depth; i++) strcat(ups, i ? "/.." : "..");
    cr_expect_str_eq(relative("/"), ups);
}

Test(report_paths, relative_paths_stay_as_typed) {
    cr_expect_str_eq(relative("fixtures/regressions"), "fixtures/regressions");
    cr_expect_str_eq(relative("../shared"), "../shared");
    char small[8];
    kvc_relative_path("fixtures/regressions", small, sizeof small);
    cr_expect_str_eq(small, "fixture");
}

/* Helpers of the command-line tests: run a subcommand through its C entry
 * point with its output captured, and check what a user reads. */
#ifndef KVCMP_TESTS_CLI_SUPPORT_H
#define KVCMP_TESTS_CLI_SUPPORT_H

#include "tests/test_support.h"

#include <sys/stat.h>
#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

static inline void expect_contains(const char *text, const char *needle, const char *what) {
    cr_expect(text && strstr(text, needle) != NULL, "%s lacks '%s':\n%s", what, needle, text ? text : "(null)");
}

static inline void expect_replay_usage_error(int argc, char **argv, const char *needle) {
    captured_run run = support_capture(kvc_cmd_replay, argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d for '%s'", run.status, argc ? argv[0] : "");
    expect_contains(run.err, needle, "stderr");
    cr_expect_str_empty(run.out, "a usage error printed results");
    support_free_run(&run);
}

/* A valid case with the reference's outputs, saved to root/name. */
static inline void save_case(const char *root, const char *name, const char *variant, const char *source, int64_t index, char *dir,
                      size_t size) {
    kvc_case c;
    support_make_case(variant, KVC_FAM_NORMAL, 21, index, &c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, &c), 0, "the reference rejected %s case %lld", variant, (long long)index);
    snprintf(c.source, sizeof c.source, "%s", source);
    snprintf(dir, size, "%s/%s", root, name);
    char error[512];
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
}

/* kvc_cmd_fuzz re-executes itself unless an OpenMP wait policy is set. */
static inline captured_run run_fuzz(int argc, char **argv) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    return support_capture(kvc_cmd_fuzz, argc, argv);
}

static inline void expect_fuzz_usage_error(int argc, char **argv, const char *needle) {
    captured_run run = run_fuzz(argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d", run.status);
    expect_contains(run.err, needle, "stderr");
    support_free_run(&run);
}

#endif

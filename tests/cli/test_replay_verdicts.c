/* kvcmp replay: verdicts, exit codes and __REPRO lines on real case directories. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "kvcmp/validate.h"
#include "cli/commands.h"
#include "kvcmp/backends.h"
#include "harness/fuzz/run.h"
#include "harness/replay/replay.h"




/* ---- replay: verdicts on real case directories -------------------------------- */


/* Rewrites one byte of a saved tensor, at the first byte where NAME.out
 * differs from NAME (a byte the stage writes). */
static void corrupt_expected(const char *dir, const char *name) {
    char path[600], error[512];
    kvc_array input, expected;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    cr_assert_eq(kvc_npy_read(path, &input, error, sizeof error), 0, "%s", error);
    snprintf(path, sizeof path, "%s/%s.out.npy", dir, name);
    cr_assert_eq(kvc_npy_read(path, &expected, error, sizeof error), 0, "%s", error);
    size_t bytes = (size_t)expected.count * (size_t)kvc_dtype_size(expected.dtype), i = 0;
    while (i < bytes && ((uint8_t *)input.data)[i] == ((uint8_t *)expected.data)[i]) i++;
    cr_assert_lt(i, bytes, "the stage wrote nothing into %s", name);
    ((uint8_t *)expected.data)[i] ^= 0x40;
    cr_assert_eq(kvc_npy_write(path, &expected, error, sizeof error), 0, "%s", error);
    kvc_array_free(&input);
    kvc_array_free(&expected);
}

Test(cli_replay, passing_cases_per_source, .timeout = 60) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "a", "v41.rope_plain_insert/bf16", "vllm-triton-h200 (unit test)", 0, dir, sizeof dir);
    save_case(root, "b", "v4.save_partial_states/d128/r4", "vllm-eager-torch-cpu", 1, dir, sizeof dir);
    save_case(root, "nested/c", "v41.save_compress_norm/r1", "vllm-eager-torch-cpu", 2, dir, sizeof dir);
    char *argv[] = {"--impl", "ref", "--policy", "vllm", "--page-padding", "128", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_contains(run.out, "PASS [vllm-triton-h200] ", "stdout");
    expect_contains(run.out, "/nested/c: bit-exact", "stdout");
    expect_contains(run.out, "source vllm-triton-h200         1 passed, 0 failed, 0 skipped", "stdout");
    expect_contains(run.out, "source vllm-eager-torch-cpu     2 passed, 0 failed, 0 skipped", "stdout");
    expect_contains(run.out, "\n3 passed, 0 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, optimized_backend_passes_the_same_cases, .timeout = 60) {
    char error[256];
    if (!kvc_backend_by_name("opt", error, sizeof error)) cr_skip_test("%s", error);
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "a", "v4.compress/d512/r4", "spec", 3, dir, sizeof dir);
    save_case(root, "b", "v41.forward/r2", "spec", 4, dir, sizeof dir);
    char *argv[] = {"--impl", "opt", "--quiet", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    cr_expect_str_eq(run.out, "2 passed, 0 failed, 0 skipped\n", "--quiet prints only the summary when everything passes");
    support_free_run(&run);
    /* The same with the options after the path. */
    char *late[] = {root, "--impl", "opt"};
    run = support_capture(kvc_cmd_replay, ARGC(late), late);
    cr_expect_eq(run.status, 0, "stdout:\n%s", run.out);
    expect_contains(run.out, "2 passed, 0 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, a_changed_expected_byte_fails_with_its_location, .timeout = 60) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "bad", "v41.rope_plain_insert/bf16", "spec-cases", 5, dir, sizeof dir);
    corrupt_expected(dir, "kv_cache");
    char *argv[] = {"--quiet", dir};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "FAIL [spec-cases] ", "stdout");
    expect_contains(run.out, "; first: kv_cache row ", "stdout");
    expect_contains(run.out, "  __REPRO: build/kvcmp replay --impl ref --policy exact ", "stdout");
    expect_contains(run.out, "0 passed, 1 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, cases_without_expected_outputs, .timeout = 60) {
    char root[64], path[320], error[512];
    support_temp_dir(root, sizeof root);
    /* An input to reject, correctly rejected: a slot past the cache. */
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/fp8", 22, "slot_mapping", "kv_cache", &c);
    snprintf(path, sizeof path, "%s/rejected", root);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    /* A valid input recorded as one to reject: the stage accepts it. */
    support_make_case("v41.rope_plain_insert/fp8", KVC_FAM_NORMAL, 22, 1, &c);
    snprintf(path, sizeof path, "%s/accepted", root);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    char *argv[] = {root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "/rejected: rejected as expected, nothing written: ", "stdout");
    expect_contains(run.out, "/accepted: the case has no expected outputs (an input to reject), but the stage accepted it", "stdout");
    expect_contains(run.out, "1 passed, 1 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(cli_replay, rejected_case_with_expected_outputs_and_broken_cases, .timeout = 60) {
    char root[64], dir[256], path[320];
    support_temp_dir(root, sizeof root);
    /* Expected outputs (here: the cache unchanged), but an input the stage rejects. */
    kvc_case c;
    char error[512];
    support_make_index_error_case("v41.rope_plain_insert/bf16", 6, "slot_mapping", "kv_cache", &c);
    kvc_array expected, *cache = kvc_case_get(&c, "kv_cache");
    cr_assert_eq(kvc_array_alloc(&expected, cache->dtype, cache->ndim, cache->shape), 0);
    memcpy(expected.data, cache->data, (size_t)cache->count * 2);
    cr_assert_eq(kvc_case_put(&c, "kv_cache.out", &expected), 0);
    snprintf(dir, sizeof dir, "%s/rejects", root);
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    /* A case.json that does not parse. */
    snprintf(path, sizeof path, "%s/broken", root);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/broken/case.json", root);
    support_write_text(path, "{ nope");
    /* A path with no case under it. */
    snprintf(path, sizeof path, "%s/empty", root);
    mkdir(path, 0777);
    char broken_dir[320];
    snprintf(broken_dir, sizeof broken_dir, "%s/broken", root);
    char *argv[] = {"--quiet", dir, broken_dir, path};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "/rejects: stage returned index-out-of-range: slot_mapping[", "stdout");
    expect_contains(run.out, "FAIL [unreadable] ", "stdout");
    expect_contains(run.out, "/broken: cannot load case: ", "stdout");
    expect_contains(run.out, "not valid JSON", "stdout");
    expect_contains(run.err, "kvcmp replay: no case directory (with case.json) under ", "stderr");
    expect_contains(run.out, "0 passed, 3 failed, 0 skipped\n", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

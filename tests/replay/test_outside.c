/* kvcmp replay --outputs DIR and --outputs-in-case (NAME.got.npy): outputs of an
 * implementation that ran elsewhere, compared with the reference run on
 * the case's inputs ("expected" is always the reference).  The outside
 * runner's status file says it ran (tests/cli/test_replay_outside_status.c
 * covers the other statuses). */
#include "tests/cli/cli_support.h"

/* Writes the case's NAME.out tensor as path (a stand-in for an outside
 * implementation that got everything right), optionally one bit off. */
static void write_output(const char *case_dir, const char *name, const char *path, int flip_byte) {
    char from[512], error[512];
    snprintf(from, sizeof from, "%s/%s.out.npy", case_dir, name);
    kvc_array a;
    cr_assert_eq(kvc_npy_read(from, &a, error, sizeof error), 0, "%s", error);
    if (flip_byte >= 0) ((uint8_t *)a.data)[flip_byte] ^= 1;
    cr_assert_eq(kvc_npy_write(path, &a, error, sizeof error), 0, "%s", error);
    kvc_array_free(&a);
}

/* The outside runner's status file (SPEC.md section 10). */
static void write_status(const char *dir, const char *file, const char *status, const char *message) {
    char path[700], text[400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(text, sizeof text, "{\"status\": \"%s\", \"message\": \"%s\"}\n", status, message);
    support_write_text(path, text);
}

static captured_run replay_outputs(const char *outputs, const char *case_dir, const char *policy) {
    char *argv[] = {"--outputs", (char *)outputs, "--policy", (char *)policy, (char *)case_dir};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

Test(replay_outside, outputs_dir_pass_and_one_bit_off) {
    char root[128], dir[512], outputs[512], case_out[600], path[700];
    support_temp_dir(root, sizeof root);
    save_case(root, "c1", "v41.save_compress_norm/r1", "outside test", 0, dir, sizeof dir);
    snprintf(outputs, sizeof outputs, "%s/outputs", root);
    snprintf(case_out, sizeof case_out, "%s/c1", outputs);
    captured_run run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "no outside status: ", "stdout");
    expect_contains(run.out, "/outputs/c1/status.json is missing", "stdout");
    expect_contains(run.out, "__REPRO: build/kvcmp replay --outputs", "stdout");
    support_free_run(&run);
    mkdir(outputs, 0777);
    mkdir(case_out, 0777);
    write_status(case_out, "status.json", "ran", "");
    run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "outside output latent is missing", "stdout");
    expect_contains(run.out, "latent.got.npy", "stdout");
    support_free_run(&run);
    snprintf(path, sizeof path, "%s/latent.npy", case_out);
    write_output(dir, "latent", path, -1);
    char trailing[600];
    snprintf(trailing, sizeof trailing, "%s/", dir);
    run = replay_outputs(outputs, trailing, "exact");
    cr_expect_eq(run.status, 0, "%s", run.out);
    expect_contains(run.out, "PASS [outside] ", "stdout");
    expect_contains(run.out, "bit-exact", "stdout");
    support_free_run(&run);
    write_output(dir, "latent", path, 0);
    run = replay_outputs(outputs, dir, "vllm");
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "latent value x1", "stdout");
    expect_contains(run.out, "first: latent token 0 dim 0 (latent value) expected=0x", "stdout");
    support_free_run(&run);
    support_write_text(path, "not an npy file");
    run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "cannot read the outside outputs", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

Test(replay_outside, got_files_beside_the_case) {
    char root[128], dir[512], path[700];
    support_temp_dir(root, sizeof root);
    save_case(root, "c2", "v4.save_partial_states/d128/r4", "outside test", 0, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/state_cache.got.npy", dir);
    write_output(dir, "state_cache", path, -1);
    write_status(dir, "status.got.json", "ran", "");
    char *argv[] = {"--outputs-in-case", dir};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s", run.out);
    support_free_run(&run);
    /* A misshapen outside output. */
    kvc_array small;
    int64_t shape[1] = {3};
    char error[512];
    cr_assert_eq(kvc_array_alloc(&small, KVC_DT_F4, 1, shape), 0);
    cr_assert_eq(kvc_npy_write(path, &small, error, sizeof error), 0);
    kvc_array_free(&small);
    run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "outside output state_cache is misshapen", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* A must-reject case: the outside side passes when it wrote nothing (no
 * file, or the input bytes unchanged) and fails when it wrote. */
Test(replay_outside, rejected_case) {
    char root[128], dir[600], outputs[512], case_out[600], path[700], error[512];
    support_temp_dir(root, sizeof root);
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 3, "slot_mapping", "kv_cache", &c);
    snprintf(dir, sizeof dir, "%s/bad", root);
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    snprintf(outputs, sizeof outputs, "%s/outputs", root);
    snprintf(case_out, sizeof case_out, "%s/bad", outputs);
    mkdir(outputs, 0777);
    mkdir(case_out, 0777);
    write_status(case_out, "status.json", "rejected", "slot out of range");
    captured_run run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 0, "%s", run.out);
    expect_contains(run.out, "rejected by the reference (index-out-of-range", "stdout");
    expect_contains(run.out, "and by the outside runner: slot out of range", "stdout");
    support_free_run(&run);
    snprintf(path, sizeof path, "%s/kv_cache.npy", case_out);
    kvc_array *cache = kvc_case_get(&c, "kv_cache");
    cr_assert_eq(kvc_npy_write(path, cache, error, sizeof error), 0);
    run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 0, "%s", run.out);
    support_free_run(&run);
    ((uint8_t *)cache->data)[0] ^= 0x80;
    cr_assert_eq(kvc_npy_write(path, cache, error, sizeof error), 0);
    run = replay_outputs(outputs, dir, "exact");
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "but the outside kv_cache differs from its input", "stdout");
    support_free_run(&run);
    kvc_case_free(&c);
    support_remove_tree(root);
}

/* Malformed case.json files: every refusal names the field. */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/npy.h"
#include "kvcmp/validate.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/history.h"
#include "harness/backends/plugin.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"

/* ---- case.json -------------------------------------------------------------- */

static void expect_case_error(const char *json, const char *needle) {
    char dir[64], path[128], error[1024] = "";
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    if (json) support_write_text(path, json);
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), -1, "case.json accepted: %s", json ? json : "(none)");
    cr_expect(strstr(error, needle) != NULL, "error '%s' does not contain '%s'", error, needle);
    support_remove_tree(dir);
}

Test(case_errors, malformed_case_json) {
    expect_case_error(NULL, "cannot read");
    expect_case_error("{\"format\": \"dsv4c-case/1\",", "not valid JSON");
    expect_case_error("{\"format\": \"dsv4c-case/2\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4}}",
                      "\"format\" must be \"dsv4c-case/1\"");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v5.compress\", \"params\": {\"compress_ratio\": 4}}",
                      "unknown \"stage\" v5.compress");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"params\": {\"compress_ratio\": 4}}", "unknown \"stage\" (missing)");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\"}", "\"params\" object missing");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"head_dim\": 512}}",
                      "params.compress_ratio missing");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4.5}}",
                      "not integers");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4, \"head_dim\": 127.5}}",
                      "not integers");
    expect_case_error("{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.rope_plain_insert\", \"params\": {\"compress_ratio\": 1, "
                      "\"cache_dtype\": \"fp16\"}}",
                      "unknown params.cache_dtype \"fp16\"");
}

Test(case_errors, broken_tensor_names_its_file) {
    char dir[64], path[128], error[1024];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    support_write_text(path, "{\"format\": \"dsv4c-case/1\", \"stage\": \"v4.compress\", \"params\": {\"compress_ratio\": 4}}");
    snprintf(path, sizeof path, "%s/positions.npy", dir);
    support_write_text(path, "not numpy at all");
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "positions.npy: not a .npy file") != NULL, "%s", error);
    support_remove_tree(dir);
}

Test(case_errors, defaults_source_and_meta) {
    char dir[64], path[128], error[1024];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    support_write_text(path, "{\"format\": \"dsv4c-case/1\", \"stage\": \"v41.save_compress_norm\", \"params\": {\"compress_ratio\": 2}, "
                             "\"source\": \"vllm-triton-h200 (H200, run 3)\", \"meta\": {\"k\": [1, 2]}}");
    kvc_case c;
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), 0, "%s", error);
    cr_expect_eq(c.stage, KVC_STAGE_V41_SAVE_COMPRESS_NORM);
    cr_expect_eq(c.head_dim, 512, "head_dim defaults to 512");
    uint32_t eps_bits;
    float eps = 1e-6f;
    uint32_t want_bits;
    memcpy(&eps_bits, &c.eps, 4);
    memcpy(&want_bits, &eps, 4);
    cr_expect_eq(eps_bits, want_bits, "eps defaults to the fp32 nearest 1e-6");
    cr_expect_eq(c.has_cache_dtype, 0);
    cr_expect_str_eq(c.meta_json, "{\"k\":[1,2]}");
    char label[64];
    kvc_case_source_label(&c, label, sizeof label);
    cr_expect_str_eq(label, "vllm-triton-h200");
    c.source[0] = 0;
    kvc_case_source_label(&c, label, sizeof label);
    cr_expect_str_eq(label, "unknown");
    kvc_case_free(&c);
    support_remove_tree(dir);
}

Test(case_errors, stage_and_dtype_names) {
    for (int s = 0; s < KVC_STAGE_COUNT; s++) cr_expect_eq(kvc_stage_from_name(kvc_stage_name((kvc_stage)s)), s);
    cr_expect_eq(kvc_stage_from_name("v4.compres"), -1);
    cr_expect_str_eq(kvc_stage_name(KVC_STAGE_COUNT), "?");
    for (int d = 0; d < 4; d++) cr_expect_eq(kvc_cache_dtype_from_name(kvc_cache_dtype_name((kvc_cache_dtype)d)), d);
    cr_expect_eq(kvc_cache_dtype_from_name("bf8"), -1);
}

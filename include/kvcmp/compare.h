/* Byte comparison of a stage's outputs against expected tensors, with
 * every difference classified by region and measured in format steps. */
#ifndef KVCMP_COMPARE_H
#define KVCMP_COMPARE_H

#include "case.h"
#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KVC_POLICY_EXACT = 0, KVC_POLICY_VLLM = 1 } kvc_policy;

typedef enum {
    KVC_REGION_NOPE_CODE,    /* fp8 NoPE code (ds_mla, indexer, plain fp8 dims < 448) */
    KVC_REGION_SCALE_BYTE,   /* UE8M0 byte, its zero pad byte, or the indexer fp32 scale */
    KVC_REGION_ROPE_VALUE,   /* rotated dims (bf16, or fp8 in a plain fp8 row) */
    KVC_REGION_NOPE_VALUE,   /* bf16 NoPE dims of a plain bf16 row */
    KVC_REGION_STATE_ROW,    /* fp32 of a V4 state row or a V4.1 ring row */
    KVC_REGION_LATENT,       /* bf16 latent value */
    KVC_REGION_UNTOUCHED,    /* a row the expected output leaves unchanged */
    KVC_REGION_COUNT
} kvc_region;

const char *kvc_region_name(kvc_region region);

typedef struct {
    int64_t differing[KVC_REGION_COUNT];     /* elements that differ at all */
    int64_t failing[KVC_REGION_COUNT];       /* beyond the policy's tolerance */
    int64_t max_steps[KVC_REGION_COUNT];     /* INT64_MAX for NaN vs number */
    int64_t bytes_compared;
    int has_first;
    char first[320];                         /* the first failing element */
    char first_tensor[48];                   /* its output tensor, */
    int64_t first_offset;                    /* byte offset there, */
    int first_width;                         /* width in bytes (1, 2 or 4) */
    kvc_region first_region;
    int missing_expected;                    /* a NAME.out.npy was absent */
    char missing_name[64];
} kvc_compare_report;

/* Compare result outputs with the case's NAME.out tensors. */
void kvc_compare_outputs(const kvc_case *c, const kvc_run_result *result, kvc_policy policy, kvc_compare_report *report);
/* Compare two results of the same case with each other (differential). */
void kvc_compare_results(const kvc_case *c, const kvc_run_result *expected, const kvc_run_result *got, kvc_policy policy,
                         kvc_compare_report *report);
int kvc_report_failed(const kvc_compare_report *report);
int kvc_report_differs(const kvc_compare_report *report);
/* "scale byte x7 (max 9 steps), NoPE code x12 (max 1 step)" */
void kvc_report_summary(const kvc_compare_report *report, char *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif

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

/* What kind of difference the failing elements of a region show (bits of
 * kvc_compare_report.patterns), for failure signatures. */
enum {
    KVC_DIFF_NAN_LOST = 1u << 0,     /* expected NaN, got a number */
    KVC_DIFF_NAN_MADE = 1u << 1,     /* expected a number, got NaN */
    KVC_DIFF_NAN_BITS = 1u << 2,     /* both NaN, other bits */
    KVC_DIFF_SIGNED_ZERO = 1u << 3,  /* +0 against -0 */
    KVC_DIFF_ONE_STEP = 1u << 4,     /* one step of the format */
    KVC_DIFF_STEPS = 1u << 5,        /* more than one step */
    KVC_DIFF_SCALE_FLOOR = 1u << 6,  /* got the scale of 1e-4 floored after the /448, expected less */
    KVC_DIFF_NAN_TO_FP8 = 1u << 7,   /* expected an fp8 (or scale) NaN, got a number */
};

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
    uint32_t patterns[KVC_REGION_COUNT];     /* KVC_DIFF_* bits of failing elements */
    /* The same for the first failing tensor only: the output of the
     * first stage of a forward that went wrong, before what follows from it. */
    int64_t first_tensor_failing[KVC_REGION_COUNT];
    uint32_t first_tensor_patterns[KVC_REGION_COUNT];
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

/* Run one case's stage on a backend: bind the case's tensors to stage
 * arguments (caches copied into paged buffers with optional padding
 * between pages, the padding filled with canary bytes), call the backend,
 * and hand back the output tensors in the case's own layout. */
#ifndef KVCMP_RUN_CASE_H
#define KVCMP_RUN_CASE_H

#include "case.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t page_padding;   /* bytes of padding after every page (multiple of 64) */
    uint8_t canary;         /* value of the padding bytes */
    int keep_outputs_on_error;  /* also hand back the caches when the stage
                                   rejects its input (to check that nothing
                                   was written); not for "case:" errors */
    uint64_t alias_seed;    /* 0, or: place one output and another tensor of the
                               call overlapping in one allocation, picked by this
                               seed (SPEC.md 8.1: the stage must reject the call
                               as a conflict and write nothing) */
} kvc_run_options;

#define KVC_MAX_OUTPUTS 4

typedef struct {
    int status;             /* KVC_OK or the stage's error code */
    kvc_error error;
    int num_outputs;
    kvc_named_array outputs[KVC_MAX_OUTPUTS];   /* named like the inputs */
    int padding_touched;    /* a byte of page padding changed */
    char padding_message[256];
    int aliased;            /* alias_seed placed two tensors in one allocation */
    int alias_written;      /* a byte of that allocation changed */
    char alias_message[256];/* which tensors, where; or the changed byte */
} kvc_run_result;

/* Returns the stage status (also in result->status).  A malformed case
 * (missing tensor, wrong dtype or shape) is KVC_ERR_PARAM with a message
 * beginning "case:". */
int kvc_run_case(const kvc_backend *backend, const kvc_case *c, const kvc_run_options *options, kvc_run_result *result);
void kvc_run_result_free(kvc_run_result *result);

/* Names of the tensors a stage writes, in order; returns the count. */
int kvc_stage_outputs(const kvc_case *c, const char **names);

#ifdef __cplusplus
}
#endif

#endif

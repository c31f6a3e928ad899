/* Validation in front of every stage (SPEC.md section "Rejected inputs").
 * Shared by every backend: a stage calls its validator before it writes a
 * byte, and returns the validator's error unchanged. */
#ifndef KVCMP_VALIDATE_H
#define KVCMP_VALIDATE_H

#include "kvcmp.h"

#ifdef __cplusplus
extern "C" {
#endif

int kvc_validate_v4_save(const kvc_v4_save_args *a, kvc_error *err);
int kvc_validate_v4_compress(const kvc_v4_compress_args *a, kvc_error *err);
int kvc_validate_v41_norm(const kvc_v41_norm_args *a, kvc_error *err);
/* expect_quant: 1 for rope_quant_insert (fp8_ds_mla), 0 for plain. */
int kvc_validate_v41_insert(const kvc_v41_insert_args *a, int expect_quant, kvc_error *err);
/* A forward is one call of two stages: no output of either stage may
 * overlap an output or an input of either stage (SPEC.md 8.1).  These
 * check every such pair, with the forward's names (the insert's slots of
 * an R = 2 v41.forward are kv_slot_mapping); tensors whose size their
 * stage's validator would refuse are left to it.  Call them before the
 * stages' own validators and before the first stage runs. */
int kvc_validate_v4_forward_overlaps(const kvc_v4_save_args *save, const kvc_v4_compress_args *compress, kvc_error *err);
int kvc_validate_v41_forward_overlaps(const kvc_v41_norm_args *norm, const kvc_v41_insert_args *insert, kvc_error *err);

/* printf-style: fill err, return code. */
int kvc_fail(kvc_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *kvc_status_name(int code);

/* Positions above this are rejected so p + 1 and (p / R) * R never overflow. */
#define KVC_MAX_POSITION ((int64_t)1 << 40)

/* The cos_sin row of a closing token at position p: (p / R) * R (SPEC.md
 * step 7), the group's first position. */
static inline int64_t kvc_rope_row(int64_t position, int32_t ratio) {
    return (position / ratio) * ratio;
}

/* A closing token of ratio R at position p (SPEC.md section 1). */
static inline int kvc_is_closing(int64_t position, int32_t ratio) {
    return (position + 1) % ratio == 0;
}

#ifdef __cplusplus
}
#endif

#endif

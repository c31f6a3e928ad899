/* The scalar reference backend: one function per stage, each the literal
 * reading of SPEC.md.  Collected into kvc_reference_backend. */
#ifndef KVCMP_REFERENCE_H
#define KVCMP_REFERENCE_H

#include "kvcmp.h"

#ifdef __cplusplus
extern "C" {
#endif

int ref_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err);
int ref_v4_compress(const kvc_v4_compress_args *a, kvc_error *err);
int ref_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err);
int ref_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err);
int ref_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err);

#ifdef __cplusplus
}
#endif

#endif

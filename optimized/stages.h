/* The optimized backend's stage functions, one file each (mirroring
 * reference/), collected into the "opt" backend table in backend.c. */
#ifndef KVCMP_OPTIMIZED_STAGES_H
#define KVCMP_OPTIMIZED_STAGES_H

#include "kvcmp/kvcmp.h"

int opt_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err);
int opt_v4_compress(const kvc_v4_compress_args *a, kvc_error *err);
int opt_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err);
int opt_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err);
int opt_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err);

#endif

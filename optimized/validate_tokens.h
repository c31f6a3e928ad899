/* SPEC.md section 8's per-token checks of the V4 and V4.1 stages, split over the
 * threads: the common validator walks the tokens on one thread, which
 * was a fifth of a prefill's time on 16 cores.  Each returns 1
 * when every token passes the validator's per-token checks (after
 * kvc_validate_*_fields passed), 0 when some token may not or memory ran
 * out: the stage then runs the common validator, whose status and
 * message are the reference's. */
#ifndef KVCMP_OPTIMIZED_VALIDATE_TOKENS_H
#define KVCMP_OPTIMIZED_VALIDATE_TOKENS_H

#include <stdint.h>

#include "kvcmp/kvcmp.h"

int opt_v4_save_tokens_valid(const kvc_v4_save_args *a);
/* Also collects the closing tokens that produce a row (slot_mapping and
 * kv_slot_mapping >= 0), in token order, into tokens[0, *count): room
 * for num_tokens entries. */
int opt_v4_compress_tokens_valid(const kvc_v4_compress_args *a, int64_t *tokens, int64_t *count);
/* Both V4.1 inserts (the same per-token rules). */
int opt_v41_insert_tokens_valid(const kvc_v41_insert_args *a);
/* v41.save_compress_norm's positions and, at R = 2, its per-request rules. */
int opt_v41_norm_tokens_valid(const kvc_v41_norm_args *a);

#endif

/* Candidate stages with a planted bug, shared by the history and the
 * shrinker tests: the reference, then one byte or bit changed. */
#ifndef KVCMP_TESTS_FUZZ_PLANTED_H
#define KVCMP_TESTS_FUZZ_PLANTED_H

#include "kvcmp/reference.h"

/* Candidates with a planted bug: the reference, then one flipped byte in
 * what the stage writes (the first kv_cache byte, the first latent value). */
static inline int compress_then_flip_a_kv_byte(const kvc_v4_compress_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v4_compress(a, err);
    if (rc == KVC_OK) ((uint8_t *)a->kv_cache.data)[0] ^= 0x80;
    return rc;
}

static inline int norm_then_flip_a_latent_bit(const kvc_v41_norm_args *a, kvc_error *err) {
    int rc = kvc_reference_backend.v41_save_compress_norm(a, err);
    if (rc == KVC_OK && a->num_tokens > 0) a->latent[0] ^= 0x0001;
    return rc;
}

#endif

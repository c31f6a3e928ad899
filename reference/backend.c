/* The reference backend table. */
#include "kvcmp/reference.h"

const kvc_backend kvc_reference_backend = {
    .name = "ref",
    .v4_save_partial_states = ref_v4_save_partial_states,
    .v4_compress = ref_v4_compress,
    .v41_save_compress_norm = ref_v41_save_compress_norm,
    .v41_rope_quant_insert = ref_v41_rope_quant_insert,
    .v41_rope_plain_insert = ref_v41_rope_plain_insert,
};

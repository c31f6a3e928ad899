/* This ISA's kit (kit.h): compiled once per ISA like every kernel source,
 * so each name below is that ISA's (optimized/isa.h). */
#include "optimized/kit.h"
#include "optimized/stages.h"
#include "optimized/vector_arrays.h"
#include "optimized/vector_math.h"

const opt_kit OPT_ISA_NAME(kit) = {
    .isa = OPT_ISA_STRING,
    .backend =
        {
            .name = "opt (" OPT_ISA_STRING ")",
            .v4_save_partial_states = opt_v4_save_partial_states,
            .v4_compress = opt_v4_compress,
            .v41_save_compress_norm = opt_v41_save_compress_norm,
            .v41_rope_quant_insert = opt_v41_rope_quant_insert,
            .v41_rope_plain_insert = opt_v41_rope_plain_insert,
        },
    .exp_array = opt_exp_array,
    .exp_in_range_array = opt_exp_in_range_array,
    .bf16_array = opt_bf16_array,
    .fp8_array = opt_fp8_array,
    .fp8_in_range_array = opt_fp8_in_range_array,
    .fp8_scaled_bf16_array = opt_fp8_scaled_bf16_array,
    .quantize_bf16_block_ue8m0 = opt_quantize_bf16_block_ue8m0,
    .stream_read = opt_stream_read,
    .stream_copy = opt_stream_copy,
    .stream_write = opt_stream_write,
    .sum_of_squares = opt_sum_of_squares,
};

# file: optimized/v4_save_partial_states.c
# bug: the NaN test of the score sum is an ordered compare, false for NaN: the sum's own NaN bits are stored, not 0x7FC00000
s/_mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q)/_mm512_cmp_ps_mask(sum, sum, _CMP_NEQ_OQ)/

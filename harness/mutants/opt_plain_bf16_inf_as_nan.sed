# file: optimized/v41_rope_plain_insert.c
# bug: the bf16 NaN mask compares >= infinity, so +-inf NoPE values are stored as NaN
s/_mm512_cmpgt_epu16_mask(/_mm512_cmpge_epu16_mask(/

# file: reference/v4_save_partial_states.c
# bug: the score sum keeps a NaN's sign and payload instead of the canonical 0x7FC00000 (vLLM's CPU port)
s/state_row\[width + i\] = ref_canonical_f32(a->score\[t \* width + i\] + ape_row\[i\]);/state_row[width + i] = a->score[t * width + i] + ape_row[i];/

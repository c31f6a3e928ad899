# file: reference/steps.c
# bug: the score sum keeps a NaN's sign and payload instead of the canonical 0x7FC00000 (vLLM's CPU port)
s/state_score\[i\] = kvc_canonical_f32(score\[i\] + ape\[i\]);/state_score[i] = score[i] + ape[i];/

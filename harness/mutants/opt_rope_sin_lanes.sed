# file: optimized/vector_math.c
# bug: RoPE loads sin lanes 16..31 for both halves of the pairs (a lane offset that ignores the half)
s/cos_sin_row + KVC_ROPE_DIMS \/ 2 + 16 \* half/cos_sin_row + KVC_ROPE_DIMS \/ 2 + 16/

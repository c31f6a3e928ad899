# file: optimized/v4_save_partial_states.c
# bug: the kv half's copy loop ends one vector early (its last 16 floats keep the old row)
s/i < width; i += 16) store16(destination + i, _mm512_loadu_ps(kv + i)/i < width - 16; i += 16) store16(destination + i, _mm512_loadu_ps(kv + i)/

# file: optimized/v4_compress.c
# bug: many closing tokens: the token-parallel loop covers count rounded down to even (an unrolled-by-two remainder dropped)
s/^    for (int64_t i = 0; i < count; i++) {$/    for (int64_t i = 0; i < count \/ 2 * 2; i++) {/

# file: optimized/v4_compress.c
# bug: many closing tokens: the token-parallel loop covers count rounded down to even (an unrolled-by-two remainder dropped)
s/^        int64_t end = (r + 1) \* run < count ? (r + 1) \* run : count;$/        int64_t end = (r + 1) * run < count \/ 2 * 2 ? (r + 1) * run : count \/ 2 * 2;/

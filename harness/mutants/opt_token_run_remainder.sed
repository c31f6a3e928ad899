# file: optimized/v4_compress.c
# bug: many closing tokens: the token loop covers count rounded down to even (an unrolled-by-two remainder dropped)
s/i < count; i++) compress_token(a, tokens, i, count);$/i < count \/ 2 * 2; i++) compress_token(a, tokens, i, count);/

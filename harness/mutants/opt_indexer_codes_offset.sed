# file: optimized/v4_compress.c
# bug: the indexer quantises dims 48..111 into codes 64..127 (a vector offset of 48 instead of 64)
s/opt_quantize_codes64(z + 64, scale, codes + 64);/opt_quantize_codes64(z + 48, scale, codes + 64);/

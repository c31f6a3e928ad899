# file: optimized/v41_save_compress_norm.c
# bug: the widened norm weight is cached in a static on the first call and reused by every later call (state kept across calls)
s|    float weight\[HEAD_DIM\];   /\* the bf16 weight widened once per call \*/|    static float weight[HEAD_DIM]; static int widened; if (!widened++)|

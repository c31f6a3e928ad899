# file: reference/v41_save_compress_norm.c
# bug: the chunk tail is stored to the ring before the pooling reads it
s/^    float pooled\[HEAD_DIM\];$/    if (a->compress_ratio == 2) store_rings(s, a);\n    float pooled[HEAD_DIM];/

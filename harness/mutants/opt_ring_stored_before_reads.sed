# file: optimized/v41_save_compress_norm.c
# bug: R=2 stores the ring rows before the parallel pooling loop, so a chunk that wraps its ring reads rows it has just overwritten
s/^    int32_t ratio = a->compress_ratio;$/    int32_t ratio = a->compress_ratio;\n    if (ratio == 2) store_rings(a);/

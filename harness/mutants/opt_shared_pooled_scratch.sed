# file: optimized/v4_compress.c
# bug: the token-parallel loop's pooled row is a static shared by every thread (a race from 2 threads on)
s/^    float pooled\[MAX_HEAD_DIM\];$/    static float pooled[MAX_HEAD_DIM];/

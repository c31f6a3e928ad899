# file: optimized/vector_math.c
# bug: the RMSNorm sum of squares skips the last 16 values
s/^    for (int d = 0; d < count; d += 16) {$/    for (int d = 0; d + 16 < count; d += 16) {/

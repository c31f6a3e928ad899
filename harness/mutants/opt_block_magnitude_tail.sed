# file: optimized/vector_math.c
# bug: the block maximum skips the last 16 values (a loop bound one vector short)
s/for (int j = 0; j < count; j += 16)$/for (int j = 0; j + 16 < count; j += 16)/

# file: reference/steps.c
# bug: the RMSNorm sum of squares is one sequential accumulator, not the 16-lane tree
s/lanes\[d % 16\] = fmaf(pooled\[d\], pooled\[d\], lanes\[d % 16\]);/lanes[0] = fmaf(pooled[d], pooled[d], lanes[0]);/

# file: reference/steps.c
# bug: the pooling accumulator rounds e*kv and the add separately where the contract says fma
s/acc = fmaf(e, window_kv\[w\], acc);/acc = acc + e * window_kv[w];/

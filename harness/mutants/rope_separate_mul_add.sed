# file: reference/steps.c
# bug: RoPE rounds the product and the sum separately where the contract says fma
s/rope_dims\[2 \* i\] = fmaf(x_even, c, -(x_odd \* s));/rope_dims[2 * i] = x_even * c - x_odd * s;/
s/rope_dims\[2 \* i + 1\] = fmaf(x_odd, c, x_even \* s);/rope_dims[2 * i + 1] = x_odd * c + x_even * s;/

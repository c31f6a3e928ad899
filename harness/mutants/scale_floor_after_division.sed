# file: reference/steps.c
# bug: the 1e-4 floor applied to a/448 instead of to a (the AVX-512 port)
s/float a = 1e-4f;/float a = 0.0f;/
s|kvc_block_scale_from_quotient(a / KVC_FP8_MAX)|kvc_block_scale_from_quotient(kvc_max_nan(a / KVC_FP8_MAX, 1e-4f))|

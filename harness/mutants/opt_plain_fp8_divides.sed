# file: optimized/v41_rope_plain_insert.c
# bug: the fp8 plain row divides by the scale instead of multiplying by RN(1/scale) (they round apart for x = s * an fp8 midpoint)
s|float inverse_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? 1.0f / a->fp8_scale : 1.0f;|float inverse_scale = a->cache_dtype == KVC_CACHE_FP8_E4M3 ? a->fp8_scale : 1.0f;|
s|opt_clamp_fp8_range16(_mm512_mul_ps(value, r))|opt_clamp_fp8_range16(_mm512_div_ps(value, r))|

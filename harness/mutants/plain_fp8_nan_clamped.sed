# file: reference/steps.c
# bug: the fp8 clamp is fmaxf/fminf, which maps NaN to -448 (code 0xfe) where the contract writes NaN
s/row\[d\] = kvc_fp8_from_f32(kvc_clamp_fp8_range(kvc_f32_from_bf16(rounded\[d\]) \* inverse_scale));/row[d] = kvc_fp8_from_f32(__builtin_fminf(__builtin_fmaxf(kvc_f32_from_bf16(rounded[d]) * inverse_scale, -448.0f), 448.0f));/

# file: common/validate.c
# bug: fp8_scale = 0 (and -0) is accepted: the plain fp8 insert then multiplies by 1 / 0 (caught by the validator property checks and fixtures/edge-cases' fp8_scale_zero)
s/!(a->fp8_scale > 0.0f \&\& a->fp8_scale <= /!(a->fp8_scale >= 0.0f \&\& a->fp8_scale <= /

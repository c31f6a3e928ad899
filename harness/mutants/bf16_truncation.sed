# file: common/formats.c
# bug: fp32 -> bf16 truncates instead of rounding to nearest even
s/    u += 0x7FFFu + lsb;/    (void)lsb;/

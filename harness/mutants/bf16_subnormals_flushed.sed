# file: common/formats.c
# bug: fp32 -> bf16 flushes subnormal inputs to zero (the CPU port's bf16 store instruction)
s/    if ((u \& 0x7FFFFFFFu) > 0x7F800000u) return KVC_BF16_NAN;/&\n    if ((u \& 0x7F800000u) == 0) return (uint16_t)((u >> 16) \& 0x8000u);/

# file: include/kvcmp/formats.h
# bug: max drops a NaN depending on its position (x86 maxps semantics)
/if (kvc_f32_is_nan(a) || kvc_f32_is_nan(b)) return kvc_f32_from_bits(KVC_F32_NAN_BITS);/d

/* Number formats of the contract (SPEC.md section "Number formats").
 * Every function here is exact and total: any input bit pattern has one
 * defined output, and each is exhaustively tested in tests/test_formats.c. */
#ifndef KVCMP_FORMATS_H
#define KVCMP_FORMATS_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_BF16_NAN 0x7FC0u
#define KVC_FP8_NAN 0x7Fu
#define KVC_F32_NAN_BITS 0x7FC00000u
#define KVC_UE8M0_NAN 0xFFu
#define KVC_FP8_MAX 448.0f

static inline uint32_t kvc_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float kvc_f32_from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline int kvc_f32_is_nan(float x) { return (kvc_f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }

/* fp32 -> bf16 bits, round to nearest even, subnormals rounded like any
 * other value, every NaN -> 0x7FC0. */
uint16_t kvc_bf16_from_f32(float x);
/* bf16 bits -> fp32, exact. */
static inline float kvc_f32_from_bf16(uint16_t b) { return kvc_f32_from_bits((uint32_t)b << 16); }

/* fp32 -> fp8 e4m3fn byte, round to nearest even, subnormals kept
 * (m * 2^-9), NaN -> 0x7F.  A magnitude above 464 would round to 480,
 * which the format lacks (no infinity): it becomes NaN 0x7F; 464 itself
 * ties to even, 448.  Stages clamp to +-448 first. */
uint8_t kvc_fp8_from_f32(float x);
/* fp8 e4m3fn byte -> fp32, exact (0x7F / 0xFF are NaN). */
float kvc_f32_from_fp8(uint8_t b);

/* clamp(x, -448, 448) that lets NaN through. */
static inline float kvc_clamp_fp8_range(float x) {
    if (x > KVC_FP8_MAX) return KVC_FP8_MAX;
    if (x < -KVC_FP8_MAX) return -KVC_FP8_MAX;
    return x;
}

/* The block scale of SPEC.md step 9: e = ceil(log2(q)) for q = a / 448,
 * computed from q's bits.  kind tells finite / +inf / NaN. */
typedef enum { KVC_SCALE_FINITE = 0, KVC_SCALE_INF = 1, KVC_SCALE_NAN = 2 } kvc_scale_kind;
typedef struct {
    kvc_scale_kind kind;
    int scale_exp;     /* valid when kind == KVC_SCALE_FINITE */
} kvc_block_scale;

/* q must be > 0 or +inf or NaN (a >= 1e-4 guarantees it).  Inline (as is
 * kvc_ue8m0_from_scale): the optimized backend calls both once per
 * 64-value block, and an out-of-line call from its AVX-512 code costs a
 * vzeroupper and the upper register state each time. */
static inline kvc_block_scale kvc_block_scale_from_quotient(float q) {
    kvc_block_scale s = {KVC_SCALE_FINITE, 0};
    uint32_t u = kvc_f32_bits(q);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) { s.kind = KVC_SCALE_NAN; return s; }
    if (u == 0x7F800000u) { s.kind = KVC_SCALE_INF; return s; }
    uint32_t exp_field = u >> 23, man = u & 0x7FFFFFu;
    if (exp_field == 0) {
        /* Subnormal q = man * 2^-149: ceil(log2) from the top set bit. */
        int top = 31 - __builtin_clz(man);
        s.scale_exp = -149 + top + ((man & (man - 1)) ? 1 : 0);
        return s;
    }
    s.scale_exp = (int)exp_field - 127 + (man ? 1 : 0);
    return s;
}

/* UE8M0 byte: scale_exp + 127 clamped to [0, 255]; 255 for inf and NaN. */
static inline uint8_t kvc_ue8m0_from_scale(kvc_block_scale s) {
    if (s.kind != KVC_SCALE_FINITE) return KVC_UE8M0_NAN;
    int byte = s.scale_exp + 127;
    if (byte < 0) byte = 0;
    if (byte > 255) byte = 255;
    return (uint8_t)byte;
}

/* 2^-e as fp32: +0 for an infinite scale, NaN for a NaN scale. */
float kvc_scale_multiplier(kvc_block_scale s);
/* 2^e as fp32 (the D=128 stored scale): +inf, canonical NaN. */
float kvc_scale_value(kvc_block_scale s);

/* Correctly rounded binary32 exp (round to nearest even), exp(-inf) = 0,
 * exp(NaN) = NaN.  See formats.c for the argument. */
float kvc_expf_cr(float x);
/* The slow path of kvc_expf_cr: MPFR at 200 bits, then one rounding. */
float kvc_expf_mpfr(float x);

/* NaN-propagating maximum: NaN if either is NaN. */
static inline float kvc_max_nan(float a, float b) {
    if (kvc_f32_is_nan(a) || kvc_f32_is_nan(b)) return kvc_f32_from_bits(KVC_F32_NAN_BITS);
    return a > b ? a : b;
}

/* Distances between two encodings, in steps of the format (the ordinal of
 * the sign-magnitude code, so +0 and -0 are 0 steps apart); 0 for two
 * NaNs, -1 when exactly one of them is NaN (UE8M0: 255). */
int64_t kvc_fp8_distance(uint8_t a, uint8_t b);
int64_t kvc_bf16_distance(uint16_t a, uint16_t b);
int64_t kvc_ue8m0_distance(uint8_t a, uint8_t b);

/* Store helpers: little-endian, unaligned-safe. */
static inline void kvc_store_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint16_t kvc_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void kvc_store_f32(uint8_t *p, float v) {
    uint32_t u = kvc_f32_bits(v);
    p[0] = (uint8_t)u; p[1] = (uint8_t)(u >> 8); p[2] = (uint8_t)(u >> 16); p[3] = (uint8_t)(u >> 24);
}
/* fp32 that a stage computes and writes: NaN becomes canonical 0x7FC00000. */
static inline float kvc_canonical_f32(float x) {
    return kvc_f32_is_nan(x) ? kvc_f32_from_bits(KVC_F32_NAN_BITS) : x;
}

#ifdef __cplusplus
}
#endif

#endif

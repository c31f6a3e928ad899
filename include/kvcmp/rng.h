/* The fuzzer's random source: splitmix64 seeding a xoshiro256** stream,
 * so that a seed gives the same cases on every machine and libc (never
 * rand()).  A libFuzzer input can be fed in as a byte stream: while it
 * lasts, draws come from its bytes, which lets coverage guidance steer
 * the scenario; afterwards the seeded stream takes over. */
#ifndef KVCMP_FUZZ_RNG_H
#define KVCMP_FUZZ_RNG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4];
    const uint8_t *bytes;   /* optional libFuzzer input */
    size_t bytes_left;
} kvc_rng;

static inline uint64_t kvc_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Stream `stream` of seed `seed`: case i of a campaign uses stream i, so
 * any case can be regenerated alone (--only I) and shards never overlap. */
static inline void kvc_rng_seed(kvc_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = kvc_splitmix64(&x);
    r->bytes = NULL;
    r->bytes_left = 0;
}

static inline uint64_t kvc_rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t kvc_rng_next(kvc_rng *r) {
    if (r->bytes_left) {
        uint64_t v = 0;
        size_t n = r->bytes_left < 8 ? r->bytes_left : 8;
        memcpy(&v, r->bytes, n);
        r->bytes += n;
        r->bytes_left -= n;
        return v;
    }
    uint64_t *s = r->s;
    uint64_t result = kvc_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = kvc_rotl64(s[3], 45);
    return result;
}

/* Uniform in [0, n) (n >= 1); the tiny modulo bias does not matter here. */
static inline int64_t kvc_rng_below(kvc_rng *r, int64_t n) {
    return n <= 1 ? 0 : (int64_t)(kvc_rng_next(r) % (uint64_t)n);
}
static inline int64_t kvc_rng_range(kvc_rng *r, int64_t lo, int64_t hi) {   /* inclusive */
    return lo + kvc_rng_below(r, hi - lo + 1);
}
/* 1 with probability num/den. */
static inline int kvc_rng_chance(kvc_rng *r, int num, int den) { return kvc_rng_below(r, den) < num; }
/* Uniform float in [0, 1) from 24 bits: exact, no libm involved. */
static inline float kvc_rng_unit(kvc_rng *r) { return (float)(kvc_rng_next(r) >> 40) * 0x1p-24f; }

#ifdef __cplusplus
}
#endif

#endif

# file: harness/fuzz/gen_variants.c
# bug: the generator never draws a V4.1 ring chunk longer than CAP (the past-CAP draw is never taken), so no campaign feeds chunked prefill past the ring (caught by the self check of the ring draw)
s/    int past_cap = kvc_rng_chance(&own, 1, 4);/    int past_cap = 0 \&\& kvc_rng_chance(\&own, 1, 4);/

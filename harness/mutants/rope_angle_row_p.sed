# file: reference/v4_compress.c
# bug: RoPE uses cos/sin row p instead of (p / R) * R
s|int64_t cos_row = kvc_rope_row(a->positions\[t\], a->compress_ratio);|int64_t cos_row = a->positions[t];|g

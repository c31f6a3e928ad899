# file: reference/v4_compress.c
# bug: RoPE uses cos/sin row p instead of (p / R) * R
s|int64_t cos_row = s->cos_sin_row(a->positions\[t\], a->compress_ratio, a->cos_sin_rows);|int64_t cos_row = a->positions[t];|g

# file: reference/v41_save_compress_norm.c
# bug: a chunk's first closing token pools with ring row p % CAP instead of (p-1) % CAP
s/(a->positions\[t\] - 1 + cap) % cap/a->positions[t] % cap/

# file: include/kvcmp/layout.h
# bug: the ring store keeps the last CAP rows that have a slot, not the last min(n, CAP) rows: padding rows in a long chunk's last CAP rows pull earlier rows in (caught by the ring-store property checks and fixtures/edge-cases' r2_chunk_past_cap_padding_in_last_rows)
s/    for (int64_t t = end - begin > cap ? end - cap : begin; t < end; t++)/    int64_t first = end;\n    for (int64_t kept = 0; first > begin \&\& kept < cap; first--) kept += a->slot_mapping[first - 1] >= 0;\n    for (int64_t t = first; t < end; t++)/

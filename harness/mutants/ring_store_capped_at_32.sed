# file: include/kvcmp/layout.h
# bug: the ring store keeps at most 32 rows of a chunk (a staging buffer sized for the largest CAP tried), not min(n, CAP)
s/for (int64_t t = end - begin > cap ? end - cap : begin; t < end; t++)/for (int64_t t = end - begin > (cap < 32 ? cap : 32) ? end - (cap < 32 ? cap : 32) : begin; t < end; t++)/

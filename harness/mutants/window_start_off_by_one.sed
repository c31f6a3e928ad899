# file: reference/steps.c
# bug: the V4 window starts one position early (q = p - coff*R + w)
s/int64_t q = p - window + 1 + w;/int64_t q = p - window + w;/

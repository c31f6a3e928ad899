# file: common/validate.c
# bug: positions must be below 2^40 instead of at most 2^40, so a valid token at exactly 2^40 is refused (the generator's position bounds: batches moved up to 2^40)
s/positions\[t\] > KVC_MAX_POSITION)/positions[t] >= KVC_MAX_POSITION)/

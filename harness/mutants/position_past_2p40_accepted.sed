# file: common/validate.c
# bug: the position bound is off by one the other way: a valid token at 2^40 + 1 is accepted (the generator's refused position bound, exactly 2^40 + 1)
s/positions\[t\] > KVC_MAX_POSITION)/positions[t] > KVC_MAX_POSITION + 1)/

# file: common/formats.c
# bug: fp32 -> fp8 truncates instead of rounding to nearest even
s/    if (rest > half || (rest == half \&\& (kept \& 1u))) kept++;/    (void)half; (void)rest;/
s/float r = nearbyintf(scaled);/float r = truncf(scaled);/

# file: common/formats.c
# bug: fp8 subnormal results are flushed to zero
s/float r = nearbyintf(scaled);/float r = 0.0f * scaled;/

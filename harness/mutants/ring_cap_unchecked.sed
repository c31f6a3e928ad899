# file: common/validate.c
# bug: the V4.1 ring size is taken as given: a CAP that is no power of two or below 8 (SPEC.md 8) is not refused (only the ring-cap corruption draws one)
s/if (cap < 8 || (cap \& (cap - 1)) != 0)/if (cap < 1)/

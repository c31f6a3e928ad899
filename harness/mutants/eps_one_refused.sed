# file: common/validate.c
# bug: eps must be below 1 instead of at most 1 (SPEC.md 8: [0, 1]), so eps = 1 is refused (the generator's eps bound, eps = 1)
s/a->eps <= 1.0f/a->eps < 1.0f/g

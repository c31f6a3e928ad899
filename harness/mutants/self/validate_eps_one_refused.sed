# file: common/validate.c
# bug: eps must be below 1 instead of at most 1, so eps = 1 is refused (caught by the validator property checks and fixtures/edge-cases' r1_eps_1 and d128_r4_eps_1)
s/a->eps <= 1.0f/a->eps < 1.0f/g

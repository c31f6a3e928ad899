# file: common/validate.c
# bug: positions must be below 2^40 instead of at most 2^40, so a token at 2^40 is refused (caught by the validator property checks and fixtures/edge-cases' positions_up_to_2p40 cases)
s/positions\[t\] > KVC_MAX_POSITION)/positions[t] >= KVC_MAX_POSITION)/

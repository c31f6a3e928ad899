# file: common/validate.c
# bug: positions are checked for consecutiveness from a chunk's third token on, so a gap between its first two positions passes (caught by the validator property checks and fixtures/edge-cases' r2_gap_between_first_two_positions)
s/if (t > qsl\[r\] \&\& (a->positions\[t - 1\] == INT64_MAX/if (t > qsl[r] + 1 \&\& (a->positions[t - 1] == INT64_MAX/

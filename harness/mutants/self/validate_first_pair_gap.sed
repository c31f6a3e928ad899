# file: common/validate.c
# bug: positions are checked for consecutiveness from a chunk's third token on (the INT64_MAX guard still from the second), so a gap between a chunk's first two positions passes (caught by the validator property checks and fixtures/edge-cases' r2_gap_between_first_two_positions)
s/ || a->positions\[t\] != a->positions\[t - 1\] + 1)) {/ || (t > qsl[r] + 1 \&\& a->positions[t] != a->positions[t - 1] + 1))) {/

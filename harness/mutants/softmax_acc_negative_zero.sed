# file: reference/steps.c
# bug: the pooling accumulator starts at -0 instead of +0 (SPEC.md 4.2 step 2), so a window whose kv are all -0 pools to -0
s/float denom = 0.0f, acc = 0.0f;/float denom = 0.0f, acc = -0.0f;/

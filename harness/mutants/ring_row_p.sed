# file: reference/steps.c
# bug: a chunk's first closing token pools with ring row p % CAP instead of (p-1) % CAP
s/return (p - 1) % cap;/return p % cap;/

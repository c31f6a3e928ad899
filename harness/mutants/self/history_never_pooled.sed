# file: harness/fuzz/history.c
# bug: a history under a geometry pool is sized for its own length, not the next power of two of it, so a kernel that compiles per size compiles once per length (caught by the self check of the pooled sizes)
s/Ls = pool ? power_of_two_at_least(L) : L,/Ls = 0 \&\& pool ? power_of_two_at_least(L) : L,/

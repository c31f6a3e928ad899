# file: optimized/validate_tokens.c
# bug: the token check's per-thread ranges are floored (count / parts * part): on a team the last count % parts tokens go unchecked (only the spinning team rule splits the check)
s|static int64_t range_start(int64_t count, int part, int parts) { return count \* part / parts; }|static int64_t range_start(int64_t count, int part, int parts) { return count / parts * part; }|

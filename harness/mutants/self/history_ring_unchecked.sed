# file: harness/fuzz/history.c
# bug: the history check compares the V4 state cache but not the V4.1 ring, so a candidate whose ring alone differs after chunked feeding passes (caught by the history check of a ring-only candidate)
s/    if ((at = first_difference(a->state, b->state, a->state_bytes)) >= 0) {/    if (h->version == 4 \&\& (at = first_difference(a->state, b->state, a->state_bytes)) >= 0) {/

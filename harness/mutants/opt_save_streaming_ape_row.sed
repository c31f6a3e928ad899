# file: optimized/v4_save_partial_states.c
# bug: the streaming-store path (batches past 8 MiB of state rows) adds ape row 0 for every token instead of row p mod R
s/int streaming = large_batch \&\& ((uintptr_t)state_row \& 63) == 0;/int streaming = large_batch \&\& ((uintptr_t)state_row \& 63) == 0; if (streaming) ape_row = a->ape;/

# file: optimized/v4_compress.c
# bug: window rows are found page_bytes apart instead of page_stride apart: with padded pages the loads land past each page
s/block_row\[column\] \* a->state_cache.page_stride/block_row[column] * a->state_cache.page_bytes/

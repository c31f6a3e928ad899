# file: include/kvcmp/layout.h
# bug: the page stride rebuilt from a padding counted in whole 64-byte lines (page_bytes + padding / 64 * 64): pages drift when the padding is not a multiple of 64
s|(slot / cache->page_rows) \* cache->page_stride|(slot / cache->page_rows) * (cache->page_bytes + (cache->page_stride - cache->page_bytes) / 64 * 64)|

# file: include/kvcmp/layout.h
# bug: pages assumed dense (page_bytes apart) instead of page_stride apart
s|(slot / cache->page_rows) \* cache->page_stride|(slot / cache->page_rows) * cache->page_bytes|

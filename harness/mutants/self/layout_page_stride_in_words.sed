# file: include/kvcmp/layout.h
# bug: pages are found through a stride rounded down to whole 4-byte words, so byte caches (fp8) with a page padding that is no multiple of 4 drift (caught by the page-addressing property checks; the stored corpora replay with paddings of 0, 100 and 128 bytes)
s|(slot / cache->page_rows) \* cache->page_stride|(slot / cache->page_rows) * (cache->page_stride \& ~(int64_t)3)|

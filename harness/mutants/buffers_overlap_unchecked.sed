# file: common/validate.c
# bug: no stage checks that its buffers are disjoint: an output placed over an input or over another output is written through (only the aliased-buffers check places one so)
s/if (!out || !in || out_bytes <= 0 || in_bytes <= 0) return KVC_OK;/return KVC_OK;/

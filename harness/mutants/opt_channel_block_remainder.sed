# file: optimized/v4_compress.c
# bug: few closing tokens: the (token, channel block) loop stops one item short, so the last token's last 32 channels are never pooled (a partition remainder)
s/item < count \* blocks; item++/item < count * blocks - 1; item++/

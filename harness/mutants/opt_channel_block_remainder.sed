# file: optimized/v4_compress.c
# bug: few closing tokens: the (token, channel block) loops stop one pair short, so the last token's last 32 channels are never pooled (a partition remainder)
s/item < pairs; item++/item < pairs - 1; item++/

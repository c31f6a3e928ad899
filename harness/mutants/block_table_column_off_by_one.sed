# file: include/kvcmp/layout.h
# bug: the V4 window reads block_table column q/BS + 1
s|a->block_table\[req \* a->max_blocks + q / bs\]|a->block_table[req * a->max_blocks + q / bs + 1]|

# file: harness/fuzz/permute.c
# bug: the shuffle of physical pages never swaps, so the permutation check runs every case on its own layout (caught by the permutation check on caches of two pages)
s/for (int64_t k = pages - 1; k > 0; k--) {/for (int64_t k = pages - 1; k > pages; k--) {/

# file: optimized/v4_compress.c
# bug: the guided pooling loop ends with nowait, so a thread finishes tokens whose channel blocks others may still be pooling (a missing barrier; make race-check must catch it too)
s|^#pragma omp for schedule(guided)$|#pragma omp for schedule(guided) nowait|

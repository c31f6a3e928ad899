/* The generator's stages' cases (gen_variants.c): V4, V4.1 norm and insert. */
#ifndef KVCMP_HARNESS_FUZZ_GEN_VARIANTS_H
#define KVCMP_HARNESS_FUZZ_GEN_VARIANTS_H

#include <stddef.h>

#include "harness/fuzz/gen_assembly.h"

void gen_v4(gen *g);
void gen_v41_norm(gen *g, int forward);
void gen_v41_insert(gen *g, kvc_cache_dtype dtype);

#endif

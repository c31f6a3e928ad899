/* The generator's invalid metadata (gen_invalid.c): one field broken so SPEC.md 8 refuses the case. */
#ifndef KVCMP_HARNESS_FUZZ_GEN_INVALID_H
#define KVCMP_HARNESS_FUZZ_GEN_INVALID_H

#include <stddef.h>

#include "harness/fuzz/gen_assembly.h"

void corrupt(gen *g, char *what, size_t what_size);

#endif

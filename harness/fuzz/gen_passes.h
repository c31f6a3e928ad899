/* The generator's case-wide passes (gen_passes.c): bit patterns, edge rows, padding slots. */
#ifndef KVCMP_HARNESS_FUZZ_GEN_PASSES_H
#define KVCMP_HARNESS_FUZZ_GEN_PASSES_H

#include <stddef.h>

#include "harness/fuzz/gen_assembly.h"

void apply_bit_patterns(gen *g);
void shape_edge_rows(gen *g);
void other_padding_slots(gen *g);

#endif

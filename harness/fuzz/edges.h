/* The bounds of SPEC.md 8 in generated cases (harness/fuzz/gen.c): both
 * sides of each bound a case can hold, drawn on purpose where the
 * ordinary draws never land (positions 2^40 - 1, 2^40 and 2^40 + 1, the
 * metadata of tokens that do not close, eps = 1, the smallest fp8 scale,
 * each index one past its table), and measured in every case, so that
 * the campaign's coverage says how often each was reached
 * (kvc_gen_case.edges, KVC_EDGE_*). */
#ifndef KVCMP_FUZZ_EDGES_H
#define KVCMP_FUZZ_EDGES_H

#include <stddef.h>

#include "kvcmp/case.h"
#include "kvcmp/rng.h"

/* Edges a valid case may hold, drawn with a small probability each
 * (positions moved to 2^40 - 1 or 2^40, the token_to_req of a slotted
 * token that does not close left unset, eps = 1, fp8_scale = 2^-149).
 * Returns the KVC_EDGE_* bits drawn. */
unsigned kvc_edges_draw(kvc_rng *rng, kvc_case *c);

/* One input just past a bound (a position 2^40 + 1, a slot one past its
 * cache, a token_to_req of num_requests, a block-table entry of
 * num_pages, a cos_sin table one row short, query_start_loc[NR] = T + 1,
 * eps one step above 1): the stage must reject the case.  Returns the
 * KVC_EDGE_* bit and names the rule and what changed; 0 when this case
 * has nothing that bound applies to. */
unsigned kvc_edges_corrupt(kvc_rng *rng, kvc_case *c, const char **rule, char *what, size_t what_size);

/* The KVC_EDGE_* bounds the case holds (valid tokens at 2^40 - 1 or 2^40,
 * a writer on its cache's last row, the last request, the last cos_sin
 * row and block-table column, the last state page, a batch without
 * trailing padding, CAP 8), whoever put them there. */
unsigned kvc_edges_measure(const kvc_case *c);

#endif

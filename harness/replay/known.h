/* Known upstream differences: what a corpus documents about its own
 * cases.  A classes.json beside the cases (in the case's directory's
 * parent, or up to two levels above it) maps the case's path below that
 * directory to its class: a name ("scale-floor") or a list of labels
 * ("code: contract NaN, Triton +-448", ...), as upstream-fuzz/ writes
 * them.  Replay reports a difference as known only when every cause the
 * classifier finds in the bytes is one the case's class names. */
#ifndef KVCMP_KNOWN_H
#define KVCMP_KNOWN_H

#include <stddef.h>

#include "harness/compare/causes.h"

/* The cause a class name or label names; KVC_CAUSE_COUNT for none. */
kvc_parity_cause kvc_cause_from_label(const char *label);

/* The causes documented for the case in case_dir, as a bit mask (bit k:
 * cause k), 0 when no classes.json lists the case or its class is empty;
 * the class as written goes to label ("" for none).  A label that names
 * no cause makes the whole class unknown (0): a difference it cannot
 * explain must fail. */
unsigned kvc_known_causes(const char *case_dir, char *label, size_t label_size);

/* Whether the differences counted in counts are all explained by known:
 * 1 when at least one cause was found and every one is in known (a code
 * that follows its block's changed scale counts with the scale's cause;
 * under tolerant, the vllm policy, the one-step and NaN-pattern
 * differences it accepts too). */
int kvc_differences_known(const int64_t counts[KVC_CAUSE_COUNT], unsigned known, int tolerant);

#endif

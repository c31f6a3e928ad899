/* kvcmp report parity --outputs DIR: the outputs of an implementation
 * that ran elsewhere (kvcmp gen's cases run by an outside runner, as
 * kvcmp replay --outputs reads them: DIR/CASE/NAME.npy and
 * DIR/CASE/status.json, harness/replay/replay.h) take the place of the
 * cases' NAME.out tensors as the side compared with the reference. */
#ifndef KVCMP_REPORT_PARITY_H
#define KVCMP_REPORT_PARITY_H

#include "harness/report/report.h"

/* kvc_parity_add_path with the other side read from outputs_dir (NULL:
 * the cases' own NAME.out, as kvc_parity_add_path).  An outside status
 * that disagrees with the reference (missing, crashed, a rejection of a
 * case the reference runs, a run of one it rejects) is counted as a
 * stage-error difference with the status in its example. */
int kvc_parity_add_outside_path(kvc_parity_report *report, const char *path, const char *outputs_dir);

#endif

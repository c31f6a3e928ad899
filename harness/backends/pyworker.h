/* A Python candidate as a backend: `py:FILE.py:FUNCTION` or
 * `py:MODULE:FUNCTION`.  Each stage call is forwarded to a long-lived
 * worker process (the interpreter running kvcmp._worker) over a pipe, the
 * call's tensors in a shared-memory file (no per-case files); the worker's
 * failures come back as statuses of their own (KVC_ERR_CANDIDATE,
 * KVC_ERR_CRASHED, KVC_ERR_DEVICE_LOST) whose messages start with the
 * failure's class.  The protocol is documented in python/kvcmp/_worker.py.
 *
 * A worker that died, lost its device or left threads behind is replaced
 * by a fresh one at the next call; a hanging one is the supervisor's to
 * kill (the worker dies with the process that started it). */
#ifndef KVCMP_PYWORKER_H
#define KVCMP_PYWORKER_H

#include <stddef.h>
#include <stdint.h>

#include "kvcmp/kvcmp.h"

/* The backend for spec (without "py:"): starts a worker once to resolve
 * the candidate and learn the stages it offers, then stops it (each
 * process that calls a stage starts its own).  NULL with a message when
 * the interpreter, the package or the candidate cannot be loaded. */
const kvc_backend *kvc_pyworker_backend(const char *spec, char *error, size_t error_size);

/* The interpreter that runs workers: the one given here, else
 * $KVCMP_PYTHON, else python3 from PATH. */
void kvc_pyworker_set_python(const char *python);
const char *kvc_pyworker_python(void);

/* 1: every call starts a fresh worker (shrinking a device-lost case:
 * no attempt may run on a context a previous attempt broke). */
void kvc_pyworker_fresh_each_call(int on);

/* Resident memory of this process's worker, 0 when none runs. */
int64_t kvc_pyworker_rss_bytes(void);

/* Starts this process's worker now (a no-op without a Python candidate),
 * so that importing the candidate's framework is not charged to the
 * first case's --timeout. */
void kvc_pyworker_warm_up(void);

/* How long a worker's start-up (the interpreter and the candidate's
 * import, up to its hello) may take: --startup-timeout; <= 0 the default.
 * A call that starts a worker past it fails as "startup-timeout". */
#define KVC_PYWORKER_DEFAULT_STARTUP_SECONDS 60.0
void kvc_pyworker_set_startup_timeout(double seconds);

/* What the worker process's calls are doing, for a supervisor that times
 * them: KVC_PYWORKER_STARTUP while a worker starts inside a call,
 * KVC_PYWORKER_FIRST_CALL while a call of a geometry (stage, tensor
 * shapes and strides, integer parameters) new to this worker runs (a JIT
 * compiles), KVC_PYWORKER_CALL when either ends.  hook NULL: none. */
enum { KVC_PYWORKER_CALL, KVC_PYWORKER_STARTUP, KVC_PYWORKER_FIRST_CALL };
void kvc_pyworker_set_phase_hook(void (*hook)(int phase));

/* Stops this process's worker (it is started again at the next call). */
void kvc_pyworker_stop(void);

#endif

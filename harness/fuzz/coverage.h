/* Coverage builds (make coverage compiles with --coverage -DKVC_COVERAGE)
 * write gcov's counters from an atexit handler, which _exit skips: a
 * forked fuzz worker would otherwise end without leaving any trace in the
 * coverage report.  kvc_exit_worker flushes them first; in every other
 * build it is plain _exit. */
#ifndef KVCMP_COVERAGE_H
#define KVCMP_COVERAGE_H

#include <unistd.h>

#ifdef KVC_COVERAGE
extern void __gcov_dump(void);
#endif

/* Flushes the coverage counters of this process (a no-op outside coverage
 * builds); call it before _exit or exec. */
static inline void kvc_coverage_flush(void) {
#ifdef KVC_COVERAGE
    __gcov_dump();
#endif
}

/* _exit for worker processes that must not run the parent's atexit
 * handlers or flush its stdio buffers. */
static inline void kvc_exit_worker(int status) {
    kvc_coverage_flush();
    _exit(status);
}

#endif

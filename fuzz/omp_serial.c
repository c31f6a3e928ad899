/* The OpenMP calls of libkvcmp for a build without -fopenmp (fuzz/build.sh
 * with KVCMP_FUZZ_SERIAL=1, the default for MemorySanitizer): the pragmas
 * are then ignored and every parallel region runs on the calling thread,
 * so these answer as a team of one.  MemorySanitizer needs it because
 * LLVM's OpenMP runtime is not instrumented: the stores its worker
 * threads make are invisible to it, and every later read of a cache they
 * wrote is reported as a use of uninitialised memory. */
#include <omp.h>

int omp_get_max_threads(void) { return 1; }
int omp_get_num_threads(void) { return 1; }
int omp_get_thread_num(void) { return 0; }
int omp_get_num_procs(void) { return 1; }
void omp_set_num_threads(int threads) { (void)threads; }

/* Team masters: each OpenMP team size the campaign asks for gets a
 * thread of its own that starts every team of that size, so that
 * libgomp's pool of idle threads never shrinks and is never rebuilt.
 *
 * libgomp keeps one pool per thread that starts teams; a team smaller
 * than that thread's previous one makes the surplus pool threads exit,
 * and the next larger team creates them again.  The campaign draws 1 to 8
 * threads per case, so on one thread it created about 0.65 threads a case
 * (clone, the new stack's page faults, exit).  On its master a team has
 * the size, and so the work split, it would have had on the caller's
 * thread: only the thread that starts it differs. */
#ifndef KVCMP_FUZZ_TEAMS_H
#define KVCMP_FUZZ_TEAMS_H

#include "kvcmp/kvcmp.h"

/* Runs job(argument) on the master thread of `threads`-thread teams (its
 * OpenMP thread count set to `threads`), started on first use, and waits
 * for it; one job at a time per master.  -1 when there is no master for
 * that count (threads < 2 or above KVC_TEAM_MASTERS_MAX, or the thread
 * could not be started): the caller runs the job itself. */
#define KVC_TEAM_MASTERS_MAX 64
int kvc_run_on_team_master(int threads, void (*job)(void *), void *argument);

/* A backend whose stages are real's, each called through
 * kvc_run_on_team_master(threads, ...); real itself when threads < 2.
 * *proxy holds the table; the forwarding stays valid on this thread until
 * the next call.  For in-process code that neither forks nor keeps state
 * per thread (the optimized backend). */
const kvc_backend *kvc_team_backend(const kvc_backend *real, int threads, kvc_backend *proxy);

#endif

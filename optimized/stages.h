/* The optimized backend's stage functions, one file each (mirroring
 * reference/), collected into the "opt" backend table in backend.c. */
#ifndef KVCMP_OPTIMIZED_STAGES_H
#define KVCMP_OPTIMIZED_STAGES_H

#include <stdint.h>
#include <math.h>
#include <omp.h>

#include "kvcmp/kvcmp.h"

/* How many threads a call pays for.  A stage splits its work over every
 * thread it is allowed (omp_get_max_threads), but gives each thread at
 * least a minimum of its estimated one-thread time, because starting a
 * thread of the team costs that much.  A minimum per thread, not a cap:
 * a call of 16 x the minimum gets 16 threads.  What a start costs
 * depends on where the threads wait between calls (OMP_WAIT_POLICY).
 * Measured on a quiet 16-core Xeon, 64-request V4 decode, 2026-12-02
 * (measurements/2026-12-02-xeon16-*.txt):
 * - default or active (threads spin for a while after a call): a start
 *   costs about a microsecond; every thread took 0.037-0.039 ms at 16
 *   threads against 0.14 ms on the 5 that the passive rule below gives.
 *   Spinning teams get a 2 us minimum and nothing else.
 * - passive (threads sleep between calls; the fuzzer's choice): the
 *   master wakes them one by one, 5-12 us each, so a call of one-thread
 *   time W on n threads takes about W / n + c n, least at n = sqrt(W / c)
 *   with c = 5 us; with every thread at >= 10 us each (no wake-up term)
 *   the decode took 0.114 ms on 16 threads in one run and 0.425 in the
 *   next, slower than 1 thread (0.320), against 0.10-0.18 ms at 4-5.
 * In a stage's own units (estimates below), 10 us is about 4 closing
 * tokens of V4 R=4 D=512 (4096 exps each), 1 of R=128 D=128 (16384
 * exps), 10 V4.1 R=2 decode tokens (a 4 KiB row, 512 exps and a ring
 * row each), 200 KB of V4 state rows read and written, or 80 inserted
 * rows.  The rule does not look at the host's load: where other jobs
 * hold the cores, a second thread waits for one. */
#define OPT_NANOSECONDS_PER_THREAD 10000.0
#define OPT_NANOSECONDS_PER_WAKE 5000.0
#define OPT_NANOSECONDS_PER_SPINNING_THREAD 2000.0
/* The per-thread minimum and the wake-up cost for a wait policy (the
 * value of OMP_WAIT_POLICY, NULL when unset): 10 us and 5 us for
 * passive, 2 us and none for active or libgomp's default. */
double opt_thread_work_for_policy(const char *policy);
double opt_wake_cost_for_policy(const char *policy);
/* Estimates of one thread's time, from the bench on a 2-core host. */
#define OPT_NANOSECONDS_PER_EXP 0.6
#define OPT_NANOSECONDS_PER_BYTE 0.05
#define OPT_NANOSECONDS_PER_INSERTED_ROW 120.0

/* The threads that pay off for a call of `nanoseconds` on one thread
 * (every allowed one under kvc_optimized_set_thread_work(0)):
 * at least 1, at most what the caller allows (omp_get_max_threads).
 * The count decides which thread computes a row, never how: every
 * output bit is the same at any count. */
extern double opt_nanoseconds_per_thread;   /* kvc_optimized_set_thread_work */
extern double opt_nanoseconds_per_wake;     /* set with it from the wait policy */
/* Spinning teams are all or one: libgomp ends the surplus threads of its
 * pool whenever a team is smaller than the one before and creates them
 * again for the next larger one, and on the 16-core Xeon a 16-request
 * decode (its save worth 6 threads, then compress on 16) took 0.39-0.42
 * ms at 16 threads against 0.05-0.06 on one; an idle spinning thread
 * only passes the barrier.  Sleeping (passive) teams keep the count the
 * wake-up cost pays for, since every woken thread costs the master. */
static inline int opt_threads_for(double nanoseconds) {
    int allowed = omp_get_max_threads();
    if (opt_nanoseconds_per_thread <= 0) return allowed;
    double useful = nanoseconds / opt_nanoseconds_per_thread;
    if (opt_nanoseconds_per_wake > 0) {
        double woken = sqrt(nanoseconds / opt_nanoseconds_per_wake);
        if (woken < useful) useful = woken;
    } else if (useful >= 2) {
        return allowed;
    }
    return useful < 1 ? 1 : useful < allowed ? (int)useful : allowed;
}

/* Each stage's one-thread estimate, in nanoseconds, from the counts that
 * drive its work (tests/optimized check what they give on many cores). */
/* v4.compress: one exp per channel and window entry, plus the norm, RoPE
 * and quantised store of each closing token's row. */
static inline double opt_v4_compress_nanoseconds(int64_t closing_tokens, int32_t ratio, int32_t head_dim) {
    double window = (ratio == 4 ? 2.0 : 1.0) * ratio;
    return (double)closing_tokens * (OPT_NANOSECONDS_PER_EXP * window * head_dim + OPT_NANOSECONDS_PER_INSERTED_ROW);
}
/* v4.save_partial_states: read kv + score, write the row (4 x coff x D floats). */
static inline double opt_v4_save_nanoseconds(int64_t tokens, int64_t width) {
    return OPT_NANOSECONDS_PER_BYTE * (double)tokens * 4.0 * (double)width * 4.0;
}
/* v41.save_compress_norm: each row read once, one exp per channel of a
 * token (R = 2), and the ring rows (at most CAP per request) read and
 * written once. */
static inline double opt_v41_norm_nanoseconds(int64_t tokens, int32_t ratio, int64_t ring_rows) {
    return (double)tokens * (OPT_NANOSECONDS_PER_BYTE * 512.0 * ratio * 4.0 + OPT_NANOSECONDS_PER_EXP * 512.0) +
           OPT_NANOSECONDS_PER_BYTE * 2.0 * 4096.0 * (double)ring_rows;
}
/* The inserts: every token a closing one at most, about 120 ns a row. */
static inline double opt_v41_insert_nanoseconds(int64_t tokens) { return OPT_NANOSECONDS_PER_INSERTED_ROW * (double)tokens; }

/* Light calls split their tokens statically: one contiguous range per
 * thread, the same ranges in save_partial_states and compress, so that
 * at decode a request's state rows are written and read again on one
 * core, call after call, and stay in its L2.  Heavier calls keep
 * dynamic or guided chunks, which even out threads that run slow.  On
 * the 16-core Xeon (2026-12-02) static ranges in both stages
 * took a 64-request D=128 decode from 0.025 ms to 0.016-0.017 at 16
 * threads, but a 4096-token D=512 R=128 compress (~80 us a thread) from
 * 0.150 ms to 0.187.  Sleeping (passive) teams never split statically:
 * their threads are woken one by one, and the last one's range would end
 * the call 5-12 us per thread late.  The split decides which thread
 * computes a row, never how. */
#define OPT_STATIC_SPLIT_NANOSECONDS 50000.0
static inline int opt_split_statically(double nanoseconds, int threads) {
    return opt_nanoseconds_per_wake <= 0 && nanoseconds <= OPT_STATIC_SPLIT_NANOSECONDS * threads;
}

/* Iterations per dynamic chunk for `count` items over `threads`: at
 * least 8 chunks per thread to even out the load (and for late-waking
 * threads), at most `largest` items per chunk. */
static inline int opt_chunk_for(int64_t count, int threads, int largest) {
    int64_t chunk = count / (8 * (int64_t)threads);
    return chunk < 1 ? 1 : chunk > largest ? largest : (int)chunk;
}

int opt_v4_save_partial_states(const kvc_v4_save_args *a, kvc_error *err);
int opt_v4_compress(const kvc_v4_compress_args *a, kvc_error *err);
int opt_v41_save_compress_norm(const kvc_v41_norm_args *a, kvc_error *err);
int opt_v41_rope_quant_insert(const kvc_v41_insert_args *a, kvc_error *err);
int opt_v41_rope_plain_insert(const kvc_v41_insert_args *a, kvc_error *err);

#endif

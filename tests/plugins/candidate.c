/* Candidate libraries that are wrong on purpose, for the plug-in loader's
 * refusals and the fuzzer's crash and skip paths (tests/test_campaign.c).
 * The Makefile builds one library per kind from this file:
 *
 *   no_entry     exports no kvcmp_plugin_entry
 *   null_table   kvcmp_plugin_entry returns NULL
 *   wrong_abi    a table of ABI version 2
 *   short_table  ABI 1, but struct_size smaller than version 1's table
 *   crash        v41.rope_plain_insert only, unnamed; the worker dies in
 *                it: killed by SIGKILL on a bf16 cache, _exit(3) on fp8
 *   partial      v4.save_partial_states and v41.save_compress_norm only
 *                (neither forward is complete), which always fail
 *   bench        for kvcmp bench (tests/bench/test_bench.c): a correct
 *                v4.save_partial_states (inputs taken as valid) and a
 *                v41.rope_quant_insert that writes nothing
 *
 * Hostile candidates for the supervision of fuzz and replay
 * (tests/robust/test_isolation.c), all v41.rope_plain_insert only:
 *   hang         never returns
 *   shrink_crash the first call of a process fails (bad-parameter), every
 *                later one (the shrinker's) dies of SIGSEGV
 *   shrink_hang  the same, but the later calls never return
 *   exit0        calls exit(0)
 *   abort        calls abort()
 *   heap_smash   writes past a malloc block and frees it twice
 *   balloon      allocates and touches memory without end, 8 MiB at a time
 *   leak         the reference's insert (so every case passes), leaking
 *                16 MiB of touched memory per call
 *   threads      the reference's insert, leaving a thread behind per call
 *                that sleeps forever
 *
 * Candidates that attack the supervision itself (tests/robust/test_hostile.c),
 * all the reference's v41.rope_plain_insert plus one misdeed:
 *   writes_stop_flag  writes 1s over every shared writable mapping of its
 *                     process (where a campaign kept its stop flag)
 *   forks_twice       forks at its process's first call; both go on
 *   writes_input      flips a bit of its const latent input after a call
 *                     with more than one OpenMP thread (so that a case's
 *                     first call may leave it and its thread check write)
 *   closes_pipe_and_hangs  closes every descriptor above 2, then never returns
 *   leaves_helper     forks, at its process's first call, a helper that
 *                     sleeps forever holding the process's descriptors
 *   forges_results    writes 4 KiB of 0x7f bytes into every descriptor from 3
 *                     to 63 (kvcmp's result pipe among them), then _exit(0)
 *   closes_stdio_and_logs  closes 1 and 2 at its process's first call and
 *                     starts a thread that writes log lines to them without
 *                     end; every output it returns is wrong (one byte), so
 *                     that cases are shrunk and saved while it logs
 * leak, threads and these link libkvcmp.a for the reference. */
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvcmp/plugin.h"
#if defined(KIND_bench)
#include <string.h>

#include "kvcmp/formats.h"
#include "kvcmp/layout.h"
#endif

#if defined(KIND_crash)
static int crashing_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)err;
    if (a->cache_dtype == KVC_CACHE_BF16) raise(SIGKILL);
    _exit(3);
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = NULL,
    .v41_rope_plain_insert = crashing_insert,
};
#elif defined(KIND_hang) || defined(KIND_shrink_crash) || defined(KIND_shrink_hang) || defined(KIND_exit0) || \
    defined(KIND_abort) || defined(KIND_heap_smash) || defined(KIND_balloon)
__attribute__((unused)) static void hang_forever(void) {
    for (;;) pause();
}
static int hostile_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)a;
#if defined(KIND_hang)
    hang_forever();
#elif defined(KIND_shrink_crash) || defined(KIND_shrink_hang)
    static int calls;
    if (calls++ == 0) { err->code = KVC_ERR_PARAM; return KVC_ERR_PARAM; }
#if defined(KIND_shrink_crash)
    raise(SIGSEGV);
#else
    hang_forever();
#endif
#elif defined(KIND_exit0)
    exit(0);
#elif defined(KIND_abort)
    abort();
#elif defined(KIND_heap_smash)
    char *volatile first = malloc(24), *volatile second = malloc(24);
    memset(first, 0x41, 64);   /* past its end, over second */
    free(first);
    free(second);
    free(first);               /* glibc's tcache check aborts here */
#elif defined(KIND_balloon)
    for (;;) {
        static char *volatile block;
        block = malloc(8 << 20);
        if (block) memset(block, 1, 8 << 20);
    }
#endif
    (void)err;
    return KVC_ERR_PARAM;
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "hostile test candidate",
    .v41_rope_plain_insert = hostile_insert,
};
#elif defined(KIND_leak) || defined(KIND_threads)
#include <pthread.h>

#include "kvcmp/reference.h"
__attribute__((unused)) static void *sleep_forever(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}
static int misbehaving_insert(const kvc_v41_insert_args *a, kvc_error *err) {
#if defined(KIND_leak)
    static char *volatile leaked;   /* escapes, so the allocation stays */
    leaked = malloc(16 << 20);
    if (leaked) memset(leaked, 1, 16 << 20);
#else
    pthread_t thread;
    if (pthread_create(&thread, NULL, sleep_forever, NULL) == 0) pthread_detach(thread);
#endif
    return ref_v41_rope_plain_insert(a, err);
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "misbehaving test candidate",
    .v41_rope_plain_insert = misbehaving_insert,
};
#elif defined(KIND_records_device)
#include <stdio.h>

#include "kvcmp/reference.h"
/* The reference's insert, logging "PID DEVICE" (the worker's
 * CUDA_VISIBLE_DEVICES) to KVCMP_TEST_DEVICE_LOG on every call. */
static int recording_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    const char *log = getenv("KVCMP_TEST_DEVICE_LOG"), *device = getenv("CUDA_VISIBLE_DEVICES");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "%ld %s\n", (long)getpid(), device ? device : "-");
        fclose(f);
    }
    return ref_v41_rope_plain_insert(a, err);
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "device-recording test candidate",
    .v41_rope_plain_insert = recording_insert,
};
#elif defined(KIND_writes_stop_flag) || defined(KIND_forks_twice) || defined(KIND_writes_input) || \
    defined(KIND_closes_pipe_and_hangs) || defined(KIND_leaves_helper) || defined(KIND_closes_stdio_and_logs) || \
    defined(KIND_forges_results)
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>

#include "kvcmp/reference.h"
#if defined(KIND_writes_stop_flag)
/* Every rw-s mapping in /proc/self/maps, filled with 1s. */
static void poke_shared_memory(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && strcmp(perms, "rw-s") == 0)
            for (unsigned long a = start; a < end; a += sizeof(int)) *(volatile int *)a = 1;
    }
    if (maps) fclose(maps);
}
#elif defined(KIND_closes_stdio_and_logs)
static void *log_forever(void *arg) {
    (void)arg;
    static const char text[] = "candidate log line\n";
    for (;;) {
        ssize_t done = write(1, text, sizeof text - 1) + write(2, text, sizeof text - 1);
        (void)done;
        usleep(200);
    }
    return NULL;
}
#endif
static int hostile_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    static pid_t first_call_of;   /* the process whose first call this was */
    int first = first_call_of != getpid();
    first_call_of = getpid();
#if defined(KIND_closes_pipe_and_hangs)
    for (int fd = 3; fd < 1024; fd++) close(fd);
    for (;;) pause();
#elif defined(KIND_forges_results)
    static char forged[4096];
    memset(forged, 0x7f, sizeof forged);
    for (int fd = 3; fd < 64; fd++) { ssize_t done = write(fd, forged, sizeof forged); (void)done; }
    _exit(0);
#endif
#if defined(KIND_forks_twice)
    if (first) fork();
#elif defined(KIND_leaves_helper)
    if (first && fork() == 0)
        for (;;) pause();
#elif defined(KIND_writes_stop_flag)
    poke_shared_memory();
#elif defined(KIND_closes_stdio_and_logs)
    pthread_t thread;
    if (first) {
        close(1);
        close(2);
        if (pthread_create(&thread, NULL, log_forever, NULL) == 0) pthread_detach(thread);
    }
#endif
    (void)first;
    int rc = ref_v41_rope_plain_insert(a, err);
#if defined(KIND_writes_input)
    if (rc == KVC_OK && a->num_tokens > 0 && omp_get_max_threads() > 1) ((uint16_t *)a->latent)[0] ^= 1;
#elif defined(KIND_closes_stdio_and_logs)
    if (rc == KVC_OK) ((uint8_t *)a->kv_cache.data)[0] ^= 1;
#endif
    return rc;
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "supervision attacking test candidate",
    .v41_rope_plain_insert = hostile_insert,
};
#elif defined(KIND_partial)
static int refuse_save(const kvc_v4_save_args *a, kvc_error *err) { (void)a; (void)err; return KVC_ERR_UNAVAILABLE; }
static int refuse_norm(const kvc_v41_norm_args *a, kvc_error *err) { (void)a; (void)err; return KVC_ERR_UNAVAILABLE; }
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "partial test candidate",
    .v4_save_partial_states = refuse_save, .v41_save_compress_norm = refuse_norm,
};
#elif defined(KIND_bench)
/* SPEC.md 3.1 without the validation: the bench's inputs are valid. */
static int save_without_validation(const kvc_v4_save_args *a, kvc_error *err) {
    (void)err;
    int64_t width = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    for (int64_t t = 0; t < a->num_tokens; t++) {
        if (a->slot_mapping[t] < 0) continue;
        float *row = (float *)kvc_plain_row(&a->state_cache, a->slot_mapping[t], 2 * width * 4);
        const float *ape = a->ape + (a->positions[t] % a->compress_ratio) * width;
        memcpy(row, a->kv + t * width, (size_t)width * 4);
        for (int64_t i = 0; i < width; i++) row[width + i] = kvc_canonical_f32(a->score[t * width + i] + ape[i]);
    }
    return KVC_OK;
}
static int insert_nothing(const kvc_v41_insert_args *a, kvc_error *err) { (void)a; (void)err; return KVC_OK; }
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "bench test candidate",
    .v4_save_partial_states = save_without_validation, .v41_rope_quant_insert = insert_nothing,
};
#elif defined(KIND_wrong_abi)
static const kvcmp_plugin table = {.abi_version = 2, .struct_size = sizeof(kvcmp_plugin), .name = "from the future"};
#elif defined(KIND_short_table)
static const kvcmp_plugin table = {.abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = 8, .name = "truncated"};
#endif

#if defined(KIND_null_table)
KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return NULL; }
#elif defined(KIND_no_entry)
KVCMP_PLUGIN_EXPORT int kvcmp_plugin_entry_misspelt(void) { return 1; }
#else
KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &table; }
#endif

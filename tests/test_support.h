/* Helpers shared by test_cli.c, test_errors.c and test_optimized_edges.c:
 * capturing a command's stdout and stderr, temporary directories, and
 * valid generated cases to break on purpose.  Everything is static inline
 * so that a file using only some of it compiles without warnings. */
#ifndef KVCMP_TEST_SUPPORT_H
#define KVCMP_TEST_SUPPORT_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/options/options.h"
#include "kvcmp/case.h"
#include "kvcmp/generate.h"
#include "kvcmp/run.h"

/* The tests run kvcmp's commands in-process: their __REPRO lines read as
 * from the checkout's command, as cli/main.c names it. */
__attribute__((constructor)) static void support_invocation(void) { kvc_set_invocation("build/kvcmp"); }

/* ---- captured output ---------------------------------------------------- */

typedef struct {
    int status;
    char *out;   /* everything written to stdout, NUL-terminated */
    char *err;   /* everything written to stderr */
} captured_run;

static inline char *support_read_fd(int fd) {
    off_t size = lseek(fd, 0, SEEK_END);
    cr_assert(size >= 0);
    char *text = malloc((size_t)size + 1);
    cr_assert_not_null(text);
    cr_assert_eq(pread(fd, text, (size_t)size, 0), size);
    text[size] = 0;
    return text;
}

/* Runs command(argc, argv) with fds 1 and 2 pointing at temporary files;
 * dup2 keeps the FILE objects stdout/stderr valid throughout. */
static inline captured_run support_capture(int (*command)(int, char **), int argc, char **argv) {
    char out_path[] = "/tmp/kvcmp-test-out-XXXXXX", err_path[] = "/tmp/kvcmp-test-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    cr_assert(out_fd >= 0 && err_fd >= 0, "cannot create capture files");
    unlink(out_path);
    unlink(err_path);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    captured_run run;
    run.status = command(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    run.out = support_read_fd(out_fd);
    run.err = support_read_fd(err_fd);
    close(out_fd);
    close(err_fd);
    return run;
}

static inline void support_free_run(captured_run *run) {
    free(run->out);
    free(run->err);
}

/* ---- the conformance corpora -------------------------------------------- */

/* fixtures/spec-cases, fixtures/vllm-cases and fixtures/upstream-fuzz,
 * carried in the checkout (fixtures/README.md); the tests run from the
 * repository root and need nothing beside it. */
static inline void support_corpus_path(const char *relative, char *out, size_t size) {
    snprintf(out, size, "fixtures/%s", relative);
}

/* ---- temporary directories ---------------------------------------------- */

static inline void support_temp_dir(char *out, size_t size) {
    snprintf(out, size, "/tmp/kvcmp-test-XXXXXX");
    cr_assert_not_null(mkdtemp(out), "cannot create a temporary directory");
}

static inline int support_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static inline void support_remove_tree(const char *dir) { nftw(dir, support_remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static inline void support_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static inline int support_file_exists(const char *path) { return access(path, F_OK) == 0; }

static inline char *support_read_file(const char *path) {
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "cannot read %s", path);
    char *text = support_read_fd(fd);
    close(fd);
    return text;
}

/* ---- valid cases ---------------------------------------------------------- */

static inline int support_variant_index(const char *name) {
    for (int v = 0; v < kvc_variant_count(); v++)
        if (strcmp(kvc_variant(v)->name, name) == 0) return v;
    cr_assert_fail("no fuzz variant named %s", name);
    return -1;
}

/* Case `index` of one variant and value family, never corrupted on purpose. */
static inline void support_make_case(const char *variant, int family, uint64_t seed, int64_t index, kvc_case *out) {
    int v = support_variant_index(variant);
    kvc_gen_config config = {.seed = seed, .variant_mask = 1ull << v, .family_mask = 1u << family};
    kvc_gen_case g;
    kvc_gen_make(&config, index, &g);
    cr_assert_eq(g.history, 0);
    cr_assert_eq(g.invalid[0], 0, "case corrupted although invalid_per_mille is 0: %s", g.invalid);
    cr_assert_eq(kvc_case_copy(out, &g.c), 0);
    kvc_gen_free(&g);
}

/* Renames a tensor so that the case no longer has it. */
static inline void support_hide_tensor(kvc_case *c, const char *name) {
    for (int i = 0; i < c->num_tensors; i++)
        if (strcmp(c->tensors[i].name, name) == 0) {
            snprintf(c->tensors[i].name, sizeof c->tensors[i].name, "hidden-%.30s", name);
            return;
        }
    cr_assert_fail("case has no tensor %s to hide", name);
}

/* A case of `variant` whose writing tokens all name a row one past the
 * end of `cache_name` in `slot_name`: an input the reference rejects with
 * KVC_ERR_INDEX.  Tries successive generated cases until one writes. */
static inline void support_make_index_error_case(const char *variant, uint64_t seed, const char *slot_name, const char *cache_name,
                                                 kvc_case *out) {
    for (int64_t index = 0; index < 64; index++) {
        support_make_case(variant, KVC_FAM_NORMAL, seed, index, out);
        kvc_array *slots = kvc_case_get(out, slot_name), *cache = kvc_case_get(out, cache_name);
        cr_assert(slots && cache, "case lacks %s or %s", slot_name, cache_name);
        for (int64_t t = 0; t < slots->count; t++)
            if (((int64_t *)slots->data)[t] >= 0) ((int64_t *)slots->data)[t] = cache->shape[0] * cache->shape[1] + t;
        kvc_run_result result;
        int rc = kvc_run_case(&kvc_reference_backend, out, NULL, &result);
        kvc_run_result_free(&result);
        if (rc == KVC_ERR_INDEX) return;
        kvc_case_free(out);
    }
    cr_assert_fail("no case of %s among 64 writes a row", variant);
}

/* A .npy 1.0 image with the given header dictionary (padded like numpy
 * does) followed by data_bytes bytes of 0x11. */
static inline size_t support_npy_image(uint8_t *out, size_t capacity, const char *dict, size_t data_bytes) {
    size_t dict_len = strlen(dict), total = 10 + dict_len + 1;
    size_t pad = (64 - total % 64) % 64, header_len = dict_len + pad + 1;
    cr_assert(10 + header_len + data_bytes <= capacity);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)header_len;
    out[9] = (uint8_t)(header_len >> 8);
    memcpy(out + 10, dict, dict_len);
    memset(out + 10 + dict_len, ' ', pad);
    out[10 + dict_len + pad] = '\n';
    memset(out + 10 + header_len, 0x11, data_bytes);
    return 10 + header_len + data_bytes;
}

#endif

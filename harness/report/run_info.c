/* Run metadata: see run_info.h.  The version, commit and flags come from
 * harness/options/version.c, the one object the Makefile gives them to;
 * the compiler is the one compiling this file. */
#include "harness/report/run_info.h"

#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

const char *kvc_build_compiler(void) {
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

void kvc_cpu_model(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, size, "%s", colon);
        break;
    }
    fclose(f);
}

/* The process's own arguments, as the shell passed them. */
static cJSON *command_line(void) {
    cJSON *args = cJSON_CreateArray();
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) return args;
    char arg[4096];
    size_t n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (ch && n + 1 < sizeof arg) { arg[n++] = (char)ch; continue; }
        if (ch) continue;   /* longer than arg: truncated */
        arg[n] = 0;
        cJSON_AddItemToArray(args, cJSON_CreateString(arg));
        n = 0;
    }
    fclose(f);
    return args;
}

cJSON *kvc_run_info(uint64_t seed, int has_seed, cJSON *options) {
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "kvcmp_version", kvc_build_version());
    cJSON_AddStringToObject(info, "commit", kvc_build_commit());
    cJSON_AddStringToObject(info, "compiler", kvc_build_compiler());
    cJSON_AddStringToObject(info, "flags", kvc_build_flags());
    char cpu[256];
    kvc_cpu_model(cpu, sizeof cpu);
    cJSON_AddStringToObject(info, "cpu", cpu);
    cJSON_AddItemToObject(info, "command_line", command_line());
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(info, "started", when);
    /* A JSON number is a double: a 64-bit seed goes as a string too. */
    if (has_seed) {
        char text[32];
        snprintf(text, sizeof text, "%llu", (unsigned long long)seed);
        cJSON_AddStringToObject(info, "seed", text);
    }
    cJSON_AddItemToObject(info, "options", options ? options : cJSON_CreateObject());
    return info;
}

/* The directory that holds path, when its own parent exists. */
void kvc_make_parent_dir(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return;
    *slash = 0;
    mkdir(dir, 0777);
}

int kvc_write_json_file(const char *path, cJSON *root, char *error, size_t error_size) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) { snprintf(error, error_size, "cannot write %s: out of memory", path); return -1; }
    kvc_make_parent_dir(path);
    /* Written beside the target and renamed over it when complete: a full
     * disk or a kill leaves the old file or none, never half of one. */
    int rc = kvc_atomic_write_text(path, text, error, error_size);
    free(text);
    if (rc) kvc_error_hint(error, error_size, "give a path in a writable directory");
    return rc;
}

const char *kvc_json_duplicated_key(const cJSON *item) {
    for (const cJSON *a = item ? item->child : NULL; a; a = a->next) {
        if (cJSON_IsObject(item) && a->string)
            for (const cJSON *b = a->next; b; b = b->next)
                if (b->string && strcmp(a->string, b->string) == 0) return a->string;
        const char *inner = kvc_json_duplicated_key(a);
        if (inner) return inner;
    }
    return NULL;
}

cJSON *kvc_read_json_file_checked(const char *path, size_t max_bytes, char *error, size_t error_size) {
    /* Non-blocking: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(error, error_size, "%s: cannot open it: %s (give the path of an existing, readable file)", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(error, error_size, "%s: not a regular file (%s): only a regular file is read (give the file itself)", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                 : "not a file");
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        snprintf(error, error_size, "%s: %lld bytes, more than the %zu a JSON file may have here (give the file kvcmp wrote)", path,
                 (long long)st.st_size, max_bytes);
        close(fd);
        return NULL;
    }
    /* One byte more than its size: a file that grows while read is refused. */
    size_t size = (size_t)st.st_size;
    char *text = malloc(size + 2);
    size_t n = 0;
    ssize_t got = 0;
    while (text && n <= size && (got = read(fd, text + n, size + 1 - n)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        n += (size_t)got;
    }
    int read_errno = errno;
    close(fd);
    if (!text || got < 0 || n > size) {
        snprintf(error, error_size, "%s: %s (give the file kvcmp wrote)", path,
                 !text ? "out of memory" : got < 0 ? strerror(read_errno) : "it grew while being read");
        free(text);
        return NULL;
    }
    text[n] = 0;
    cJSON *root = memchr(text, 0, n) ? NULL : cJSON_Parse(text);
    free(text);
    if (!root) {
        snprintf(error, error_size, "%s: cannot be read as JSON (give the file kvcmp wrote)", path);
        return NULL;
    }
    const char *twice = kvc_json_duplicated_key(root);
    if (twice) {
        snprintf(error, error_size, "%s: the key \"%.100s\" appears twice in one object: an edited file, not one kvcmp wrote (give the file "
                 "kvcmp wrote)", path, twice);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

cJSON *kvc_read_json_file(const char *path) {
    char error[1200];
    return kvc_read_json_file_checked(path, KVC_JSON_FILE_MAX_BYTES, error, sizeof error);
}

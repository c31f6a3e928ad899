/* Output files written aside and renamed into place (common/atomic_file.h
 * says why and what it guarantees). */
#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporaries of one process are numbered, so that one planted at a name
 * (or left by a killed process of the same pid) only moves on to the next. */
static unsigned long temp_counter;

static int fail(const char *path, const char *reason, char *error, size_t error_size) {
    snprintf(error, error_size, "cannot write %s: %s", path, reason);
    return -1;
}

/* The temporary's stream writes through these, so that the reason of a
 * failed write (which stdio does not keep) is kept for the commit. */
static ssize_t write_all(void *cookie, const char *buffer, size_t size) {
    kvc_atomic_file *a = cookie;
    for (size_t done = 0; done < size;) {
        ssize_t n = write(a->fd, buffer + done, size - done);
        if (n < 0) { a->write_errno = errno; return -1; }
        done += (size_t)n;
    }
    return (ssize_t)size;
}

static int close_fd(void *cookie) {
    kvc_atomic_file *a = cookie;
    int rc = close(a->fd);
    if (rc != 0) a->write_errno = errno;
    return rc;
}

/* A candidate that closed its stdout or stderr and keeps printing would
 * otherwise write into the file that took descriptor 1 or 2 (a saved
 * case's tensors): the file moves above them. */
static int above_stdio(kvc_atomic_file *a) {
    int high = fcntl(a->fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    int reason = errno;
    close(a->fd);
    if (high < 0) unlink(a->temp);   /* out of descriptors */
    errno = reason;
    return high;
}

int kvc_atomic_open(kvc_atomic_file *a, const char *path, char *error, size_t error_size) {
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) return fail(path, strerror(ENAMETOOLONG), error, error_size);
    struct stat st;
    int exists = lstat(path, &st) == 0;
    if (exists && S_ISLNK(st.st_mode))
        return fail(path, "it is a symbolic link (kvcmp never writes through one: remove it or give another path)", error, error_size);
    if (exists && S_ISDIR(st.st_mode)) return fail(path, strerror(EISDIR), error, error_size);
    snprintf(a->path, sizeof a->path, "%s", path);
    const char *slash = strrchr(path, '/');
    int dir_length = slash ? (int)(slash - path + 1) : 0;
    /* O_EXCL refuses an existing name, a link included: the next is tried. */
    do {
        unsigned long n = __atomic_fetch_add(&temp_counter, 1, __ATOMIC_RELAXED);
        snprintf(a->temp, sizeof a->temp, "%.*s.%s.partial-%ld-%lu", dir_length, path, path + dir_length, (long)getpid(), n);
        a->fd = open(a->temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    } while (a->fd < 0 && errno == EEXIST);
    if (a->fd < 0) return fail(path, strerror(errno), error, error_size);
    if (a->fd <= STDERR_FILENO) a->fd = above_stdio(a);
    if (a->fd < 0) return fail(path, strerror(errno), error, error_size);
    const cookie_io_functions_t io = {.write = write_all, .close = close_fd};
    a->f = fopencookie(a, "w", io);
    if (a->f) return 0;
    int reason = errno;   /* out of memory */
    close(a->fd);
    unlink(a->temp);
    return fail(path, strerror(reason), error, error_size);
}

int kvc_atomic_commit(kvc_atomic_file *a, char *error, size_t error_size) {
    /* Every failure passes through write_all or close_fd. */
    fflush(a->f);
    fclose(a->f);
    a->f = NULL;
    int reason = a->write_errno;
    if (!reason && rename(a->temp, a->path) != 0) reason = errno;
    if (!reason) return 0;
    unlink(a->temp);
    return fail(a->path, strerror(reason), error, error_size);
}

void kvc_atomic_abort(kvc_atomic_file *a) {
    fclose(a->f);
    a->f = NULL;
    unlink(a->temp);
}

int kvc_atomic_write_text(const char *path, const char *text, char *error, size_t error_size) {
    kvc_atomic_file a;
    if (kvc_atomic_open(&a, path, error, error_size)) return -1;
    fputs(text, a.f);
    fputc('\n', a.f);
    return kvc_atomic_commit(&a, error, error_size);
}

void kvc_error_hint(char *error, size_t error_size, const char *hint) {
    size_t n = strlen(error);   /* < error_size: snprintf wrote it */
    snprintf(error + n, error_size - n, " (%s)", hint);
}

int kvc_plain_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 255 || name[0] == '.' || strchr(name, '/') || strstr(name, "..")) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7F) return 0;
    return 1;
}

int kvc_output_target_refused(const char *path, char *why, size_t size) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (S_ISLNK(st.st_mode)) {
        snprintf(why, size, "%s is a symbolic link (kvcmp never writes through one: remove it or give another path)", path);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) { snprintf(why, size, "%s is a folder, not a file", path); return 1; }
    return 0;
}

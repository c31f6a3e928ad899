/* A Python candidate as a backend: see pyworker.h; the wire protocol is
 * described in python/kvcmp/_worker.py. */
#include "harness/backends/pyworker.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/fuzz/geometry.h"
#include "harness/fuzz/supervise.h"
#include "kvcmp/validate.h"

/* The worker's descriptors: requests in, replies out, the shared memory. */
#define WORKER_REQUEST_FD 3
#define WORKER_REPLY_FD 4
#define WORKER_SHM_FD 5
/* How long the handshake (the interpreter's start-up and the candidate's
 * import) may take unless kvc_pyworker_set_startup_timeout says otherwise. */
#define DEFAULT_STARTUP_SECONDS KVC_PYWORKER_DEFAULT_STARTUP_SECONDS
/* Geometries remembered per worker (kvc_pyworker_set_phase_hook); past
 * this many the set starts again (a call then gets the allowance again). */
#define GEOMETRY_SLOTS 4096

enum { STAGE_SAVE, STAGE_COMPRESS, STAGE_NORM, STAGE_QUANT_INSERT, STAGE_PLAIN_INSERT, STAGE_COUNT };
static const char *const stage_names[STAGE_COUNT] = {"v4.save_partial_states", "v4.compress", "v41.save_compress_norm",
                                                     "v41.rope_quant_insert", "v41.rope_plain_insert"};

typedef struct {
    pid_t pid;               /* 0: no worker */
    pid_t owner;             /* the process that started it */
    int request_fd, shm_fd;
    int reply_fd;
    char *pending;           /* reply bytes read but not yet taken as a line */
    size_t pending_length, pending_capacity;
    uint64_t sequence;       /* of the last request: its reply must echo it */
    uint8_t *shm;
    size_t shm_size;
    uint64_t geometries[GEOMETRY_SLOTS];   /* hashes of the call geometries this worker has run (0: free) */
    int num_geometries;
} worker_process;

static struct {
    char spec[PATH_MAX + 256];
    char python[PATH_MAX];
    double startup_seconds;  /* <= 0: DEFAULT_STARTUP_SECONDS */
    void (*phase_hook)(int phase);
    int fresh_each_call;
    worker_process w;
    kvc_backend backend;
    char name[PATH_MAX + 300];
} bridge;

void kvc_pyworker_set_python(const char *python) { snprintf(bridge.python, sizeof bridge.python, "%s", python ? python : ""); }

const char *kvc_pyworker_python(void) {
    if (bridge.python[0]) return bridge.python;
    const char *env = getenv("KVCMP_PYTHON");
    return env && env[0] ? env : "python3";
}

void kvc_pyworker_fresh_each_call(int on) { bridge.fresh_each_call = on; }

void kvc_pyworker_set_startup_timeout(double seconds) { bridge.startup_seconds = seconds; }

static double startup_seconds(void) { return bridge.startup_seconds > 0 ? bridge.startup_seconds : DEFAULT_STARTUP_SECONDS; }

void kvc_pyworker_set_phase_hook(void (*hook)(int phase)) { bridge.phase_hook = hook; }

static void phase(int p) {
    if (bridge.phase_hook) bridge.phase_hook(p);
}

int64_t kvc_pyworker_rss_bytes(void) {
    if (!bridge.w.pid || bridge.w.owner != getpid()) return 0;
    int64_t rss = kvc_process_rss_bytes(bridge.w.pid);
    return rss > 0 ? rss : 0;
}

static void forget_worker(worker_process *w) {
    if (w->reply_fd >= 0) close(w->reply_fd);
    if (w->request_fd >= 0) close(w->request_fd);
    if (w->shm) munmap(w->shm, w->shm_size);
    if (w->shm_fd >= 0) close(w->shm_fd);
    free(w->pending);
    w->pid = w->owner = 0;
    w->request_fd = w->shm_fd = w->reply_fd = -1;
    w->pending = NULL;
    w->pending_length = w->pending_capacity = 0;
    w->sequence = 0;
    w->shm = NULL;
    w->shm_size = 0;
    w->num_geometries = 0;
    memset(w->geometries, 0, sizeof w->geometries);
}

/* Ends this process's worker; returns how it ended (waitpid status). */
static int end_worker(worker_process *w, int kill_it) {
    int status = 0;
    if (w->pid && w->owner == getpid()) {
        if (kill_it) kill(w->pid, SIGKILL);
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {}
    }
    forget_worker(w);
    return status;
}

void kvc_pyworker_stop(void) {
    if (bridge.w.pid) end_worker(&bridge.w, 1);
}

/* Where the kvcmp package and libkvcmp.so lie relative to this program
 * (a checkout's build/kvcmp, or PREFIX/bin/kvcmp), for a worker started
 * from the command line; a Python front end sets both itself. */
static void point_worker_at_package(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = 0;
    const char *python_dirs[] = {"%s/../python", "%s/../share/kvcmp/python"};
    for (size_t i = 0; i < sizeof python_dirs / sizeof *python_dirs; i++) {
        char dir[PATH_MAX + 64], probe[PATH_MAX + 96];
        snprintf(dir, sizeof dir, python_dirs[i], exe);
        snprintf(probe, sizeof probe, "%s/kvcmp/_worker.py", dir);
        if (access(probe, R_OK) != 0) continue;
        const char *old = getenv("PYTHONPATH");
        char path[2 * PATH_MAX + 128];
        snprintf(path, sizeof path, "%s%s%s", dir, old && old[0] ? ":" : "", old ? old : "");
        setenv("PYTHONPATH", path, 1);
        break;
    }
    const char *lib_dirs[] = {"%s/libkvcmp.so", "%s/../lib/libkvcmp.so"};
    for (size_t i = 0; i < sizeof lib_dirs / sizeof *lib_dirs && !getenv("KVCMP_LIB"); i++) {
        char lib[PATH_MAX + 64];
        snprintf(lib, sizeof lib, lib_dirs[i], exe);
        if (access(lib, R_OK) == 0) setenv("KVCMP_LIB", lib, 1);
    }
}

/* Moves fd to a descriptor above the worker's fixed ones. */
static int above_fixed(int fd) {
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return moved;
}

static int start_worker(worker_process *w, char *error, size_t size) {
    static int pointed;
    if (!pointed++) point_worker_at_package();
    signal(SIGPIPE, SIG_IGN);   /* a dead worker is seen at the reply, not as a signal */
    memset(w, 0, sizeof *w);
    w->request_fd = w->shm_fd = w->reply_fd = -1;
    int requests[2], replies[2];
    if (pipe2(requests, O_CLOEXEC)) { snprintf(error, size, "pipe: %s", strerror(errno)); return -1; }
    if (pipe2(replies, O_CLOEXEC)) { snprintf(error, size, "pipe: %s", strerror(errno)); close(requests[0]); close(requests[1]); return -1; }
    int shm = memfd_create("kvcmp-case", MFD_CLOEXEC);
    if (shm < 0) { snprintf(error, size, "memfd_create: %s", strerror(errno)); close(requests[0]); close(requests[1]); close(replies[0]); close(replies[1]); return -1; }
    int child_in = above_fixed(requests[0]), child_out = above_fixed(replies[1]), child_shm = fcntl(shm, F_DUPFD_CLOEXEC, 10);
    const char *python = kvc_pyworker_python();
    /* Not -m kvcmp._worker: the package imports that module too, and a second
     * copy as __main__ would have a kvcmp.DeviceLost of its own. */
    char *argv[] = {(char *)python, "-c", "import sys, kvcmp._worker as w; sys.exit(w.main(sys.argv))", bridge.spec, NULL};
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        signal(SIGINT, SIG_IGN);   /* the terminal's ^C is the supervisor's */
        signal(SIGPIPE, SIG_DFL);
        dup2(child_in, WORKER_REQUEST_FD);
        dup2(child_out, WORKER_REPLY_FD);
        dup2(child_shm, WORKER_SHM_FD);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        dup2(2, 1);   /* the candidate's prints go to stderr: stdout is the campaign's */
        close_range(WORKER_SHM_FD + 1, ~0U, 0);
        execvp(python, argv);
        char message[PATH_MAX + 200];
        int n = snprintf(message, sizeof message, "{\"fatal\": \"cannot run the Python interpreter '%s': %s\"}\n", python, strerror(errno));
        ssize_t done = write(WORKER_REPLY_FD, message, (size_t)n);
        (void)done;
        _exit(127);
    }
    close(child_in);
    close(child_out);
    close(child_shm);
    if (pid < 0) {
        snprintf(error, size, "fork: %s", strerror(errno));
        close(requests[1]); close(replies[0]); close(shm);
        return -1;
    }
    w->pid = pid;
    w->owner = parent;
    w->request_fd = requests[1];
    w->reply_fd = replies[0];
    w->shm_fd = shm;
    return 0;
}

/* One line from the worker (without its newline), NULL when it closed
 * its end, or when timeout_s (> 0) passed: then *timed_out is 1.  The
 * bytes after the line stay pending (extra_reply_bytes). */
static char *read_line(worker_process *w, double timeout_s, int *timed_out) {
    double deadline = timeout_s > 0 ? kvc_now_seconds() + timeout_s : 0;
    *timed_out = 0;
    for (;;) {
        char *newline = w->pending_length ? memchr(w->pending, '\n', w->pending_length) : NULL;
        if (newline) {
            size_t n = (size_t)(newline - w->pending);
            char *line = malloc(n + 1);
            if (!line) return NULL;
            memcpy(line, w->pending, n);
            line[n] = 0;
            w->pending_length -= n + 1;
            memmove(w->pending, newline + 1, w->pending_length);
            return line;
        }
        if (deadline) {
            struct pollfd p = {.fd = w->reply_fd, .events = POLLIN};
            double left = deadline - kvc_now_seconds();
            int ready = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
            /* A campaign's SIGHUP, SIGINT or SIGTERM ends the wait (the campaign stops). */
            if (ready < 0 && errno == EINTR) { if (kvc_interrupted()) return NULL; continue; }
            if (ready == 0) { *timed_out = 1; return NULL; }
            if (ready < 0) return NULL;
        }
        if (w->pending_capacity - w->pending_length < 4096) {
            size_t grown = w->pending_capacity * 2 + 8192;
            char *more = realloc(w->pending, grown);
            if (!more) return NULL;
            w->pending = more;
            w->pending_capacity = grown;
        }
        ssize_t got = read(w->reply_fd, w->pending + w->pending_length, w->pending_capacity - w->pending_length);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return NULL;
        w->pending_length += (size_t)got;
    }
}

/* Bytes in the reply stream after a call's reply line: the candidate
 * wrote into it (nothing else does). */
static size_t extra_reply_bytes(worker_process *w) {
    struct pollfd p = {.fd = w->reply_fd, .events = POLLIN};
    if (!w->pending_length && poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
        char byte[256];
        ssize_t got = read(w->reply_fd, byte, sizeof byte);
        return got > 0 ? (size_t)got : 0;
    }
    return w->pending_length;
}

/* "signal 6 (Aborted)", "exit status 0" for a worker that died. */
static void describe_end(int status, char *out, size_t size) {
    if (WIFSIGNALED(status)) snprintf(out, size, "signal %d: the Python worker was killed by signal %d (%s)", WTERMSIG(status),
                                      WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, size, "exit status %d: the Python worker exited with status %d", WEXITSTATUS(status), WEXITSTATUS(status));
}

/* The handshake: the stages the candidate offers (a bit per stage).
 * Bounded by the start-up limit (--startup-timeout). */
static int hello(worker_process *w, unsigned *offered, char *error, size_t size) {
    int timed_out;
    char *line = read_line(w, startup_seconds(), &timed_out);
    cJSON *reply = line ? cJSON_Parse(line) : NULL;
    free(line);
    if (timed_out) {
        end_worker(w, 1);
        snprintf(error, size, "startup-timeout: the Python worker (%s) did not finish importing the candidate %s within %g s "
                 "(--startup-timeout): raise --startup-timeout, or time `import` of the candidate's module by hand",
                 kvc_pyworker_python(), bridge.spec, startup_seconds());
        cJSON_Delete(reply);
        return -1;
    }
    const cJSON *fatal = cJSON_GetObjectItemCaseSensitive(reply, "fatal");
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "hello"), "stages");
    int rc = 0;
    if (cJSON_IsString(fatal)) {
        snprintf(error, size, "%s", fatal->valuestring);
        rc = -1;
    } else if (!cJSON_IsArray(stages)) {
        int status = end_worker(w, 1);
        char how[200];
        describe_end(status, how, sizeof how);
        snprintf(error, size, "the Python worker (%s) ended while it started and imported the candidate %s, before it said hello "
                 "(%s; its error is above): import the candidate's module with that interpreter by hand to see why, or name "
                 "another interpreter with --python or KVCMP_PYTHON",
                 kvc_pyworker_python(), bridge.spec, how);
        rc = -1;
    } else {
        *offered = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, stages)
            for (int i = 0; i < STAGE_COUNT; i++)
                if (cJSON_IsString(s) && strcmp(s->valuestring, stage_names[i]) == 0) *offered |= 1u << i;
    }
    cJSON_Delete(reply);
    return rc;
}

/* ---- one call -------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *dtype;       /* numpy's: "<f4", "<i8", "<i4", "<u2", "|u1" */
    int ndim;
    int64_t shape[3], strides[3];
    void *data;              /* NULL: the tensor is absent */
    size_t bytes;            /* span in memory, padding included */
    int output;
    int by_value;            /* a scalar argument (fp8_scale): a C candidate gets a copy, so no write of it comes back */
    size_t offset;           /* in the shared memory */
} wire_tensor;

typedef struct {
    wire_tensor t[16];
    int n;
    cJSON *params;
} wire_call;

static wire_tensor *add(wire_call *c, const char *name, const char *dtype, size_t item, const void *data, int output, int ndim,
                        int64_t d0, int64_t d1) {
    wire_tensor *t = &c->t[c->n++];
    *t = (wire_tensor){.name = name, .dtype = dtype, .ndim = ndim, .shape = {d0, d1}, .data = (void *)data, .output = output};
    if (ndim == 1) t->strides[0] = (int64_t)item;
    else { t->strides[0] = d1 * (int64_t)item; t->strides[1] = (int64_t)item; }
    t->bytes = (size_t)(d0 > 0 && (ndim == 1 || d1 > 0) ? d0 * (ndim == 1 ? 1 : d1) : 0) * item;
    return t;
}

/* A paged cache as [pages, rows, width] whose pages lie page_stride
 * apart: the candidate sees the padding as the stride, and scribbling
 * into it comes back with the bytes. */
static void add_paged(wire_call *c, const char *name, const char *dtype, size_t item, const kvc_paged_cache *p, int output) {
    wire_tensor *t = &c->t[c->n++];
    int64_t rows = p->page_rows > 0 ? p->page_rows : 1;
    int64_t width = p->page_bytes / rows / (int64_t)item;
    *t = (wire_tensor){.name = name, .dtype = dtype, .ndim = 3, .shape = {p->num_pages, rows, width},
                       .strides = {p->page_stride, width * (int64_t)item, (int64_t)item}, .data = p->data, .output = output};
    t->bytes = p->num_pages > 0 ? (size_t)(p->num_pages * p->page_stride) : 0;
}

static void param(wire_call *c, const char *key, double value) { cJSON_AddNumberToObject(c->params, key, value); }

/* Non-finite eps travels as a string JSON can carry. */
static void param_float(wire_call *c, const char *key, float value) {
    if (value == value && value - value == 0) param(c, key, value);
    else cJSON_AddStringToObject(c->params, key, value != value ? "nan" : value > 0 ? "inf" : "-inf");
}

static int ensure_shm(worker_process *w, size_t size, char *error, size_t error_size) {
    if (size <= w->shm_size && w->shm) return 0;
    size_t grown = size < 1 << 20 ? 1 << 20 : size + size / 2;
    if (w->shm) munmap(w->shm, w->shm_size);
    w->shm = NULL;
    if (ftruncate(w->shm_fd, (off_t)grown) || (w->shm = mmap(NULL, grown, PROT_READ | PROT_WRITE, MAP_SHARED, w->shm_fd, 0)) == MAP_FAILED) {
        w->shm = NULL;
        w->shm_size = 0;
        snprintf(error, error_size, "shared memory of %zu bytes: %s", grown, strerror(errno));
        return -1;
    }
    w->shm_size = grown;
    return 0;
}

static cJSON *request_json(const char *stage, wire_call *c, size_t shm_size, uint64_t sequence) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "call", stage);
    cJSON_AddNumberToObject(r, "seq", (double)sequence);
    cJSON_AddItemToObject(r, "params", c->params);
    c->params = NULL;
    cJSON_AddNumberToObject(r, "threads", omp_get_max_threads());
    cJSON_AddNumberToObject(r, "size", (double)shm_size);
    cJSON *tensors = cJSON_AddArrayToObject(r, "tensors");
    for (int i = 0; i < c->n; i++) {
        const wire_tensor *t = &c->t[i];
        if (!t->data && t->bytes) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", t->dtype);
        double shape[3], strides[3];
        for (int k = 0; k < t->ndim; k++) { shape[k] = (double)t->shape[k]; strides[k] = (double)t->strides[k]; }
        cJSON_AddItemToObject(o, "shape", cJSON_CreateDoubleArray(shape, t->ndim));
        cJSON_AddItemToObject(o, "strides", cJSON_CreateDoubleArray(strides, t->ndim));
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddBoolToObject(o, "output", t->output);
        cJSON_AddItemToArray(tensors, o);
    }
    return r;
}

/* The status of a "rejected" reply without a code: the one the shared
 * validator gives, so that rejecting what the reference rejects passes. */
typedef int (*validator_fn)(const void *args, kvc_error *err);

static int reply_status(int stage, cJSON *reply, const void *args, validator_fn validate, kvc_error *err) {
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "status"));
    const char *message = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "message"));
    const char *class = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "class"));
    message = message ? message : "";
    if (status && strcmp(status, "ok") == 0) { err->code = KVC_OK; err->message[0] = 0; return KVC_OK; }
    if (status && strcmp(status, "rejected") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(reply, "code");
        int rc = cJSON_IsNumber(code) && code->valueint > 0 && code->valueint < KVC_ERR_CANDIDATE ? code->valueint : 0;
        if (!rc) {
            kvc_error validator = {0};
            rc = validate(args, &validator);
            if (!rc) rc = KVC_ERR_PARAM;
        }
        return kvc_fail(err, rc, "%.380s", message);
    }
    int code = status && strcmp(status, "device-lost") == 0 ? KVC_ERR_DEVICE_LOST : KVC_ERR_CANDIDATE;
    return kvc_fail(err, code, "%s: %.60s: %.300s", stage_names[stage], class ? class : "error", message);
}

static int must_restart(cJSON *reply) {
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "status"));
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "restart")) || (status && strcmp(status, "device-lost") == 0);
}

/* 1 the first time this worker sees the geometry (it is remembered). */
static int first_of_geometry(worker_process *w, uint64_t g) {
    if (w->num_geometries >= GEOMETRY_SLOTS / 2) {
        memset(w->geometries, 0, sizeof w->geometries);
        w->num_geometries = 0;
    }
    for (size_t k = g % GEOMETRY_SLOTS;; k = (k + 1) % GEOMETRY_SLOTS) {
        if (w->geometries[k] == g) return 0;
        if (!w->geometries[k]) { w->geometries[k] = g; w->num_geometries++; return 1; }
    }
}

/* A reply stream out of step: the call fails as "protocol" and the
 * worker is replaced, so that no later call reads this one's reply. */
static int protocol_failure(worker_process *w, int stage, kvc_error *err, const char *what) {
    end_worker(w, 1);
    return kvc_fail(err, KVC_ERR_CANDIDATE,
                    "%s: protocol: %.300s; the candidate wrote into the worker's reply stream (descriptor %d): print to "
                    "stdout or stderr instead (the worker was replaced)",
                    stage_names[stage], what, WORKER_REPLY_FD);
}

/* Sends the call to the worker (started if needed), copies the outputs
 * back (every byte, padding included) and turns the reply into a status.
 * geometry: the call's key (harness/fuzz/geometry.h), the compile
 * allowance's unit: the campaign counts the same keys. */
static int call_worker(int stage, wire_call *c, uint64_t geometry, const void *args, validator_fn validate, kvc_error *err) {
    worker_process *w = &bridge.w;
    char error[600];
    if (w->pid && (w->owner != getpid() || bridge.fresh_each_call)) {
        if (w->owner == getpid()) end_worker(w, 1);
        else forget_worker(w);   /* inherited through fork: the parent's */
    }
    if (!w->pid) {
        unsigned offered;
        phase(KVC_PYWORKER_STARTUP);
        int failed = start_worker(w, error, sizeof error) || hello(w, &offered, error, sizeof error);
        phase(KVC_PYWORKER_CALL);
        if (failed) {
            end_worker(w, 1);
            cJSON_Delete(c->params);
            int timed_out = strncmp(error, "startup-timeout:", 16) == 0;
            return kvc_fail(err, KVC_ERR_CRASHED, "%s: %s%.400s", stage_names[stage], timed_out ? "" : "no worker: ", error);
        }
    }
    int first = first_of_geometry(w, geometry);
    size_t size = 0;
    for (int i = 0; i < c->n; i++) {
        c->t[i].offset = size;
        size += (c->t[i].bytes + 63) / 64 * 64;
    }
    if (ensure_shm(w, size, error, sizeof error)) { cJSON_Delete(c->params); return kvc_fail(err, KVC_ERR_NOMEM, "%s", error); }
    for (int i = 0; i < c->n; i++)
        if (c->t[i].data && c->t[i].bytes) memcpy(w->shm + c->t[i].offset, c->t[i].data, c->t[i].bytes);
    uint64_t sequence = ++w->sequence;
    cJSON *request = request_json(stage_names[stage], c, w->shm_size, sequence);
    char *text = cJSON_PrintUnformatted(request);
    cJSON_Delete(request);
    size_t length = strlen(text);
    text[length] = '\n';
    if (first) phase(KVC_PYWORKER_FIRST_CALL);
    ssize_t sent = write(w->request_fd, text, length + 1);
    free(text);
    int timed_out;
    char *line = sent == (ssize_t)(length + 1) ? read_line(w, 0, &timed_out) : NULL;
    if (first) phase(KVC_PYWORKER_CALL);
    if (!line) {
        char how[200];
        describe_end(end_worker(w, 0), how, sizeof how);
        return kvc_fail(err, KVC_ERR_CRASHED, "%s: %s", stage_names[stage], how);
    }
    cJSON *reply = cJSON_Parse(line);
    const cJSON *echoed = cJSON_GetObjectItemCaseSensitive(reply, "seq");
    char what[200] = "";
    if (!reply)
        snprintf(what, sizeof what, "the reply to call %llu is not JSON (it starts '%.40s')", (unsigned long long)sequence, line);
    else if (!cJSON_IsNumber(echoed) || echoed->valuedouble != (double)sequence)
        snprintf(what, sizeof what, "the reply to call %llu answers %s", (unsigned long long)sequence,
                 cJSON_IsNumber(echoed) ? "another call" : "no call (a line without \"seq\")");
    else if (extra_reply_bytes(w))
        snprintf(what, sizeof what, "bytes followed the reply to call %llu", (unsigned long long)sequence);
    free(line);
    if (what[0]) {
        cJSON_Delete(reply);
        return protocol_failure(w, stage, err, what);
    }
    /* Outputs come back; so do inputs the candidate wrote into (a py:
     * candidate's inputs are copies in the shared memory): the campaign's
     * const-input check (harness/fuzz/run.c) then fails the case as
     * input-write and puts the case's bytes back, as for a C candidate. */
    for (int i = 0; i < c->n; i++)
        if (c->t[i].data && c->t[i].bytes && !c->t[i].by_value && (c->t[i].output || memcmp(c->t[i].data, w->shm + c->t[i].offset, c->t[i].bytes) != 0))
            memcpy(c->t[i].data, w->shm + c->t[i].offset, c->t[i].bytes);
    int rc = reply_status(stage, reply, args, validate, err);
    if (must_restart(reply)) end_worker(w, 1);
    cJSON_Delete(reply);
    return rc;
}

/* ---- the stages ------------------------------------------------------- */

static int validate_save(const void *a, kvc_error *e) { return kvc_validate_v4_save(a, e); }
static int validate_compress(const void *a, kvc_error *e) { return kvc_validate_v4_compress(a, e); }
static int validate_norm(const void *a, kvc_error *e) { return kvc_validate_v41_norm(a, e); }
static int validate_quant_insert(const void *a, kvc_error *e) { return kvc_validate_v41_insert(a, 1, e); }
static int validate_plain_insert(const void *a, kvc_error *e) { return kvc_validate_v41_insert(a, 0, e); }

static int negative_size(kvc_error *err, const char *what, int64_t value) {
    return kvc_fail(err, KVC_ERR_PARAM, "%s = %lld is negative", what, (long long)value);
}

static int py_v4_save(const kvc_v4_save_args *a, kvc_error *err) {
    if (a->num_tokens < 0) return negative_size(err, "num_tokens", a->num_tokens);
    int64_t T = a->num_tokens, W = (int64_t)kvc_v4_coff(a->compress_ratio) * a->head_dim;
    wire_call c = {.params = cJSON_CreateObject()};
    param(&c, "compress_ratio", a->compress_ratio);
    param(&c, "head_dim", a->head_dim);
    add(&c, "kv", "<f4", 4, a->kv, 0, 2, T, W);
    add(&c, "score", "<f4", 4, a->score, 0, 2, T, W);
    add(&c, "ape", "<f4", 4, a->ape, 0, 2, a->compress_ratio, W);
    add(&c, "positions", "<i8", 8, a->positions, 0, 1, T, 0);
    add(&c, "slot_mapping", "<i8", 8, a->slot_mapping, 0, 1, T, 0);
    add_paged(&c, "state_cache", "<f4", 4, &a->state_cache, 1);
    return call_worker(STAGE_SAVE, &c, kvc_geometry_v4_save(a), a, validate_save, err);
}

static int py_v4_compress(const kvc_v4_compress_args *a, kvc_error *err) {
    if (a->num_tokens < 0) return negative_size(err, "num_tokens", a->num_tokens);
    if (a->num_requests < 0 || a->max_blocks < 0) return negative_size(err, "num_requests or max_blocks", a->num_requests < 0 ? a->num_requests : a->max_blocks);
    int64_t T = a->num_tokens;
    wire_call c = {.params = cJSON_CreateObject()};
    param(&c, "compress_ratio", a->compress_ratio);
    param(&c, "head_dim", a->head_dim);
    param_float(&c, "eps", a->eps);
    cJSON_AddStringToObject(c.params, "cache_dtype", a->head_dim == 128 ? "fp8_indexer" : "fp8_ds_mla");
    add_paged(&c, "state_cache", "<f4", 4, &a->state_cache, 0);
    add(&c, "block_table", "<i4", 4, a->block_table, 0, 2, a->num_requests, a->max_blocks);
    add(&c, "token_to_req", "<i4", 4, a->token_to_req, 0, 1, T, 0);
    add(&c, "positions", "<i8", 8, a->positions, 0, 1, T, 0);
    add(&c, "slot_mapping", "<i8", 8, a->slot_mapping, 0, 1, T, 0);
    add(&c, "kv_slot_mapping", "<i8", 8, a->kv_slot_mapping, 0, 1, T, 0);
    add(&c, "norm_weight", "<f4", 4, a->norm_weight, 0, 1, a->head_dim, 0);
    add(&c, "cos_sin", "<f4", 4, a->cos_sin, 0, 2, a->cos_sin_rows, 64);
    add_paged(&c, "kv_cache", "|u1", 1, &a->kv_cache, 1);
    return call_worker(STAGE_COMPRESS, &c, kvc_geometry_v4_compress(a), a, validate_compress, err);
}

static int py_v41_norm(const kvc_v41_norm_args *a, kvc_error *err) {
    if (a->num_tokens < 0) return negative_size(err, "num_tokens", a->num_tokens);
    int64_t T = a->num_tokens;
    int ring = a->compress_ratio == 2;
    wire_call c = {.params = cJSON_CreateObject()};
    param(&c, "compress_ratio", a->compress_ratio);
    param(&c, "head_dim", KVC_V41_HEAD_DIM);
    param_float(&c, "eps", a->eps);
    add(&c, "kv_score", "<f4", 4, a->kv_score, 0, 2, T, 512 * (ring ? 2 : 1));
    add(&c, "positions", "<i8", 8, a->positions, 0, 1, T, 0);
    add(&c, "slot_mapping", "<i8", 8, a->slot_mapping, 0, 1, T, 0);
    add(&c, "norm_weight", "<u2", 2, a->norm_weight, 0, 1, 512, 0);
    add(&c, "latent", "<u2", 2, a->latent, 1, 2, T, 512);
    if (ring) {
        if (a->num_requests < 0) return negative_size(err, "num_requests", a->num_requests);
        add_paged(&c, "state_cache", "<f4", 4, &a->state_cache, 1);
        add(&c, "query_start_loc", "<i4", 4, a->query_start_loc, 0, 1, a->num_requests + 1, 0);
        add(&c, "token_to_req", "<i4", 4, a->token_to_req, 0, 1, T, 0);
    }
    return call_worker(STAGE_NORM, &c, kvc_geometry_v41_norm(a), a, validate_norm, err);
}

static const char *cache_dtype_name(kvc_cache_dtype d) {
    switch (d) {
    case KVC_CACHE_FP8_DS_MLA: return "fp8_ds_mla";
    case KVC_CACHE_FP8_INDEXER: return "fp8_indexer";
    case KVC_CACHE_BF16: return "bf16";
    case KVC_CACHE_FP8_E4M3: return "fp8_e4m3";
    }
    return "unknown";
}

static int py_v41_insert(const kvc_v41_insert_args *a, kvc_error *err, int stage) {
    if (a->num_tokens < 0) return negative_size(err, "num_tokens", a->num_tokens);
    int64_t T = a->num_tokens;
    wire_call c = {.params = cJSON_CreateObject()};
    param(&c, "compress_ratio", a->compress_ratio);
    param(&c, "head_dim", KVC_V41_HEAD_DIM);
    cJSON_AddStringToObject(c.params, "cache_dtype", cache_dtype_name(a->cache_dtype));
    add(&c, "latent", "<u2", 2, a->latent, 0, 2, T, 512);
    add(&c, "positions", "<i8", 8, a->positions, 0, 1, T, 0);
    add(&c, "slot_mapping", "<i8", 8, a->slot_mapping, 0, 1, T, 0);
    add(&c, "cos_sin", "<f4", 4, a->cos_sin, 0, 2, a->cos_sin_rows, 64);
    if (a->cache_dtype == KVC_CACHE_BF16) add_paged(&c, "kv_cache", "<u2", 2, &a->kv_cache, 1);
    else add_paged(&c, "kv_cache", "|u1", 1, &a->kv_cache, 1);
    if (a->cache_dtype == KVC_CACHE_FP8_E4M3) add(&c, "fp8_scale", "<f4", 4, &a->fp8_scale, 0, 1, 1, 0)->by_value = 1;
    return call_worker(stage, &c, kvc_geometry_v41_insert(a, stage == STAGE_QUANT_INSERT), a, stage == STAGE_QUANT_INSERT ? validate_quant_insert : validate_plain_insert, err);
}

static int py_v41_quant_insert(const kvc_v41_insert_args *a, kvc_error *err) { return py_v41_insert(a, err, STAGE_QUANT_INSERT); }
static int py_v41_plain_insert(const kvc_v41_insert_args *a, kvc_error *err) { return py_v41_insert(a, err, STAGE_PLAIN_INSERT); }

void kvc_pyworker_warm_up(void) {
    worker_process *w = &bridge.w;
    char error[600];
    unsigned offered;
    if (!bridge.spec[0] || (w->pid && w->owner == getpid())) return;
    if (w->pid) forget_worker(w);
    if (start_worker(w, error, sizeof error) || hello(w, &offered, error, sizeof error)) end_worker(w, 1);
}

const kvc_backend *kvc_pyworker_backend(const char *spec, char *error, size_t error_size) {
    if (!spec[0] || !strchr(spec, ':')) {
        snprintf(error, error_size, "a Python candidate is py:FILE.py:FUNCTION or py:MODULE:FUNCTION, not 'py:%s'", spec);
        return NULL;
    }
    if (bridge.w.pid) end_worker(&bridge.w, 1);
    snprintf(bridge.spec, sizeof bridge.spec, "%s", spec);
    worker_process w;
    unsigned offered = 0;
    if (start_worker(&w, error, error_size)) return NULL;
    int rc = hello(&w, &offered, error, error_size);
    end_worker(&w, 1);
    if (rc) return NULL;
    snprintf(bridge.name, sizeof bridge.name, "py:%s", spec);
    bridge.backend = (kvc_backend){.name = bridge.name};
    if (offered & 1u << STAGE_SAVE) bridge.backend.v4_save_partial_states = py_v4_save;
    if (offered & 1u << STAGE_COMPRESS) bridge.backend.v4_compress = py_v4_compress;
    if (offered & 1u << STAGE_NORM) bridge.backend.v41_save_compress_norm = py_v41_norm;
    if (offered & 1u << STAGE_QUANT_INSERT) bridge.backend.v41_rope_quant_insert = py_v41_quant_insert;
    if (offered & 1u << STAGE_PLAIN_INSERT) bridge.backend.v41_rope_plain_insert = py_v41_plain_insert;
    return &bridge.backend;
}

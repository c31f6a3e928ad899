/* Team masters: see teams.h. */
#include "harness/fuzz/teams.h"

#include <omp.h>
#include <pthread.h>
#include <unistd.h>

typedef struct {
    pthread_mutex_t call;     /* held by a caller for its whole job: one job at a time */
    pthread_mutex_t lock;     /* guards job, argument, pending */
    pthread_cond_t posted, finished;
    void (*job)(void *);
    void *argument;
    int pending;              /* 1 from posting a job until it returned */
    int threads;
    pid_t owner;              /* the process whose thread this is: a forked child starts its own */
} team_master;

static team_master masters[KVC_TEAM_MASTERS_MAX + 1];
static pthread_mutex_t starting = PTHREAD_MUTEX_INITIALIZER;

static void *master_loop(void *p) {
    team_master *m = p;
    omp_set_num_threads(m->threads);
    pthread_mutex_lock(&m->lock);
    for (;;) {
        while (!m->pending) pthread_cond_wait(&m->posted, &m->lock);
        pthread_mutex_unlock(&m->lock);
        m->job(m->argument);
        pthread_mutex_lock(&m->lock);
        m->pending = 0;
        pthread_cond_signal(&m->finished);
    }
    return NULL;
}

/* The master of `threads`, started if this process has none yet; NULL
 * when its thread cannot be started. */
static team_master *master_for(int threads) {
    team_master *m = &masters[threads];
    pid_t self = getpid();
    pthread_mutex_lock(&starting);
    if (m->owner != self) {
        /* Fresh, or copied by fork() without its thread: whatever a
         * thread of the parent held is released by starting over. */
        pthread_mutex_init(&m->call, NULL);
        pthread_mutex_init(&m->lock, NULL);
        pthread_cond_init(&m->posted, NULL);
        pthread_cond_init(&m->finished, NULL);
        m->pending = 0;
        m->threads = threads;
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&thread, &attr, master_loop, m) == 0) m->owner = self;
        pthread_attr_destroy(&attr);
    }
    team_master *started = m->owner == self ? m : NULL;
    pthread_mutex_unlock(&starting);
    return started;
}

int kvc_run_on_team_master(int threads, void (*job)(void *), void *argument) {
    if (threads < 2 || threads > KVC_TEAM_MASTERS_MAX) return -1;
    team_master *m = master_for(threads);
    if (!m) return -1;
    pthread_mutex_lock(&m->call);
    pthread_mutex_lock(&m->lock);
    m->job = job;
    m->argument = argument;
    m->pending = 1;
    pthread_cond_signal(&m->posted);
    while (m->pending) pthread_cond_wait(&m->finished, &m->lock);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->call);
    return 0;
}

/* ---- a backend whose stages run on a master ---------------------------- */

enum { SAVE, COMPRESS, NORM, QUANT_INSERT, PLAIN_INSERT };

typedef struct {
    const kvc_backend *real;
    int stage;
    const void *args;
    kvc_error *err;
    int rc;
} stage_call;

static void call_stage(void *p) {
    stage_call *s = p;
    const kvc_backend *b = s->real;
    switch (s->stage) {
    case SAVE: s->rc = b->v4_save_partial_states(s->args, s->err); break;
    case COMPRESS: s->rc = b->v4_compress(s->args, s->err); break;
    case NORM: s->rc = b->v41_save_compress_norm(s->args, s->err); break;
    case QUANT_INSERT: s->rc = b->v41_rope_quant_insert(s->args, s->err); break;
    default: s->rc = b->v41_rope_plain_insert(s->args, s->err); break;
    }
}

/* The backend table has no context pointer: the forwarding is per thread. */
static _Thread_local struct {
    const kvc_backend *real;
    int threads;
} forwarding;

static int forward(int stage, const void *args, kvc_error *err) {
    stage_call s = {.real = forwarding.real, .stage = stage, .args = args, .err = err};
    if (kvc_run_on_team_master(forwarding.threads, call_stage, &s)) call_stage(&s);
    return s.rc;
}

static int forward_save(const kvc_v4_save_args *a, kvc_error *e) { return forward(SAVE, a, e); }
static int forward_compress(const kvc_v4_compress_args *a, kvc_error *e) { return forward(COMPRESS, a, e); }
static int forward_norm(const kvc_v41_norm_args *a, kvc_error *e) { return forward(NORM, a, e); }
static int forward_quant(const kvc_v41_insert_args *a, kvc_error *e) { return forward(QUANT_INSERT, a, e); }
static int forward_plain(const kvc_v41_insert_args *a, kvc_error *e) { return forward(PLAIN_INSERT, a, e); }

const kvc_backend *kvc_team_backend(const kvc_backend *real, int threads, kvc_backend *proxy) {
    if (threads < 2) return real;
    forwarding.real = real;
    forwarding.threads = threads;
    /* A stage the candidate lacks stays missing. */
    *proxy = (kvc_backend){
        .name = real->name,
        .v4_save_partial_states = real->v4_save_partial_states ? forward_save : NULL,
        .v4_compress = real->v4_compress ? forward_compress : NULL,
        .v41_save_compress_norm = real->v41_save_compress_norm ? forward_norm : NULL,
        .v41_rope_quant_insert = real->v41_rope_quant_insert ? forward_quant : NULL,
        .v41_rope_plain_insert = real->v41_rope_plain_insert ? forward_plain : NULL,
    };
    return proxy;
}

/* Team masters (harness/fuzz/teams.c): each team size started by a
 * thread of its own, whose OpenMP pool is never shrunk. */
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_support.h"

#include "harness/fuzz/teams.h"
#include "kvcmp/validate.h"

typedef struct {
    pthread_t caller;
    int ran_elsewhere, max_threads, team_size;
    pid_t members[KVC_TEAM_MASTERS_MAX];
} team_seen;

/* Where the job ran and the team its parallel region got. */
static void observe_team(void *p) {
    team_seen *s = p;
    s->ran_elsewhere = !pthread_equal(pthread_self(), s->caller);
    s->max_threads = omp_get_max_threads();
#pragma omp parallel
    {
#pragma omp single
        s->team_size = omp_get_num_threads();
        s->members[omp_get_thread_num()] = gettid();
    }
}

static team_seen team_of(int threads) {
    team_seen s = {.caller = pthread_self()};
    cr_assert_eq(kvc_run_on_team_master(threads, observe_team, &s), 0, "no master for %d threads", threads);
    return s;
}

Test(teams, a_job_runs_on_its_masters_thread_in_a_team_of_that_size) {
    for (int threads = 2; threads <= 8; threads += 3) {
        team_seen s = team_of(threads);
        cr_expect(s.ran_elsewhere, "%d threads: the job ran on the caller's thread", threads);
        cr_expect_eq(s.max_threads, threads);
        cr_expect_eq(s.team_size, threads);
    }
}

/* The point of the masters: a smaller team in between does not make the
 * larger team's threads exit (they would come back with new ids). */
Test(teams, a_smaller_team_in_between_keeps_the_larger_teams_threads) {
    team_seen first = team_of(7);
    team_of(3);
    team_of(2);
    team_seen again = team_of(7);
    for (int i = 0; i < 7; i++) cr_expect_eq(again.members[i], first.members[i], "team member %d was started again", i);
}

Test(teams, counts_without_a_master_are_refused) {
    team_seen s = {.caller = pthread_self()};
    cr_expect_eq(kvc_run_on_team_master(1, observe_team, &s), -1);
    cr_expect_eq(kvc_run_on_team_master(0, observe_team, &s), -1);
    cr_expect_eq(kvc_run_on_team_master(KVC_TEAM_MASTERS_MAX + 1, observe_team, &s), -1);
    cr_expect_eq(s.max_threads, 0, "a refused job ran");
    cr_expect_eq(kvc_run_on_team_master(KVC_TEAM_MASTERS_MAX, observe_team, &s), 0);
    cr_expect_eq(s.team_size, KVC_TEAM_MASTERS_MAX);
}

/* Where no thread can be started, the caller is told to run the job.
 * In a child (RLIMIT_NPROC binds only a user other than root), with the
 * limit at 0 every clone() fails. */
Test(teams, a_master_that_cannot_start_is_refused) {
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        alarm(20);
        struct rlimit none = {0, 0};
        if (setrlimit(RLIMIT_NPROC, &none) != 0 || (getuid() == 0 && setuid(65534) != 0)) _exit(2);
        team_seen s = {.caller = pthread_self()};
        int refused = kvc_run_on_team_master(6, observe_team, &s) == -1 && s.max_threads == 0;
        _exit(refused ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 2, "the child could not drop its process limit (status %d)", status);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a master without a thread took the job (status %d)", status);
}

/* A child forked after a master started has the master's table but not
 * its thread: it must start its own instead of waiting for ever. */
Test(teams, a_forked_child_starts_masters_of_its_own) {
    team_of(4);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        alarm(20);   /* a wait on the parent's master ends the child, failing the test, not hanging it */
        team_seen s = {.caller = pthread_self()};
        int ok = kvc_run_on_team_master(4, observe_team, &s) == 0 && s.ran_elsewhere && s.team_size == 4;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's call failed (status %d)", status);
}

/* ---- the forwarding backend ---------------------------------------------- */

static pthread_t test_thread;
static int stage_threads, stage_elsewhere;

static int save_seeing_threads(const kvc_v4_save_args *a, kvc_error *err) {
    (void)a;
    stage_threads = omp_get_max_threads();
    stage_elsewhere = !pthread_equal(pthread_self(), test_thread);
    return kvc_fail(err, KVC_ERR_METADATA, "planted error %d", 7);
}
static int compress_stage(const kvc_v4_compress_args *a, kvc_error *err) { (void)a; (void)err; return 11; }
static int norm_stage(const kvc_v41_norm_args *a, kvc_error *err) { (void)a; (void)err; return 12; }
static int quant_stage(const kvc_v41_insert_args *a, kvc_error *err) { (void)a; (void)err; return 13; }
static int plain_stage(const kvc_v41_insert_args *a, kvc_error *err) { (void)a; (void)err; return 14; }

Test(teams, the_team_backend_calls_each_stage_on_the_master_with_its_result) {
    const kvc_backend real = {"planted", save_seeing_threads, compress_stage, norm_stage, quant_stage, plain_stage};
    kvc_backend proxy;
    test_thread = pthread_self();
    const kvc_backend *b = kvc_team_backend(&real, 5, &proxy);
    cr_assert_eq(b, &proxy);
    cr_expect_str_eq(b->name, "planted");
    kvc_error err = {0};
    cr_expect_eq(b->v4_save_partial_states(NULL, &err), KVC_ERR_METADATA);
    cr_expect_str_eq(err.message, "planted error 7");
    cr_expect(stage_elsewhere, "the stage ran on the caller's thread");
    cr_expect_eq(stage_threads, 5);
    cr_expect_eq(b->v4_compress(NULL, &err), 11);
    cr_expect_eq(b->v41_save_compress_norm(NULL, &err), 12);
    cr_expect_eq(b->v41_rope_quant_insert(NULL, &err), 13);
    cr_expect_eq(b->v41_rope_plain_insert(NULL, &err), 14);
}

Test(teams, the_team_backend_keeps_missing_stages_missing) {
    const kvc_backend real = {.name = "partial", .v41_rope_plain_insert = plain_stage};
    kvc_backend proxy;
    const kvc_backend *b = kvc_team_backend(&real, 3, &proxy);
    cr_expect_null(b->v4_save_partial_states);
    cr_expect_null(b->v4_compress);
    cr_expect_null(b->v41_save_compress_norm);
    cr_expect_null(b->v41_rope_quant_insert);
    cr_expect_eq(b->v41_rope_plain_insert(NULL, NULL), 14);
}

Test(teams, one_thread_calls_the_backend_directly) {
    const kvc_backend real = {.name = "planted", .v41_rope_plain_insert = plain_stage};
    kvc_backend proxy;
    cr_expect_eq(kvc_team_backend(&real, 1, &proxy), &real);
}

/* More threads than masters: the stage runs on the caller's thread. */
Test(teams, a_count_without_a_master_runs_the_stage_on_the_callers_thread) {
    const kvc_backend real = {.name = "planted", .v4_save_partial_states = save_seeing_threads};
    kvc_backend proxy;
    test_thread = pthread_self();
    stage_elsewhere = 1;
    kvc_error err = {0};
    cr_expect_eq(kvc_team_backend(&real, KVC_TEAM_MASTERS_MAX + 1, &proxy)->v4_save_partial_states(NULL, &err), KVC_ERR_METADATA);
    cr_expect(!stage_elsewhere, "the stage ran on another thread");
}

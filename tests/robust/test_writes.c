/* Writes stay inside: a symbolic link planted where kvcmp
 * writes (--json and its temporary's name, --junit, report --out, bench
 * --json, a case name or case.json under gen --out) never gets the file
 * it points to written: the command refuses it, naming it, or replaces
 * the link with a regular file.  A full disk (RLIMIT_FSIZE: EFBIG, as
 * ENOSPC) is a non-zero exit naming the file, with the old file intact.
 * gen into a folder that holds its cases replaces each whole (no stale
 * .out or .got files); a gen that fails or is killed leaves no torn case. */
#include "tests/robust/robust_support.h"

#include "common/atomic_file.h"
#include "harness/bench/output.h"
#include "harness/report/junit.h"
#include "harness/report/report.h"
#include "harness/report/run_info.h"

#define VICTIM_TEXT "the linked file, which must stay as it is\n"

typedef struct {
    char dir[64];
    char victim[128];   /* outside every folder kvcmp is told to write to */
} planted;

static void plant_setup(planted *p) {
    support_temp_dir(p->dir, sizeof p->dir);
    snprintf(p->victim, sizeof p->victim, "%s/victim", p->dir);
    support_write_text(p->victim, VICTIM_TEXT);
}

static void plant_link(const planted *p, const char *at) { cr_assert_eq(symlink(p->victim, at), 0, "symlink %s: %s", at, strerror(errno)); }

static void expect_victim_untouched(const planted *p, const char *after) {
    char *text = support_read_file(p->victim);
    cr_expect_str_eq(text, VICTIM_TEXT, "%s wrote through the planted link", after);
    free(text);
}

static int is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static void expect_refused_link(const child_run *run, const char *path, const char *what) {
    cr_expect_neq(run->status, 0, "%s: a planted link is a failure\nstdout:\n%s\nstderr:\n%s", what, run->out, run->err);
    char message[600];
    snprintf(message, sizeof message, "%s: it is a symbolic link", path);
    if (strstr(run->err, message) == NULL) snprintf(message, sizeof message, "%s is a symbolic link", path);
    expect_text(run->err, message, what);
    expect_text(run->err, "remove it or give another path", what);
}

/* ---- the writer itself ---------------------------------------------------------- */

Test(writes, atomic_file_writes_whole_files_and_never_through_a_link) {
    planted p;
    plant_setup(&p);
    char path[256], error[4400], text[64];
    snprintf(path, sizeof path, "%s/out.json", p.dir);
    /* Links planted at the names of this process's first temporaries and
     * at the old fixed name PATH.partial-PID: each is skipped. */
    for (int n = 0; n < 4; n++) {
        char temp[300];
        snprintf(temp, sizeof temp, "%s/.out.json.partial-%ld-%d", p.dir, (long)getpid(), n);
        plant_link(&p, temp);
    }
    char legacy[300];
    snprintf(legacy, sizeof legacy, "%s.partial-%ld", path, (long)getpid());
    plant_link(&p, legacy);
    cr_assert_eq(kvc_atomic_write_text(path, "{\"new\": 1}", error, sizeof error), 0, "%s", error);
    char *written = support_read_file(path);
    cr_expect_str_eq(written, "{\"new\": 1}\n");
    free(written);
    expect_victim_untouched(&p, "kvc_atomic_write_text");
    cr_expect(is_link(legacy), "the planted link was removed or replaced");
    /* The --json writer, with a link at its old temporary's name. */
    snprintf(path, sizeof path, "%s/summary.json", p.dir);
    snprintf(legacy, sizeof legacy, "%s.partial-%ld", path, (long)getpid());
    plant_link(&p, legacy);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "cases", 3);
    cr_assert_eq(kvc_write_json_file(path, root, error, sizeof error), 0, "%s", error);
    cJSON *back = read_summary(path);
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(back, "cases")->valueint, 3);
    cJSON_Delete(back);
    expect_victim_untouched(&p, "kvc_write_json_file");
    /* The target itself a link: refused, the link and its file left as they are. */
    snprintf(path, sizeof path, "%s/linked.json", p.dir);
    plant_link(&p, path);
    cr_expect_eq(kvc_atomic_write_text(path, "x", error, sizeof error), -1);
    snprintf(text, sizeof text, "linked.json: it is a symbolic link");
    cr_expect(strstr(error, text) && strstr(error, "remove it or give another path"), "%s", error);
    cr_expect(is_link(path));
    expect_victim_untouched(&p, "a write to a link");
    /* A folder, a missing folder, a name too long: each named, nothing created. */
    cr_expect_eq(kvc_atomic_write_text(p.dir, "x", error, sizeof error), -1);
    cr_expect(strstr(error, "Is a directory"), "%s", error);
    snprintf(path, sizeof path, "%s/no/such.json", p.dir);
    cr_expect_eq(kvc_atomic_write_text(path, "x", error, sizeof error), -1);
    cr_expect(strstr(error, "no/such.json: No such file or directory"), "%s", error);
    char *long_path = malloc(4101);
    memset(long_path, 'a', 4100);
    long_path[4100] = 0;
    cr_expect_eq(kvc_atomic_write_text(long_path, "x", error, sizeof error), -1);
    cr_expect(strstr(error, "File name too long"), "%s", error);
    free(long_path);
    /* A bare name: its temporary in the current directory. */
    cr_assert_eq(chdir(p.dir), 0);
    cr_expect_eq(kvc_atomic_write_text("bare.json", "{}", error, sizeof error), 0, "%s", error);
    cr_expect(support_file_exists("bare.json"));
    support_remove_tree(p.dir);
}

/* A candidate closed stdout and stderr and keeps printing: the files
 * kvcmp writes never take descriptors 1 and 2. */
Test(writes, atomic_file_never_takes_stdout_or_stderr) {
    char dir[64], path[128], error[4400];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    close(STDOUT_FILENO);
    close(STDERR_FILENO);
    kvc_atomic_file a;
    int rc = kvc_atomic_open(&a, path, error, sizeof error);
    int fd = a.fd;
    ssize_t stray = write(STDOUT_FILENO, "a stray log line\n", 17) + write(STDERR_FILENO, "another\n", 8);
    if (rc == 0) {
        fputs("{}", a.f);
        rc = kvc_atomic_commit(&a, error, sizeof error);
    }
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    cr_assert_eq(rc, 0, "%s", error);
    cr_expect_gt(fd, STDERR_FILENO, "the file took descriptor %d", fd);
    cr_expect_eq(stray, -2, "the stray writes found an open descriptor");
    char *text = support_read_file(path);
    cr_expect_str_eq(text, "{}");
    free(text);
    support_remove_tree(dir);
}

Test(writes, atomic_file_abort_and_a_failed_rename_leave_the_old_file) {
    char dir[64], path[128], error[4400];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.md", dir);
    support_write_text(path, "old\n");
    kvc_atomic_file a;
    cr_assert_eq(kvc_atomic_open(&a, path, error, sizeof error), 0, "%s", error);
    fputs("new\n", a.f);
    kvc_atomic_abort(&a);
    char *text = support_read_file(path);
    cr_expect_str_eq(text, "old\n");
    free(text);
    cr_expect_eq(entries_in(dir, NULL), 1, "the temporary was left");
    /* The target turned into a non-empty folder meanwhile: the rename fails, named. */
    snprintf(path, sizeof path, "%s/later", dir);
    cr_assert_eq(kvc_atomic_open(&a, path, error, sizeof error), 0, "%s", error);
    cr_assert_eq(mkdir(path, 0700), 0);
    char inner[160];
    snprintf(inner, sizeof inner, "%s/inside", path);
    support_write_text(inner, "x");
    cr_expect_eq(kvc_atomic_commit(&a, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot write ") && strstr(error, "/later: Is a directory"), "%s", error);
    cr_expect_eq(entries_in(dir, NULL), 2, "the temporary was left");
    support_remove_tree(dir);
}

/* The file-size limit is lowered in this test's own process (Criterion
 * runs each test in a process of its own) and raised again before it ends. */
Test(writes, atomic_file_on_a_full_disk_reports_it_and_keeps_the_old_file) {
    char dir[64], path[128], error[4400];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    support_write_text(path, "old\n");
    char big[8192];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    struct rlimit saved, limited;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    limited = saved;
    limited.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &limited), 0);
    int rc = kvc_atomic_write_text(path, big, error, sizeof error);
    setrlimit(RLIMIT_FSIZE, &saved);
    cr_expect_eq(rc, -1);
    cr_expect(strstr(error, "summary.json: File too large"), "%s", error);
    char *text = support_read_file(path);
    cr_expect_str_eq(text, "old\n", "the old file was cut short");
    free(text);
    cr_expect_eq(entries_in(dir, NULL), 1, "the temporary was left");
    support_remove_tree(dir);
}

static void write_old(const char *dir, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    support_write_text(path, "old\n");
}

static void expect_old(const char *dir, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = support_read_file(path);
    cr_expect_str_eq(text, "old\n", "%s was cut short or replaced by a failed write", name);
    free(text);
}

/* Every writer, in this process, under a 64-byte file-size limit: each
 * fails, and each old file stays whole (their messages go to /dev/null). */
Test(writes, every_writer_on_a_full_disk_fails_and_keeps_the_old_file) {
    char dir[64], path[256], error[4400];
    support_temp_dir(dir, sizeof dir);
    const char *names[] = {"parity.md", "parity.html", "parity.json", "results.xml", "summary.json", "bench.json", "bench.csv", "x.npy"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) write_old(dir, names[i]);
    kvc_parity_report parity;
    memset(&parity, 0, sizeof parity);
    kvc_junit *junit = kvc_junit_new("kvcmp");
    kvc_junit_pass(junit, "v41.rope_quant_insert", "a case with a long enough name to pass 64 bytes", 0.5);
    bench_run *run = calloc(1, sizeof *run);
    kvc_array array;
    int64_t shape[1] = {64};
    cr_assert_eq(kvc_array_alloc(&array, KVC_DT_F4, 1, shape), 0);
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    char case_dir[128];
    snprintf(case_dir, sizeof case_dir, "%s/case", dir);

    fflush(stderr);
    int saved_stderr = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    struct rlimit saved, limited;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    limited = saved;
    limited.rlim_cur = 64;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &limited), 0);
    int parity_rc = kvc_render_parity(&parity, dir);
    snprintf(path, sizeof path, "%s/results.xml", dir);
    int junit_rc = kvc_junit_write(junit, path, error, sizeof error);
    char junit_error[4400];
    snprintf(junit_error, sizeof junit_error, "%s", error);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "what", "a summary longer than sixty-four bytes, which the limit cuts");
    int json_rc = kvc_write_json_file(path, root, error, sizeof error);
    snprintf(path, sizeof path, "%s/bench.json", dir);
    int bench_json_rc = bench_write_json(path, run);
    snprintf(path, sizeof path, "%s/bench.csv", dir);
    int bench_csv_rc = bench_write_csv(path, run);
    snprintf(path, sizeof path, "%s/x.npy", dir);
    int npy_rc = kvc_npy_write(path, &array, error, sizeof error);
    int case_rc = kvc_case_save(case_dir, &c, error, sizeof error);
    setrlimit(RLIMIT_FSIZE, &saved);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    close(null);

    cr_expect_eq(parity_rc, -1, "report parity said it wrote");
    cr_expect_eq(junit_rc, -1);
    cr_expect(strstr(junit_error, "results.xml: File too large (check the free space there"), "%s", junit_error);
    cr_expect_eq(json_rc, -1);
    cr_expect_eq(bench_json_rc, 1);
    cr_expect_eq(bench_csv_rc, 1);
    cr_expect_eq(npy_rc, -1);
    cr_expect_eq(case_rc, -1);
    cr_expect(strstr(error, "/case.json: File too large"), "%s", error);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) expect_old(dir, names[i]);
    int hidden;
    cr_expect_eq(entries_in(dir, &hidden), (int)(sizeof names / sizeof *names), "a case or another file was left");
    cr_expect_eq(hidden, 0, "a temporary was left");
    kvc_case_free(&c);
    kvc_array_free(&array);
    free(run);
    kvc_junit_free(junit);
    support_remove_tree(dir);
}

Test(writes, plain_names) {
    const char *plain[] = {"kv_cache", "kv_cache.out", "x-1", "a.b.c"};
    const char *not_plain[] = {"", ".", "..", "../../x", "a/b", ".hidden", "a..b", "tab\tname", "del\x7f", "/abs"};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) cr_expect(kvc_plain_name(plain[i]), "%s", plain[i]);
    for (size_t i = 0; i < sizeof not_plain / sizeof *not_plain; i++) cr_expect_not(kvc_plain_name(not_plain[i]), "%s", not_plain[i]);
    char long_name[300];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    cr_expect_not(kvc_plain_name(long_name));
    char error[64] = "cannot write x: reason";
    kvc_error_hint(error, sizeof error, "a hint far too long to fit in the rest of this buffer at all");
    cr_expect_eq(strncmp(error, "cannot write x: reason (a hint", 30), 0, "%s", error);
    cr_expect_eq(strlen(error), sizeof error - 1);
}

/* ---- case directories ----------------------------------------------------------- */

Test(writes, case_save_refuses_names_that_leave_the_case_and_links) {
    planted p;
    plant_setup(&p);
    char path[256], error[1024];
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    snprintf(path, sizeof path, "%s/case", p.dir);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    /* A bad tensor name over an existing case: refused, the old case intact. */
    kvc_case bad;
    cr_assert_eq(kvc_case_copy(&bad, &c), 0);
    snprintf(bad.tensors[0].name, sizeof bad.tensors[0].name, "../../x\n");
    cr_expect_eq(kvc_case_save(path, &bad, error, sizeof error), -1);
    cr_expect(strstr(error, "tensor name '../../x?' is not a plain file name") && strstr(error, "rename the tensor"), "%s", error);
    kvc_case loaded;
    cr_expect_eq(kvc_case_load(path, &loaded, error, sizeof error), 0, "%s", error);
    cr_expect_eq(loaded.num_tensors, c.num_tensors);
    kvc_case_free(&loaded);
    kvc_case_free(&bad);
    int hidden;
    cr_expect_eq(entries_in(p.dir, &hidden), 2);
    cr_expect_eq(hidden, 0, "a temporary was left");
    /* A case name that is not plain. */
    char saved[512];
    cr_expect_eq(kvc_case_save_new(p.dir, "../escaped", &c, saved, sizeof saved, error, sizeof error), -1);
    cr_expect(strstr(error, "case name '../escaped' is not a plain file name"), "%s", error);
    /* A link, a file and a folder of other things where the case goes: refused. */
    char elsewhere[256];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", p.dir);
    cr_assert_eq(mkdir(elsewhere, 0700), 0);
    snprintf(path, sizeof path, "%s/link", p.dir);
    cr_assert_eq(symlink(elsewhere, path), 0);
    cr_expect_eq(kvc_case_save(path, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "it is a symbolic link"), "%s", error);
    cr_expect_eq(entries_in(elsewhere, NULL), 0, "the case was written through the link");
    cr_expect_eq(kvc_case_save(p.victim, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "victim: it is not a directory"), "%s", error);
    expect_victim_untouched(&p, "kvc_case_save");
    snprintf(path, sizeof path, "%s/elsewhere/sub", p.dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/elsewhere/case.json", p.dir);
    support_write_text(path, "{}");
    cr_expect_eq(kvc_case_save(elsewhere, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "a directory that holds something besides a case"), "%s", error);
    cr_expect_eq(entries_in(elsewhere, NULL), 2);
    cr_expect_eq(kvc_case_save("/proc", &c, error, sizeof error), -1);
    /* A directory that cannot be renamed (the current one): the failure is named, nothing left. */
    char empty[256];
    snprintf(empty, sizeof empty, "%s/empty", p.dir);
    cr_assert_eq(mkdir(empty, 0700), 0);
    cr_assert_eq(chdir(empty), 0);
    cr_expect_eq(kvc_case_save(".", &c, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot replace ./."), "%s", error);
    cr_expect_eq(entries_in(".", NULL), 0, "the partial case was left");
    kvc_case_free(&c);
    support_remove_tree(p.dir);
}

Test(writes, case_save_replaces_an_existing_case_whole) {
    planted p;
    plant_setup(&p);
    char path[256], file[300], error[1024];
    kvc_case c;
    support_make_case("v41.rope_quant_insert", KVC_FAM_NORMAL, 1, 0, &c);
    snprintf(path, sizeof path, "%s/case", p.dir);
    cr_assert_eq(mkdir(path, 0700), 0);   /* an empty directory is taken */
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    int files = entries_in(path, NULL);
    /* Stale results and a planted case.json link: gone after the next save. */
    snprintf(file, sizeof file, "%s/kv_cache.got.npy", path);
    support_write_text(file, "stale");
    snprintf(file, sizeof file, "%s/case.json", path);
    cr_assert_eq(unlink(file), 0);
    plant_link(&p, file);
    cr_assert_eq(kvc_case_save(path, &c, error, sizeof error), 0, "%s", error);
    cr_expect_eq(entries_in(path, NULL), files, "a file of the old case stayed");
    cr_expect_not(is_link(file), "case.json is still the planted link");
    expect_victim_untouched(&p, "kvc_case_save");
    kvc_case loaded;
    cr_expect_eq(kvc_case_load(path, &loaded, error, sizeof error), 0, "%s", error);
    kvc_case_free(&loaded);
    int hidden;
    cr_expect_eq(entries_in(p.dir, &hidden), 2);
    cr_expect_eq(hidden, 0, "the old case or a temporary was left");
    kvc_case_free(&c);
    support_remove_tree(p.dir);
}

/* ---- the commands ---------------------------------------------------------------- */

Test(writes, fuzz_json_and_junit_links_are_refused, .timeout = 60) {
    planted p;
    plant_setup(&p);
    char json[256], junit[256], fine[256];
    snprintf(json, sizeof json, "%s/summary.json", p.dir);
    snprintf(junit, sizeof junit, "%s/results.xml", p.dir);
    snprintf(fine, sizeof fine, "%s/fine.xml", p.dir);
    plant_link(&p, json);
    char *with_json[] = {"fuzz", "--seed", "1", "--cases", "3", "--candidate", "ref", "--json", json, "--junit", fine, "--quiet", NULL};
    child_run run = run_kvcmp(with_json, NULL);
    expect_refused_link(&run, json, "fuzz --json");
    expect_victim_untouched(&p, "fuzz --json");
    cr_expect(is_link(json));
    free_child_run(&run);
    snprintf(json, sizeof json, "%s/fine.json", p.dir);
    plant_link(&p, junit);
    char *with_junit[] = {"fuzz", "--seed", "1", "--cases", "3", "--candidate", "ref", "--json", json, "--junit", junit, "--quiet", NULL};
    run = run_kvcmp(with_junit, NULL);
    expect_refused_link(&run, junit, "fuzz --junit");
    expect_victim_untouched(&p, "fuzz --junit");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

static void gen_cases(const char *out, const char *cases) {
    char *argv[] = {"gen", "--seed", "1", "--cases", (char *)cases, "--out", (char *)out, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_assert_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    free_child_run(&run);
}

Test(writes, report_parity_out_link_and_full_disk, .timeout = 60) {
    planted p;
    plant_setup(&p);
    char cases[256], out[256], md[300];
    snprintf(cases, sizeof cases, "%s/cases", p.dir);
    snprintf(out, sizeof out, "%s/report", p.dir);
    snprintf(md, sizeof md, "%s/parity.md", out);
    gen_cases(cases, "2");
    cr_assert_eq(mkdir(out, 0700), 0);
    plant_link(&p, md);
    char *argv[] = {"report", "parity", "--out", out, cases, NULL};
    child_run run = run_kvcmp(argv, NULL);
    expect_refused_link(&run, md, "report parity --out");
    cr_expect(strstr(run.out, "wrote") == NULL, "it says it wrote:\n%s", run.out);
    expect_victim_untouched(&p, "report parity --out");
    free_child_run(&run);
#ifndef KVC_COVERAGE
    /* A full disk: a non-zero exit naming the file; the old report stays whole. */
    cr_assert_eq(unlink(md), 0);
    support_write_text(md, "the old report\n");
    child_options opt = {.file_size_limit = 1024};
    run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    char message[400];
    snprintf(message, sizeof message, "kvcmp report: cannot write %s: File too large", md);
    expect_text(run.err, message, "stderr");
    cr_expect(strstr(run.out, "wrote") == NULL, "it says it wrote:\n%s", run.out);
    char *text = support_read_file(md);
    cr_expect_str_eq(text, "the old report\n");
    free(text);
    int hidden;
    entries_in(out, &hidden);
    cr_expect_eq(hidden, 0, "a temporary was left");
    free_child_run(&run);
#endif
    support_remove_tree(p.dir);
}

Test(writes, bench_json_and_csv_links_are_refused_before_the_run, .timeout = 60) {
    planted p;
    plant_setup(&p);
    char json[256], csv[256];
    snprintf(json, sizeof json, "%s/bench.json", p.dir);
    snprintf(csv, sizeof csv, "%s/bench.csv", p.dir);
    plant_link(&p, json);
    plant_link(&p, csv);
    char *argv[] = {"bench", "--json", json, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 2, "stderr:\n%s", run.err);
    expect_refused_link(&run, json, "bench --json");
    free_child_run(&run);
    char *csv_argv[] = {"bench", "--csv", csv, NULL};
    run = run_kvcmp(csv_argv, NULL);
    expect_refused_link(&run, csv, "bench --csv");
    expect_victim_untouched(&p, "bench");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

/* The file names of each case directory under dir, one line per case. */
static char *listing(const char *dir) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    struct dirent **cases;
    int n = scandir(dir, &cases, NULL, alphasort);
    cr_assert(n >= 0);
    for (int i = 0; i < n; i++) {
        if (cases[i]->d_name[0] != '.') {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dir, cases[i]->d_name);
            struct dirent **files;
            int m = scandir(path, &files, NULL, alphasort);
            fprintf(f, "%s:", cases[i]->d_name);
            for (int k = 0; k < m; k++) {
                if (files[k]->d_name[0] != '.') fprintf(f, " %s", files[k]->d_name);
                free(files[k]);
            }
            free(files);
            fputc('\n', f);
        }
        free(cases[i]);
    }
    free(cases);
    fclose(f);
    return text;
}

Test(writes, gen_twice_into_one_folder_leaves_no_stale_files, .timeout = 120) {
    planted p;
    plant_setup(&p);
    char out[256];
    snprintf(out, sizeof out, "%s/cases", p.dir);
    gen_cases(out, "12");
    char *first = listing(out);
    /* Files of an earlier run that the new cases do not have, and a planted case.json link. */
    DIR *d = opendir(out);
    struct dirent *e;
    int planted_links = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/kv_cache.got.npy", out, e->d_name);
        support_write_text(path, "stale");
        snprintf(path, sizeof path, "%s/%s/extra.out.npy", out, e->d_name);
        support_write_text(path, "stale");
        if (!planted_links++) {
            snprintf(path, sizeof path, "%s/%s/case.json", out, e->d_name);
            cr_assert_eq(unlink(path), 0);
            plant_link(&p, path);
        }
    }
    closedir(d);
    gen_cases(out, "12");
    char *second = listing(out);
    cr_expect_str_eq(second, first, "the second gen left files of the first");
    expect_victim_untouched(&p, "gen --out");
    int hidden;
    entries_in(out, &hidden);
    cr_expect_eq(hidden, 0, "an old case or a temporary was left");
    /* Every case passes replay against the reference: none is judged by stale results. */
    char *replay[] = {"replay", "--impl", "ref", "--quiet", out, NULL};
    child_run run = run_kvcmp(replay, NULL);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    free_child_run(&run);
    free(first);
    free(second);
    support_remove_tree(p.dir);
}

Test(writes, gen_refuses_a_planted_case_link, .timeout = 60) {
    planted p;
    plant_setup(&p);
    char out[256], elsewhere[256], link[512];
    snprintf(out, sizeof out, "%s/cases", p.dir);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", p.dir);
    cr_assert_eq(mkdir(out, 0700), 0);
    cr_assert_eq(mkdir(elsewhere, 0700), 0);
    char name[128];
    kvc_gen_config config = {.seed = 1, .invalid_per_mille = KVC_GEN_DEFAULT_INVALID_PER_MILLE};
    kvc_gen_case g;
    kvc_gen_make(&config, 0, &g);
    kvc_gen_case_name(1, 0, g.variant, name, sizeof name);
    kvc_gen_free(&g);
    snprintf(link, sizeof link, "%s/%s", out, name);
    cr_assert_eq(symlink(elsewhere, link), 0);
    char *argv[] = {"gen", "--seed", "1", "--cases", "1", "--out", out, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_text(run.err, "it is a symbolic link, which kvcmp never writes through", "stderr");
    expect_text(run.err, name, "stderr");
    cr_expect_eq(entries_in(elsewhere, NULL), 0, "the case was written through the link");
    cr_expect(is_link(link));
    free_child_run(&run);
    support_remove_tree(p.dir);
}

/* Every visible entry under dir is a whole case. */
static int whole_cases_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;   /* killed before the first case */
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096], error[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        kvc_case c;
        cr_expect_eq(kvc_case_load(path, &c, error, sizeof error), 0, "a torn case: %s", error);
        kvc_case_free(&c);
        n++;
    }
    closedir(d);
    return n;
}

Test(writes, gen_on_a_full_disk_or_killed_leaves_no_torn_case, .timeout = 120) {
#ifdef KVC_COVERAGE
    cr_skip_test("the file-size limit would truncate the coverage counters");
#endif
    char dir[64], out[256];
    support_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/cases", dir);
    gen_cases(out, "3");
    char *before = listing(out);
    /* Over the same cases with a 4 KiB file limit: the first tensor over it fails. */
    child_options opt = {.file_size_limit = 4096};
    char *argv[] = {"gen", "--seed", "1", "--cases", "6", "--out", out, NULL};
    child_run run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_text(run.err, ".npy: File too large", "stderr");
    expect_text(run.err, "kvcmp gen: cannot write ", "stderr");
    char *after = listing(out);
    cr_expect_str_eq(after, before, "the failed gen changed or tore a case");
    int hidden;
    entries_in(out, &hidden);
    cr_expect_eq(hidden, 0, "a temporary was left");
    free(before);
    free(after);
    free_child_run(&run);
    /* Killed while writing: whatever is visible is whole. */
    support_remove_tree(out);
    child_options kill_opt = {.signal_after = 0.5, .signals = {SIGKILL}};
    char *forever[] = {"gen", "--seed", "2", "--seconds", "60", "--out", out, NULL};
    run = run_kvcmp(forever, &kill_opt);
    cr_expect_eq(run.status, 128 + SIGKILL);
    cr_expect_geq(whole_cases_in(out), 0);
    free_child_run(&run);
    support_remove_tree(dir);
}

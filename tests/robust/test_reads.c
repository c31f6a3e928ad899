/* Reads stay inside: kvcmp replay judges the candidate's run,
 * never outside outputs a case directory happens to hold; the case walk
 * and the case loader never follow a symlink out of the tree; no file's
 * contents are echoed; a tensor's size is checked against its header
 * before it is read; every entry of a tree is replayed or reported (long
 * paths, one outputs folder for two cases), and strings from the case
 * tree reach a terminal and JUnit escaped. */
#include <sys/resource.h>

#include "tests/cli/cli_support.h"
#include "tests/robust/robust_support.h"

#include "kvcmp/npy.h"

/* Copies dir/NAME.out.npy to dir/NAME.got.npy (an outside runner that got
 * everything right) and writes status.got.json "ran". */
static void plant_got_files(const char *dir, const char *name) {
    char from[700], to[700], error[512];
    snprintf(from, sizeof from, "%s/%s.out.npy", dir, name);
    snprintf(to, sizeof to, "%s/%s.got.npy", dir, name);
    kvc_array a;
    cr_assert_eq(kvc_npy_read(from, &a, error, sizeof error), 0, "%s", error);
    cr_assert_eq(kvc_npy_write(to, &a, error, sizeof error), 0, "%s", error);
    kvc_array_free(&a);
    snprintf(to, sizeof to, "%s/status.got.json", dir);
    support_write_text(to, "{\"status\": \"ran\", \"message\": \"\"}\n");
}

static captured_run replay_args(int argc, char **argv) { return support_capture(kvc_cmd_replay, argc, argv); }

/* ---- the candidate always runs ------------------------------------------- */

Test(reads, got_files_never_stand_in_for_the_candidate, .timeout = 60) {
    char root[64], dir[512], plugin[512];
    support_temp_dir(root, sizeof root);
    hostile_plugin("crash", plugin, sizeof plugin);
    save_case(root, "planted", "v41.rope_plain_insert/bf16", "reads test", 0, dir, sizeof dir);
    plant_got_files(dir, "kv_cache");
    /* The candidate dies on every call: a .got file must not pass it. */
    char *argv[] = {"replay", "--impl", plugin, dir, NULL};
    child_run run = run_kvcmp(argv, NULL);
    cr_expect_eq(run.status, 1, "a crashing candidate passed through planted .got files:\n%s", run.out);
    expect_text(run.out, "FAIL [", "stdout");
    expect_text(run.out, "crash: the candidate's process", "stdout");
    expect_text(run.out, "0 passed, 1 failed", "stdout");
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    /* The reference runs too, and the line says the .got files were not read. */
    char *plain[] = {dir};
    captured_run ref = replay_args(ARGC(plain), plain);
    cr_expect_eq(ref.status, 0, "%s", ref.out);
    expect_contains(ref.out, "were not read: --outputs-in-case judges them", "stdout");
    support_free_run(&ref);
    /* Asked for, they are judged (and the __REPRO line asks for them again). */
    char *in_case[] = {"--outputs-in-case", dir};
    ref = replay_args(ARGC(in_case), in_case);
    cr_expect_eq(ref.status, 0, "%s", ref.out);
    expect_contains(ref.out, "PASS [reads] ", "stdout");
    support_free_run(&ref);
    char path[700];
    snprintf(path, sizeof path, "%s/kv_cache.got.npy", dir);
    unlink(path);
    ref = replay_args(ARGC(in_case), in_case);
    cr_expect_eq(ref.status, 1, "%s", ref.out);
    expect_contains(ref.out, "outside output kv_cache is missing", "stdout");
    expect_contains(ref.out, "__REPRO: build/kvcmp replay --outputs-in-case --policy exact ", "stdout");
    support_free_run(&ref);
    char *both[] = {"--outputs-in-case", "--outputs", root, dir};
    expect_replay_usage_error(ARGC(both), both, "--outputs DIR and --outputs-in-case name two places");
    support_remove_tree(root);
}

/* An absent status is not a rejection: a must-reject case fails when the
 * outside runner left nothing, wherever its outputs were to be. */
Test(reads, missing_outside_outputs_fail_must_reject_cases) {
    char root[64], dir[600], outputs[600], error[512];
    support_temp_dir(root, sizeof root);
    kvc_case c;
    support_make_index_error_case("v41.rope_plain_insert/bf16", 3, "slot_mapping", "kv_cache", &c);
    snprintf(dir, sizeof dir, "%s/reject", root);
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    snprintf(outputs, sizeof outputs, "%s/empty", root);
    cr_assert_eq(mkdir(outputs, 0700), 0);
    char *empty[] = {"--outputs", outputs, dir};
    captured_run run = replay_args(ARGC(empty), empty);
    cr_expect_eq(run.status, 1, "an empty outputs folder passed a must-reject case:\n%s", run.out);
    expect_contains(run.out, "no outside status: ", "stdout");
    expect_contains(run.out, "0 passed, 1 failed", "stdout");
    support_free_run(&run);
    snprintf(outputs, sizeof outputs, "%s/absent", root);
    char *absent[] = {"--outputs", outputs, dir};
    run = replay_args(ARGC(absent), absent);
    cr_expect_eq(run.status, 1, "%s", run.out);
    expect_contains(run.out, "0 passed, 1 failed", "stdout");
    support_free_run(&run);
    char *in_case[] = {"--outputs-in-case", dir};
    run = replay_args(ARGC(in_case), in_case);
    cr_expect_eq(run.status, 1, "%s", run.out);
    expect_contains(run.out, "status.got.json is missing", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

/* ---- symlinks ------------------------------------------------------------ */

Test(reads, the_walk_refuses_symlinks_out_of_the_tree, .timeout = 30) {
    char root[64], tree[128], dir[512], path[512], target[512];
    support_temp_dir(root, sizeof root);
    snprintf(tree, sizeof tree, "%s/tree", root);
    save_case(tree, "inside", "v41.rope_quant_insert", "reads test", 0, dir, sizeof dir);
    save_case(root, "outside", "v41.rope_quant_insert", "reads test", 1, target, sizeof target);
    snprintf(path, sizeof path, "%s/to-outside", tree);
    cr_assert_eq(symlink(target, path), 0);
    snprintf(path, sizeof path, "%s/to-usr", tree);
    cr_assert_eq(symlink("/usr", path), 0);
    kvc_case_walk walk;
    cr_expect_eq(kvc_walk_cases(tree, &walk), 1, "a case outside the tree was found through a link");
    cr_assert_eq(walk.num_refused, 2);
    cr_expect(strstr(walk.refused[0].path, "/tree/to-outside") != NULL, "%s", walk.refused[0].path);
    cr_expect(strstr(walk.refused[1].path, "/tree/to-usr") != NULL, "%s", walk.refused[1].path);
    cr_expect(strstr(walk.refused[1].why, "a symbolic link: the case walk does not follow links") != NULL, "%s", walk.refused[1].why);
    kvc_case_walk_free(&walk);
    /* Replayed: the links are FAIL lines, counted, and in the JUnit file. */
    char junit[256];
    snprintf(junit, sizeof junit, "%s/junit.xml", root);
    char *argv[] = {"--junit", junit, tree};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "%s", run.out);
    expect_contains(run.out, "FAIL [unreadable] ", "stdout");
    expect_contains(run.out, "/tree/to-usr: a symbolic link", "stdout");
    expect_contains(run.out, "1 passed, 2 failed", "stdout");
    char *xml = support_read_file(junit);
    cr_expect_eq(count_of(xml, "<failure"), 2, "%s", xml);
    expect_contains(xml, "/tree/to-outside", "the JUnit file");
    free(xml);
    support_free_run(&run);
    /* The root itself may be a link: the command line names it. */
    snprintf(path, sizeof path, "%s/root-link", root);
    cr_assert_eq(symlink(tree, path), 0);
    cr_expect_eq(kvc_walk_cases(path, &walk), 1);
    kvc_case_walk_free(&walk);
    support_remove_tree(root);
}

Test(reads, case_files_are_never_read_through_a_link) {
    char root[64], dir[512], path[700], secret[256], error[1024];
    support_temp_dir(root, sizeof root);
    snprintf(secret, sizeof secret, "%s/secret.txt", root);
    support_write_text(secret, "TOP-SECRET-LINE of a file outside the tree\n");
    char tree[128];
    snprintf(tree, sizeof tree, "%s/tree", root);
    save_case(tree, "linked-json", "v41.rope_quant_insert", "reads test", 0, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    unlink(path);
    cr_assert_eq(symlink(secret, path), 0);
    kvc_case c;
    cr_expect_eq(kvc_case_load(dir, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "case.json is a symbolic link: kvcmp reads case files only as regular files") != NULL, "%s", error);
    /* A tensor linked to a valid .npy elsewhere (the case's own outputs, moved out). */
    save_case(tree, "linked-tensor", "v41.rope_quant_insert", "reads test", 1, dir, sizeof dir);
    char moved[256];
    snprintf(moved, sizeof moved, "%s/elsewhere.npy", root);
    snprintf(path, sizeof path, "%s/kv_cache.out.npy", dir);
    cr_assert_eq(rename(path, moved), 0);
    cr_assert_eq(symlink(moved, path), 0);
    cr_expect_eq(kvc_case_load(dir, &c, error, sizeof error), -1, "a tensor was read through a link");
    cr_expect(strstr(error, "kv_cache.out.npy is a symbolic link") != NULL, "%s", error);
    /* Both fail the replay; nothing of the linked file reaches the output. */
    char junit[256];
    snprintf(junit, sizeof junit, "%s/junit.xml", root);
    char *argv[] = {"--junit", junit, tree};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "0 passed, 2 failed", "stdout");
    cr_expect(strstr(run.out, "TOP-SECRET") == NULL, "an outside file's contents reached stdout:\n%s", run.out);
    char *xml = support_read_file(junit);
    cr_expect(strstr(xml, "TOP-SECRET") == NULL, "an outside file's contents reached the JUnit file:\n%s", xml);
    free(xml);
    support_free_run(&run);
    support_remove_tree(root);
}

/* ---- messages ------------------------------------------------------------ */

Test(reads, a_case_json_that_is_not_json_is_named_by_byte_not_echoed) {
    char root[64], dir[512], path[700], junit[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "garbled", "v41.rope_quant_insert", "reads test", 0, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/case.json", dir);
    support_write_text(path, "{\"format\": PRIVATE-KEY-MATERIAL abcdef}\n");
    snprintf(junit, sizeof junit, "%s/junit.xml", root);
    char *argv[] = {"--junit", junit, dir};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "case.json: not valid JSON (parsing stopped at byte 11", "stdout");
    cr_expect(strstr(run.out, "PRIVATE-KEY") == NULL, "case.json's text reached stdout:\n%s", run.out);
    char *xml = support_read_file(junit);
    cr_expect(strstr(xml, "PRIVATE-KEY") == NULL, "case.json's text reached the JUnit file:\n%s", xml);
    free(xml);
    support_free_run(&run);
    support_remove_tree(root);
}

Test(reads, strings_from_the_case_tree_are_escaped) {
    char root[64], dir[512], junit[256];
    support_temp_dir(root, sizeof root);
    save_case(root, "esc\x1b]0;title\x07-case", "v41.rope_quant_insert", "evil\x1b[2J\r\n:", 0, dir, sizeof dir);
    snprintf(junit, sizeof junit, "%s/junit.xml", root);
    char *argv[] = {"--junit", junit, root};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s", run.out);
    cr_expect(strchr(run.out, '\x1b') == NULL && strchr(run.out, '\x07') == NULL && strchr(run.out, '\r') == NULL,
              "a control character reached stdout raw:\n%s", run.out);
    expect_contains(run.out, "PASS [evil\\x1b[2J\\x0d\\x0a] ", "stdout");
    expect_contains(run.out, "/esc\\x1b]0;title\\x07-case: bit-exact", "stdout");
    char *xml = support_read_file(junit);
    cr_expect(strchr(xml, '\x1b') == NULL && strchr(xml, '\x07') == NULL, "a control character reached the JUnit file raw:\n%s", xml);
    expect_contains(xml, "classname=\"replay.evil\\x1b[2J\\x0d\\x0a\"", "the JUnit file");
    free(xml);
    support_free_run(&run);
    support_remove_tree(root);
}

Test(reads, escape_text_shows_every_unprintable_byte) {
    char out[64];
    cr_expect_str_eq(kvc_escape_text("a b~", out, sizeof out), "a b~");
    cr_expect_str_eq(kvc_escape_text("\x1b[1m\x7f\xc3\xa9\t", out, sizeof out), "\\x1b[1m\\x7f\\xc3\\xa9\\x09");
    /* Truncated to fit, never mid-escape. */
    cr_expect_str_eq(kvc_escape_text("abcdefgh", out, 6), "ab");   /* room for one more escape and the NUL */
    cr_expect_str_eq(kvc_escape_text("\x01\x02", out, 8), "\\x01");
}

/* ---- tensor sizes --------------------------------------------------------- */

/* A .npy file of `dict` followed by data_bytes of zeros, sparse. */
static void write_sparse_npy(const char *path, const char *dict, off_t data_bytes) {
    uint8_t image[256];
    size_t header = support_npy_image(image, sizeof image, dict, 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, image, header), (ssize_t)header);
    cr_assert_eq(ftruncate(fd, (off_t)header + data_bytes), 0);
    close(fd);
}

static long peak_rss_mib(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024;
}

Test(reads, tensor_size_checked_against_the_header_before_reading, .timeout = 60) {
    char root[64], path[256], error[512];
    support_temp_dir(root, sizeof root);
    snprintf(path, sizeof path, "%s/x.npy", root);
    kvc_array a;
    /* A header of 2 floats in a 256 MiB sparse file: refused by its size,
     * without reading 256 MiB. */
    long before = peak_rss_mib();
    write_sparse_npy(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", (off_t)256 << 20);
    cr_expect_eq(kvc_npy_read(path, &a, error, sizeof error), -1);
    cr_expect(strstr(error, "trailing bytes after the data") != NULL, "%s", error);
    cr_expect_lt(peak_rss_mib() - before, 64, "a refused 256 MiB file raised the peak RSS by %ld MiB", peak_rss_mib() - before);
    /* A header of 512 MiB in a short file: refused before allocating. */
    write_sparse_npy(path, "{'descr': '<u2', 'fortran_order': False, 'shape': (16384, 16384), }", 4096);
    cr_expect_eq(kvc_npy_read(path, &a, error, sizeof error), -1);
    cr_expect(strstr(error, "truncated data: ") != NULL && strstr(error, "shape needs 536870912") != NULL, "%s", error);
    /* 96 MiB that match: read once, straight into the array. */
    before = peak_rss_mib();
    write_sparse_npy(path, "{'descr': '|u1', 'fortran_order': False, 'shape': (96, 1048576), }", (off_t)96 << 20);
    cr_assert_eq(kvc_npy_read(path, &a, error, sizeof error), 0, "%s", error);
    cr_expect_eq(a.count, (int64_t)96 << 20);
    cr_expect_eq(((uint8_t *)a.data)[a.count - 1], 0);
    kvc_array_free(&a);
    cr_expect_lt(peak_rss_mib() - before, 150, "a 96 MiB tensor raised the peak RSS by %ld MiB (read twice?)", peak_rss_mib() - before);
    support_remove_tree(root);
}

/* A case replayed in kvcmp's own process (the built-in backends) is held
 * to --rss-limit-mb like a worker: its tensor files' sizes are summed
 * before any is read. */
Test(reads, a_case_larger_than_the_memory_limit_is_refused_unread, .timeout = 60) {
    char root[64], dir[512], path[700];
    support_temp_dir(root, sizeof root);
    save_case(root, "big", "v41.rope_plain_insert/bf16", "reads test", 0, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/extra.npy", dir);
    write_sparse_npy(path, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 1048576), }", (off_t)3 << 20);
    long before = peak_rss_mib();
    char *argv[] = {"--rss-limit-mb", "2", dir};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "%s", run.out);
    expect_contains(run.out, "memory: the case's tensors take 3 MB, more than --rss-limit-mb 2 (raise it to replay this case)", "stdout");
    expect_contains(run.out, "0 passed, 1 failed", "stdout");
    support_free_run(&run);
    cr_expect_lt(peak_rss_mib() - before, 2, "the refused case was read");
    support_remove_tree(root);
}

/* ---- every entry accounted for -------------------------------------------- */

/* Makes root/ddd.../ddd... until the path is `length` bytes long (every
 * component under 255 bytes); the path goes to out. */
static void make_long_dir(const char *root, size_t length, char *out, size_t size) {
    snprintf(out, size, "%s", root);
    while (strlen(out) < length) {
        size_t left = length - strlen(out) - 1, n = strlen(out);   /* after the '/' */
        size_t part = left <= 200 ? left : left - 200 >= 2 ? 200 : left - 2;   /* leave room for one more "/d" */
        out[n] = '/';
        memset(out + n + 1, 'd', part);
        out[n + 1 + part] = 0;
        cr_assert(mkdir(out, 0700) == 0 || errno == EEXIST, "mkdir %zu bytes: %s", strlen(out), strerror(errno));
    }
    cr_assert_eq(strlen(out), length);
}

Test(reads, a_case_past_path_max_is_reported_not_dropped, .timeout = 60) {
    char root[64], dir[512], deep[8192];
    support_temp_dir(root, sizeof root);
    save_case(root, "short", "v41.rope_quant_insert", "reads test", 0, dir, sizeof dir);
    /* Components of 250 bytes, made through directory descriptors: the
     * case ends up more than 4,096 bytes below the root. */
    char moved[512];
    save_case(root, "moved", "v41.rope_quant_insert", "reads test", 1, moved, sizeof moved);
    int fd = open(root, O_RDONLY | O_DIRECTORY);
    cr_assert(fd >= 0);
    char name[251];
    memset(name, 'e', 250);
    name[250] = 0;
    for (int level = 0; level < 17; level++) {
        cr_assert_eq(mkdirat(fd, name, 0700), 0, "%s", strerror(errno));
        int next = openat(fd, name, O_RDONLY | O_DIRECTORY);
        cr_assert(next >= 0);
        close(fd);
        fd = next;
    }
    cr_assert_eq(renameat(AT_FDCWD, moved, fd, "case"), 0, "%s", strerror(errno));
    close(fd);
    char *argv[] = {root};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "a case past PATH_MAX was dropped:\n%s", run.out);
    expect_contains(run.out, "FAIL [unreadable] ", "stdout");
    expect_contains(run.out, "move the cases to a shorter path", "stdout");
    expect_contains(run.out, "1 passed, 1 failed", "stdout");
    support_free_run(&run);
    /* The loader refuses a path it would have to truncate. */
    kvc_case c;
    char error[1024];
    memset(deep, 'f', 4090);
    deep[0] = '/';
    deep[4090] = 0;
    cr_expect_eq(kvc_case_load(deep, &c, error, sizeof error), -1);
    cr_expect(strstr(error, "/case.json: path longer than 4095 bytes") != NULL, "%s", error);
    make_long_dir(root, 4085, deep, sizeof deep);
    cr_assert_eq(rmdir(deep), 0);
    cr_assert_eq(rename(dir, deep), 0, "%s", strerror(errno));
    cr_expect_eq(kvc_case_load(deep, &c, error, sizeof error), -1);
    cr_expect(strstr(error, ".npy: path longer than 4095 bytes") != NULL, "%s", error);
    /* The walk refuses a directory whose case.json would be past PATH_MAX. */
    char walked[128];
    snprintf(walked, sizeof walked, "%s/w", root);
    cr_assert_eq(mkdir(walked, 0700), 0);
    make_long_dir(walked, 4090, deep, sizeof deep);
    kvc_case_walk walk;
    cr_expect_eq(kvc_walk_cases(walked, &walk), 0);
    cr_assert_eq(walk.num_refused, 1);
    cr_expect_eq(strlen(walk.refused[0].path), 4090);
    cr_expect(strstr(walk.refused[0].why, "paths would be longer than 4095 bytes") != NULL, "%s", walk.refused[0].why);
    kvc_case_walk_free(&walk);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    cr_expect_eq(system(command), 0);
}

Test(reads, two_cases_of_one_name_under_outputs_fail, .timeout = 30) {
    char root[64], tree[128], dir[512], first[512], outputs[256];
    support_temp_dir(root, sizeof root);
    snprintf(tree, sizeof tree, "%s/tree", root);
    save_case(tree, "a/same", "v41.rope_quant_insert", "reads test", 0, first, sizeof first);
    save_case(tree, "b/same", "v41.rope_quant_insert", "reads test", 1, dir, sizeof dir);
    save_case(tree, "b/other", "v41.rope_quant_insert", "reads test", 2, dir, sizeof dir);
    snprintf(outputs, sizeof outputs, "%s/out", root);
    char *argv[] = {"--outputs", outputs, tree};
    captured_run run = replay_args(ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "FAIL [outputs] ", "stdout");
    char expected[1400];
    snprintf(expected, sizeof expected, "/tree/b/same: the case directory %s has the same name, so both would be judged by %s/same", first,
             outputs);
    expect_contains(run.out, expected, "stdout");
    cr_expect_eq(count_of(run.out, "FAIL [outputs]"), 1, "%s", run.out);
    support_free_run(&run);
    /* Without --outputs the names do not matter. */
    char *plain[] = {tree};
    run = replay_args(ARGC(plain), plain);
    cr_expect_eq(run.status, 0, "%s", run.out);
    expect_contains(run.out, "3 passed, 0 failed", "stdout");
    support_free_run(&run);
    support_remove_tree(root);
}

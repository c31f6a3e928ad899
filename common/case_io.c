/* Case directories: see case_io.h. */
#include "kvcmp/case.h"

#include "common/atomic_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

static const char *const stage_names[KVC_STAGE_COUNT] = {
    "v4.save_partial_states", "v4.compress", "v4.forward", "v41.save_compress_norm",
    "v41.rope_quant_insert", "v41.rope_plain_insert", "v41.forward",
};
static const char *const cache_dtype_names[] = {"fp8_ds_mla", "fp8_indexer", "bf16", "fp8_e4m3"};

const char *kvc_stage_name(kvc_stage stage) { return stage < KVC_STAGE_COUNT ? stage_names[stage] : "?"; }
int kvc_stage_from_name(const char *name) {
    for (int i = 0; i < KVC_STAGE_COUNT; i++)
        if (strcmp(name, stage_names[i]) == 0) return i;
    return -1;
}
const char *kvc_cache_dtype_name(kvc_cache_dtype dtype) { return cache_dtype_names[dtype]; }
int kvc_cache_dtype_from_name(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, cache_dtype_names[i]) == 0) return i;
    return -1;
}

#define FAIL(...) do { snprintf(error, error_size, __VA_ARGS__); goto fail; } while (0)

static char *read_text(const char *path, char *error, size_t error_size) {
    uint8_t *bytes;
    size_t size;
    char inner[512];
    if (kvc_read_regular_file(path, &bytes, &size, inner, sizeof inner)) {
        snprintf(error, error_size, "cannot read case.json: %s", inner);
        return NULL;
    }
    return (char *)bytes;
}

int kvc_is_case_dir(const char *dir) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/case.json", dir);
    /* A symlinked case.json makes a case, which then fails to load by
     * name (kvc_read_regular_file never follows it): never a silent skip. */
    return lstat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

/* What a JSON value is, for "must be a number (found a string)". */
static const char *json_type_name(const cJSON *item) {
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsNumber(item)) return "a number";
    if (cJSON_IsBool(item)) return "a boolean";
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsArray(item)) return "an array";
    return "an object";
}

/* params.KEY as a number: 1 when present, 0 when absent, -1 (with the
 * field named in error) when present with another type. */
static int number_param(const cJSON *params, const char *key, double *value, const char *path, char *error, size_t error_size) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(params, key);
    if (!item) return 0;
    if (!cJSON_IsNumber(item)) {
        snprintf(error, error_size, "%s: params.%s must be a number, found %s", path, key, json_type_name(item));
        return -1;
    }
    *value = item->valuedouble;
    return 1;
}

/* An integer-valued params.KEY that fits int32. */
static int integer_param(const cJSON *params, const char *key, int32_t *value, const char *path, char *error, size_t error_size) {
    double v;
    int rc = number_param(params, key, &v, path, error, error_size);
    if (rc <= 0) return rc;
    if (!(v >= INT32_MIN && v <= INT32_MAX) || v != (double)(int32_t)v) {
        snprintf(error, error_size, "%s: params.%s = %g (values that are not integers are refused)", path, key, v);
        return -1;
    }
    *value = (int32_t)v;
    return 1;
}

/* JSON has no NaN or infinity: a non-finite eps is written as the string
 * "nan", "-nan", "inf" or "-inf" (SPEC.md section 10), so that a case
 * the fuzzer made to be rejected (eps NaN) reads back as it was written. */
static const struct {
    const char *text;
    uint32_t bits;
} nonfinite_params[] = {{"nan", 0x7FC00000u}, {"-nan", 0xFFC00000u}, {"inf", 0x7F800000u}, {"-inf", 0xFF800000u}};

static float float_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* params.eps: a number, or one of the strings above. */
static int eps_param(const cJSON *params, double *value, const char *path, char *error, size_t error_size) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(params, "eps");
    if (cJSON_IsString(item)) {
        for (size_t i = 0; i < sizeof nonfinite_params / sizeof nonfinite_params[0]; i++)
            if (strcmp(item->valuestring, nonfinite_params[i].text) == 0) {
                *value = (double)float_from_bits(nonfinite_params[i].bits);
                return 1;
            }
        snprintf(error, error_size, "%s: params.eps must be a number or one of \"nan\", \"-nan\", \"inf\", \"-inf\", found \"%.40s\"", path,
                 item->valuestring);
        return -1;
    }
    int rc = number_param(params, "eps", value, path, error, error_size);
    if (rc < 0) {
        size_t n = strlen(error);
        snprintf(error + n, error_size - n, " (non-finite values are written \"nan\", \"-nan\", \"inf\", \"-inf\")");
    }
    return rc;
}

/* params.eps as written: a number, or the string of a non-finite value. */
static void add_eps(cJSON *params, float eps) {
    if (isfinite(eps)) { cJSON_AddNumberToObject(params, "eps", (double)eps); return; }
    const char *text = isinf(eps) ? (signbit(eps) ? "-inf" : "inf") : (signbit(eps) ? "-nan" : "nan");
    cJSON_AddStringToObject(params, "eps", text);
}

static int parse_params(const cJSON *params, kvc_case *c, const char *path, char *error, size_t error_size) {
    double eps = 1e-6;
    c->head_dim = 512;
    int rc = integer_param(params, "compress_ratio", &c->compress_ratio, path, error, error_size);
    if (rc == 0) snprintf(error, error_size, "%s: params.compress_ratio missing", path);
    if (rc <= 0) return -1;
    if (integer_param(params, "head_dim", &c->head_dim, path, error, error_size) < 0) return -1;
    if (eps_param(params, &eps, path, error, error_size) < 0) return -1;
    c->eps = (float)eps;   /* the nearest fp32, as the format says */
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(params, "cache_dtype");
    if (!dtype) return 0;
    if (!cJSON_IsString(dtype)) {
        snprintf(error, error_size, "%s: params.cache_dtype must be a string (fp8_ds_mla, fp8_indexer, bf16 or fp8_e4m3), found %s", path,
                 json_type_name(dtype));
        return -1;
    }
    int d = kvc_cache_dtype_from_name(dtype->valuestring);
    if (d < 0) { snprintf(error, error_size, "%s: unknown params.cache_dtype \"%s\"", path, dtype->valuestring); return -1; }
    c->has_cache_dtype = 1;
    c->cache_dtype = (kvc_cache_dtype)d;
    return 0;
}

static int parse_json(const char *dir, kvc_case *c, char *error, size_t error_size) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/case.json", dir) >= (int)sizeof path) {
        snprintf(error, error_size, "%.200s.../case.json: path longer than %zu bytes (move the case to a shorter path)", dir, sizeof path - 1);
        return -1;
    }
    char *text = read_text(path, error, error_size);
    cJSON *root = NULL;
    if (!text) return -1;
    const char *stop = text;
    root = cJSON_ParseWithOpts(text, &stop, 0);
    /* The byte where parsing stopped, never the text there: case.json may
     * hold anything, and messages reach terminals and JUnit files. */
    if (!root) FAIL("%s: not valid JSON (parsing stopped at byte %td; fix the file or remove the case)", path, stop - text);
    cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, "dsv4c-case/1") != 0)
        FAIL("%s: \"format\" must be \"dsv4c-case/1\"", path);
    cJSON *stage = cJSON_GetObjectItemCaseSensitive(root, "stage");
    if (!cJSON_IsString(stage) || kvc_stage_from_name(stage->valuestring) < 0)
        FAIL("%s: unknown \"stage\" %s", path, cJSON_IsString(stage) ? stage->valuestring : "(missing)");
    c->stage = (kvc_stage)kvc_stage_from_name(stage->valuestring);
    cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (!cJSON_IsObject(params)) FAIL("%s: \"params\" object missing", path);
    if (parse_params(params, c, path, error, error_size)) goto fail;
    cJSON *source = cJSON_GetObjectItemCaseSensitive(root, "source");
    if (source && !cJSON_IsString(source)) FAIL("%s: \"source\" must be a string, found %s", path, json_type_name(source));
    if (source) snprintf(c->source, sizeof c->source, "%s", source->valuestring);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    if (meta) c->meta_json = cJSON_PrintUnformatted(meta);
    cJSON_Delete(root);
    free(text);
    return 0;
fail:
    cJSON_Delete(root);
    free(text);
    return -1;
}

int kvc_case_load(const char *dir, kvc_case *c, char *error, size_t error_size) {
    memset(c, 0, sizeof *c);
    if (parse_json(dir, c, error, error_size)) return -1;
    DIR *d = opendir(dir);
    if (!d) { snprintf(error, error_size, "cannot list %s: %s", dir, strerror(errno)); kvc_case_free(c); return -1; }
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        size_t n = strlen(entry->d_name);
        if (n < 5 || strcmp(entry->d_name + n - 4, ".npy") != 0) continue;
        if (n - 4 >= sizeof c->tensors[0].name) {
            snprintf(error, error_size, "%s/%s: tensor name longer than %zu characters", dir, entry->d_name, sizeof c->tensors[0].name - 1);
            closedir(d); kvc_case_free(c); return -1;
        }
        if (c->num_tensors == KVC_CASE_MAX_TENSORS) {
            snprintf(error, error_size, "%s: more than %d tensors", dir, KVC_CASE_MAX_TENSORS);
            closedir(d); kvc_case_free(c); return -1;
        }
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, entry->d_name) >= (int)sizeof path) {
            snprintf(error, error_size, "%.200s.../%s: path longer than %zu bytes (move the case to a shorter path)", dir, entry->d_name,
                     sizeof path - 1);
            closedir(d); kvc_case_free(c); return -1;
        }
        kvc_named_array *t = &c->tensors[c->num_tensors];
        if (kvc_npy_read(path, &t->array, error, error_size)) { closedir(d); kvc_case_free(c); return -1; }
        memcpy(t->name, entry->d_name, n - 4);
        t->name[n - 4] = 0;
        c->num_tensors++;
    }
    closedir(d);
    return 0;
}

/* mkdir -p; a path component that exists as something else than a
 * directory is an error (ENOTDIR), not success. */
/* mkdir -p; on failure errno says why and *failed names the folder that
 * could not be made (not a deeper one that only lacks its parent). */
static int make_dirs(const char *dir, char *failed, size_t failed_size) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    if (!path[0]) { errno = ENOENT; snprintf(failed, failed_size, "''"); return -1; }
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/') continue;
        char end = *p;
        *p = 0;
        struct stat st;
        if (mkdir(path, 0777) != 0 && (errno != EEXIST || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
            if (errno == EEXIST) errno = ENOTDIR;
            snprintf(failed, failed_size, "%s", path);
            return -1;
        }
        *p = end;
        if (!end) return 0;
    }
}

/* The stages that take eps (an RMSNorm), and those that write kv_cache
 * (and so have a cache_dtype): a case of another stage is written
 * without that param, as the stage-call table lists it. */
static int stage_has_eps(kvc_stage s) {
    return s == KVC_STAGE_V4_COMPRESS || s == KVC_STAGE_V4_FORWARD || s == KVC_STAGE_V41_SAVE_COMPRESS_NORM || s == KVC_STAGE_V41_FORWARD;
}

static int stage_has_cache_dtype(kvc_stage s) { return s != KVC_STAGE_V4_SAVE_PARTIAL_STATES && s != KVC_STAGE_V41_SAVE_COMPRESS_NORM; }

static int write_case_json(const char *dir, const kvc_case *c, char *error, size_t error_size) {
    cJSON *root = cJSON_CreateObject(), *params = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "dsv4c-case/1");
    cJSON_AddStringToObject(root, "stage", kvc_stage_name(c->stage));
    cJSON_AddNumberToObject(params, "compress_ratio", c->compress_ratio);
    cJSON_AddNumberToObject(params, "head_dim", c->head_dim);
    if (stage_has_eps(c->stage)) add_eps(params, c->eps);
    if (c->has_cache_dtype && stage_has_cache_dtype(c->stage)) cJSON_AddStringToObject(params, "cache_dtype", kvc_cache_dtype_name(c->cache_dtype));
    cJSON_AddItemToObject(root, "params", params);
    cJSON_AddStringToObject(root, "source", c->source);
    if (c->meta_json) {
        cJSON *meta = cJSON_Parse(c->meta_json);
        if (meta) cJSON_AddItemToObject(root, "meta", meta);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/case.json", dir);
    if (!text) { snprintf(error, error_size, "cannot write %s: out of memory", path); return -1; }
    int rc = kvc_atomic_write_text(path, text, error, error_size);
    free(text);
    return rc;
}

/* A tensor name with its control characters shown as '?', for messages. */
static void printable_name(const char *name, char *out, size_t size) {
    snprintf(out, size, "%s", name);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7F) *p = '?';
}

/* Tensor names become file names: one that is not a plain name ('/',
 * "..", a leading '.') would write outside the case directory. */
static int check_tensor_names(const kvc_case *c, const char *parent, const char *name, char *error, size_t error_size) {
    for (int i = 0; i < c->num_tensors; i++) {
        if (kvc_plain_name(c->tensors[i].name)) continue;
        char shown[sizeof c->tensors[i].name];
        printable_name(c->tensors[i].name, shown, sizeof shown);
        snprintf(error, error_size,
                 "tensor name '%s' is not a plain file name (no '/', no '..', no leading '.', no control characters): "
                 "case %s/%s not saved (rename the tensor)", shown, parent, name);
        return -1;
    }
    return 0;
}

static int write_case_files(const char *dir, const kvc_case *c, char *error, size_t error_size) {
    if (write_case_json(dir, c, error, error_size)) return -1;
    for (int i = 0; i < c->num_tensors; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", dir, c->tensors[i].name);
        if (kvc_npy_write(path, &c->tensors[i].array, error, error_size)) return -1;
    }
    return 0;
}

static int save_by_rename(const char *parent, const char *name, int names, const kvc_case *c, char *saved, size_t saved_size,
                          char *error, size_t error_size);
static int replace_case(const char *parent, const char *name, const kvc_case *c, char *error, size_t error_size);
static int holds_a_case_or_nothing(const char *dir);

/* A case directory is written aside and renamed into place, so a full
 * disk or a kill never leaves half a case under its name.  An existing
 * case directory (case.json and files, or an empty directory) is replaced
 * whole: no file of the old case (a NAME.out.npy the new one lacks, a
 * NAME.got.npy) stays beside the new one.  Anything else at dir is
 * refused: a symbolic link (it could lead out of the tree), a file, a
 * directory that holds something besides a case. */
int kvc_case_save(const char *dir, const kvc_case *c, char *error, size_t error_size) {
    struct stat st;
    char path[4096], parent[4096], saved[4200];
    snprintf(path, sizeof path, "%s", dir);
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/'; n--) path[n - 1] = 0;
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    const char *name = slash ? slash + 1 : path;
    if (slash) *slash = 0;
    const char *where = !slash ? "." : parent[0] ? parent : "/";
    if (lstat(path, &st) != 0) return save_by_rename(where, name, 1, c, saved, sizeof saved, error, error_size);
    if (S_ISDIR(st.st_mode) && holds_a_case_or_nothing(path)) return replace_case(where, name, c, error, error_size);
    snprintf(error, error_size, "cannot save a case as %s: it is %s (give a new directory or an existing case directory)", path,
             S_ISLNK(st.st_mode) ? "a symbolic link, which kvcmp never writes through" : S_ISDIR(st.st_mode) ?
             "a directory that holds something besides a case" : "not a directory");
    return -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

int kvc_remove_tree(const char *path) { return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* The temporary directory of a save in progress: hidden (the case walk
 * skips names that start with '.') and named after the writing process,
 * so that a supervisor can remove what a killed worker left. */
static void partial_name(const char *parent, const char *name, pid_t pid, char *out, size_t size) {
    snprintf(out, size, "%s/.%s.partial-%ld", parent, name, (long)pid);
}

/* Writes the case into the hidden partial directory of parent/name. */
static int write_partial(const char *parent, const char *name, const kvc_case *c, char *partial, size_t partial_size, char *error,
                         size_t error_size) {
    if (check_tensor_names(c, parent, name, error, error_size)) return -1;
    char failed[4096];
    if (make_dirs(parent, failed, sizeof failed)) {
        int err = errno;
        if (strcmp(failed, parent) == 0) snprintf(error, error_size, "cannot create %s: %s", parent, strerror(err));
        else snprintf(error, error_size, "cannot create %s: %s (its folder %s cannot be made)", parent, strerror(err), failed);
        return -1;
    }
    partial_name(parent, name, getpid(), partial, partial_size);
    kvc_remove_tree(partial);   /* a leftover of an earlier process with this pid */
    if (mkdir(partial, 0777) != 0) { snprintf(error, error_size, "cannot create %s: %s", partial, strerror(errno)); return -1; }
    if (write_case_files(partial, c, error, error_size)) { kvc_remove_tree(partial); return -1; }
    return 0;
}

/* Writes the case into a hidden partial directory and renames it to
 * parent/name, or (up to `names` tries) name-2, name-3 ...; never over an
 * existing directory (RENAME_NOREPLACE). */
static int save_by_rename(const char *parent, const char *name, int names, const kvc_case *c, char *saved, size_t saved_size,
                          char *error, size_t error_size) {
    char partial[4096];
    if (write_partial(parent, name, c, partial, sizeof partial, error, error_size)) return -1;
    for (int attempt = 1; attempt <= names; attempt++) {
        if (attempt == 1) snprintf(saved, saved_size, "%s/%s", parent, name);
        else snprintf(saved, saved_size, "%s/%s-%d", parent, name, attempt);
        if (renameat2(AT_FDCWD, partial, AT_FDCWD, saved, RENAME_NOREPLACE) == 0) return 0;
        if (errno != EEXIST) break;
    }
    snprintf(error, error_size, "cannot rename %s to %s: %s", partial, saved, strerror(errno));
    kvc_remove_tree(partial);
    return -1;
}

/* The new case is written aside first; then the old directory is moved
 * to a hidden name, the new one into place, and the old one removed.  A
 * kill in between leaves only hidden directories (the case walk skips
 * them; kvc_case_remove_partial_saves removes them). */
static int replace_case(const char *parent, const char *name, const kvc_case *c, char *error, size_t error_size) {
    char partial[4096], path[8200], old[8300];   /* parent and name each up to 4095 bytes */
    if (write_partial(parent, name, c, partial, sizeof partial, error, error_size)) return -1;
    snprintf(path, sizeof path, "%s/%s", parent, name);
    snprintf(old, sizeof old, "%s/.%s.old.partial-%ld", parent, name, (long)getpid());
    kvc_remove_tree(old);
    if (rename(path, old) != 0 || renameat2(AT_FDCWD, partial, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
        snprintf(error, error_size, "cannot replace %s: %s (remove it and save again)", path, strerror(errno));
        rename(old, path);   /* the old case back, when it was moved */
        kvc_remove_tree(partial);
        return -1;
    }
    kvc_remove_tree(old);
    return 0;
}

/* Whether dir may be replaced by a case: it is empty, or it holds
 * case.json and no directory (what a case holds). */
static int holds_a_case_or_nothing(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int entries = 0, case_json = 0, subdirectories = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        struct stat st;
        entries++;
        case_json |= strcmp(entry->d_name, "case.json") == 0;
        subdirectories |= fstatat(dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    closedir(d);
    return entries == 0 || (case_json && !subdirectories);
}

/* An existing case (another campaign's, an earlier run's) is never
 * replaced; the next free NAME-2, NAME-3 ... is taken. */
int kvc_case_save_new(const char *parent, const char *name, const kvc_case *c, char *saved, size_t saved_size, char *error,
                      size_t error_size) {
    if (!kvc_plain_name(name)) {
        snprintf(error, error_size, "case name '%s' is not a plain file name: not saved under %s", name, parent);
        return -1;
    }
    return save_by_rename(parent, name, 9999, c, saved, saved_size, error, error_size);
}

void kvc_case_remove_partial_saves(const char *parent, pid_t pid) {
    DIR *d = opendir(parent);
    if (!d) return;
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".partial-%ld", (long)pid);
    size_t suffix_len = strlen(suffix);
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        size_t n = strlen(entry->d_name);
        if (entry->d_name[0] != '.' || n <= suffix_len || strcmp(entry->d_name + n - suffix_len, suffix) != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", parent, entry->d_name);
        kvc_remove_tree(path);
    }
    closedir(d);
}

void kvc_case_free(kvc_case *c) {
    for (int i = 0; i < c->num_tensors; i++) kvc_array_free(&c->tensors[i].array);
    free(c->meta_json);
    memset(c, 0, sizeof *c);
}

kvc_array *kvc_case_get(const kvc_case *c, const char *name) {
    for (int i = 0; i < c->num_tensors; i++)
        if (strcmp(c->tensors[i].name, name) == 0) return (kvc_array *)&c->tensors[i].array;
    return NULL;
}

int kvc_case_put(kvc_case *c, const char *name, kvc_array *array) {
    kvc_array *existing = kvc_case_get(c, name);
    if (existing) { kvc_array_free(existing); *existing = *array; return 0; }
    if (c->num_tensors == KVC_CASE_MAX_TENSORS || strlen(name) >= sizeof c->tensors[0].name) return -1;
    kvc_named_array *t = &c->tensors[c->num_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->array = *array;
    return 0;
}

int kvc_case_copy(kvc_case *dst, const kvc_case *src) {
    *dst = *src;
    dst->meta_json = src->meta_json ? strdup(src->meta_json) : NULL;
    for (int i = 0; i < src->num_tensors; i++) {
        const kvc_array *a = &src->tensors[i].array;
        size_t bytes = (size_t)a->count * (size_t)kvc_dtype_size(a->dtype);
        dst->tensors[i].array.data = malloc(bytes ? bytes : 1);
        if (!dst->tensors[i].array.data) { dst->num_tensors = i; kvc_case_free(dst); return -1; }
        memcpy(dst->tensors[i].array.data, a->data, bytes);
    }
    return 0;
}

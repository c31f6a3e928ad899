/* The case walk of replay and report parity: see replay.h. */
#include "harness/replay/replay.h"

#include <fts.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(char ***list, int *count, int *capacity, const char *text) {
    if (*count == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 64;
        char **grown = realloc(*list, (size_t)*capacity * sizeof **list);
        if (!grown) return -1;
        *list = grown;
    }
    (*list)[(*count)++] = strdup(text);
    return 0;
}

static void add_refusal(kvc_case_walk *walk, int *capacity, const char *kind, const char *path, const char *why) {
    if (walk->num_refused == *capacity) {
        int grown = *capacity ? 2 * *capacity : 16;
        kvc_refusal *more = realloc(walk->refused, (size_t)grown * sizeof *more);
        if (!more) return;
        walk->refused = more;
        *capacity = grown;
    }
    walk->refused[walk->num_refused++] = (kvc_refusal){strdup(path), strdup(why), kind};
}

static int compare_entries(const FTSENT **a, const FTSENT **b) { return strcmp((*a)->fts_name, (*b)->fts_name); }

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Why the walk refuses an entry, or NULL when it does not: an entry it
 * could not stat or read is reported, not dropped (a path longer than
 * PATH_MAX among them), and a symlink is never followed, so a case tree
 * cannot send kvcmp outside itself.  *kind: the label of its FAIL line. */
static const char *refusal(const FTSENT *e, const char **kind, char *why, size_t size) {
    *kind = "unreadable";
    if (e->fts_info == FTS_SL || e->fts_info == FTS_SLNONE) {
        snprintf(why, size, "a symbolic link: the case walk does not follow links (name the target on the command line, or copy the "
                            "cases in)");
        return why;
    }
    if (e->fts_errno) {   /* FTS_NS, FTS_DNR, FTS_ERR */
        snprintf(why, size, "cannot read it: %s (make it readable, or move the cases to a shorter path)", strerror(e->fts_errno));
        return why;
    }
    if (e->fts_info == FTS_D && strlen(e->fts_path) + sizeof "/case.json" > PATH_MAX) {
        snprintf(why, size, "a directory whose files' paths would be longer than %d bytes (move the cases to a shorter path)",
                 PATH_MAX - 1);
        return why;
    }
    if (e->fts_name[0] == '.' && e->fts_info == FTS_D) {
        *kind = "hidden";
        snprintf(why, size, "a hidden directory: the walk does not replay it (rename it without the leading dot, or skip it by name with "
                            "--skip %.100s)", e->fts_name);
        return why;
    }
    if (e->fts_info == FTS_DEFAULT) {
        *kind = "not a file";
        snprintf(why, size, "neither a regular file nor a directory (a FIFO, a socket or a device): never opened (remove it, or skip it "
                            "by name with --skip %.100s)", e->fts_name);
        return why;
    }
    return NULL;
}

/* fts_number bits of a directory, gathered from below as the walk leaves it. */
enum { ACCOUNTED = 1,   /* a case, or an entry reported, lies below */
       HOLDS_FILES = 2  /* a regular file lies below */ };

/* fts with FTS_PHYSICAL: entries are lstat'ed, never followed (the root
 * only, by FTS_COMFOLLOW, as the command line named it), and only
 * stat'ed: a FIFO or a device in the tree is never opened.  A case
 * directory ends the descent: its files are the case's tensors.  Every
 * entry below the root is a case, part of the way to one, or reported:
 * a directory that holds files but no case.json and no case below it (a
 * case whose case.json was lost or renamed) is reported when the tree
 * has cases; hidden files (.gitkeep) are the only entries passed over. */
int kvc_walk_cases(const char *path, kvc_case_walk *walk) {
    int capacity = 0, refused_capacity = 0, caseless_count = 0, caseless_capacity = 0;
    char **caseless = NULL;   /* directories with files and no case, reported if the tree has cases */
    memset(walk, 0, sizeof *walk);
    char *roots[2] = {(char *)path, NULL};
    FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_COMFOLLOW | FTS_NOCHDIR, compare_entries);
    if (!fts) return 0;
    FTSENT *e;
    while ((e = fts_read(fts)) != NULL) {
        FTSENT *parent = e->fts_level > 0 ? e->fts_parent : NULL;
        if (e->fts_info == FTS_DP) {
            /* Leaving a directory: its findings go up to its parent. */
            if (e->fts_level > 0 && !(e->fts_number & ACCOUNTED) && (e->fts_number & HOLDS_FILES)) {
                push(&caseless, &caseless_count, &caseless_capacity, e->fts_path);
                e->fts_number |= ACCOUNTED;
            }
            if (parent) parent->fts_number |= e->fts_number;
            continue;
        }
        if (e->fts_level > 0 && e->fts_name[0] == '.' && (e->fts_info == FTS_F || e->fts_info == FTS_NSOK)) continue;
        char why[300];
        const char *kind;
        if (e->fts_level > 0 && refusal(e, &kind, why, sizeof why)) {   /* the root is the command line's */
            add_refusal(walk, &refused_capacity, kind, e->fts_path, why);
            if (parent) parent->fts_number |= ACCOUNTED;
            if (e->fts_info == FTS_D) fts_set(fts, e, FTS_SKIP);
        } else if (e->fts_info == FTS_D && kvc_is_case_dir(e->fts_path)) {
            push(&walk->dirs, &walk->count, &capacity, e->fts_path);
            if (parent) parent->fts_number |= ACCOUNTED;
            fts_set(fts, e, FTS_SKIP);
        } else if (e->fts_info == FTS_D) {
            e->fts_number = 0;
        } else if (e->fts_level > 0 && parent) {
            parent->fts_number |= HOLDS_FILES;
        }
    }
    fts_close(fts);
    for (int i = 0; i < caseless_count; i++) {
        if (walk->count)
            add_refusal(walk, &refused_capacity, "not a case", caseless[i],
                        "a directory without case.json and no case below it, in a tree of cases: not replayed (restore its case.json, "
                        "remove it, or skip it by name with --skip NAME)");
        free(caseless[i]);
    }
    free(caseless);
    if (walk->count) qsort(walk->dirs, (size_t)walk->count, sizeof *walk->dirs, compare_names);
    return walk->count;
}

void kvc_case_walk_free(kvc_case_walk *walk) {
    kvc_free_case_list(walk->dirs, walk->count);
    for (int i = 0; i < walk->num_refused; i++) {
        free(walk->refused[i].path);
        free(walk->refused[i].why);
    }
    free(walk->refused);
    memset(walk, 0, sizeof *walk);
}

int kvc_find_cases(const char *path, char ***dirs) {
    kvc_case_walk walk;
    int count = kvc_walk_cases(path, &walk);
    *dirs = walk.dirs;
    walk.dirs = NULL;
    walk.count = 0;
    kvc_case_walk_free(&walk);
    return count;
}

void kvc_free_case_list(char **dirs, int count) {
    for (int i = 0; i < count; i++) free(dirs[i]);
    free(dirs);
}

/* ---- case names under --outputs ---------------------------------------- */

void kvc_case_dir_name(const char *case_dir, char *out, size_t size) {
    size_t end = strlen(case_dir);
    while (end > 1 && case_dir[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && case_dir[start - 1] != '/') start--;
    snprintf(out, size, "%.*s", (int)(end - start), case_dir + start);
}

typedef struct {
    char name[256];
    const char *dir;
    int order;
} named_dir;

static int compare_named(const void *a, const void *b) {
    const named_dir *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->order - y->order;
}

int kvc_case_name_clashes(const kvc_case_walk *walks, int num_walks, const char ***pairs) {
    int total = 0, clashes = 0;
    for (int i = 0; i < num_walks; i++) total += walks[i].count;
    named_dir *sorted = calloc((size_t)total + 1, sizeof *sorted);
    *pairs = calloc(2 * (size_t)total + 1, sizeof **pairs);
    if (!sorted || !*pairs) {
        free(sorted);
        free(*pairs);
        *pairs = NULL;
        return -1;
    }
    for (int i = 0, n = 0; i < num_walks; i++)
        for (int k = 0; k < walks[i].count; k++, n++) {
            kvc_case_dir_name(walks[i].dirs[k], sorted[n].name, sizeof sorted[n].name);
            sorted[n].dir = walks[i].dirs[k];
            sorted[n].order = n;
        }
    qsort(sorted, (size_t)total, sizeof *sorted, compare_named);
    /* Each directory after the first of its name clashes with that first one. */
    for (int i = 1, first = 0; i < total; i++) {
        if (strcmp(sorted[i].name, sorted[first].name) != 0) { first = i; continue; }
        (*pairs)[2 * clashes] = sorted[i].dir;
        (*pairs)[2 * clashes++ + 1] = sorted[first].dir;
    }
    free(sorted);
    return clashes;
}

/* ---- untrusted text ----------------------------------------------------- */

const char *kvc_escape_text(const char *text, char *out, size_t size) {
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s && n + 5 <= size; s++) {
        if (*s >= 0x20 && *s < 0x7F) out[n++] = (char)*s;
        else n += (size_t)snprintf(out + n, size - n, "\\x%02x", *s);
    }
    out[n] = 0;
    return out;
}

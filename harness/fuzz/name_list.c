/* Comma- (or other sep-) separated lists of names, as signatures carry
 * their explanations and refutations: see name_list.h. */
#include "harness/fuzz/name_list.h"

#include <stdio.h>
#include <string.h>

/* The next item of a sep-separated list at *p, into item; 0 at the end. */
int names_next(const char **p, char sep, char *item, size_t size) {
    if (!**p) return 0;
    size_t len = strcspn(*p, (char[]){sep, 0});
    snprintf(item, size, "%.*s", (int)len, *p);
    *p += len + ((*p)[len] == sep);
    return 1;
}

/* 1 when the sep-separated list holds the item. */
int names_has(const char *list, const char *item, char sep) {
    char x[200];
    for (const char *p = list; names_next(&p, sep, x, sizeof x);)
        if (strcmp(x, item) == 0) return 1;
    return 0;
}

int names_share(const char *a, const char *b, char sep) {
    char x[200];
    for (const char *p = a; names_next(&p, sep, x, sizeof x);)
        if (names_has(b, x, sep)) return 1;
    return 0;
}

void names_append(char *into, size_t size, const char *item, char sep) {
    size_t n = strlen(into);
    if (n + strlen(item) + 2 <= size) snprintf(into + n, size - n, "%s%s", n ? (char[]){sep, 0} : "", item);
}

/* into += the items of `more` it lacks. */
void names_union(char *into, size_t size, const char *more, char sep) {
    char item[200];
    for (const char *p = more; names_next(&p, sep, item, sizeof item);)
        if (!names_has(into, item, sep)) names_append(into, size, item, sep);
}

/* into = the items of into that `other` also has; 0 when none is left
 * (into unchanged). */
int names_intersect(char *into, size_t size, const char *other, char sep) {
    char kept[200] = "", item[200];
    for (const char *p = into; names_next(&p, sep, item, sizeof item);)
        if (names_has(other, item, sep)) names_append(kept, sizeof kept, item, sep);
    if (!kept[0]) return 0;
    /* Items of into: it holds them. */
    size_t n = strlen(kept);
    if (n < size) memcpy(into, kept, n + 1);
    return 1;
}

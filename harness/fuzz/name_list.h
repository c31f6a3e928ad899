/* Lists of names in one string, items separated by sep (",", "+", ";"):
 * the explanations, refutations and SPEC places of a signature. */
#ifndef KVCMP_HARNESS_FUZZ_NAME_LIST_H
#define KVCMP_HARNESS_FUZZ_NAME_LIST_H

#include <stddef.h>

int names_next(const char **p, char sep, char *item, size_t size);
int names_has(const char *list, const char *item, char sep);
int names_share(const char *a, const char *b, char sep);
void names_append(char *into, size_t size, const char *item, char sep);
void names_union(char *into, size_t size, const char *more, char sep);
int names_intersect(char *into, size_t size, const char *other, char sep);

#endif

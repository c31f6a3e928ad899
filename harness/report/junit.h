/* JUnit XML for CI systems: one <testsuite> of testcases (passed, failed
 * with a message and a text, or skipped), with the run metadata as
 * <properties>.  Cases are collected in memory and written at the end,
 * so the counts in the header are those of the body. */
#ifndef KVCMP_JUNIT_H
#define KVCMP_JUNIT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

typedef struct kvc_junit kvc_junit;

/* NULL when out of memory. */
kvc_junit *kvc_junit_new(const char *suite_name);
void kvc_junit_free(kvc_junit *junit);

/* The run metadata (kvc_run_info) as properties: one per member, nested
 * objects and arrays as their JSON text.  run_info stays the caller's. */
void kvc_junit_properties(kvc_junit *junit, const cJSON *run_info);
void kvc_junit_pass(kvc_junit *junit, const char *classname, const char *name, double seconds);
/* message: one line (the classified difference); text: the details,
 * the __REPRO line among them. */
void kvc_junit_fail(kvc_junit *junit, const char *classname, const char *name, double seconds, const char *type, const char *message,
                    const char *text);
void kvc_junit_skip(kvc_junit *junit, const char *classname, const char *name, const char *message);

int kvc_junit_tests(const kvc_junit *junit);
int kvc_junit_failures(const kvc_junit *junit);

/* Writes the file (creating its directory).  0, or -1 with a message
 * naming the file, why, and what to do. */
int kvc_junit_write(const kvc_junit *junit, const char *path, char *error, size_t error_size);

/* XML character data or attribute value: & < > " ' escaped, control
 * characters XML cannot carry and invalid UTF-8 written as visible
 * \xNN, tabs and newlines kept (as character references in attributes). */
void kvc_xml_escape(FILE *f, const char *text, int attribute);

#endif

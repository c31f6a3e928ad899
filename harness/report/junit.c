/* JUnit XML: see junit.h.  The layout is the one Jenkins, GitLab and the
 * GitHub test-report actions read: <testsuites> around one <testsuite>. */
#include "harness/report/junit.h"

#include "harness/report/run_info.h"
#include "common/atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum { OUTCOME_PASS, OUTCOME_FAIL, OUTCOME_SKIP } outcome;

typedef struct {
    char *classname, *name, *type, *message, *text;
    double seconds;
    outcome outcome;
} testcase;

typedef struct {
    char *name, *value;
} property;

struct kvc_junit {
    char *suite;
    char timestamp[32];
    testcase *cases;
    int num_cases, capacity, failures, skipped;
    property *properties;
    int num_properties;
};

static char *copy(const char *s) { return strdup(s ? s : ""); }

kvc_junit *kvc_junit_new(const char *suite_name) {
    kvc_junit *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->suite = copy(suite_name);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(j->timestamp, sizeof j->timestamp, "%Y-%m-%dT%H:%M:%S", &tm);
    return j;
}

void kvc_junit_free(kvc_junit *j) {
    if (!j) return;
    for (int i = 0; i < j->num_cases; i++) {
        testcase *t = &j->cases[i];
        free(t->classname); free(t->name); free(t->type); free(t->message); free(t->text);
    }
    for (int i = 0; i < j->num_properties; i++) { free(j->properties[i].name); free(j->properties[i].value); }
    free(j->cases);
    free(j->properties);
    free(j->suite);
    free(j);
}

static void add_property(kvc_junit *j, const char *name, const char *value) {
    property *grown = realloc(j->properties, (size_t)(j->num_properties + 1) * sizeof *grown);
    if (!grown) return;
    j->properties = grown;
    j->properties[j->num_properties++] = (property){copy(name), copy(value)};
}

void kvc_junit_properties(kvc_junit *j, const cJSON *run_info) {
    for (const cJSON *item = run_info ? run_info->child : NULL; item; item = item->next) {
        if (cJSON_IsString(item)) { add_property(j, item->string, item->valuestring); continue; }
        char *text = cJSON_PrintUnformatted(item);
        add_property(j, item->string, text);
        free(text);
    }
}

static void add_case(kvc_junit *j, outcome o, const char *classname, const char *name, double seconds, const char *type,
                     const char *message, const char *text) {
    if (j->num_cases == j->capacity) {
        int capacity = j->capacity ? 2 * j->capacity : 64;
        testcase *grown = realloc(j->cases, (size_t)capacity * sizeof *grown);
        if (!grown) return;
        j->cases = grown;
        j->capacity = capacity;
    }
    j->cases[j->num_cases++] = (testcase){copy(classname), copy(name), copy(type), copy(message), copy(text), seconds, o};
    j->failures += o == OUTCOME_FAIL;
    j->skipped += o == OUTCOME_SKIP;
}

void kvc_junit_pass(kvc_junit *j, const char *classname, const char *name, double seconds) {
    add_case(j, OUTCOME_PASS, classname, name, seconds, NULL, NULL, NULL);
}

void kvc_junit_fail(kvc_junit *j, const char *classname, const char *name, double seconds, const char *type, const char *message,
                    const char *text) {
    add_case(j, OUTCOME_FAIL, classname, name, seconds, type, message, text);
}

void kvc_junit_skip(kvc_junit *j, const char *classname, const char *name, const char *message) {
    add_case(j, OUTCOME_SKIP, classname, name, 0, NULL, message, NULL);
}

int kvc_junit_tests(const kvc_junit *j) { return j->num_cases; }
int kvc_junit_failures(const kvc_junit *j) { return j->failures; }

/* Length of the valid UTF-8 sequence at s, or 0. */
static int utf8_length(const unsigned char *s) {
    int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : 0;
    if (s[0] >= 0xF5) n = 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;   /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;   /* overlong, > U+10FFFF */
    return n;
}

void kvc_xml_escape(FILE *f, const char *text, int attribute) {
    for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); continue;
        case '<': fputs("&lt;", f); continue;
        case '>': fputs("&gt;", f); continue;
        case '"': fputs(attribute ? "&quot;" : "\"", f); continue;
        case '\'': fputs(attribute ? "&apos;" : "'", f); continue;
        case '\t': case '\n': case '\r':
            /* An attribute's parser turns a raw newline into a space. */
            if (attribute) fprintf(f, "&#%d;", *s);
            else fputc(*s, f);
            continue;
        default: break;
        }
        if (*s < 0x20 || *s == 0x7F) { fprintf(f, "\\x%02x", *s); continue; }
        if (*s < 0x80) { fputc(*s, f); continue; }
        int n = utf8_length(s);
        if (n == 0) { fprintf(f, "\\x%02x", *s); continue; }
        fwrite(s, 1, (size_t)n, f);
        s += n - 1;
    }
}

static void attribute(FILE *f, const char *name, const char *value) {
    fprintf(f, " %s=\"", name);
    kvc_xml_escape(f, value, 1);
    fputc('"', f);
}

static void write_case(FILE *f, const testcase *t) {
    fputs("    <testcase", f);
    attribute(f, "classname", t->classname);
    attribute(f, "name", t->name);
    fprintf(f, " time=\"%.3f\"", t->seconds);
    if (t->outcome == OUTCOME_PASS) { fputs("/>\n", f); return; }
    fputs(">\n", f);
    if (t->outcome == OUTCOME_SKIP) {
        fputs("      <skipped", f);
        attribute(f, "message", t->message);
        fputs("/>\n", f);
    } else {
        fputs("      <failure", f);
        attribute(f, "type", t->type[0] ? t->type : "failure");
        attribute(f, "message", t->message);
        fputs(">", f);
        kvc_xml_escape(f, t->text, 0);
        fputs("</failure>\n", f);
    }
    fputs("    </testcase>\n", f);
}

static void write_document(FILE *f, const kvc_junit *j) {
    double seconds = 0;
    for (int i = 0; i < j->num_cases; i++) seconds += j->cases[i].seconds;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", f);
    attribute(f, "name", j->suite);
    fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\">\n", j->num_cases, j->failures, j->skipped,
            seconds);
    fputs("  <testsuite", f);
    attribute(f, "name", j->suite);
    fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\"", j->num_cases, j->failures, j->skipped, seconds);
    attribute(f, "timestamp", j->timestamp);
    attribute(f, "hostname", host);
    fputs(">\n", f);
    if (j->num_properties) {
        fputs("    <properties>\n", f);
        for (int i = 0; i < j->num_properties; i++) {
            fputs("      <property", f);
            attribute(f, "name", j->properties[i].name);
            attribute(f, "value", j->properties[i].value);
            fputs("/>\n", f);
        }
        fputs("    </properties>\n", f);
    }
    for (int i = 0; i < j->num_cases; i++) write_case(f, &j->cases[i]);
    fputs("  </testsuite>\n</testsuites>\n", f);
}

int kvc_junit_write(const kvc_junit *j, const char *path, char *error, size_t error_size) {
    kvc_make_parent_dir(path);
    kvc_atomic_file a;
    if (kvc_atomic_open(&a, path, error, error_size)) {
        kvc_error_hint(error, error_size, "give --junit a path in a writable directory");
        return -1;
    }
    write_document(a.f, j);
    if (kvc_atomic_commit(&a, error, error_size)) {
        kvc_error_hint(error, error_size, "check the free space there; the old file, if any, is unchanged");
        return -1;
    }
    return 0;
}

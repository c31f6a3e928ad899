/* The command lines of the kvcmp commands: getopt_long over a table that
 * says, for each option, where its value goes and which values it takes.
 * Every number is parsed completely and range-checked ("10x" is not 10,
 * "abc" is not 0); a bad value, a missing one or an unknown option is an
 * error that names the option, with exit status 2.  --help and -h print
 * the command's usage to stdout.  Adding an option is one table row. */
#ifndef KVCMP_OPTIONS_H
#define KVCMP_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    KVC_OPT_FLAG,     /* no value: *(int *)target = 1 */
    KVC_OPT_STRING,   /* *(const char **)target = the value */
    KVC_OPT_INT,      /* *(int *)target, a whole number in [min, max] */
    KVC_OPT_INT64,    /* *(int64_t *)target, a whole number in [min, max] */
    KVC_OPT_UINT64,   /* *(uint64_t *)target, any 64-bit value, decimal or 0x hex */
    KVC_OPT_DOUBLE,   /* *(double *)target, a finite number in [low, high] */
    KVC_OPT_CUSTOM,   /* parse(value, target, why, size) */
} kvc_option_kind;

/* Parses value into target; 0, or non-zero with why (the whole message
 * after "kvcmp COMMAND: ", e.g. "unknown policy 'x' (exact or vllm)"). */
typedef int (*kvc_option_parser)(const char *value, void *target, char *why, size_t size);

typedef struct {
    const char *name;          /* without the leading "--" */
    kvc_option_kind kind;
    void *target;
    int64_t min, max;          /* KVC_OPT_INT, KVC_OPT_INT64 */
    double low, high;          /* KVC_OPT_DOUBLE */
    kvc_option_parser parse;   /* KVC_OPT_CUSTOM */
    int *given;                /* when set: the option's position among the options given (1, 2, ...) */
} kvc_option;

typedef struct {
    const char *command;        /* "fuzz": messages start with "kvcmp fuzz: " */
    const kvc_option *options;  /* ends with an entry whose name is NULL */
    void (*usage)(FILE *out);
    int max_operands;           /* arguments that are not options (paths); -1: any number */
} kvc_command_line;

enum { KVC_OPTIONS_OK = 0, KVC_OPTIONS_HELP = 1, KVC_OPTIONS_ERROR = 2 };

/* Parses argv[0..argc), the arguments after the command's name; options
 * may come before or after the operands, and every argument after "--"
 * is an operand.  Returns KVC_OPTIONS_OK with the operands in
 * operands[0..*num_operands) (room for argc entries, or max_operands when
 * that is not -1), KVC_OPTIONS_HELP after printing the usage to
 * stdout, or KVC_OPTIONS_ERROR after printing what is wrong and the
 * usage to stderr. */
int kvc_parse_command_line(const kvc_command_line *line, int argc, char **argv, char **operands, int *num_operands);

/* A usage error found after parsing (a combination of options, a missing
 * path): prints "kvcmp COMMAND: " and the message, then the usage, to
 * stderr.  Returns KVC_OPTIONS_ERROR, the exit status of a usage error. */
int kvc_usage_error(const kvc_command_line *line, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Complete parses of one number: 0 when all of text is one number (no
 * sign for the unsigned one, no space, nothing after it, in range of the
 * type; a double finite), else -1. */
int kvc_parse_int64_text(const char *text, int64_t *out);
int kvc_parse_uint64_text(const char *text, uint64_t *out);
int kvc_parse_double_text(const char *text, double *out);

/* Shared custom parsers. */
int kvc_option_policy(const char *value, void *target, char *why, size_t size);   /* exact|vllm -> kvc_policy */
int kvc_option_shard(const char *value, void *target, char *why, size_t size);    /* I/N -> int[2] {I, N}, 0 <= I < N */

/* "kvcmp 1.0.0 (commit 0123abcd)": the Makefile's KVCMP_VERSION and the
 * git commit the build was made from, when it knew one. */
const char *kvc_version_string(void);

/* word as one shell word that the shell reads back as exactly word and
 * that runs nothing (printf %q's style): as it is when it holds only
 * characters no shell treats specially, else in single quotes, else (a
 * control character or a byte outside ASCII) as $'...' with \xNN
 * escapes.  Returns the length it needs; when that does not fit in size
 * bytes, out is "" (never a word cut short). */
size_t kvc_shell_quote(const char *word, char *out, size_t size);

/* How this process's user runs kvcmp, for the __REPRO lines every job
 * prints: the path the command was run by ("build/kvcmp"), "kvcmp" when
 * the shell found it on PATH, "/usr/bin/python3 -m kvcmp" from Python.
 * "kvcmp" until a front end sets it. */
void kvc_set_invocation(const char *command);
const char *kvc_invocation(void);

#endif

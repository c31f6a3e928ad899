/* kvcmp command lines: see options.h. */
#include "harness/options/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/compare.h"

/* getopt_long's val for table row i; below it, 'h' for -h. */
#define FIRST_OPTION_VALUE 1000

/* ---- numbers ------------------------------------------------------------ */

/* strto* skip leading space and accept a sign; a command-line number
 * starts with a digit (or '-' where negatives can be meant) instead. */
static int starts_like_a_number(const char *text, int allow_minus) {
    if (allow_minus && text[0] == '-') text++;
    return isdigit((unsigned char)text[0]) || (text[0] == '.' && isdigit((unsigned char)text[1]));
}

int kvc_parse_int64_text(const char *text, int64_t *out) {
    if (!starts_like_a_number(text, 1)) return -1;
    char *end;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || *end) return -1;
    *out = value;
    return 0;
}

int kvc_parse_uint64_text(const char *text, uint64_t *out) {
    if (!starts_like_a_number(text, 0)) return -1;
    int hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, hex ? 16 : 10);
    if (errno || *end) return -1;
    *out = value;
    return 0;
}

int kvc_parse_double_text(const char *text, double *out) {
    if (!starts_like_a_number(text, 1)) return -1;
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno || *end || !isfinite(value)) return -1;
    *out = value;
    return 0;
}

/* ---- one option's value -------------------------------------------------- */

static int parse_integer(const kvc_option *o, const char *value, char *why, size_t size) {
    int64_t n;
    if (kvc_parse_int64_text(value, &n) || n < o->min || n > o->max) {
        snprintf(why, size, "--%s takes a whole number from %" PRId64 " to %" PRId64 ", not '%s'", o->name, o->min, o->max, value);
        return -1;
    }
    if (o->kind == KVC_OPT_INT) *(int *)o->target = (int)n;
    else *(int64_t *)o->target = n;
    return 0;
}

static int parse_value(const kvc_option *o, const char *value, char *why, size_t size) {
    switch (o->kind) {
    case KVC_OPT_FLAG: *(int *)o->target = 1; return 0;
    case KVC_OPT_STRING: *(const char **)o->target = value; return 0;
    case KVC_OPT_INT:
    case KVC_OPT_INT64: return parse_integer(o, value, why, size);
    case KVC_OPT_UINT64:
        if (kvc_parse_uint64_text(value, (uint64_t *)o->target) == 0) return 0;
        snprintf(why, size, "--%s takes a whole number from 0 to 2^64-1 (decimal or 0x hex), not '%s'", o->name, value);
        return -1;
    case KVC_OPT_DOUBLE: {
        double x;
        if (kvc_parse_double_text(value, &x) == 0 && x >= o->low && x <= o->high) { *(double *)o->target = x; return 0; }
        snprintf(why, size, "--%s takes a number from %g to %g, not '%s'", o->name, o->low, o->high, value);
        return -1;
    }
    default: return o->parse(value, o->target, why, size) ? -1 : 0;
    }
}

int kvc_option_policy(const char *value, void *target, char *why, size_t size) {
    if (strcmp(value, "exact") == 0) *(kvc_policy *)target = KVC_POLICY_EXACT;
    else if (strcmp(value, "vllm") == 0) *(kvc_policy *)target = KVC_POLICY_VLLM;
    else { snprintf(why, size, "unknown policy '%s' (exact or vllm)", value); return -1; }
    return 0;
}

/* --shard I/N: both whole numbers, 0 <= I < N. */
int kvc_option_shard(const char *value, void *target, char *why, size_t size) {
    int *index_and_count = target;
    const char *slash = strchr(value, '/');
    char index_text[32];
    int64_t index = -1, count = 0;
    if (slash && (size_t)(slash - value) < sizeof index_text) {
        memcpy(index_text, value, (size_t)(slash - value));
        index_text[slash - value] = 0;
        if (kvc_parse_int64_text(index_text, &index) || kvc_parse_int64_text(slash + 1, &count)) count = 0;
    }
    if (count < 1 || count > INT32_MAX || index < 0 || index >= count) {
        snprintf(why, size, "--shard takes I/N with 0 <= I < N, e.g. --shard 0/4, not '%s'", value);
        return -1;
    }
    index_and_count[0] = (int)index;
    index_and_count[1] = (int)count;
    return 0;
}

/* ---- the command line ---------------------------------------------------- */

static void vreport(const kvc_command_line *line, const char *format, va_list args) {
    fprintf(stderr, "kvcmp %s: ", line->command);
    vfprintf(stderr, format, args);
    fprintf(stderr, " (see kvcmp %s --help)\n", line->command);
    line->usage(stderr);
}

int kvc_usage_error(const kvc_command_line *line, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vreport(line, format, args);
    va_end(args);
    return KVC_OPTIONS_ERROR;
}

static int count_options(const kvc_option *options) {
    int n = 0;
    while (options[n].name) n++;
    return n;
}

/* getopt_long's '?' or ':': name the option and what is wrong with it. */
static int refuse(const kvc_command_line *line, int got, char **args) {
    if (got == ':') return kvc_usage_error(line, "--%s needs a value", line->options[optopt - FIRST_OPTION_VALUE].name);
    if (optopt >= FIRST_OPTION_VALUE) return kvc_usage_error(line, "--%s takes no value", line->options[optopt - FIRST_OPTION_VALUE].name);
    if (optopt) return kvc_usage_error(line, "unknown option '-%c'", optopt);
    return kvc_usage_error(line, "unknown option '%s'", args[optind - 1]);
}

/* Runs getopt_long over args (args[0] is the command's name). */
static int parse_options(const kvc_command_line *line, int argc, char **args, const struct option *table) {
    int position = 0;
    optind = 0;   /* glibc: start over, a command may be parsed twice in one process */
    opterr = 0;
    for (int got; (got = getopt_long(argc, args, ":h", table, NULL)) != -1;) {
        if (got == 'h') { line->usage(stdout); return KVC_OPTIONS_HELP; }
        if (got == '?' || got == ':') return refuse(line, got, args);
        const kvc_option *o = &line->options[got - FIRST_OPTION_VALUE];
        char why[512];
        if (parse_value(o, optarg, why, sizeof why)) return kvc_usage_error(line, "%s", why);
        if (o->given) *o->given = ++position;
    }
    return KVC_OPTIONS_OK;
}

int kvc_parse_command_line(const kvc_command_line *line, int argc, char **argv, char **operands, int *num_operands) {
    int count = count_options(line->options);
    struct option table[count + 2];
    for (int i = 0; i < count; i++)
        table[i] = (struct option){line->options[i].name, line->options[i].kind == KVC_OPT_FLAG ? no_argument : required_argument,
                                   NULL, FIRST_OPTION_VALUE + i};
    table[count] = (struct option){"help", no_argument, NULL, 'h'};
    table[count + 1] = (struct option){0};
    /* getopt_long permutes its vector: a copy, with the name in front. */
    char name[64], *args[argc + 2];
    snprintf(name, sizeof name, "kvcmp %s", line->command);
    args[0] = name;
    memcpy(args + 1, argv, (size_t)argc * sizeof *args);
    args[argc + 1] = NULL;
    int status = parse_options(line, argc + 1, args, table);
    if (status != KVC_OPTIONS_OK) return status;
    int found = argc + 1 - optind;
    if (line->max_operands >= 0 && found > line->max_operands)
        return kvc_usage_error(line, "unexpected argument '%s'", args[optind + line->max_operands]);
    for (int i = 0; i < found; i++) operands[i] = args[optind + i];
    *num_operands = found;
    return KVC_OPTIONS_OK;
}

size_t kvc_shell_quote(const char *word, char *out, size_t size) {
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%";
    char buffer[8];
    size_t n = 0;
    /* Appends text when the whole of it fits; n counts what is needed. */
#define PUT(text)                                                                                      \
    do {                                                                                               \
        const char *t_ = (text);                                                                       \
        size_t k_ = strlen(t_);                                                                        \
        if (n + k_ < size) memcpy(out + n, t_, k_);                                                    \
        n += k_;                                                                                       \
    } while (0)
    int plain = word[0] != 0 && word[0] != '=' && word[strspn(word, safe)] == 0, printable = 1;
    for (const unsigned char *p = (const unsigned char *)word; *p; p++) printable &= *p >= 0x20 && *p < 0x7F;
    if (plain) {
        PUT(word);
    } else if (printable) {
        PUT("'");
        for (const char *p = word; *p; p++) {
            if (*p == '\'') PUT("'\\''");
            else { buffer[0] = *p; buffer[1] = 0; PUT(buffer); }
        }
        PUT("'");
    } else {
        /* Bytes a terminal would act on: $'...' with \xNN, as printf %q writes them. */
        PUT("$'");
        for (const unsigned char *p = (const unsigned char *)word; *p; p++) {
            if (*p == '\'' || *p == '\\') { buffer[0] = '\\'; buffer[1] = (char)*p; buffer[2] = 0; }
            else if (*p >= 0x20 && *p < 0x7F) { buffer[0] = (char)*p; buffer[1] = 0; }
            else snprintf(buffer, sizeof buffer, "\\x%02x", *p);
            PUT(buffer);
        }
        PUT("'");
    }
#undef PUT
    if (size) out[n < size ? n : 0] = 0;
    return n;
}

static char invocation[512] = "kvcmp";

void kvc_set_invocation(const char *command) {
    if (command == invocation) return;
    snprintf(invocation, sizeof invocation, "%s", command && command[0] ? command : "kvcmp");
}

const char *kvc_invocation(void) { return invocation; }

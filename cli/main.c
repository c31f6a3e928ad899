/* kvcmp: the command-line entry point. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "harness/options/options.h"
#include "optimized/optimized.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"replay", kvc_cmd_replay, "run case directories through an implementation and compare every byte"},
    {"fuzz", kvc_cmd_fuzz, "differential fuzzing of an implementation against the reference"},
    {"gen", kvc_cmd_gen, "write the fuzzer's generated cases as case directories (for outside implementations)"},
    {"merge", kvc_cmd_merge, "combine the JSON summaries of a campaign's --shard runs into one signature list"},
    {"bench", kvc_cmd_bench, "throughput of the reference and optimized backends"},
    {"report", kvc_cmd_report, "precision and upstream-parity reports"},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fprintf(out, "usage: kvcmp COMMAND [options]\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++) fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "Run 'kvcmp COMMAND --help' for a command's options; 'kvcmp --version' for the version.\n");
}

static int run_command(const char *name, int argc, char **argv) {
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run(argc, argv);
    fprintf(stderr, "kvcmp: unknown command '%s'\n", name);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    /* __REPRO lines name the command as it was run: the path typed, or
     * "kvcmp" when the shell found it on PATH. */
    char quoted[512];
    kvc_set_invocation(!strchr(argv[0], '/') || kvc_shell_quote(argv[0], quoted, sizeof quoted) >= sizeof quoted ? "kvcmp" : quoted);
    if (argc < 2) { usage(stderr); return 2; }
    const char *first = argv[1];
    if (strcmp(first, "--version") == 0) {
        char paths[1024];
        kvc_optimized_describe(paths, sizeof paths);
        printf("%s\n%s\n", kvc_version_string(), paths);
        return 0;
    }
    if (strcmp(first, "help") == 0 || strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        /* `kvcmp help fuzz` is `kvcmp fuzz --help`, rewritten in place:
         * fuzz re-executes itself with main's argv. */
        if (argc > 2) {
            argv[1] = argv[2];
            argv[2] = (char *)"--help";
            return run_command(argv[1], 1, argv + 2);
        }
        usage(stdout);
        return 0;
    }
    return run_command(first, argc - 2, argv + 2);
}

/* kvcmp: the command-line entry point. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"replay", kvc_cmd_replay, "run case directories through an implementation and compare every byte"},
    {"fuzz", kvc_cmd_fuzz, "differential fuzzing of an implementation against the reference"},
    {"gen", kvc_cmd_gen, "write the fuzzer's generated cases as case directories (for outside implementations)"},
    {"bench", kvc_cmd_bench, "throughput of the reference and optimized backends"},
    {"report", kvc_cmd_report, "precision and upstream-parity reports"},
};

static void usage(void) {
    fprintf(stderr, "usage: kvcmp COMMAND [options]\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(stderr, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(stderr, "Run 'kvcmp COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(); return 2; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "kvcmp: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
}

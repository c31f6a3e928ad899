/* kvcmp: the command-line entry point. */
#include <stdio.h>
#include <string.h>

#include "replay.h"

static void usage(void) {
    fprintf(stderr,
            "usage: kvcmp COMMAND [options]\n"
            "  replay   run case directories through an implementation and compare every byte\n"
            "Run 'kvcmp COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(); return 2; }
    if (strcmp(argv[1], "replay") == 0) return kvc_cmd_replay(argc - 2, argv + 2);
    usage();
    return 2;
}

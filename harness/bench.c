/* kvcmp bench: placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int kvc_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvcmp bench: not built yet\n");
    return 2;
}

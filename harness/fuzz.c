/* kvcmp fuzz: placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int kvc_cmd_fuzz(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvcmp fuzz: not built yet\n");
    return 2;
}

/* kvcmp report: placeholder until its issue lands. */
#include <stdio.h>

#include "commands.h"

int kvc_cmd_report(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvcmp report: not built yet\n");
    return 2;
}

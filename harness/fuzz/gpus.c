/* Workers spread over the visible GPUs: see gpus.h. */
#include "harness/fuzz/gpus.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The visible devices, comma-separated, and how many. */
static int visible_gpus(char *list, size_t size) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    list[0] = 0;
    if (visible) {
        snprintf(list, size, "%s", visible);
    } else {
        DIR *d = opendir("/proc/driver/nvidia/gpus");
        int n = 0;
        for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
        if (d) closedir(d);
        for (int i = 0, k = 0; i < n && k < (int)size - 8; i++) k += snprintf(list + k, size - (size_t)k, "%s%d", i ? "," : "", i);
    }
    int count = list[0] ? 1 : 0;
    for (const char *p = list; *p; p++) count += *p == ',';
    return count;
}

int kvc_gpu_for_job(int job, char *out, size_t size) {
    char list[256];
    int count = visible_gpus(list, sizeof list);
    out[0] = 0;
    if (count < 2) return 0;
    const char *start = list;
    for (int i = 0; i < job % count; i++) start = strchr(start, ',') + 1;
    snprintf(out, size, "%.*s", (int)strcspn(start, ","), start);
    return 1;
}

void kvc_spread_over_gpus(int job) {
    char one[64];
    if (kvc_gpu_for_job(job, one, sizeof one)) setenv("CUDA_VISIBLE_DEVICES", one, 1);
}

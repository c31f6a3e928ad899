/* Replays libFuzzer inputs without libFuzzer: each argument is a file or
 * a directory of files, each file one input to LLVMFuzzerTestOneInput.
 * Used by `make test` on fixtures/corpus and handy for a crash file. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay_corpus: cannot open %s\n", path); return 1; }
    uint8_t *data = malloc(1 << 20);
    size_t size = fread(data, 1, 1 << 20, f);
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

int main(int argc, char **argv) {
    int inputs = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "replay_corpus: no such file %s\n", argv[i]); errors++; continue; }
        if (!S_ISDIR(st.st_mode)) { errors += run_file(argv[i]); inputs++; continue; }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            errors += run_file(path);
            inputs++;
        }
        if (d) closedir(d);
    }
    printf("replay_corpus: %d inputs replayed, none failed\n", inputs - errors);
    return errors ? 1 : 0;
}

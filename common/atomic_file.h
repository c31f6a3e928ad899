/* Output files written whole or not at all, and never through a link.
 *
 * Every file kvcmp writes (JSON summaries, JUnit XML, reports, bench
 * tables, .npy tensors, case.json) is written to a new temporary beside
 * its target and renamed over the target once every write, the flush and
 * the close succeeded: a full disk (ENOSPC, EFBIG) or a kill leaves the
 * old file or none, never a torn one.  The temporary is created with
 * O_CREAT|O_EXCL, which fails on any existing name, a symbolic link
 * included, so a link planted at a temporary's name is never opened (the
 * next name is tried).  A target that is a symbolic link is refused:
 * rename would replace the link itself, not the file it points to, but a
 * link where kvcmp writes is a mistake or a plant, and saying so is
 * better than replacing it silently.  The directories above the target
 * are the caller's, used as given. */
#ifndef KVCMP_COMMON_ATOMIC_FILE_H
#define KVCMP_COMMON_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;            /* the temporary: write through it between open and commit */
    int fd;
    int write_errno;    /* the last write's or the close's failure: ENOSPC, EFBIG... */
    char path[4096];    /* the target */
    char temp[4200];
} kvc_atomic_file;

/* Opens a temporary for path.  0, or -1 with "cannot write PATH: REASON"
 * in error (nothing created).  a->f writes through a, which must stay
 * where it is until the commit or the abort. */
int kvc_atomic_open(kvc_atomic_file *a, const char *path, char *error, size_t error_size);

/* Closes the temporary and renames it over the target.  0, or -1 with
 * "cannot write PATH: REASON" (the first write, flush or close error:
 * No space left on device, File too large...) in error; the temporary is
 * removed and the target is left as it was. */
int kvc_atomic_commit(kvc_atomic_file *a, char *error, size_t error_size);

/* Drops the temporary; the target is left as it was. */
void kvc_atomic_abort(kvc_atomic_file *a);

/* text and a newline, through open and commit. */
int kvc_atomic_write_text(const char *path, const char *text, char *error, size_t error_size);

/* 1, with why, when path cannot be an output file whatever its folder:
 * it is a symbolic link or a folder.  Checked by commands before a long
 * run, so that the run is not lost to a refusal at its end. */
int kvc_output_target_refused(const char *path, char *why, size_t size);

/* Appends " (HINT)" to an error message: what to do next. */
void kvc_error_hint(char *error, size_t error_size, const char *hint);

/* 1 when name can only name an entry of the directory it is joined to:
 * not empty, no '/', no "..", no leading '.' (hidden names are the
 * temporaries'), no control characters, shorter than 256 bytes. */
int kvc_plain_name(const char *name);

#endif

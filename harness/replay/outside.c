/* Outputs of an implementation that ran elsewhere (a GPU, another
 * process): see replay.h.  The reference runs on the case's inputs and
 * is always "expected"; the outside bytes are "got". */
#include "harness/replay/replay.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvcmp/validate.h"

/* The outside output NAME, as the tensor NAME.got of the case. */
static const kvc_array *outside_output(const kvc_case *c, const char *name) {
    char got_name[64];
    snprintf(got_name, sizeof got_name, "%.40s.got", name);
    return kvc_case_get(c, got_name);
}

int kvc_has_outside_outputs(const kvc_case *c) {
    for (int i = 0; i < c->num_tensors; i++) {
        size_t n = strlen(c->tensors[i].name);
        if (n > 4 && strcmp(c->tensors[i].name + n - 4, ".got") == 0) return 1;
    }
    return 0;
}

/* CASE: the last component of the case directory's path. */
static void case_name(const char *case_dir, char *out, size_t size) {
    size_t end = strlen(case_dir);
    while (end > 1 && case_dir[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && case_dir[start - 1] != '/') start--;
    snprintf(out, size, "%.*s", (int)(end - start), case_dir + start);
}

int kvc_load_outside_outputs(kvc_case *c, const char *outputs_dir, const char *case_dir, char *error, size_t error_size) {
    char name[1024];
    case_name(case_dir, name, sizeof name);
    const char *names[KVC_MAX_OUTPUTS];
    int n = kvc_stage_outputs(c, names);
    for (int i = 0; i < n; i++) {
        char path[4096], got_name[64];
        snprintf(path, sizeof path, "%s/%s/%s.npy", outputs_dir, name, names[i]);
        if (access(path, F_OK) != 0) continue;   /* absent: judged by kvc_compare_outside */
        kvc_array a;
        if (kvc_npy_read(path, &a, error, error_size)) return -1;
        snprintf(got_name, sizeof got_name, "%.40s.got", names[i]);
        if (kvc_case_put(c, got_name, &a)) { kvc_array_free(&a); snprintf(error, error_size, "%s: too many tensors", path); return -1; }
    }
    return 0;
}

/* A case the reference rejects: the outside implementation must have
 * rejected it too - no outputs, or outputs equal to the inputs. */
static int outside_rejection(const kvc_case *c, const kvc_run_result *ref, char *detail, size_t size) {
    for (int i = 0; i < ref->num_outputs; i++) {
        const kvc_array *got = outside_output(c, ref->outputs[i].name), *input = kvc_case_get(c, ref->outputs[i].name);
        if (!got) continue;
        size_t bytes = (size_t)got->count * (size_t)kvc_dtype_size(got->dtype);
        if (!input || input->dtype != got->dtype || input->count != got->count || memcmp(input->data, got->data, bytes) != 0) {
            snprintf(detail, size, "the reference rejects the case (%s: %.300s) but the outside %s differs from its input",
                     kvc_status_name(ref->status), ref->error.message, ref->outputs[i].name);
            return 1;
        }
    }
    snprintf(detail, size, "rejected by the reference (%s: %.300s), no outside output written", kvc_status_name(ref->status),
             ref->error.message);
    return 0;
}

int kvc_compare_outside(const kvc_case *c, kvc_policy policy, kvc_compare_report *report, char *detail, size_t size) {
    memset(report, 0, sizeof *report);
    kvc_run_result ref;
    kvc_run_options run = {.page_padding = 0, .canary = 0xA5, .keep_outputs_on_error = 1};
    int failed = 1;
    if (kvc_run_case(&kvc_reference_backend, c, &run, &ref) != KVC_OK) {
        failed = outside_rejection(c, &ref, detail, size);
        kvc_run_result_free(&ref);
        return failed;
    }
    kvc_run_result got;
    memset(&got, 0, sizeof got);
    for (int i = 0; i < ref.num_outputs; i++) {
        const kvc_array *a = outside_output(c, ref.outputs[i].name);
        const kvc_array *want = &ref.outputs[i].array;
        if (!a || a->dtype != want->dtype || a->count != want->count) {
            snprintf(detail, size,
                     "outside output %s is %s (the reference writes %s %lld elements; give it as OUTPUTS/CASE/%s.npy with "
                     "--outputs OUTPUTS, or as %s.got.npy in the case directory)",
                     ref.outputs[i].name, a ? "misshapen" : "missing", kvc_dtype_descr(want->dtype), (long long)want->count,
                     ref.outputs[i].name, ref.outputs[i].name);
            kvc_run_result_free(&ref);
            return 1;
        }
        got.outputs[i] = ref.outputs[i];
        got.outputs[i].array = *a;   /* borrowed from the case, not freed */
        got.num_outputs++;
    }
    kvc_compare_results(c, &ref, &got, policy, report);
    failed = kvc_report_failed(report);
    char summary[700];
    kvc_report_summary(report, summary, sizeof summary);
    if (failed) snprintf(detail, size, "%s; first: %s", summary, report->has_first ? report->first : "-");
    else snprintf(detail, size, "%s", summary[0] ? summary : "bit-exact");
    kvc_run_result_free(&ref);
    return failed;
}

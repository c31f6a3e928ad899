/* Outputs of an implementation that ran elsewhere (a GPU, another
 * process): see replay.h.  The reference runs on the case's inputs and
 * is always "expected"; the outside bytes are "got", and the outside
 * runner's status file says whether it ran, rejected or crashed. */
#include "harness/replay/replay.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/compare/causes.h"
#include "harness/report/run_info.h"
#include "kvcmp/deviations.h"
#include "kvcmp/validate.h"

/* The outside output NAME, as the tensor NAME.got of the case. */
static const kvc_array *outside_output(const kvc_case *c, const char *name) {
    char got_name[64];
    snprintf(got_name, sizeof got_name, "%.40s.got", name);
    return kvc_case_get(c, got_name);
}

const char *kvc_outside_state_name(kvc_outside_state state) {
    switch (state) {
    case KVC_OUTSIDE_RAN: return "ran";
    case KVC_OUTSIDE_REJECTED: return "rejected";
    case KVC_OUTSIDE_CRASHED: return "crashed";
    default: return "missing";
    }
}

int kvc_has_outside_outputs(const kvc_case *c, const char *case_dir) {
    for (int i = 0; i < c->num_tensors; i++) {
        size_t n = strlen(c->tensors[i].name);
        if (n > 4 && strcmp(c->tensors[i].name + n - 4, ".got") == 0) return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", case_dir, KVC_OUTSIDE_GOT_STATUS_FILE);
    return access(path, F_OK) == 0;
}

/* The status file at status->path: absent is NO_STATUS, anything but
 * {"status": "ran"|"rejected"|"crashed", "message": STRING?} an error. */
static int read_status(kvc_outside_status *status, char *error, size_t error_size) {
    status->state = KVC_OUTSIDE_NO_STATUS;
    status->message[0] = 0;
    if (access(status->path, F_OK) != 0) return 0;
    uint8_t *bytes;
    size_t size;
    char inner[512];
    if (kvc_read_regular_file(status->path, &bytes, &size, inner, sizeof inner)) {
        snprintf(error, error_size, "cannot read the outside status file: %s", inner);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength((const char *)bytes, size);
    free(bytes);
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(root, "status");
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(root, "message");
    static const char *const names[] = {"ran", "rejected", "crashed"};
    int found = -1;
    for (int i = 0; i < 3 && cJSON_IsString(state); i++)
        if (strcmp(state->valuestring, names[i]) == 0) found = i;
    const char *twice = cJSON_IsObject(root) ? kvc_json_duplicated_key(root) : NULL;
    char shown[300];
    if (twice) {
        snprintf(error, error_size, "%s: the key \"%.100s\" appears twice: kvcmp (the first) and Python's json (the last) would read "
                 "different statuses, so the file is refused (write each key once, e.g. json.dump of a dict)", status->path,
                 kvc_escape_text(twice, shown, sizeof shown));
    } else if (!cJSON_IsObject(root)) {
        snprintf(error, error_size, "%s: not a JSON object (an outside status file is {\"status\": \"ran\"|\"rejected\"|\"crashed\", "
                 "\"message\": \"...\"})", status->path);
    } else if (found < 0) {
        snprintf(error, error_size, "%s: \"status\" must be \"ran\", \"rejected\" or \"crashed\", found %s%.40s%s", status->path,
                 cJSON_IsString(state) ? "\"" : "", cJSON_IsString(state) ? state->valuestring : state ? "another type" : "nothing",
                 cJSON_IsString(state) ? "\"" : "");
    } else if (message && !cJSON_IsString(message) && !cJSON_IsNull(message)) {
        snprintf(error, error_size, "%s: \"message\" must be a string", status->path);
    } else {
        status->state = (kvc_outside_state)(KVC_OUTSIDE_RAN + found);
        if (cJSON_IsString(message)) snprintf(status->message, sizeof status->message, "%s", message->valuestring);
        cJSON_Delete(root);
        return 0;
    }
    cJSON_Delete(root);
    return -1;
}

int kvc_load_outside_outputs(kvc_case *c, const char *outputs_dir, const char *case_dir, kvc_outside_status *status, char *error,
                             size_t error_size) {
    memset(status, 0, sizeof *status);
    if (!outputs_dir) {
        snprintf(status->path, sizeof status->path, "%s/%s", case_dir, KVC_OUTSIDE_GOT_STATUS_FILE);
        return read_status(status, error, error_size);
    }
    char name[1024];
    kvc_case_dir_name(case_dir, name, sizeof name);
    snprintf(status->path, sizeof status->path, "%.500s/%.500s/%s", outputs_dir, name, KVC_OUTSIDE_STATUS_FILE);
    if (read_status(status, error, error_size)) return -1;
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

/* The outside message, as " (MESSAGE)" or "". */
static void said(const kvc_outside_status *status, char *out, size_t size) {
    if (status->message[0]) snprintf(out, size, ": %.400s", status->message);
    else snprintf(out, size, "%s", status->state == KVC_OUTSIDE_CRASHED ? " (no message)" : "");
}

int kvc_outside_status_verdict(const kvc_case *c, const kvc_outside_status *status, int ref_status, const kvc_run_result *ref,
                               char *detail, size_t size) {
    char why[420], reference[400];
    said(status, why, sizeof why);
    if (ref_status != KVC_OK) snprintf(reference, sizeof reference, "the reference rejects the case (%s: %.300s)", kvc_status_name(ref_status), ref->error.message);
    else snprintf(reference, sizeof reference, "the reference runs the case");
    switch (status->state) {
    case KVC_OUTSIDE_NO_STATUS:
        snprintf(detail, size, "no outside status: %s is missing (the outside runner died before writing it, or never ran the case); %s",
                 status->path, reference);
        return 1;
    case KVC_OUTSIDE_CRASHED:
        snprintf(detail, size, "the outside runner crashed%s; %s", why, reference);
        return 1;
    case KVC_OUTSIDE_REJECTED:
        if (ref_status == KVC_OK) { snprintf(detail, size, "the outside runner rejected a case the reference runs%s", why); return 1; }
        break;
    case KVC_OUTSIDE_RAN:
        if (ref_status == KVC_OK) return -1;
        snprintf(detail, size, "the outside runner ran the case, but the reference rejects it (%s: %.300s)", kvc_status_name(ref_status),
                 ref->error.message);
        return 1;
    }
    /* Both rejected: the outside side must have written nothing - no
     * outputs, or outputs equal to the inputs. */
    for (int i = 0; i < ref->num_outputs; i++) {
        const kvc_array *got = outside_output(c, ref->outputs[i].name), *input = kvc_case_get(c, ref->outputs[i].name);
        if (!got) continue;
        size_t bytes = (size_t)got->count * (size_t)kvc_dtype_size(got->dtype);
        if (!input || input->dtype != got->dtype || input->count != got->count || memcmp(input->data, got->data, bytes) != 0) {
            snprintf(detail, size, "%s and the outside runner rejected it too, but the outside %s differs from its input", reference,
                     ref->outputs[i].name);
            return 1;
        }
    }
    snprintf(detail, size, "rejected by the reference (%s: %.300s) and by the outside runner%s, no outside output written",
             kvc_status_name(ref_status), ref->error.message, why);
    return 0;
}

/* What a differing case's diagnosis may spend on pairs and compositions of deviations. */
#define OUTSIDE_DIAGNOSIS_SECONDS 2.0

int kvc_compare_outside(const kvc_case *c, const kvc_outside_status *status, kvc_policy policy, kvc_compare_report *report,
                        char *detail, size_t size) {
    memset(report, 0, sizeof *report);
    kvc_run_result ref;
    kvc_run_options run = {.page_padding = 0, .canary = 0xA5, .keep_outputs_on_error = 1};
    int ref_status = kvc_run_case(&kvc_reference_backend, c, &run, &ref);
    int failed = kvc_outside_status_verdict(c, status, ref_status, &ref, detail, size);
    if (failed >= 0) {
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
    if (failed) {
        /* The causes of the differences, as report parity and the fuzzer's
         * signatures name them. */
        int64_t counts[KVC_CAUSE_COUNT];
        char causes[300] = "";
        kvc_cause_counts(c, &ref, &got, counts);
        kvc_cause_summary(counts, causes, sizeof causes);
        snprintf(detail, size, "%s; first: %s%s%s; ", summary, report->has_first ? report->first : "-", causes[0] ? "; causes: " : "", causes);
        size_t n = strlen(detail);
        kvc_diagnose_clause(c, &run, &got, OUTSIDE_DIAGNOSIS_SECONDS, detail + n, size - n);
    } else {
        snprintf(detail, size, "%s", summary[0] ? summary : "bit-exact");
    }
    kvc_run_result_free(&ref);
    return failed;
}

/* Workers spread over the visible GPUs (harness/fuzz/gpus.c), tested with
 * a stand-in device list: job j's worker sees device j mod N of
 * CUDA_VISIBLE_DEVICES, the summary and the JSON name each job's device,
 * and a single visible device is left as it is. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "harness/fuzz/gpus.h"
#include "tests/test_support.h"

Test(gpus, jobs_take_the_visible_devices_in_turn) {
    setenv("CUDA_VISIBLE_DEVICES", "3,5,GPU-7f", 1);
    const char *want[] = {"3", "5", "GPU-7f", "3", "5", "GPU-7f", "3"};
    for (int job = 0; job < 7; job++) {
        char device[64] = "?";
        cr_assert_eq(kvc_gpu_for_job(job, device, sizeof device), 1);
        cr_expect_str_eq(device, want[job], "job %d", job);
    }
}

Test(gpus, one_visible_device_is_not_narrowed) {
    setenv("CUDA_VISIBLE_DEVICES", "2", 1);
    char device[64] = "?";
    cr_expect_eq(kvc_gpu_for_job(1, device, sizeof device), 0);
    cr_expect_str_empty(device);
    kvc_spread_over_gpus(1);
    cr_expect_str_eq(getenv("CUDA_VISIBLE_DEVICES"), "2");
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    cr_expect_eq(kvc_gpu_for_job(0, device, sizeof device), 0);
}

/* A campaign of three jobs over "4,6": each worker's candidate saw one
 * device, job 0 and 2 device 4, job 1 device 6, and the outputs say so. */
Test(gpus, each_worker_sees_its_device_and_the_outputs_name_it, .timeout = 120) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    char plugin[1024], out[] = "/tmp/kvcmp-gpus-XXXXXX", log[1200], json[1200];
    snprintf(plugin, sizeof plugin, "%s/records_device.so", dir && dir[0] ? dir : "build/test-plugins");
    if (!support_file_exists(plugin)) cr_skip_test("%s not built (make test builds tests/plugins/candidate.c into it)", plugin);
    cr_assert_not_null(mkdtemp(out));
    snprintf(log, sizeof log, "%s/devices.log", out);
    snprintf(json, sizeof json, "%s/summary.json", out);
    setenv("KVCMP_TEST_DEVICE_LOG", log, 1);
    setenv("CUDA_VISIBLE_DEVICES", "4,6", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    char *argv[] = {"--candidate", plugin, "--jobs", "3", "--cases", "60", "--seed", "5", "--threads", "1",
                    "--out", out, "--json", json, "--stage", "v41.rope_plain_insert"};
    captured_run run = support_capture(kvc_cmd_fuzz, (int)(sizeof argv / sizeof *argv), argv);
    cr_assert_eq(run.status, 0, "%s%s", run.out, run.err);
    cr_expect(strstr(run.err, "job 0: 4 job 1: 6 job 2: 4") != NULL, "%s", run.err);
    /* Every call's worker saw a single device, 4 or 6, and both were used. */
    char *text = support_read_file(log);
    int calls = 0, saw[2] = {0, 0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), calls++) {
        const char *device = strchr(line, ' ') + 1;
        cr_expect(strcmp(device, "4") == 0 || strcmp(device, "6") == 0, "a worker saw CUDA_VISIBLE_DEVICES=%s", device);
        saw[strcmp(device, "6") == 0]++;
    }
    cr_expect_gt(calls, 0);
    cr_expect(saw[0] > 0 && saw[1] > 0, "device 4 took %d calls, device 6 %d", saw[0], saw[1]);
    free(text);
    char *summary = support_read_file(json);
    cJSON *root = cJSON_Parse(summary);
    cJSON *devices = cJSON_GetObjectItem(root, "worker_devices");
    cr_assert_eq(cJSON_GetArraySize(devices), 3);
    cr_expect_str_eq(cJSON_GetArrayItem(devices, 0)->valuestring, "4");
    cr_expect_str_eq(cJSON_GetArrayItem(devices, 1)->valuestring, "6");
    cr_expect_str_eq(cJSON_GetArrayItem(devices, 2)->valuestring, "4");
    cJSON_Delete(root);
    free(summary);
    support_free_run(&run);
}

/* The strict command line (harness/options): every number is parsed
 * whole and range-checked, a bad value or option is named with exit
 * status 2 and nothing run, every help prints to stdout with status 0. */
#include "tests/cli/cli_support.h"

#include "harness/options/options.h"

/* main.c's dispatch under another name (test_main.c has its own copy). */
#define main options_test_main
#include "cli/main.c"
#undef main

/* ---- numbers ---------------------------------------------------------------- */

Test(cli_options, integers_are_parsed_whole) {
    int64_t n = 7;
    cr_expect_eq(kvc_parse_int64_text("42", &n), 0);
    cr_expect_eq(n, 42);
    cr_expect_eq(kvc_parse_int64_text("-5", &n), 0);
    cr_expect_eq(n, -5);
    static const char *const bad[] = {"", "abc", "10x", " 5", "+5", "-", "5 ", "1e3", "9223372036854775808", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = 7;
        cr_expect_eq(kvc_parse_int64_text(bad[i], &n), -1, "'%s' accepted as an integer", bad[i]);
        cr_expect_eq(n, 7, "'%s' changed the value", bad[i]);
    }
}

Test(cli_options, unsigned_integers_take_decimal_or_hex) {
    uint64_t n = 7;
    cr_expect_eq(kvc_parse_uint64_text("18446744073709551615", &n), 0);
    cr_expect_eq(n, UINT64_MAX);
    cr_expect_eq(kvc_parse_uint64_text("0x1F", &n), 0);
    cr_expect_eq(n, 31);
    cr_expect_eq(kvc_parse_uint64_text("010", &n), 0);
    cr_expect_eq(n, 10, "a leading zero read as octal");
    static const char *const bad[] = {"", "-1", "abc", "0x", "0xg", "12z", "18446744073709551616", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(kvc_parse_uint64_text(bad[i], &n), -1, "'%s' accepted as an unsigned integer", bad[i]);
}

Test(cli_options, doubles_are_finite_and_whole) {
    double x = 0;
    cr_expect_eq(kvc_parse_double_text(".5", &x), 0);
    cr_expect_eq(x, 0.5);
    cr_expect_eq(kvc_parse_double_text("-1.5e1", &x), 0);
    cr_expect_eq(x, -15.0);
    static const char *const bad[] = {"", "abc", "1s", "inf", "nan", "1e999", " 1", ".", "-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(kvc_parse_double_text(bad[i], &x), -1, "'%s' accepted as a number", bad[i]);
}

/* ---- the examples and every kind of refusal -------------------------------- */

static void expect_fuzz_refusal(int argc, char **argv, const char *needle) {
    captured_run run = run_fuzz(argc, argv);
    cr_expect_eq(run.status, 2, "exit status %d for %s %s", run.status, argv[0], argc > 1 ? argv[1] : "");
    expect_contains(run.err, needle, "stderr");
    expect_contains(run.err, "usage: kvcmp fuzz", "stderr");
    cr_expect_str_empty(run.out, "a refused command line ran something");
    support_free_run(&run);
}

Test(cli_options, fuzz_refuses_malformed_numbers) {
    char *seconds[] = {"--seconds", "abc"};
    expect_fuzz_refusal(ARGC(seconds), seconds, "kvcmp fuzz: --seconds takes a number from 0.001 to 1e+07, not 'abc' (see kvcmp fuzz --help)");
    char *cases[] = {"--cases", "-5"};
    expect_fuzz_refusal(ARGC(cases), cases, "kvcmp fuzz: --cases takes a whole number from 0 to 9223372036854775807, not '-5'");
    char *seed[] = {"--seed", "abc"};
    expect_fuzz_refusal(ARGC(seed), seed, "kvcmp fuzz: --seed takes a whole number from 0 to 2^64-1 (decimal or 0x hex), not 'abc'");
    char *suffix[] = {"--cases", "10x"};
    expect_fuzz_refusal(ARGC(suffix), suffix, "kvcmp fuzz: --cases takes a whole number from 0 to 9223372036854775807, not '10x'");
    char *rate[] = {"--invalid-rate", "1001"};
    expect_fuzz_refusal(ARGC(rate), rate, "kvcmp fuzz: --invalid-rate takes a whole number from 0 to 1000, not '1001'");
    char *failures[] = {"--max-failures", "0"};
    expect_fuzz_refusal(ARGC(failures), failures, "kvcmp fuzz: --max-failures takes a whole number from 1 to");
    char *shrink[] = {"--shrink-seconds", "-1"};
    expect_fuzz_refusal(ARGC(shrink), shrink, "kvcmp fuzz: --shrink-seconds takes a number from 0 to 1e+07, not '-1'");
    char *infinite[] = {"--seconds", "inf"};
    expect_fuzz_refusal(ARGC(infinite), infinite, "--seconds takes a number from 0.001 to 1e+07, not 'inf'");
}

Test(cli_options, fuzz_refuses_malformed_options) {
    char *flag_value[] = {"--quiet=1"};
    expect_fuzz_refusal(ARGC(flag_value), flag_value, "kvcmp fuzz: --quiet takes no value (see kvcmp fuzz --help)");
    char *short_option[] = {"-x"};
    expect_fuzz_refusal(ARGC(short_option), short_option, "kvcmp fuzz: unknown option '-x'");
    char *ambiguous[] = {"--s", "1"};
    expect_fuzz_refusal(ARGC(ambiguous), ambiguous, "kvcmp fuzz: unknown option '--s'");
    char *operand[] = {"--cases", "1", "stray"};
    expect_fuzz_refusal(ARGC(operand), operand, "kvcmp fuzz: unexpected argument 'stray'");
    static const char *const shards[] = {"3", "1/", "/4", "1/4x", "0123456789012345678901234567890123456789/4", "2/-1"};
    for (size_t i = 0; i < sizeof shards / sizeof shards[0]; i++) {
        char *shard[] = {"--shard", (char *)shards[i]};
        expect_fuzz_refusal(ARGC(shard), shard, "kvcmp fuzz: --shard takes I/N with 0 <= I < N, e.g. --shard 0/4, not '");
    }
}

/* Of --cases and --seconds the one given last counts. */
Test(cli_options, fuzz_cases_after_seconds_count, .timeout = 60) {
    char *argv[] = {"--seconds", "30", "--cases", "2", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_plain_insert/bf16",
                    "--json", "", "--seed", "0x10", "--shard", "1/3"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    expect_contains(run.err, "kvcmp fuzz: seed 16, candidate ref, policy exact, 1 jobs x 1 threads, shard 1/3", "stderr");
    expect_contains(run.err, "kvcmp fuzz: running 2 cases\n", "stderr");
    support_free_run(&run);
}

Test(cli_options, fuzz_seconds_after_cases_count, .timeout = 60) {
    char *argv[] = {"--cases", "100000000", "--seconds", "0.5", "--jobs", "1", "--candidate", "ref", "--stage",
                    "v41.rope_plain_insert/bf16", "--json", "", "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    long long cases = -1;
    const char *summary = strstr(run.out, "fuzz: ");
    cr_assert_not_null(summary, "no summary:\n%s", run.out);
    cr_assert_eq(sscanf(summary, "fuzz: %lld cases in ", &cases), 1);
    cr_expect_lt(cases, 100000000, "--seconds given last did not limit the campaign");
    support_free_run(&run);
}

Test(cli_options, replay_bench_and_report_refuse_bad_values) {
    char *padding[] = {"--page-padding", "abc", "x"};
    expect_replay_usage_error(ARGC(padding), padding, "kvcmp replay: --page-padding must be a non-negative multiple of 4 (at most 2^30), not 'abc'");
    char *huge[] = {"--page-padding", "2147483648", "x"};
    expect_replay_usage_error(ARGC(huge), huge, "--page-padding must be a non-negative multiple of 4");
    char *no_path[] = {"--impl", "ref"};
    expect_replay_usage_error(ARGC(no_path), no_path, "kvcmp replay: no PATH to replay (see kvcmp replay --help)");
    char *threads[] = {"--threads", "2x"};
    captured_run run = support_capture(kvc_cmd_bench, ARGC(threads), threads);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp bench: --threads takes thread counts from 1 to 1024, not '2x'", "stderr");
    cr_expect_str_empty(run.out);
    support_free_run(&run);
    char *stray[] = {"--runs", "1", "stray"};
    run = support_capture(kvc_cmd_bench, ARGC(stray), stray);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp bench: unexpected argument 'stray'", "stderr");
    support_free_run(&run);
    /* Each form of report names itself. */
    static const char *const forms[][4] = {{"--cases", "0", NULL, "kvcmp report: --cases takes a whole number from 1 to 1000, not '0'"},
                                           {"parity", "--seed", "-1", "kvcmp report parity: --seed takes a whole number"},
                                           {"precision", "x", NULL, "kvcmp report precision: unexpected argument 'x'"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *argv[] = {(char *)forms[i][0], (char *)forms[i][1], (char *)forms[i][2]};
        run = support_capture(kvc_cmd_report, forms[i][2] ? 3 : 2, argv);
        cr_expect_eq(run.status, 2, "%s %s accepted", forms[i][0], forms[i][1]);
        expect_contains(run.err, forms[i][3], "stderr");
        cr_expect_str_empty(run.out);
        support_free_run(&run);
    }
    char *too_many[] = {"parity", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    run = support_capture(kvc_cmd_report, ARGC(too_many), too_many);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp report parity: unexpected argument '9'", "stderr");
    support_free_run(&run);
}

/* ---- help and version --------------------------------------------------------- */

static void expect_help(int (*command)(int, char **), int argc, char **argv, const char *needle) {
    captured_run run = support_capture(command, argc, argv);
    cr_expect_eq(run.status, 0, "exit status %d for %s", run.status, argv[argc - 1]);
    expect_contains(run.out, needle, "stdout");
    cr_expect_str_empty(run.err, "help wrote to stderr");
    support_free_run(&run);
}

Test(cli_options, every_help_prints_to_stdout) {
    setenv("OMP_WAIT_POLICY", "passive", 1);   /* fuzz re-executes itself without one */
    char *main_help[] = {"kvcmp", "--help"}, *main_word[] = {"kvcmp", "help"}, *main_short[] = {"kvcmp", "-h"};
    expect_help(options_test_main, ARGC(main_help), main_help, "usage: kvcmp COMMAND [options]\n  replay ");
    expect_help(options_test_main, ARGC(main_word), main_word, "usage: kvcmp COMMAND [options]");
    expect_help(options_test_main, ARGC(main_short), main_short, "'kvcmp --version' for the version");
    char *help_fuzz[] = {"kvcmp", "help", "fuzz"};
    expect_help(options_test_main, ARGC(help_fuzz), help_fuzz, "usage: kvcmp fuzz [--seed S]");
    char *replay[] = {"--help"}, *bench[] = {"-h"}, *report[] = {"parity", "--help"}, *precision[] = {"precision", "-h"};
    expect_help(kvc_cmd_replay, ARGC(replay), replay, "usage: kvcmp replay [--impl");
    expect_help(kvc_cmd_bench, ARGC(bench), bench, "usage: kvcmp bench [--candidate LIB.so]");
    expect_help(kvc_cmd_report, ARGC(report), report, "usage: kvcmp report precision");
    expect_help(kvc_cmd_report, ARGC(precision), precision, "kvcmp report parity [--out DIR] PATH...");
}

Test(cli_options, help_for_an_unknown_command_is_an_error) {
    char *argv[] = {"kvcmp", "help", "replya"};
    captured_run run = support_capture(options_test_main, ARGC(argv), argv);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp: unknown command 'replya'", "stderr");
    cr_expect_str_empty(run.out);
    support_free_run(&run);
}

Test(cli_options, version_names_the_release) {
    char *argv[] = {"kvcmp", "--version"};
    captured_run run = support_capture(options_test_main, ARGC(argv), argv);
    cr_expect_eq(run.status, 0);
    int major = -1, minor = -1, patch = -1;
    cr_expect_eq(sscanf(run.out, "kvcmp %d.%d.%d", &major, &minor, &patch), 3, "not a version line: %s", run.out);
    cr_expect(major >= 1 && minor >= 0 && patch >= 0);
    cr_expect_eq(run.out[strlen(run.out) - 1], '\n');
    cr_expect_str_empty(run.err);
    support_free_run(&run);
}

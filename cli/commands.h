/* The kvcmp subcommands; each lives in its own file under harness/. */
#ifndef KVCMP_COMMANDS_H
#define KVCMP_COMMANDS_H

int kvc_cmd_replay(int argc, char **argv);  /* harness/replay/replay.c */
int kvc_cmd_fuzz(int argc, char **argv);    /* harness/fuzz/fuzz_command.c */
int kvc_cmd_bench(int argc, char **argv);   /* harness/bench/bench.c */
int kvc_cmd_report(int argc, char **argv);  /* harness/report/report.c */
int kvc_cmd_gen(int argc, char **argv);     /* harness/fuzz/gen_command.c */
int kvc_cmd_merge(int argc, char **argv);   /* harness/fuzz/merge_output.c */

#endif

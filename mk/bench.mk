# The benchmark of issues 4 and 15.  Included by the Makefile.
#
#   make bench    builds build/kvcmp and runs every scenario, writing the
#                 human tables to stdout and reports/bench.json
#
# BENCH_ARGS adds options, e.g. BENCH_ARGS='--scenario v4-d512-r4-prefill
# --runs 31 --threads 1,2 --candidate build/examples/wrap_reference.so'.
# A benchmark, not a test: it asserts nothing about speed.

BENCH_ARGS ?=
# Threads sleep while they wait for work: on a shared 2-core machine a
# spinning OpenMP thread keeps the other one (or another job) off the
# CPU, and one scheduler tick (4 ms) per parallel region then swamps the
# timings; sleeping costs a few microseconds per region instead.
BENCH_ENV ?= OMP_WAIT_POLICY=passive

.PHONY: bench
bench: $(BUILD)/kvcmp
	@mkdir -p reports
	$(BENCH_ENV) $(BUILD)/kvcmp bench --json reports/bench.json $(BENCH_ARGS)

# Reports: precision of the reference against an MPFR oracle,
# parity of the upstream cases with it, and coverage with enforced
# thresholds.  Included by the main Makefile.
#
#   make report          reports/precision.* and reports/parity.*
#   make coverage        the coverage build and gate, 95% lines / 85% branches
#                        (part of make test)

REPORT_DIR ?= reports
# Cases per stage variant and value family of the precision corpus.
REPORT_CASES ?= 2
REPORT_SEED ?= 20261129
# Parity runs over the upstream cases: fixtures/vllm-cases (and SHARED's,
# when given) and upstream-fuzz (vLLM's kernels on the fuzzer's inputs;
# UPSTREAM_FUZZ_DIR, mk/ci.mk), each difference given its cause
# (harness/compare/causes.c).
REPORT_PARITY_CASES = fixtures/vllm-cases $(if $(SHARED),$(wildcard $(SHARED)/vllm-cases)) $(UPSTREAM_FUZZ_DIR)

.PHONY: report coverage

report: deps-build $(BUILD)/kvcmp
	$(BUILD)/kvcmp report precision --out $(REPORT_DIR) --cases $(REPORT_CASES) --seed $(REPORT_SEED)
	$(if $(REPORT_PARITY_CASES),$(BUILD)/kvcmp report parity --out $(REPORT_DIR) $(REPORT_PARITY_CASES))

# Coverage: the whole build again with gcc --coverage (CC carries the flag
# into every compile and link, the test binary included) in its own build
# directory, then the test suite, the replay of the shared corpora, a short
# fixed-seed fuzz campaign and a small report run, and gcovr over
# reference/, optimized/ and harness/.  Fails under 95% lines / 85% branches.
# Part of make test (TEST_EXTRA), so CI fails when a change leaves code
# untested; the unit tests' own verdict comes from the sanitized run that
# make test does after it.
#
# Every object of the coverage build, kvcmp's and the test binary's, is
# compiled the same way: -O0 and no sanitizers.  gcovr adds up the counts
# of one source line from every object that holds it, branch by branch in
# order; objects built with other flags (the test binary's -O1 with
# ASan/UBSan) carry other branches on the same lines (UBSan's never-taken
# checks, comparisons that -O1 turns into conditional moves), and the sum
# then counts branches that are not in the source, or two different ones
# as one.  The sanitized run stays in make test itself.
# KVC_COVERAGE makes forked fuzz workers flush their counters before
# _exit (harness/fuzz/coverage.h); without it their cases would not count.
# The formats suite is left out of the coverage run: its exhaustive 2^32
# loops exercise only common/formats.c, outside the measured directories,
# and take many minutes once instrumented.
COVERAGE_BUILD ?= $(BUILD)/coverage
COVERAGE_DIR ?= $(REPORT_DIR)/coverage
COVERAGE_FUZZ_CASES ?= 1000
COVERAGE_LINE_MIN ?= 95
COVERAGE_BRANCH_MIN ?= 85
COVERAGE_FILTERS := --filter '$(CURDIR)/common/' --filter '$(CURDIR)/include/' --filter '$(CURDIR)/reference/' --filter '$(CURDIR)/optimized/' --filter '$(CURDIR)/harness/'
COVERAGE_MAKE_FLAGS := CC='$(CC) --coverage -DKVC_COVERAGE' OPT_FLAGS='-O0' TEST_OPT_FLAGS='-O0' SANITIZE=

# The planted-bug libraries of make mutants: the campaign tests fuzz them.
coverage: deps-test $(MUTANT_LIBS)
	@# make does not see changed flags: a build made with others starts over.
	@if [ "$$(cat $(COVERAGE_BUILD)/flags 2>/dev/null)" != "$(COVERAGE_MAKE_FLAGS)" ]; then \
		rm -rf $(COVERAGE_BUILD) && mkdir -p $(COVERAGE_BUILD) && echo "$(COVERAGE_MAKE_FLAGS)" > $(COVERAGE_BUILD)/flags; fi
	find $(COVERAGE_BUILD) -name '*.gcda' -delete 2>/dev/null || true
	$(MAKE) --no-print-directory $(BUILD_JOBS) BUILD=$(COVERAGE_BUILD) $(COVERAGE_MAKE_FLAGS) \
		$(COVERAGE_BUILD)/kvcmp $(COVERAGE_BUILD)/asan/unit-tests $(TEST_PLUGIN_KINDS:%=$(COVERAGE_BUILD)/test-plugins/%.so) \
		$(COVERAGE_BUILD)/mutants/multi/multi_bug.so
	@# The runs below only collect counts: their verdicts come from the
	@# sanitized unit tests and corpus-check, so a failure here stops nothing.
	KVCMP_TEST_PLUGINS=$(COVERAGE_BUILD)/test-plugins \
		$(COVERAGE_BUILD)/asan/unit-tests --jobs $(NPROC) --filter '!(formats)/*' || true
	$(COVERAGE_BUILD)/kvcmp replay --quiet --policy exact fixtures/spec-cases fixtures/regressions > $(COVERAGE_BUILD)/replay.log || true
	$(COVERAGE_BUILD)/kvcmp replay --quiet --policy vllm fixtures/vllm-cases >> $(COVERAGE_BUILD)/replay.log || true
	$(COVERAGE_BUILD)/kvcmp fuzz --seed 1 --cases $(COVERAGE_FUZZ_CASES) --quiet \
		--save $(COVERAGE_BUILD)/fuzz-failures --json $(COVERAGE_BUILD)/fuzz-summary.json || true
	$(COVERAGE_BUILD)/kvcmp report --cases 1 --out $(COVERAGE_BUILD)/report fixtures/vllm-cases || true
	@mkdir -p $(COVERAGE_DIR)
	@# One pass over the gcov data into a tracefile, then every output from it.
	@# The search path is the coverage build alone: gcovr's default, the
	@# root, would add the counts of any other build tree under it.
	gcovr --root . $(COVERAGE_FILTERS) --object-directory $(COVERAGE_BUILD) --json $(COVERAGE_BUILD)/coverage.json $(COVERAGE_BUILD)
	gcovr --root . --add-tracefile $(COVERAGE_BUILD)/coverage.json --branches --txt $(COVERAGE_DIR)/summary-branches.txt
	@# gcovr writes every report first, then exits non-zero under a threshold.
	gcovr --root . --add-tracefile $(COVERAGE_BUILD)/coverage.json \
		--html-details $(COVERAGE_DIR)/index.html --html-title 'kvcmp coverage' \
		--txt $(COVERAGE_DIR)/summary.txt --json-summary-pretty --json-summary $(COVERAGE_DIR)/summary.json \
		--print-summary --fail-under-line $(COVERAGE_LINE_MIN) --fail-under-branch $(COVERAGE_BRANCH_MIN); \
		status=$$?; echo "per file: $(COVERAGE_DIR)/summary.txt (lines), $(COVERAGE_DIR)/summary-branches.txt (branches);" \
		"HTML: $(COVERAGE_DIR)/index.html"; \
		if [ $$status -ne 0 ]; then echo "coverage below $(COVERAGE_LINE_MIN)% lines or $(COVERAGE_BRANCH_MIN)% branches:" \
			"add tests for the lines and branches listed as missing in those files"; fi; \
		exit $$status

TEST_EXTRA += coverage

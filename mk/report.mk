# Reports (issue 6): precision of the reference against an MPFR oracle,
# parity of the upstream cases with it, and coverage with enforced
# thresholds.  Included by the main Makefile.

REPORT_DIR ?= reports
# Cases per stage variant and value family of the precision corpus.
REPORT_CASES ?= 2
REPORT_SEED ?= 20261129
# Parity runs over the shared upstream cases when they are there.
REPORT_PARITY_CASES := $(wildcard $(SHARED)/vllm-cases)

.PHONY: report coverage

report: deps $(BUILD)/kvcmp
	$(BUILD)/kvcmp report precision --out $(REPORT_DIR) --cases $(REPORT_CASES) --seed $(REPORT_SEED)
	$(if $(REPORT_PARITY_CASES),$(BUILD)/kvcmp report parity --out $(REPORT_DIR) $(REPORT_PARITY_CASES))

# Coverage: the whole build again with gcc --coverage (CC carries the flag
# into every compile and link, the ASan test binary included) in its own
# build directory, then the test suite, the replay of the shared corpora,
# a short fixed-seed fuzz campaign and a small report run, and gcovr over
# reference/, optimized/ and harness/.  Fails under 95% lines / 85% branches.
# The formats suite is left out of the coverage run: its exhaustive 2^32
# loops exercise only common/formats.c, outside the measured directories,
# and take many minutes once instrumented.
COVERAGE_BUILD ?= $(BUILD)/coverage
COVERAGE_DIR ?= $(REPORT_DIR)/coverage
COVERAGE_FUZZ_CASES ?= 1000
COVERAGE_LINE_MIN ?= 95
COVERAGE_BRANCH_MIN ?= 85
COVERAGE_FILTERS := --filter '$(CURDIR)/reference/' --filter '$(CURDIR)/optimized/' --filter '$(CURDIR)/harness/'

coverage: deps
	find $(COVERAGE_BUILD) -name '*.gcda' -delete 2>/dev/null || true
	$(MAKE) --no-print-directory BUILD=$(COVERAGE_BUILD) CC='$(CC) --coverage' OPT_FLAGS='-O0' \
		$(COVERAGE_BUILD)/kvcmp $(COVERAGE_BUILD)/asan/unit-tests
	ASAN_OPTIONS=detect_leaks=0 KVCMP_SHARED=$(SHARED) $(COVERAGE_BUILD)/asan/unit-tests --jobs 2 --filter '!(formats)/*' || true
	-$(COVERAGE_BUILD)/kvcmp replay --quiet --policy exact $(SHARED)/spec-cases fixtures/regressions
	-$(COVERAGE_BUILD)/kvcmp replay --quiet --policy vllm $(SHARED)/vllm-cases
	-$(COVERAGE_BUILD)/kvcmp fuzz --seed 1 --cases $(COVERAGE_FUZZ_CASES) --quiet \
		--save $(COVERAGE_BUILD)/fuzz-failures --json $(COVERAGE_BUILD)/fuzz-summary.json
	-$(COVERAGE_BUILD)/kvcmp report --cases 1 --out $(COVERAGE_BUILD)/report $(SHARED)/vllm-cases
	@mkdir -p $(COVERAGE_DIR)
	@# One pass over the gcov data into a tracefile, then every output from it.
	gcovr --root . $(COVERAGE_FILTERS) --object-directory $(COVERAGE_BUILD) --json $(COVERAGE_BUILD)/coverage.json
	gcovr --root . --add-tracefile $(COVERAGE_BUILD)/coverage.json --branches --txt $(COVERAGE_DIR)/summary-branches.txt
	@# gcovr writes every report first, then exits non-zero under a threshold.
	gcovr --root . --add-tracefile $(COVERAGE_BUILD)/coverage.json \
		--html-details $(COVERAGE_DIR)/index.html --html-title 'kvcmp coverage' \
		--txt $(COVERAGE_DIR)/summary.txt --json-summary-pretty --json-summary $(COVERAGE_DIR)/summary.json \
		--print-summary --fail-under-line $(COVERAGE_LINE_MIN) --fail-under-branch $(COVERAGE_BRANCH_MIN); \
		status=$$?; echo "per file: $(COVERAGE_DIR)/summary.txt (lines), $(COVERAGE_DIR)/summary-branches.txt (branches);" \
		"HTML: $(COVERAGE_DIR)/index.html"; \
		if [ $$status -ne 0 ]; then echo "coverage below $(COVERAGE_LINE_MIN)% lines or $(COVERAGE_BRANCH_MIN)% branches"; fi; \
		exit $$status

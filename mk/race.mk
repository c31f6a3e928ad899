# Races in the optimized backend, found on purpose.  Included by the Makefile.
#
#   make race-check      the optimized backend under ThreadSanitizer (clang,
#                        libomp and its Archer tool): tools/race_check.c runs
#                        generated cases through every path this CPU has at
#                        team sizes 2, 3, 4 and 8 (more threads than cores)
#                        under both team rules and compares each run with
#                        the reference; then each race mutant
#                        (harness/mutants/*.sed whose bug line names make
#                        race-check) must be caught (part of make test)
#
# RACE_CASES sets the cases per run (default 150).

RACE_CASES ?= 150
RACE_SEED ?= 20261206
TSAN_FLAGS := -O1 -fsanitize=thread
# Archer gives ThreadSanitizer OpenMP's own synchronisation; libomp itself
# is not instrumented.
RACE_ENV := OMP_TOOL_LIBRARIES=$(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so)) \
  TSAN_OPTIONS='ignore_noninstrumented_modules=1 exitcode=66'
RACE_MUTANTS := $(basename $(notdir $(shell grep -l '^# bug: .*make race-check' harness/mutants/*.sed)))

.PHONY: race-check

# The library and the driver built with clang and ThreadSanitizer from
# source tree $(1) into $(2).
define race_build
	$(MAKE) --no-print-directory -C $(1) BUILD=$(abspath $(2)) CC=clang OPT_FLAGS='$(TSAN_FLAGS)' $(abspath $(2))/libkvcmp.a
	clang $(STD_FLAGS) $(TSAN_FLAGS) -I$(1)/include -I$(1) $(1)/tools/race_check.c $(2)/libkvcmp.a -o $(2)/race-check $(LIBS)
endef

race-check:
	@bash tools/deps.sh clang libomp-14-dev
	$(call race_build,.,$(BUILD)/tsan)
	$(RACE_ENV) $(BUILD)/tsan/race-check --cases $(RACE_CASES) --seed $(RACE_SEED)
	@for m in $(RACE_MUTANTS); do \
	   src=$(BUILD)/tsan-mutants/$$m; rm -rf $$src && mkdir -p $$src; \
	   cp -r Makefile mk common reference optimized harness include tools cli $$src/; \
	   file=$$(sed -n 's/^# file: //p' harness/mutants/$$m.sed); sed -i -f harness/mutants/$$m.sed $$src/$$file; \
	   if cmp -s $$file $$src/$$file; then echo "race-check: mutant $$m no longer changes $$file" >&2; exit 1; fi; \
	   $(MAKE) --no-print-directory -C $$src BUILD=$(abspath $(BUILD))/tsan-mutants/$$m/build CC=clang OPT_FLAGS='$(TSAN_FLAGS)' \
	     $(abspath $(BUILD))/tsan-mutants/$$m/build/libkvcmp.a > $$src/build.log 2>&1 || { tail -20 $$src/build.log; exit 1; }; \
	   clang $(STD_FLAGS) $(TSAN_FLAGS) -I$$src/include -I$$src $$src/tools/race_check.c $$src/build/libkvcmp.a -o $$src/race-check $(LIBS) || exit 1; \
	   if $(RACE_ENV) $$src/race-check --cases $(RACE_CASES) --seed $(RACE_SEED) > $$src/race-check.log 2>&1; then \
	     echo "race-check: mutant $$m SURVIVED (log: $$src/race-check.log)" >&2; exit 1; fi; \
	   echo "race-check: mutant $$m caught: $$(grep -c 'WARNING: ThreadSanitizer' $$src/race-check.log) race reports, $$(grep -c 'DIFFERS' $$src/race-check.log) differing runs"; \
	 done

TEST_EXTRA += race-check

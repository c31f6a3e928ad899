# The differential fuzzer's goals.  Included by the Makefile.
#
#   make fuzz            the main job: a ~1 minute campaign over every stage
#   make mutants         planted-bug candidates, build/mutants/NAME.so
#   make mutants-check   every mutant must be caught by a fixed-seed campaign
#   make fuzz-check      fixed-seed campaign of 20,000 cases, and 5,000 under
#                        OMP_WAIT_POLICY=active (part of make test)
#   make wrap-check      fuzz examples/wrap_reference (part of make test)
#   make examples        the example plug-ins, build/examples/wrap_reference.so
#                        and build/examples/cpp_plugin.so (C++17)
#   make multi-bug       build/mutants/multi/multi_bug.so, one planted bug per
#                        stage (mutants-check fuzzes it)
#   make fuzz-corpus-check  the libFuzzer entry point over fixtures/corpus,
#                        without libFuzzer (part of make test)
#   make libfuzzer       clang libFuzzer target build/libfuzzer/kvcmp_fuzzer
#                        (LIBFUZZER_SERIAL=1: without OpenMP, for MemorySanitizer)
#   make exp-boundaries  rewrites harness/fuzz/exp_boundaries.inc, the exp
#                        rounding boundaries of the exp_boundary value family,
#                        with tools/exp_boundaries.c (MPFR; under a minute)
#
# FUZZ_ARGS adds options to `make fuzz`, e.g. FUZZ_ARGS='--candidate my.so'.

FUZZ_SEED ?= 20261129
FUZZ_ARGS ?=
FUZZ_CHECK_CASES ?= 20000
# libgomp reads OMP_WAIT_POLICY once per process and kvcmp fuzz runs
# under passive unless the environment names one: fuzz-check runs this
# many cases again under the active policy (spinning idle threads), as
# a library user's process may (docs/fuzzing.md, the wait policy).
FUZZ_ACTIVE_CASES ?= 5000
MUTANT_SEED ?= 1
MUTANT_SECONDS ?= 10
PLUGIN_FLAGS := $(STD_FLAGS) -O1 -fPIC -shared -fvisibility=hidden
PLUGIN_LIBS := -lmpfr -lgmp -lm -fopenmp

MUTANT_NAMES := $(sort $(basename $(notdir $(wildcard harness/mutants/*.sed))))

.PHONY: fuzz fuzz-check mutants mutants-check wrap-check examples libfuzzer fuzz-corpus-check multi-bug exp-boundaries

fuzz: deps-build $(BUILD)/kvcmp
	@mkdir -p reports
	$(BUILD)/kvcmp fuzz --seconds 60 $(FUZZ_ARGS)

fuzz-check: $(BUILD)/kvcmp
	@mkdir -p reports
	$(BUILD)/kvcmp fuzz --seed $(FUZZ_SEED) --cases $(FUZZ_CHECK_CASES) --json reports/fuzz-check.json \
	  --junit $(JUNIT_DIR)/fuzz-check.xml
	OMP_WAIT_POLICY=active $(BUILD)/kvcmp fuzz --seed $(FUZZ_SEED) --cases $(FUZZ_ACTIVE_CASES) --json reports/fuzz-check-active.json \
	  --quiet > $(BUILD)/fuzz-check-active.log 2>&1 || { cat $(BUILD)/fuzz-check-active.log; exit 1; }
	@grep -q '^  omp wait policy        active: $(FUZZ_ACTIVE_CASES) (100.0%)$$' $(BUILD)/fuzz-check-active.log || \
	  { echo "fuzz-check: the campaign under OMP_WAIT_POLICY=active did not run every case under it"; \
	    cat $(BUILD)/fuzz-check-active.log; exit 1; }
	@grep '^fuzz: ' $(BUILD)/fuzz-check-active.log | head -1

# A mutant: the reference's sources and headers copied to
# build/mutants/NAME, one file patched by harness/mutants/NAME.sed (its
# first line names the file), compiled into a plug-in with the copied
# headers first on the include path.  reference/ itself stays clean.
# (A mutant recompiles the reference instead of linking libkvcmp: its
# patched file would clash with the library's unpatched copy.)
$(BUILD)/mutants/%.so: harness/mutants/%.sed harness/mutants/entry.c $(PUBLIC_HEADERS) $(COMMON_SRC) $(REFERENCE_SRC)
	@rm -rf $(BUILD)/mutants/$* && mkdir -p $(BUILD)/mutants/$*
	@cp -r common reference include $(BUILD)/mutants/$*/
	@file=$$(sed -n 's/^# file: //p' $<); \
	 sed -f $< $$file > $(BUILD)/mutants/$*/$$file; \
	 if cmp -s $$file $(BUILD)/mutants/$*/$$file; then \
	   echo "mutant $*: $< no longer changes $$file; update the patch to the current source" >&2; exit 1; fi
	$(Q)$(call say,CC,$@)$(CC) $(PLUGIN_FLAGS) -DKVC_MUTANT_NAME='"$*"' -I$(BUILD)/mutants/$*/include -I$(BUILD)/mutants/$* \
	  $(BUILD)/mutants/$*/common/*.c $(BUILD)/mutants/$*/reference/*.c \
	  harness/mutants/entry.c -o $@ $(PLUGIN_LIBS)

# An optimized-backend mutant (harness/mutants/opt_*.sed), once per ISA
# of OPT_ISAS: build/mutants/opt_NAME-ISA.so holds a patched copy of
# optimized/ with that ISA's kernels alone (the other kit left out with
# -DOPT_HAVE_...=0), behind harness/mutants/entry_opt.c, which serves that
# ISA's stage table.  check.sh skips, by name, a mutant whose ISA this
# CPU lacks.
OPTIMIZED_HEADERS := $(wildcard optimized/*.h)
OPT_MUTANT_NAMES := $(filter opt_%,$(MUTANT_NAMES))
MUTANT_LIBS := $(patsubst %,$(BUILD)/mutants/%.so,$(filter-out opt_%,$(MUTANT_NAMES))) \
  $(foreach isa,$(OPT_ISAS),$(patsubst %,$(BUILD)/mutants/%-$(isa).so,$(OPT_MUTANT_NAMES)))
OPT_OTHER_ISA_avx512 := -DOPT_HAVE_AVX2=0
OPT_OTHER_ISA_avx2 := -DOPT_HAVE_AVX512=0
define opt_mutant_rule
$(BUILD)/mutants/opt_%-$(1).so: harness/mutants/opt_%.sed harness/mutants/entry_opt.c $(PUBLIC_HEADERS) $(COMMON_SRC) $(OPTIMIZED_SRC) \
    $(OPTIMIZED_HEADERS)
	@rm -rf $(BUILD)/mutants/opt_$$*-$(1) && mkdir -p $(BUILD)/mutants/opt_$$*-$(1)/objects
	@cp -r common optimized include $(BUILD)/mutants/opt_$$*-$(1)/
	@file=$$$$(sed -n 's/^# file: //p' $$<); \
	 sed -f $$< $$$$file > $(BUILD)/mutants/opt_$$*-$(1)/$$$$file; \
	 if cmp -s $$$$file $(BUILD)/mutants/opt_$$*-$(1)/$$$$file; then \
	   echo "mutant opt_$$*: $$< no longer changes $$$$file; update the patch to the current source" >&2; exit 1; fi
	$$(Q)$$(call say,CC,$$@)src=$$(abspath $(BUILD)/mutants/opt_$$*-$(1)); cd $$$$src/objects && \
	  $$(CC) $$(PLUGIN_FLAGS) $$(OPT_OTHER_ISA_$(1)) -I$$$$src/include -I$$$$src -c $$$$src/common/*.c \
	    $$(patsubst %,$$$$src/%,$$(OPT_BASELINE_SRC)) && \
	  $$(CC) $$(PLUGIN_FLAGS) $$(OPT_OTHER_ISA_$(1)) -Wno-psabi -DKVC_MUTANT_NAME='"opt_$$*-$(1)"' -I$$$$src/include -I$$$$src \
	    $$(subst optimized/isa.h,$$$$src/optimized/isa.h,$$(ISA_FLAGS_$(1))) -c $$(patsubst %,$$$$src/%,$$(OPT_KERNEL_SRC)) $$(CURDIR)/harness/mutants/entry_opt.c && \
	  $$(CC) $$(PLUGIN_FLAGS) *.o -o $$(abspath $$@) $$(PLUGIN_LIBS)
endef
$(foreach isa,$(OPT_ISAS),$(eval $(call opt_mutant_rule,$(isa))))

mutants: $(MUTANT_LIBS)

mutants-check: $(MUTANT_LIBS) $(BUILD)/mutants/multi/multi_bug.so $(BUILD)/kvcmp
	@bash harness/mutants/check.sh $(BUILD)/kvcmp $(BUILD)/mutants $(MUTANT_SEED) $(MUTANT_SECONDS) $(JUNIT_DIR)/mutants.xml

# The vLLM-style wrapper example, linked against libkvcmp.a (a plug-in
# carries its own copy of the reference and validators).
$(BUILD)/examples/wrap_reference.so: examples/wrap_reference/wrap_reference.c $(PUBLIC_HEADERS) $(BUILD)/libkvcmp.a
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$@)$(CC) $(PLUGIN_FLAGS) -Iinclude $< $(BUILD)/libkvcmp.a -o $@ $(PLUGIN_LIBS) -lcjson -ldl

# The C++17 example, the same wrapper in C++ (make install-check builds
# it against the installed library instead).
$(BUILD)/examples/cpp_plugin.so: examples/cpp_plugin/cpp_plugin.cpp $(PUBLIC_HEADERS) $(BUILD)/libkvcmp.a
	@mkdir -p $(dir $@)
	$(Q)$(call say,CXX,$@)$(CXX) -std=c++17 -Wall -Wextra -O1 -fPIC -shared -fvisibility=hidden -ffp-contract=off -fno-fast-math \
	  -Iinclude $< $(BUILD)/libkvcmp.a -o $@ $(PLUGIN_LIBS) -lcjson -ldl

examples: $(BUILD)/examples/wrap_reference.so $(BUILD)/examples/cpp_plugin.so

wrap-check: $(BUILD)/examples/wrap_reference.so $(BUILD)/kvcmp
	@mkdir -p reports
	$(BUILD)/kvcmp fuzz --candidate $(BUILD)/examples/wrap_reference.so --seed $(FUZZ_SEED) --cases 3000 \
	  --json reports/fuzz-wrap-reference.json --junit $(JUNIT_DIR)/fuzz-wrap-reference.xml

# The fp32 inputs whose exp lies next to a rounding boundary, which
# harness/fuzz/gen_values.c includes (fixtures/exp-boundaries/README.md).  A
# source file, not a fixture: the build needs it.  Written to a temporary
# file first, so that a failed run leaves the list as it was.
$(BUILD)/exp-boundaries: tools/exp_boundaries.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) -std=c17 -O2 -ffp-contract=off -fno-fast-math $< -o $@ -lmpfr -lgmp -lm

exp-boundaries: $(BUILD)/exp-boundaries
	$(BUILD)/exp-boundaries > $(BUILD)/exp_boundaries.inc.new
	mv $(BUILD)/exp_boundaries.inc.new harness/fuzz/exp_boundaries.inc

# libFuzzer (clang): the OSS-Fuzz style script does the build.
libfuzzer:
	@bash tools/deps.sh clang libomp-dev
	$(if $(filter 1,$(LIBFUZZER_SERIAL)),KVCMP_FUZZ_SERIAL=1 )bash fuzz/build.sh
	@echo "run it: mkdir -p build/corpus build/libfuzzer/artifacts && build/libfuzzer/kvcmp_fuzzer build/corpus fixtures/corpus" \
		"-dict=fuzz/kvcmp_fuzzer.dict -artifact_prefix=build/libfuzzer/artifacts/ -max_total_time=60" \
		"  (new inputs go to build/corpus, crashes to build/libfuzzer/artifacts; see fuzz/README.md)"

# The same entry point without libFuzzer, replaying the seed corpus.
$(BUILD)/fuzz-corpus-replay: $(call obj,obj,fuzz/libfuzzer_entry.c fuzz/replay_corpus.c) $(BUILD)/libkvcmp.a
	$(Q)$(call say,LD,$@)$(CC) $(STD_FLAGS) $^ -o $@ $(LIBS)

fuzz-corpus-check: $(BUILD)/fuzz-corpus-replay
	$(BUILD)/fuzz-corpus-replay fixtures/corpus

TEST_EXTRA += fuzz-check wrap-check mutants-check fuzz-corpus-check
TEST_BUILD += $(MUTANT_LIBS) $(BUILD)/mutants/multi/multi_bug.so $(BUILD)/examples/wrap_reference.so $(BUILD)/fuzz-corpus-replay

# A candidate with several independent bugs, one per stage (the mutants
# named here, applied together to one copy of the reference): a fixed-seed
# campaign against it must list each bug's signature once.
MULTI_BUG_MUTANTS := state_slot_ignored ring_row_p save_nan_payload_kept plain_fp8_nan_clamped
$(BUILD)/mutants/multi/multi_bug.so: $(patsubst %,harness/mutants/%.sed,$(MULTI_BUG_MUTANTS)) harness/mutants/entry.c \
    $(PUBLIC_HEADERS) $(COMMON_SRC) $(REFERENCE_SRC)
	@rm -rf $(BUILD)/mutants/multi/src && mkdir -p $(BUILD)/mutants/multi/src
	@cp -r common reference include $(BUILD)/mutants/multi/src/
	@for m in $(MULTI_BUG_MUTANTS); do \
	   patch=harness/mutants/$$m.sed; file=$$(sed -n 's/^# file: //p' $$patch); \
	   sed -f $$patch $(BUILD)/mutants/multi/src/$$file > $(BUILD)/mutants/multi/src/$$file.new; \
	   if cmp -s $(BUILD)/mutants/multi/src/$$file $(BUILD)/mutants/multi/src/$$file.new; then \
	     echo "multi_bug: $$patch no longer changes $$file; update the patch to the current source" >&2; exit 1; fi; \
	   mv $(BUILD)/mutants/multi/src/$$file.new $(BUILD)/mutants/multi/src/$$file; done
	$(Q)$(call say,CC,$@)$(CC) $(PLUGIN_FLAGS) -DKVC_MUTANT_NAME='"multi_bug"' -I$(BUILD)/mutants/multi/src/include \
	  -I$(BUILD)/mutants/multi/src $(BUILD)/mutants/multi/src/common/*.c $(BUILD)/mutants/multi/src/reference/*.c \
	  harness/mutants/entry.c -o $@ $(PLUGIN_LIBS)

multi-bug: $(BUILD)/mutants/multi/multi_bug.so

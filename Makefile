# kvcmp build.  `make test`, `make fuzz`, `make report` and `make coverage`
# install the missing Debian packages they need first (make deps-*).
# See README.md.
#
#   make                 build/kvcmp, build/libkvcmp.a and build/libkvcmp.so
#                        (the same as make all)
#   make test            the test suite, what CI runs (unit tests under
#                        ASan/UBSan, corpus replay, fuzz and mutant checks,
#                        the coverage gate)
#   make deps            installs every Debian package make test needs
#   make deps-build      only those that build kvcmp and run make fuzz
#   make deps-test       those plus the test tools (g++, Criterion, gcovr,
#                        clang)
#   make deps-python     Python 3 with numpy, pytest, torch and yaml, for
#                        the Python package and its tests
#   make lib             build/libkvcmp.a and build/libkvcmp.so only
#   make exhaustive      format and vector-exp checks over all 2^32 inputs
#   make clean           removes build/
#   make help            this list
#
# Every goal, here and in mk/*.mk, is listed in a comment line
# "#   make GOAL  what it does" at the top of its file: make help prints them.

# Bare `make` builds `all`, whatever rule comes first below.
.DEFAULT_GOAL := all
SHELL := bash
CC ?= gcc
BUILD ?= build
# The conformance corpora are in fixtures/ (fixtures/README.md).  SHARED=DIR
# names a folder of newer ones (spec-cases, vllm-cases, upstream-fuzz) that
# make test replays in addition; none by default.
SHARED ?=
# Debian packages, by what needs them: building kvcmp and `make fuzz`;
# the test suite's tools on top; the Python package and its tests.
# make deps installs all three (what make test needs).
BUILD_PACKAGES := gcc make pkg-config libmpfr-dev libgmp-dev libcjson-dev libsimde-dev
TEST_PACKAGES := $(BUILD_PACKAGES) g++ libcriterion-dev gcovr clang
PYTHON_PACKAGES := python3 python3-numpy python3-pytest python3-torch python3-yaml python3-venv python3-setuptools python3-pip
DEBIAN_PACKAGES := $(TEST_PACKAGES) $(PYTHON_PACKAGES)
STD_FLAGS := -std=c17 -D_GNU_SOURCE -g -Wall -Wextra -fno-fast-math -ffp-contract=off -fopenmp
OPT_FLAGS ?= -O2
# The optimized kernels are compiled once per ISA (optimized/isa.h): the
# AVX-512 objects in .../optimized/avx512/, the AVX2 + FMA ones (SIMDe's
# emulation of the same intrinsics, libsimde-dev) in .../optimized/avx2/.
# No other object may hold an EVEX instruction (make evex-check).  On a
# host that is not x86-64 (make check-aarch64) no kernel is built and the
# optimized backend reports itself unavailable.
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
ISA_FLAGS_avx512 := $(AVX512_FLAGS) -DKVCMP_ISA_AVX512 -include optimized/isa.h
ISA_FLAGS_avx2 := -mavx2 -mfma -Wno-psabi -DKVCMP_ISA_AVX2 -include optimized/isa.h
TARGET_ARCH_NAME ?= $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)
OPT_ISAS := $(if $(filter x86_64,$(TARGET_ARCH_NAME)),avx512 avx2)
LIBS := -lmpfr -lgmp -lcjson -lm -ldl -fopenmp
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# Optimisation of the sanitized test objects (make coverage builds them at
# -O0 without sanitizers, like its kvcmp: see mk/report.mk).
TEST_OPT_FLAGS := -O1

COMMON_SRC := $(wildcard common/*.c)
REFERENCE_SRC := $(wildcard reference/*.c)
OPTIMIZED_SRC := $(wildcard optimized/*.c)
# Compiled once, for the baseline ISA: the dispatch and the token checks.
OPT_BASELINE_SRC := optimized/backend.c optimized/validate_tokens.c
# Compiled once per ISA in OPT_ISAS.
OPT_KERNEL_SRC := $(filter-out $(OPT_BASELINE_SRC),$(OPTIMIZED_SRC))
HARNESS_SRC := $(filter-out harness/mutants/%,$(wildcard harness/*/*.c))
# libkvcmp: everything but the front ends (cli/, python/, fuzz/).
LIB_SRC := $(COMMON_SRC) $(REFERENCE_SRC) $(OPT_BASELINE_SRC) $(HARNESS_SRC)
TEST_SRC := $(wildcard tests/*/test_*.c)
PUBLIC_HEADERS := $(wildcard include/kvcmp/*.h)
# Sources include public headers as "kvcmp/NAME.h" and internal ones by
# their path from the repository root.
INCLUDES := -Iinclude -I.
KVCMP_VERSION := 1.0.0
KVCMP_SOVERSION := 1

# The version that `kvcmp --version` prints: KVCMP_VERSION and the git
# commit of the checkout, when there is one, and the compile flags for the
# run metadata of every JSON and JUnit file (harness/report/run_info.c).
# harness/options/version.c alone carries them; the stamp rebuilds it
# when any of them changes.
KVCMP_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
VERSION_DEFINES := -DKVCMP_VERSION='"$(KVCMP_VERSION)"' $(if $(KVCMP_COMMIT),-DKVCMP_COMMIT='"$(KVCMP_COMMIT)"') \
  -DKVCMP_BUILD_FLAGS='"$(CC) $(STD_FLAGS) $(OPT_FLAGS)"' -DKVCMP_SANITIZED_FLAGS='"$(CC) $(STD_FLAGS) $(TEST_OPT_FLAGS) $(SANITIZE)"'
VERSION_OBJECTS := $(BUILD)/obj/harness/options/version.o $(BUILD)/asan/harness/options/version.o
$(VERSION_OBJECTS): STD_FLAGS += $(VERSION_DEFINES)
$(VERSION_OBJECTS): $(BUILD)/version.stamp
$(BUILD)/version.stamp: FORCE
	@mkdir -p $(BUILD) && echo '$(VERSION_DEFINES)' | cmp -s - $@ || echo '$(VERSION_DEFINES)' > $@
FORCE:

# Compiler lines are hidden unless V=1; make prints one short line per file.
V ?= 0
ifeq ($(V),0)
Q := @
say = printf '  %-6s %s\n' $(1) $(2);
endif

# Release objects in $(BUILD)/obj (position-independent: the same objects
# make libkvcmp.a and libkvcmp.so), sanitized test objects in $(BUILD)/asan.
obj = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))
# The library's objects of kind $(1) (obj or asan): LIB_SRC's and the
# kernels once per ISA.
lib_obj = $(call obj,$(1),$(LIB_SRC)) $(foreach isa,$(OPT_ISAS),$(patsubst optimized/%.c,$(BUILD)/$(1)/optimized/$(isa)/%.o,$(OPT_KERNEL_SRC)))

.PHONY: all deps deps-build deps-test deps-python test fuzz exhaustive bench clean lib install uninstall help
all: $(BUILD)/kvcmp lib

deps:
	@bash tools/deps.sh $(DEBIAN_PACKAGES)
deps-build:
	@bash tools/deps.sh $(BUILD_PACKAGES)
deps-test:
	@bash tools/deps.sh $(TEST_PACKAGES)
deps-python:
	@bash tools/deps.sh $(PYTHON_PACKAGES)

define kernel_rules
$(BUILD)/obj/optimized/$(1)/%.o: optimized/%.c
	@mkdir -p $$(dir $$@)
	$$(Q)$$(call say,CC,$$<[$(1)])$$(CC) $$(STD_FLAGS) $$(OPT_FLAGS) -fPIC $$(INCLUDES) $$(ISA_FLAGS_$(1)) -MMD -MP -c $$< -o $$@
$(BUILD)/asan/optimized/$(1)/%.o: optimized/%.c
	@mkdir -p $$(dir $$@)
	$$(Q)$$(call say,CC,$$<[$(1)])$$(CC) $$(STD_FLAGS) $$(TEST_OPT_FLAGS) $$(SANITIZE) $$(INCLUDES) $$(ISA_FLAGS_$(1)) -MMD -MP -c $$< -o $$@
endef
$(foreach isa,$(OPT_ISAS),$(eval $(call kernel_rules,$(isa))))
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(STD_FLAGS) $(OPT_FLAGS) -fPIC $(INCLUDES) -MMD -MP -c $< -o $@
# The exhaustive 2^32 loops of the format tests are pure arithmetic that
# the sanitizers cannot improve on; they build optimised to stay fast.
$(BUILD)/asan/tests/formats/test_formats.o: tests/formats/test_formats.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(STD_FLAGS) -O2 $(INCLUDES) -MMD -MP -c $< -o $@
$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(STD_FLAGS) $(TEST_OPT_FLAGS) $(SANITIZE) $(INCLUDES) -MMD -MP -c $< -o $@

# The library.  The shared one exports only what include/kvcmp/ declares
# (tools/export_map.sh writes the version script from the headers).
$(BUILD)/libkvcmp.a: $(call lib_obj,obj)
	$(Q)$(call say,AR,$@)rm -f $@ && ar rcs $@ $^
$(BUILD)/asan/libkvcmp.a: $(call lib_obj,asan)
	$(Q)$(call say,AR,$@)rm -f $@ && ar rcs $@ $^
$(BUILD)/libkvcmp.map: $(PUBLIC_HEADERS) tools/export_map.sh
	$(Q)bash tools/export_map.sh $(PUBLIC_HEADERS) > $@
$(BUILD)/libkvcmp.so.$(KVCMP_VERSION): $(call lib_obj,obj) $(BUILD)/libkvcmp.map
	$(Q)$(call say,LD,$@)$(CC) $(STD_FLAGS) -shared -Wl,-soname,libkvcmp.so.$(KVCMP_SOVERSION) \
	  -Wl,--version-script=$(BUILD)/libkvcmp.map $(call lib_obj,obj) -o $@ $(LIBS)
$(BUILD)/libkvcmp.so: $(BUILD)/libkvcmp.so.$(KVCMP_VERSION)
	$(Q)ln -sf libkvcmp.so.$(KVCMP_VERSION) $(BUILD)/libkvcmp.so.$(KVCMP_SOVERSION) && ln -sf libkvcmp.so.$(KVCMP_SOVERSION) $@
lib: $(BUILD)/libkvcmp.a $(BUILD)/libkvcmp.so

$(BUILD)/kvcmp: $(BUILD)/obj/cli/main.o $(BUILD)/libkvcmp.a
	$(Q)$(call say,LD,$@)$(CC) $(STD_FLAGS) $^ -o $@ $(LIBS)

$(BUILD)/asan/kvcmp: $(BUILD)/asan/cli/main.o $(BUILD)/asan/libkvcmp.a
	$(Q)$(call say,LD,$@)$(CC) $(STD_FLAGS) $(SANITIZE) $^ -o $@ $(LIBS)

$(BUILD)/asan/unit-tests: $(call obj,asan,$(TEST_SRC)) $(BUILD)/asan/libkvcmp.a
	$(Q)$(call say,LD,$@)$(CC) $(STD_FLAGS) $(SANITIZE) $^ -o $@ $(LIBS) -lcriterion

# Candidate libraries that are wrong on purpose (no entry point, a foreign
# ABI, a crashing stage...), one per kind of tests/plugins/candidate.c;
# the unit tests find them through KVCMP_TEST_PLUGINS.
# The hostile kinds (hang ... threads) are the candidates of the
# supervision tests (tests/robust/test_isolation.c), writes_stop_flag ...
# closes_stdio_and_logs those of tests/robust/test_hostile.c; leak, threads
# and the latter carry libkvcmp.a for the reference's insert.
TEST_PLUGIN_KINDS := no_entry null_table wrong_abi short_table crash partial bench \
	hang shrink_crash shrink_hang exit0 abort heap_smash balloon leak threads \
	writes_stop_flag forks_twice writes_input closes_pipe_and_hangs leaves_helper closes_stdio_and_logs forges_results records_device
TEST_PLUGINS_WITH_REFERENCE := leak threads records_device \
	writes_stop_flag forks_twice writes_input closes_pipe_and_hangs leaves_helper closes_stdio_and_logs forges_results
# C++ candidates, one per tests/plugins/KIND.cpp (tests/backends/test_cpp_plugin.c):
# mangled defines its entry point with C++ linkage, cpp_entry after
# including kvcmp/plugin.h.
TEST_PLUGIN_CXX_KINDS := mangled cpp_entry
TEST_PLUGIN_KINDS += $(TEST_PLUGIN_CXX_KINDS)
# Candidates written on their own from SPEC.md, one per kind of
# tests/plugins/plain_insert.c (tests/diagnose/test_root_causes.c and
# the kinds of each family), with libkvcmp.a for the validation only;
# compress_window (tests/plugins/compress_window.c) with the reference's
# public steps for what its bug does not touch.
TEST_PLUGIN_INDEPENDENT_KINDS := fp8_subnormal_ties_away fp8_subnormals_truncated fp8_ties_away fp8_truncation \
	bf16_ties_away bf16_truncation bf16_nan_payload_kept block_max_drops_nan
TEST_PLUGIN_KINDS += $(TEST_PLUGIN_INDEPENDENT_KINDS) compress_window
TEST_PLUGINS = $(patsubst %,$(BUILD)/test-plugins/%.so,$(TEST_PLUGIN_KINDS))
$(TEST_PLUGINS_WITH_REFERENCE:%=$(BUILD)/test-plugins/%.so): $(BUILD)/libkvcmp.a
$(BUILD)/test-plugins/%.so: tests/plugins/candidate.c $(PUBLIC_HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$@)$(CC) $(STD_FLAGS) -O1 -fPIC -shared -fvisibility=hidden $(INCLUDES) -DKIND_$* $< -o $@ \
	  $(if $(filter $*,$(TEST_PLUGINS_WITH_REFERENCE)),$(BUILD)/libkvcmp.a $(LIBS) -lpthread)
$(TEST_PLUGIN_INDEPENDENT_KINDS:%=$(BUILD)/test-plugins/%.so): $(BUILD)/test-plugins/%.so: tests/plugins/plain_insert.c $(PUBLIC_HEADERS) \
  $(BUILD)/libkvcmp.a
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$@)$(CC) $(STD_FLAGS) -O1 -fPIC -shared -fvisibility=hidden $(INCLUDES) -DKIND_$* $< -o $@ $(BUILD)/libkvcmp.a $(LIBS)
$(BUILD)/test-plugins/compress_window.so: tests/plugins/compress_window.c $(PUBLIC_HEADERS) $(BUILD)/libkvcmp.a
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$@)$(CC) $(STD_FLAGS) -O1 -fPIC -shared -fvisibility=hidden $(INCLUDES) $< -o $@ $(BUILD)/libkvcmp.a $(LIBS)
$(TEST_PLUGIN_CXX_KINDS:%=$(BUILD)/test-plugins/%.so): $(BUILD)/test-plugins/%.so: tests/plugins/%.cpp $(PUBLIC_HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(call say,CXX,$@)$(CXX) -std=c++17 -Wall -Wextra -Werror -O1 -fPIC -shared -fvisibility=hidden $(INCLUDES) $< -o $@

# The test suite: unit and property tests under ASan/UBSan, replay of the
# shared case corpora and of fixtures/regressions.  Criterion prints the
# closing summary.
# Fragments in mk/*.mk add goals to TEST_EXTRA (run before the unit tests,
# so that Criterion's summary is the closing line).
TEST_EXTRA :=
TEST_BUILD :=
-include mk/*.mk

# make test runs its parts one after another through tools/run_tests.sh:
# the build (in parallel: -j with the number of processors unless the
# command line gave a -j), each goal of TEST_EXTRA, then the unit tests;
# each part is timed, its output kept in build/test-logs/PART.log, and the
# run ends with "make test: N passed, M failed in T s (per part)".  The
# build prints a progress line every 20 s or so; a green run leaves that
# closing line, its date and the parts' times in build/test-logs/summary.txt.
# TEST_BUILD is what the build part makes; fragments add to it what their
# goals need, so that it is built in parallel up front.
TEST_BUILD += $(BUILD)/asan/unit-tests $(BUILD)/kvcmp $(TEST_PLUGINS)
NPROC := $(shell nproc 2>/dev/null || echo 2)
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
UNIT_TESTS = ASAN_OPTIONS=detect_leaks=0 KVCMP_TEST_PLUGINS=$(BUILD)/test-plugins $(BUILD)/asan/unit-tests --jobs $(NPROC) \
	$(CRITERION_XML_FLAG) $(if $(CRITERION_XML),&& /usr/bin/python3 tools/junit_check.py --criterion $(CRITERION_XML))

test: deps
	@bash tools/run_tests.sh $(BUILD)/test-logs '$(MAKE) --no-print-directory $(BUILD_JOBS) $(TEST_BUILD)' \
	  '$(MAKE) --no-print-directory' '$(TEST_EXTRA)' '$(UNIT_TESTS)'

exhaustive: deps-build $(BUILD)/kvcmp-exhaustive
	$(BUILD)/kvcmp-exhaustive

$(BUILD)/kvcmp-exhaustive: $(BUILD)/obj/tools/exhaustive.o $(BUILD)/libkvcmp.a
	$(CC) $(STD_FLAGS) $^ -o $@ $(LIBS)

clean:
	rm -rf $(BUILD)

# The "#   make GOAL" lines of the Makefile and mk/*.mk, with their
# continuation lines.
help:
	@awk '/^#   make /{p=1; sub(/^#   /,"  "); print; next} p && /^#      /{sub(/^# /,""); print; next} {p=0}' $(MAKEFILE_LIST)
	@echo "  Variables: V=1 shows compiler lines; SHARED=DIR replays newer corpora too; FUZZ_ARGS, BENCH_ARGS add options."

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

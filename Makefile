# kvcmp build.  `make test` and `make fuzz` install missing Debian
# packages first (make deps).  See README.md.

CC ?= gcc
BUILD ?= build
# The project's shared corpora (spec-cases, vllm-cases) live beside the repo.
SHARED ?= $(abspath ../shared)
DEBIAN_PACKAGES := gcc make libmpfr-dev libgmp-dev libcriterion-dev libcjson-dev gcovr clang
STD_FLAGS := -std=c17 -D_GNU_SOURCE -g -Wall -Wextra -fno-fast-math -ffp-contract=off -fopenmp
OPT_FLAGS ?= -O2
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
LIBS := -lmpfr -lgmp -lcjson -lm -ldl -fopenmp
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# Optimisation of the sanitized test objects (make coverage builds them at
# -O0 without sanitizers, like its kvcmp: see mk/report.mk).
TEST_OPT_FLAGS := -O1

COMMON_SRC := $(wildcard common/*.c)
REFERENCE_SRC := $(wildcard reference/*.c)
OPTIMIZED_SRC := $(wildcard optimized/*.c)
HARNESS_SRC := $(filter-out harness/main.c,$(wildcard harness/*.c))
LIB_SRC := $(COMMON_SRC) $(REFERENCE_SRC) $(OPTIMIZED_SRC) $(HARNESS_SRC)
TEST_SRC := $(wildcard tests/test_*.c)

# Release objects in $(BUILD)/obj, sanitized test objects in $(BUILD)/asan.
obj = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))

.PHONY: all deps test fuzz exhaustive bench clean check-shared
all: $(BUILD)/kvcmp

deps:
	@bash tools/deps.sh $(DEBIAN_PACKAGES)

$(BUILD)/obj/optimized/%.o: optimized/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) $(OPT_FLAGS) $(AVX512_FLAGS) -MMD -c $< -o $@
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) $(OPT_FLAGS) -MMD -c $< -o $@
$(BUILD)/asan/optimized/%.o: optimized/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) $(TEST_OPT_FLAGS) $(SANITIZE) $(AVX512_FLAGS) -MMD -c $< -o $@
# The exhaustive 2^32 loops of the format tests are pure arithmetic that
# the sanitizers cannot improve on; they build optimised to stay fast.
$(BUILD)/asan/tests/test_formats.o: tests/test_formats.c
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) -O2 -MMD -c $< -o $@
$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) $(TEST_OPT_FLAGS) $(SANITIZE) -MMD -c $< -o $@

$(BUILD)/kvcmp: $(call obj,obj,$(LIB_SRC) harness/main.c)
	$(CC) $(STD_FLAGS) $^ -o $@ $(LIBS)

$(BUILD)/asan/kvcmp: $(call obj,asan,$(LIB_SRC) harness/main.c)
	$(CC) $(STD_FLAGS) $(SANITIZE) $^ -o $@ $(LIBS)

$(BUILD)/asan/unit-tests: $(call obj,asan,$(LIB_SRC) $(TEST_SRC))
	$(CC) $(STD_FLAGS) $(SANITIZE) $^ -o $@ $(LIBS) -lcriterion

# Candidate libraries that are wrong on purpose (no entry point, a foreign
# ABI, a crashing stage...), one per kind of tests/plugins/candidate.c;
# the unit tests find them through KVCMP_TEST_PLUGINS.
TEST_PLUGIN_KINDS := no_entry null_table wrong_abi short_table crash partial
TEST_PLUGINS = $(patsubst %,$(BUILD)/test-plugins/%.so,$(TEST_PLUGIN_KINDS))
$(BUILD)/test-plugins/%.so: tests/plugins/candidate.c harness/kvcmp_plugin.h common/kvcmp.h
	@mkdir -p $(dir $@)
	$(CC) $(STD_FLAGS) -O1 -fPIC -shared -fvisibility=hidden -DKIND_$* $< -o $@

# The test suite: unit and property tests under ASan/UBSan, replay of the
# shared case corpora and of fixtures/regressions.  Criterion prints the
# closing summary.
# Fragments in mk/*.mk add goals to TEST_EXTRA (run before the unit tests,
# so that Criterion's summary is the closing line).
TEST_EXTRA :=
-include mk/*.mk

test: deps check-shared
	$(MAKE) --no-print-directory $(BUILD)/asan/unit-tests $(BUILD)/kvcmp $(TEST_PLUGINS)
	$(if $(TEST_EXTRA),$(MAKE) --no-print-directory $(TEST_EXTRA))
	ASAN_OPTIONS=detect_leaks=0 KVCMP_SHARED=$(SHARED) KVCMP_TEST_PLUGINS=$(BUILD)/test-plugins $(BUILD)/asan/unit-tests --jobs 2

check-shared:
	@test -d $(SHARED)/spec-cases -a -d $(SHARED)/vllm-cases || { \
	  echo "kvcmp: the shared corpora (spec-cases, vllm-cases) are not in $(SHARED)."; \
	  echo "kvcmp: put shared/ beside the repository, or run: make test SHARED=/path/to/shared"; exit 1; }

exhaustive: deps $(BUILD)/kvcmp-exhaustive
	$(BUILD)/kvcmp-exhaustive

$(BUILD)/kvcmp-exhaustive: $(call obj,obj,$(LIB_SRC) tools/exhaustive.c)
	$(CC) $(STD_FLAGS) $^ -o $@ $(LIBS)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

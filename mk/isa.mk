# The optimized backend on every CPU.  Included by the Makefile.
#
#   make evex-check      no object outside .../optimized/avx512/ holds an
#                        AVX-512 (EVEX) instruction: zmm, xmm16-31 or
#                        ymm16-31 registers, mask registers, {1toN}
#                        broadcasts; objdump over every object of the build
#                        (part of make test)
#   make paths-check     every optimized path this CPU has besides the one
#                        `opt` picks: the optimized unit tests and a
#                        fixed-seed campaign again under KVCMP_MAX_CPU_ISA
#                        (part of make test; on a CPU with one path it says
#                        which path it skips and why)
#   make check-aarch64   cross-builds kvcmp for aarch64 (Debian's
#                        gcc-aarch64-linux-gnu and arm64 MPFR/GMP/cJSON,
#                        installed here) and runs under qemu-user the
#                        reference's replay of the conformance corpus and a
#                        2,000-case campaign of the wrap_reference plug-in

.PHONY: evex-check paths-check check-aarch64 check-aarch64-if-possible

# The instructions only an AVX-512 CPU runs, in objdump's AT&T syntax.
EVEX_PATTERN := %zmm|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|%k[0-7]\b|\{1to[0-9]+\}
evex-check: $(BUILD)/kvcmp $(BUILD)/asan/unit-tests
	@found=$$(find $(BUILD)/obj $(BUILD)/asan -name '*.o' ! -path '*/optimized/avx512/*' | sort | while read -r o; do \
	   objdump -d --no-show-raw-insn "$$o" | grep -qE '$(EVEX_PATTERN)' && echo "$$o"; done); \
	 checked=$$(find $(BUILD)/obj $(BUILD)/asan -name '*.o' ! -path '*/optimized/avx512/*' | wc -l); \
	 if [ -n "$$found" ]; then \
	   echo "evex-check: AVX-512 instructions outside the AVX-512 objects (they die with SIGILL on other CPUs):" >&2; \
	   echo "$$found" | sed 's/^/  /' >&2; \
	   echo "evex-check: see which with: objdump -d --no-show-raw-insn FILE | grep -E '$(EVEX_PATTERN)'" >&2; exit 1; fi; \
	 [ "$$checked" -gt 0 ] || { echo "evex-check: no object found under $(BUILD) to check" >&2; exit 1; }; \
	 echo "evex-check: $$checked objects outside optimized/avx512/ hold no AVX-512 instruction"

# The paths `opt` does not pick here, each run as `opt` would run it.
PATHS_SEED ?= 20261206
paths-check: $(BUILD)/kvcmp $(BUILD)/asan/unit-tests
	@best=$$($(BUILD)/kvcmp --version | sed -n 's/^optimized backend: opt (\([a-z0-9]*\)).*/\1/p'); \
	 for isa in $(OPT_ISAS); do \
	   [ "$$isa" = "$$best" ] && { echo "paths-check: $$isa is the path opt runs here; the rest of make test checks it"; continue; }; \
	   lacks=$$($(BUILD)/kvcmp --version | tr ';' '\n' | grep -o "the optimized backend's $$isa path .*"); \
	   if [ -n "$$lacks" ]; then echo "paths-check: SKIPPED the $$isa path: $$lacks"; continue; fi; \
	   echo "paths-check: the $$isa path (KVCMP_MAX_CPU_ISA=$$isa): optimized unit tests, then a 20,000-case campaign"; \
	   KVCMP_MAX_CPU_ISA=$$isa ASAN_OPTIONS=detect_leaks=0 KVCMP_TEST_PLUGINS=$(BUILD)/test-plugins \
	     $(BUILD)/asan/unit-tests --jobs $(NPROC) --filter 'optimized*/*' > $(BUILD)/paths-check-$$isa-unit.log 2>&1 \
	     || { tail -20 $(BUILD)/paths-check-$$isa-unit.log; echo "paths-check: the $$isa path failed its unit tests ($(BUILD)/paths-check-$$isa-unit.log)" >&2; exit 1; }; \
	   tail -1 $(BUILD)/paths-check-$$isa-unit.log; \
	   KVCMP_MAX_CPU_ISA=$$isa $(BUILD)/kvcmp fuzz --seed $(PATHS_SEED) --cases 20000 --out $(BUILD)/paths-check-$$isa --quiet \
	     > $(BUILD)/paths-check-$$isa-fuzz.log 2>&1 || { tail -20 $(BUILD)/paths-check-$$isa-fuzz.log; \
	       echo "paths-check: the $$isa path failed its campaign ($(BUILD)/paths-check-$$isa-fuzz.log)" >&2; exit 1; }; \
	   grep -q "candidate opt ($$isa)" $(BUILD)/paths-check-$$isa-fuzz.log || { echo "paths-check: the campaign did not run opt ($$isa)" >&2; exit 1; }; \
	   tail -1 $(BUILD)/paths-check-$$isa-fuzz.log; \
	 done

TEST_EXTRA += evex-check paths-check

# The aarch64 build: the same sources with Debian's cross compiler into
# $(BUILD)/aarch64 (no optimized kernels: they are x86-64 only), run under
# qemu-user.  In make test (check-aarch64-if-possible) a machine where the
# packages cannot be installed skips it, saying why; make check-aarch64
# alone fails there.
AARCH64_BUILD := $(BUILD)/aarch64
AARCH64_SEED ?= 20261206
QEMU_AARCH64 := qemu-aarch64
check-aarch64:
	@bash tools/deps_aarch64.sh
	$(MAKE) --no-print-directory BUILD=$(AARCH64_BUILD) CC=aarch64-linux-gnu-gcc TARGET_ARCH_NAME=aarch64 \
	  $(AARCH64_BUILD)/kvcmp $(AARCH64_BUILD)/examples/wrap_reference.so
	@file $(AARCH64_BUILD)/kvcmp | grep -q 'ARM aarch64' || { echo "check-aarch64: $(AARCH64_BUILD)/kvcmp is not an aarch64 binary" >&2; exit 1; }
	$(QEMU_AARCH64) $(AARCH64_BUILD)/kvcmp --version
	$(QEMU_AARCH64) $(AARCH64_BUILD)/kvcmp replay --quiet $(SPEC_CASES_DIR) fixtures/regressions
	$(QEMU_AARCH64) $(AARCH64_BUILD)/kvcmp fuzz --candidate $(AARCH64_BUILD)/examples/wrap_reference.so --seed $(AARCH64_SEED) \
	  --cases 2000 --out $(AARCH64_BUILD)/fuzz-out --quiet

check-aarch64-if-possible:
	@rc=0; bash tools/deps_aarch64.sh || rc=$$?; \
	 if [ $$rc = 3 ]; then echo "check-aarch64: SKIPPED: the cross toolchain cannot be installed here (above)"; exit 0; fi; \
	 [ $$rc = 0 ] || exit $$rc; \
	 $(MAKE) --no-print-directory check-aarch64

TEST_EXTRA += check-aarch64-if-possible

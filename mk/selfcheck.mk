# Mutants of code a differential campaign cannot judge.  Included by the
# Makefile.
#
#   make self-mutants-check  every mutant of harness/mutants/self/ must be
#                        caught by the self checks (harness/mutants/self_check.c)
#                        or by the stored conformance corpora (part of
#                        make mutants-check, so of make test)
#
# A mutant there patches code both sides of every comparison run: the
# shared validator (common/), the layout helpers (include/kvcmp/layout.h)
# or the harness's own checks (harness/fuzz/).  A campaign compares the
# reference with a candidate, so such a bug is on both sides, or in the
# judge, and no campaign can see it: what must catch it is a second
# reading of SPEC.md, a stored expected output, or a check of the harness
# against candidates made for it.  Each mutant gets:
#   build/mutants/self/NAME-check  the self checks built against the
#       patched copy (a patched .c file linked ahead of libkvcmp.a, a
#       patched header first on the include path);
#   build/mutants/self/NAME.so     for a patch of common/, reference/ or
#       include/: the reference plug-in of the patched copy, which
#       harness/mutants/self_check.sh replays the exact corpora through.
# CORPUS_CAUGHT_MUTANTS names campaign mutants (build/mutants/NAME.so) the
# stored corpora must catch as well.

SELF_MUTANT_NAMES := $(sort $(basename $(notdir $(wildcard harness/mutants/self/*.sed))))
SELF_MUTANT_CHECKS := $(patsubst %,$(BUILD)/mutants/self/%-check,$(SELF_MUTANT_NAMES))
CORPUS_CAUGHT_MUTANTS := softmax_acc_negative_zero
SELF_CHECK_HEADERS := tests/validate/spec_rules.h tests/validate/spec_property.h tests/layout/layout_property.h \
  tests/fuzz/harness_property.h

.PHONY: self-mutants-check

$(BUILD)/mutants/self/%-check: harness/mutants/self/%.sed harness/mutants/self_check.c $(SELF_CHECK_HEADERS) $(BUILD)/libkvcmp.a \
    $(PUBLIC_HEADERS) $(COMMON_SRC) $(REFERENCE_SRC) harness/mutants/entry.c
	@rm -rf $(BUILD)/mutants/self/$* && mkdir -p $(BUILD)/mutants/self/$*
	@cp -r common reference include $(BUILD)/mutants/self/$*/
	@file=$$(sed -n 's/^# file: //p' $<); \
	 mkdir -p $(BUILD)/mutants/self/$*/$$(dirname $$file); \
	 sed -f $< $$file > $(BUILD)/mutants/self/$*/$$file; \
	 if cmp -s $$file $(BUILD)/mutants/self/$*/$$file; then \
	   echo "self mutant $*: $< no longer changes $$file; update the patch to the current source" >&2; exit 1; fi
	$(Q)$(call say,CC,$@)file=$$(sed -n 's/^# file: //p' $<); dir=$(BUILD)/mutants/self/$*; \
	 patched=$$(case $$file in *.c) echo $$dir/$$file;; esac); \
	 $(CC) $(STD_FLAGS) -O1 -I$$dir/include -I$$dir -Iinclude -I. harness/mutants/self_check.c $$patched $(BUILD)/libkvcmp.a \
	   -o $@ $(LIBS) && \
	 case $$file in common/*|reference/*|include/*) \
	   $(CC) $(PLUGIN_FLAGS) -DKVC_MUTANT_NAME='"self_$*"' -I$$dir/include -I$$dir $$dir/common/*.c $$dir/reference/*.c \
	     harness/mutants/entry.c -o $(BUILD)/mutants/self/$*.so $(PLUGIN_LIBS);; \
	 esac

self-mutants-check: $(SELF_MUTANT_CHECKS) $(patsubst %,$(BUILD)/mutants/%.so,$(CORPUS_CAUGHT_MUTANTS)) $(BUILD)/kvcmp
	@bash harness/mutants/self_check.sh $(BUILD)/kvcmp $(BUILD)/mutants '$(SELF_MUTANT_NAMES)' '$(CORPUS_CAUGHT_MUTANTS)'

mutants-check: self-mutants-check
TEST_BUILD += $(SELF_MUTANT_CHECKS)

# Machine-readable results (issue 13).  Included by the Makefile.
#
#   build info    $(BUILD)/gen/build_info.h: version, commit and flags for
#                 the run metadata of every JSON and JUnit file
#                 (harness/report/run_info.c); rewritten only when it changes
#
# CRITERION_XML=FILE makes `make test` hand Criterion --xml=FILE (JUnit
# XML of the unit tests), e.g. make test CRITERION_XML=build/junit/unit-tests.xml

BUILD_INFO := $(BUILD)/gen/build_info.h
BUILD_INFO_OBJECTS := $(call obj,obj,harness/report/run_info.c) $(call obj,asan,harness/report/run_info.c)
KVCMP_COMMIT = $(shell git -C $(CURDIR) describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)

.PHONY: FORCE
$(BUILD_INFO): FORCE
	@mkdir -p $(dir $@)
	@{ echo '#define KVCMP_VERSION_STRING "$(KVCMP_VERSION)"'; \
	   echo '#define KVCMP_COMMIT "$(KVCMP_COMMIT)"'; \
	   echo '#define KVCMP_BUILD_FLAGS "$(CC) $(STD_FLAGS) $(OPT_FLAGS)"'; \
	   echo '#define KVCMP_SANITIZED_FLAGS "$(CC) $(STD_FLAGS) $(TEST_OPT_FLAGS) $(SANITIZE)"'; } > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD_INFO_OBJECTS): $(BUILD_INFO)
$(BUILD_INFO_OBJECTS): INCLUDES += -I$(BUILD)/gen
FORCE:

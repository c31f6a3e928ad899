# Machine-readable verdicts for CI.  Included by the Makefile.
#
#   make junit-check     every JUnit file of the run read back by python3's XML
#                        parser, counts checked against the run (part of make test)
#   make replay-junit    replay of the conformance and upstream corpora with
#                        --junit (build/junit/replay-*.xml), and of the
#                        regressions with the example candidate, as the
#                        example workflow runs it
#   make workflow-check  the example CI workflows (examples/ci/*.yml) parse,
#                        and every kvcmp option they pass exists (part of make test)
#
# JUnit XML goes to JUNIT_DIR (default build/junit): fuzz-check.xml,
# fuzz-wrap-reference.xml, mutants.xml, replay-*.xml.  CRITERION_XML=FILE
# also hands Criterion --xml=FILE for the unit tests, e.g.
#     make test CRITERION_XML=build/junit/unit-tests.xml

JUNIT_DIR ?= $(BUILD)/junit
CRITERION_XML ?=
CRITERION_XML_FLAG = $(if $(CRITERION_XML),--xml=$(CRITERION_XML))
# The corpora in the checkout when they are there, else the shared ones.
SPEC_CASES_DIR = $(firstword $(wildcard fixtures/spec-cases) $(SHARED)/spec-cases)
UPSTREAM_FUZZ_DIR = $(firstword $(wildcard fixtures/upstream-fuzz) $(wildcard $(SHARED)/upstream-fuzz))

.PHONY: junit-check replay-junit workflow-check

# The upstream cases differ from the contract on purpose (their causes are
# in reports/parity.md): exit status 1 is their verdict, not an error here;
# junit-check then holds the JUnit file to the counts replay printed.
replay-junit: $(BUILD)/kvcmp $(BUILD)/examples/wrap_reference.so
	@mkdir -p $(JUNIT_DIR)
	$(BUILD)/kvcmp replay --impl $(BUILD)/examples/wrap_reference.so --quiet --junit $(JUNIT_DIR)/replay-candidate.xml \
	  fixtures/regressions $(wildcard fixtures/spec-cases) > $(JUNIT_DIR)/replay-candidate.log
	$(BUILD)/kvcmp replay --quiet --junit $(JUNIT_DIR)/replay-conformance.xml $(SPEC_CASES_DIR) fixtures/regressions \
	  > $(JUNIT_DIR)/replay-conformance.log
	$(if $(UPSTREAM_FUZZ_DIR),$(BUILD)/kvcmp replay --quiet --junit $(JUNIT_DIR)/replay-upstream-fuzz.xml $(UPSTREAM_FUZZ_DIR) \
	  > $(JUNIT_DIR)/replay-upstream-fuzz.log || test $$? -eq 1)

junit-check: fuzz-check wrap-check mutants-check replay-junit
	/usr/bin/python3 tools/junit_check.py --fuzz $(JUNIT_DIR)/fuzz-check.xml reports/fuzz-check.json \
	  --fuzz $(JUNIT_DIR)/fuzz-wrap-reference.xml reports/fuzz-wrap-reference.json \
	  --mutants $(JUNIT_DIR)/mutants.xml reports/mutants.json \
	  --replay $(JUNIT_DIR)/replay-conformance.xml $(JUNIT_DIR)/replay-conformance.log \
	  --replay $(JUNIT_DIR)/replay-candidate.xml $(JUNIT_DIR)/replay-candidate.log \
	  $(if $(UPSTREAM_FUZZ_DIR),--replay $(JUNIT_DIR)/replay-upstream-fuzz.xml $(JUNIT_DIR)/replay-upstream-fuzz.log)

# tools/workflow_check.py asks build/kvcmp: run from a folder where build
# is $(BUILD), so that make test BUILD=DIR checks against its own kvcmp.
workflow-check: $(BUILD)/kvcmp
	@mkdir -p $(BUILD)/workflow-check && ln -sfn $(abspath $(BUILD)) $(BUILD)/workflow-check/build
	cd $(BUILD)/workflow-check && /usr/bin/python3 $(CURDIR)/tools/workflow_check.py $(abspath $(wildcard examples/ci/*.yml) action.yml)

TEST_EXTRA += junit-check workflow-check

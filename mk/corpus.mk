# The conformance corpora of fixtures/ (fixtures/README.md) through
# kvcmp replay, as a user runs it.  Included by the Makefile.
#
#   make corpus-check    replays fixtures/spec-cases, fixtures/edge-cases (also
#                        with page padding) and fixtures/regressions
#                        (exact), fixtures/vllm-cases (vllm policy) and
#                        fixtures/upstream-fuzz (exact), and SHARED's sets
#                        when SHARED=DIR is given (part of make test)
#
# A difference that a set documents in classes.json prints as a KNOWN line
# ("expected upstream difference") and does not fail; any other fails.

CORPUS_REPLAY = $(BUILD)/kvcmp replay --quiet
# SHARED's sets, where they are there: newer corpora than the project's.
SHARED_SPEC_CASES = $(if $(SHARED),$(wildcard $(SHARED)/spec-cases))
SHARED_VLLM_CASES = $(if $(SHARED),$(wildcard $(SHARED)/vllm-cases))
SHARED_UPSTREAM_FUZZ = $(if $(SHARED),$(wildcard $(SHARED)/upstream-fuzz))

.PHONY: corpus-check
corpus-check: $(BUILD)/kvcmp
	$(CORPUS_REPLAY) --policy exact fixtures/spec-cases fixtures/edge-cases fixtures/regressions $(SHARED_SPEC_CASES)
	$(CORPUS_REPLAY) --policy exact --page-padding 100 fixtures/edge-cases
	$(CORPUS_REPLAY) --policy vllm fixtures/vllm-cases $(SHARED_VLLM_CASES)
	$(CORPUS_REPLAY) --policy exact fixtures/upstream-fuzz $(SHARED_UPSTREAM_FUZZ)

TEST_EXTRA += corpus-check

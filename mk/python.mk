# The Python package (python/kvcmp, issue 10).  Included by the Makefile.
#
#   make python-check   the Python tests (tests/python, which also run
#                       examples/pytest and the CPU torch example of
#                       examples/torch_eager) with Debian's python3, numpy,
#                       pytest and torch, over build/libkvcmp.so; part of
#                       make test
#
# Debian's interpreter, not a python3 that PATH may find first (pyenv...):
# the packages of DEBIAN_PACKAGES are installed for it.
PYTHON ?= /usr/bin/python3

.PHONY: python-check
python-check: lib $(BUILD)/kvcmp
	$(Q)KVCMP_LIB=$(abspath $(BUILD)/libkvcmp.so) KVCMP_BIN=$(abspath $(BUILD)/kvcmp) \
	  PYTHONPATH=$(abspath python) PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests/python

TEST_EXTRA += python-check

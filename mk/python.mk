# The Python package (python/kvcmp).  Included by the Makefile.
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

# The wheel: the package with its libkvcmp.so inside, so that
# `pip install` into a venv needs no KVCMP_LIB.  Built offline with the
# interpreter's own setuptools (--no-build-isolation), then tagged for
# this machine with the shared libraries libkvcmp.so loads declared
# (tools/wheel_platform.py).
#
#   make wheel          build/wheel/kvcmp-VERSION-py3-none-linux_MACHINE.whl
#   make wheel-check    the wheel's tag and declared libraries (each from a
#                       runtime package, not a -dev one), then a venv
#                       (--system-site-packages, Debian's numpy and torch)
#                       with the wheel: import kvcmp, python -m kvcmp fuzz,
#                       and the pytest plugin through python -m pytest and a
#                       bare pytest, with no environment variable set; part
#                       of make test
WHEEL_DIR := $(BUILD)/wheel
.PHONY: wheel wheel-check
wheel: $(BUILD)/libkvcmp.so
	$(Q)rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)/src
	$(Q)cp -r python/pyproject.toml python/kvcmp $(WHEEL_DIR)/src/ && rm -rf $(WHEEL_DIR)/src/kvcmp/__pycache__
	$(Q)cp -L $(BUILD)/libkvcmp.so $(WHEEL_DIR)/src/kvcmp/libkvcmp.so
	$(Q)cd $(WHEEL_DIR) && $(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w . ./src > pip.log 2>&1 || { cat pip.log; exit 1; }
	$(Q)$(PYTHON) tools/wheel_platform.py $(WHEEL_DIR)/kvcmp-$(KVCMP_VERSION)-py3-none-any.whl $(WHEEL_DIR)/src/kvcmp/libkvcmp.so > /dev/null
	@echo "wheel: $$(ls $(WHEEL_DIR)/*.whl) (pip install it into a venv: README.md, Install)"

wheel-check: wheel
	$(Q)env -u KVCMP_LIB -u KVCMP_PYTHON -u PYTHONPATH bash tools/wheel_check.sh $(PYTHON) $(abspath $(WHEEL_DIR)) $(abspath tests/python/candidates.py)

TEST_EXTRA += wheel-check

# make install also installs the package's sources under
# PREFIX/share/kvcmp/python: the installed kvcmp command starts its Python
# workers with them (harness/backends/pyworker.c finds them beside bin/).
INSTALL_PYTHON := $(DESTDIR)$(PREFIX)/share/kvcmp/python/kvcmp
.PHONY: install-python uninstall-python
install: install-python
uninstall: uninstall-python
# The conformance corpus (fixtures/spec-cases) goes to
# PREFIX/share/kvcmp/conformance: `kvcmp replay --conformance` replays it.
INSTALL_SHARE := $(DESTDIR)$(PREFIX)/share/kvcmp
# Beside the package, a dist-info naming its pytest11 entry point: with
# PREFIX/share/kvcmp/python on PYTHONPATH, a bare pytest loads the plugin.
INSTALL_DIST_INFO := $(DESTDIR)$(PREFIX)/share/kvcmp/python/kvcmp-$(KVCMP_VERSION).dist-info
install-python:
	$(Q)install -d $(INSTALL_PYTHON) $(INSTALL_DIST_INFO)
	$(Q)install -m 644 python/kvcmp/*.py $(INSTALL_PYTHON)/
	$(Q)printf 'Metadata-Version: 2.1\nName: kvcmp\nVersion: $(KVCMP_VERSION)\n' > $(INSTALL_DIST_INFO)/METADATA
	$(Q)printf '[pytest11]\nkvcmp = kvcmp.pytest_plugin\n' > $(INSTALL_DIST_INFO)/entry_points.txt
	$(Q)rm -rf $(INSTALL_SHARE)/conformance && mkdir -p $(INSTALL_SHARE)/conformance && cp -r fixtures/spec-cases/. $(INSTALL_SHARE)/conformance/
uninstall-python:
	$(Q)rm -f $(addprefix $(INSTALL_PYTHON)/,$(notdir $(wildcard python/kvcmp/*.py)))
	$(Q)rm -f $(INSTALL_DIST_INFO)/METADATA $(INSTALL_DIST_INFO)/entry_points.txt
	$(Q)rmdir $(INSTALL_DIST_INFO) 2>/dev/null || true
	$(Q)rm -rf $(INSTALL_SHARE)/conformance
	$(Q)rmdir $(INSTALL_PYTHON) $(dir $(INSTALL_PYTHON)) $(INSTALL_SHARE) 2>/dev/null || true

#   make kernel-repo-check   the README's CI recipe and the example
#                            workflow's candidate job played step by step
#                            (action.yml with this checkout as the action)
#                            in a fresh repository as a user that is not
#                            root: green as written, red on a bug planted in
#                            a C++ and in a Python candidate, green with the
#                            kept case once fixed (part of make test)
.PHONY: kernel-repo-check
kernel-repo-check: lib $(BUILD)/kvcmp
	$(Q)bash tools/kernel_repo_check.sh $(BUILD) $(PYTHON)

TEST_EXTRA += kernel-repo-check

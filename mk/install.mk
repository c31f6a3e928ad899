# Installing libkvcmp.  Included by the Makefile.
#
#   make install PREFIX=/usr/local   the library (static and shared), the
#                                    public headers, kvcmp.pc and the kvcmp
#                                    command; DESTDIR is honoured
#   make uninstall PREFIX=...        removes exactly what install wrote
#   make install-check               installs into build/ and builds a C++17
#                                    program and the wrap_reference and
#                                    cpp_plugin (C++17) plug-ins against the
#                                    installed copy alone, through pkg-config,
#                                    and fuzzes both plug-ins (part of make test)

PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_LIB := $(DESTDIR)$(PREFIX)/lib
INSTALL_INCLUDE := $(DESTDIR)$(PREFIX)/include/kvcmp
INSTALL_BIN := $(DESTDIR)$(PREFIX)/bin
INSTALL_PC := $(INSTALL_LIB)/pkgconfig
INSTALLED_HEADERS = $(addprefix $(INSTALL_INCLUDE)/,$(notdir $(PUBLIC_HEADERS)))
INSTALLED_LIBS := libkvcmp.a libkvcmp.so libkvcmp.so.$(KVCMP_SOVERSION) libkvcmp.so.$(KVCMP_VERSION)

$(BUILD)/kvcmp.pc: kvcmp.pc.in Makefile
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(KVCMP_VERSION)|' $< > $@

# kvcmp.pc names PREFIX: it is written anew at every install.
install: lib $(BUILD)/kvcmp
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(KVCMP_VERSION)|' kvcmp.pc.in > $(BUILD)/kvcmp.pc
	$(Q)install -d $(INSTALL_LIB) $(INSTALL_INCLUDE) $(INSTALL_BIN) $(INSTALL_PC)
	$(Q)install -m 644 $(BUILD)/libkvcmp.a $(INSTALL_LIB)/
	$(Q)install -m 755 $(BUILD)/libkvcmp.so.$(KVCMP_VERSION) $(INSTALL_LIB)/
	$(Q)ln -sf libkvcmp.so.$(KVCMP_VERSION) $(INSTALL_LIB)/libkvcmp.so.$(KVCMP_SOVERSION)
	$(Q)ln -sf libkvcmp.so.$(KVCMP_SOVERSION) $(INSTALL_LIB)/libkvcmp.so
	$(Q)install -m 644 $(PUBLIC_HEADERS) $(INSTALL_INCLUDE)/
	$(Q)install -m 644 $(BUILD)/kvcmp.pc $(INSTALL_PC)/
	$(Q)install -m 755 $(BUILD)/kvcmp $(INSTALL_BIN)/
	@echo "installed libkvcmp $(KVCMP_VERSION) into $(DESTDIR)$(PREFIX); build against it with" \
	  "PKG_CONFIG_PATH=$(INSTALL_PC) pkg-config --cflags --libs kvcmp"

uninstall:
	$(Q)rm -f $(addprefix $(INSTALL_LIB)/,$(INSTALLED_LIBS)) $(INSTALLED_HEADERS) $(INSTALL_PC)/kvcmp.pc $(INSTALL_BIN)/kvcmp
	$(Q)rmdir $(INSTALL_INCLUDE) 2>/dev/null || true
	@echo "removed libkvcmp from $(DESTDIR)$(PREFIX)"

INSTALL_CHECK_DIR := $(abspath $(BUILD)/install-check)
INSTALL_CHECK_PKG := PKG_CONFIG_PATH=$(INSTALL_CHECK_DIR)/prefix/lib/pkgconfig pkg-config

# Everything below reads only the installed copy: the headers and the
# library under the prefix, found through pkg-config.  The plug-ins call
# the reference's steps inline, so they add plugin_cflags to --cflags
# (kvcmp.pc.in); a fuzz campaign that finds a difference fails the check.
install-check: lib $(BUILD)/kvcmp
	@rm -rf $(INSTALL_CHECK_DIR) && mkdir -p $(INSTALL_CHECK_DIR)
	$(Q)$(MAKE) --no-print-directory install PREFIX=$(INSTALL_CHECK_DIR)/prefix > /dev/null
	$(Q)c++ -std=c++17 -Wall -Wextra -Werror tests/install/every_header.cpp \
	  $$($(INSTALL_CHECK_PKG) --cflags --libs kvcmp) -o $(INSTALL_CHECK_DIR)/every_header
	$(Q)$(INSTALL_CHECK_DIR)/every_header
	$(Q)cflags=$$(echo $$($(INSTALL_CHECK_PKG) --cflags kvcmp)); if [ "$$cflags" != "-I$(INSTALL_CHECK_DIR)/prefix/include" ]; then \
	  echo "kvcmp.pc: Cflags must be the include path alone (a user's kernel keeps its own flags), not: $$cflags" >&2; exit 1; fi
	$(Q)$(CC) -std=c17 -O1 -fPIC -shared -fvisibility=hidden examples/wrap_reference/wrap_reference.c \
	  $$($(INSTALL_CHECK_PKG) --cflags kvcmp) $$($(INSTALL_CHECK_PKG) --variable=plugin_cflags kvcmp) \
	  $$($(INSTALL_CHECK_PKG) --libs kvcmp) -o $(INSTALL_CHECK_DIR)/wrap_reference.so
	$(Q)set -o pipefail; $(BUILD)/kvcmp fuzz --candidate $(INSTALL_CHECK_DIR)/wrap_reference.so --seed 7 --cases 500 --quiet \
	  --save $(INSTALL_CHECK_DIR)/failures | tail -n 1
	$(Q)$(CXX) -std=c++17 -Wall -Wextra -Werror -O1 -fPIC -shared -fvisibility=hidden examples/cpp_plugin/cpp_plugin.cpp \
	  $$($(INSTALL_CHECK_PKG) --cflags kvcmp) $$($(INSTALL_CHECK_PKG) --variable=plugin_cflags kvcmp) \
	  $$($(INSTALL_CHECK_PKG) --libs kvcmp) -o $(INSTALL_CHECK_DIR)/cpp_plugin.so
	$(Q)exports=$$(nm -D --defined-only $(INSTALL_CHECK_DIR)/cpp_plugin.so | awk '{print $$3}'); \
	  if [ "$$exports" != kvcmp_plugin_entry ]; then \
	    echo "cpp_plugin.so must export kvcmp_plugin_entry alone (C linkage), not: $$exports" >&2; exit 1; fi
	$(Q)set -o pipefail; $(BUILD)/kvcmp fuzz --candidate $(INSTALL_CHECK_DIR)/cpp_plugin.so --seed 7 --cases 500 --quiet \
	  --save $(INSTALL_CHECK_DIR)/failures-cpp | tail -n 1
	$(Q)$(MAKE) --no-print-directory uninstall PREFIX=$(INSTALL_CHECK_DIR)/prefix > /dev/null
	$(Q)left=$$(find $(INSTALL_CHECK_DIR)/prefix -type f); \
	  if [ -n "$$left" ]; then echo "make uninstall left files behind: $$left" >&2; exit 1; fi
	$(Q)extra=$$(nm -D --defined-only $(BUILD)/libkvcmp.so | awk '$$3 != "KVCMP_1" {sub(/@.*/, "", $$3); print $$3}' | \
	  grep -vxF -f <(sed -n 's/^    \(.*\);$$/\1/p' $(BUILD)/libkvcmp.map) || true); \
	  if [ -n "$$extra" ]; then echo "libkvcmp.so exports symbols no public header declares: $$extra" >&2; exit 1; fi
	@echo "install-check: the C++17 program and the wrap_reference and cpp_plugin plug-ins built against the installed libkvcmp alone"

TEST_EXTRA += install-check

#!/usr/bin/env bash
# Writes the linker version script of libkvcmp.so: every function and
# object that the public headers declare (not their static inline
# helpers) is global, everything else local.  kvcmp_plugin_entry, which
# include/kvcmp/plugin.h declares, is the plug-ins' entry point: a
# candidate library defines it, libkvcmp does not, so it is never
# exported from here.
# Usage: tools/export_map.sh include/kvcmp/*.h > libkvcmp.map
set -eu
symbols=$(grep -hvE '^\s*(static|typedef|#|/?\*)' "$@" |
    grep -oE '^(extern +)?(const +)?[A-Za-z_][A-Za-z0-9_ ]*[ *]+((kvc|ref)_[A-Za-z0-9_]+) *[(;]' |
    grep -oE '(kvc|ref)_[A-Za-z0-9_]+ *[(;]$' | tr -d '(; ' | grep -vxF kvcmp_plugin_entry | sort -u)
echo "KVCMP_1 {"
echo "  global:"
for s in $symbols; do echo "    $s;"; done
echo "  local: *;"
echo "};"

#!/usr/bin/env bash
# make kernel-repo-check: kvcmp as a kernel repository uses it (action.yml).
# A temporary repository with no kvcmp sources in it holds a C, a C++ and a
# Python candidate and its own regressions folder; kvcmp is installed from
# this checkout into a prefix; the recipe's commands (fuzz, replay of the
# regressions) run there with the installed command on PATH.  Checked:
# every output lies under the chosen folder, each candidate passes, a
# planted bug fails with __REPRO lines that fail again when run by a
# shell, and a kept regression replays.
# usage: kernel_repo_check.sh BUILD_DIR PYTHON
set -euo pipefail
build=$(cd "$1" && pwd) python=$2
checkout=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "kernel-repo-check: $*" >&2; exit 1; }

make --no-print-directory install PREFIX="$work/prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install failed"; }
export PATH="$work/prefix/bin:$PATH" PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
unset KVCMP_LIB KVCMP_PYTHON PYTHONPATH
repo=$work/kernels
mkdir -p "$repo/src" "$repo/build" "$repo/regressions"
cp "$checkout/examples/wrap_reference/wrap_reference.c" "$repo/src/c_kernel.c"
cp "$checkout/examples/cpp_plugin/cpp_plugin.cpp" "$repo/src/cpp_kernel.cpp"
cp "$checkout/tests/python/candidates.py" "$repo/src/py_kernels.py"
cd "$repo"
cc -std=c17 -O1 -fPIC -shared -fvisibility=hidden src/c_kernel.c $(pkg-config --cflags kvcmp) \
   $(pkg-config --variable=plugin_cflags kvcmp) $(pkg-config --libs kvcmp) -o build/c_kernel.so
c++ -std=c++17 -O1 -fPIC -shared -fvisibility=hidden src/cpp_kernel.cpp $(pkg-config --cflags kvcmp) \
   $(pkg-config --variable=plugin_cflags kvcmp) $(pkg-config --libs kvcmp) -o build/cpp_kernel.so
touch "$work/marker"

run_recipe() {   # CANDIDATE OUT [extra fuzz options]: the action's two commands
    local candidate=$1 out=$2
    shift 2
    kvcmp fuzz --candidate "$candidate" --seed 3 --cases 300 --out "$out" --junit "$out/fuzz.xml" --quiet "$@" > "$out.log" 2>&1
}
for candidate in build/c_kernel.so build/cpp_kernel.so py:src/py_kernels.py:correct; do
    out=out-$(basename "${candidate//[:\/]/_}")
    run_recipe "$candidate" "$out" --python "$python" || { cat "$out.log"; fail "$candidate failed its campaign"; }
    [ -f "$out/fuzz.xml" ] && [ -f "$out/fuzz-summary.json" ] || fail "$candidate: no summary or JUnit under $out"
done

# A planted bug: red, with REPRO lines a shell runs as they are.
set +e
run_recipe py:src/py_kernels.py:last_latent_bit_flipped red --python "$python" --stage v41.save --max-failures 1
status=$?
set -e
[ "$status" = 1 ] || { cat red.log; fail "the planted bug did not fail (exit $status)"; }
grep -q '__REPRO: KVCMP_PYTHON=[^ ]* kvcmp ' red.log || { cat red.log; fail "REPRO lines do not name the installed kvcmp"; }
sed -n 's/^  __REPRO: //p' red.log | head -n 2 > repros
while read -r line; do
    set +e
    bash -c "$line" > repro.log 2>&1
    status=$?
    set -e
    [ "$status" = 1 ] && grep -q FAIL repro.log || { cat repro.log; fail "this REPRO line did not fail again: $line"; }
done < repros

# Keep the saved case as the repository's regression; the fixed kernel
# passes it, the buggy one fails it.
saved=$(find red/failures -name case.json | head -n 1)
[ -n "$saved" ] || fail "the red campaign saved no case under red/failures"
cp -r "$(dirname "$saved")" regressions/
KVCMP_PYTHON=$python kvcmp replay --impl py:src/py_kernels.py:correct --junit out-regressions.xml regressions > replay.log 2>&1 \
    || { cat replay.log; fail "the regression does not pass with the correct kernel"; }
if KVCMP_PYTHON=$python kvcmp replay --impl py:src/py_kernels.py:last_latent_bit_flipped regressions > replay-red.log 2>&1; then
    cat replay-red.log; fail "the regression passes with the buggy kernel"
fi

# The same through fuzz --regressions, and the installed conformance corpus.
kvcmp fuzz --candidate build/cpp_kernel.so --cases 50 --out out-regr --regressions regressions --quiet > regr.log 2>&1 \
    || { cat regr.log; fail "fuzz --regressions failed with the C++ kernel"; }
grep -q "1 passed, 0 failed" regr.log || { cat regr.log; fail "fuzz --regressions did not replay the kept case"; }
kvcmp replay --conformance --impl build/cpp_kernel.so --quiet > conformance.log 2>&1 \
    || { cat conformance.log; fail "the installed conformance corpus does not pass with the C++ kernel"; }

# Nothing outside the chosen folders (and the logs this script wrote).
stray=$(find . -newer "$work/marker" -type f | grep -vE '^\./(out-[^/]+|red|regressions)/|^\./[^/]+\.(log|xml)$|^\./repros$|__pycache__' || true)
[ -z "$stray" ] || fail "kvcmp wrote outside its --out folder: $stray"
[ ! -e build/fuzz-failures ] && [ ! -e reports ] || fail "kvcmp wrote build/fuzz-failures or reports/ in the kernel repository"
echo "kernel-repo-check: C, C++ and Python candidates fuzzed and replayed by the installed kvcmp in a kernel repository; REPRO lines fail again from a shell; a kept regression replays"

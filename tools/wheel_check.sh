#!/usr/bin/env bash
# make wheel-check: the wheel in a fresh venv (--system-site-packages, so
# Debian's numpy, torch and pytest serve offline), used from a directory
# that is not the checkout, with no KVCMP_* variable: import, a campaign
# through python -m kvcmp, and the pytest plugin through python -m pytest
# and a bare pytest on the activated venv's PATH.  Before that, what the
# wheel says of itself: a platform tag, and a Requires-External line for
# every shared library its libkvcmp.so loads past the C library, each
# found in a runtime package (not a -dev one) where dpkg can tell.
# usage: wheel_check.sh PYTHON WHEEL_DIR CANDIDATES_PY
set -euo pipefail
python=$1 wheels=$2 candidates=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "wheel-check: $*" >&2; exit 1; }

wheel=$(ls "$wheels"/kvcmp-*.whl)
case "$(basename "$wheel")" in
    kvcmp-*-py3-none-linux_"$(uname -m)".whl) ;;
    *) fail "$(basename "$wheel") is not tagged for this machine (py3-none-linux_$(uname -m)): it carries a compiled library" ;;
esac
mkdir "$work/unpacked"
(cd "$work/unpacked" && "$python" -m zipfile -e "$wheel" .)
grep -qx "Root-Is-Purelib: false" "$work"/unpacked/kvcmp-*.dist-info/WHEEL || fail "the wheel's WHEEL file says it is pure Python"
grep -qx "Tag: py3-none-linux_$(uname -m)" "$work"/unpacked/kvcmp-*.dist-info/WHEEL || fail "the WHEEL file's Tag is not the file name's"
needs=$(ldd "$work/unpacked/kvcmp/libkvcmp.so" | awk '$2 == "=>" {print $1}' \
        | grep -vE '^(linux-vdso|ld-linux[^ ]*|libc|libm|libpthread|libdl|librt|libresolv)\.so' | sort)
declared=$(sed -n 's/^Requires-External: //p' "$work"/unpacked/kvcmp-*.dist-info/METADATA | sort)
[ -n "$needs" ] && [ "$needs" = "$declared" ] || fail "libkvcmp.so loads [$(echo $needs)], the wheel declares [$(echo $declared)]"
if command -v dpkg > /dev/null; then
    for file in $(ldd "$work/unpacked/kvcmp/libkvcmp.so" | awk '$2 == "=>" {print $3}'); do
        owner=$(dpkg -S "$(readlink -f "$file")" 2>/dev/null || dpkg -S "$file" 2>/dev/null || true)
        owner=${owner%%:*}
        case "$owner" in
            "") fail "$file, which libkvcmp.so loads, belongs to no Debian package" ;;
            *-dev) fail "$file, which libkvcmp.so loads, comes from $owner: a machine without -dev packages could not import kvcmp" ;;
        esac
    done
fi
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index --no-deps "$wheels"/kvcmp-*.whl
cd "$work"
cp "$candidates" kernels.py
venv/bin/python -c 'import kvcmp, os; assert os.path.dirname(kvcmp._lib.LIB_PATH) == os.path.dirname(kvcmp.__file__), kvcmp._lib.LIB_PATH'
venv/bin/python -m kvcmp fuzz --candidate kernels.py:correct --cases 200 --seed 5 --quiet > fuzz.log 2>&1 || { cat fuzz.log; exit 1; }
grep -q "0 failures" fuzz.log && test -f kvcmp-out/fuzz-summary.json
set +e
venv/bin/python -m kvcmp fuzz --candidate kernels.py:last_latent_bit_flipped --stage v41.save --cases 100 --quiet \
    --max-failures 1 > red.log 2>&1
status=$?
set -e
[ "$status" = 1 ] || { cat red.log; echo "wheel-check: a planted bug did not fail the campaign (exit $status)" >&2; exit 1; }
repro=$(sed -n 's/^  __REPRO: //p' red.log | tail -n 1)
[ -n "$repro" ] || { cat red.log; echo "wheel-check: no __REPRO line" >&2; exit 1; }
set +e
PATH="$work/venv/bin:$PATH" bash -c "$repro" > repro.log 2>&1
status=$?
set -e
[ "$status" = 1 ] && grep -q FAIL repro.log || { cat repro.log; echo "wheel-check: the REPRO line did not fail again: $repro" >&2; exit 1; }
cat > test_gate.py <<'PY'
import pytest

@pytest.mark.kvcmp_candidate("kernels.py:correct")
def test_gate(kvcmp_fuzz, kvcmp_stage):
    kvcmp_fuzz("kernels.py:correct", stages=kvcmp_stage, cases=30)
PY
venv/bin/python -m pytest -q -p no:cacheprovider test_gate.py > pytest.log 2>&1 || { cat pytest.log; exit 1; }
grep -q "5 passed" pytest.log || { cat pytest.log; exit 1; }
# A bare pytest, as an activated venv's PATH finds it.
[ "$(PATH="$work/venv/bin:$PATH" command -v pytest)" = "$work/venv/bin/pytest" ] || fail "the venv has no pytest of its own"
PATH="$work/venv/bin:$PATH" VIRTUAL_ENV="$work/venv" pytest -q -p no:cacheprovider test_gate.py > bare.log 2>&1 \
    || { cat bare.log; fail "a bare pytest in the venv did not pass the plugin's test"; }
grep -q "5 passed" bare.log || { cat bare.log; exit 1; }
echo "wheel-check: the wheel (py3-none-linux_$(uname -m), declaring $(echo $declared)) in a venv: import kvcmp, python -m kvcmp fuzz (green, red, REPRO fails again) and the pytest plugin (5 stages) through python -m pytest and a bare pytest, with no KVCMP_* variable"

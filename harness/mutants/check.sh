#!/usr/bin/env bash
# Fuzz every mutant candidate with a fixed seed; each must be caught
# (a failure reported) within the time limit.  `kvcmp report mutants`
# reads the campaigns' summaries, prints the kill time per mutant and
# writes reports/mutants.json (and JUnit XML when JUNIT is given).
# An optimized mutant is built once per ISA (opt_NAME-avx512.so,
# opt_NAME-avx2.so); one whose ISA this CPU lacks is not run: NAME.skipped
# holds why, and the report lists it as skipped.
# Usage: harness/mutants/check.sh KVCMP MUTANT_DIR SEED SECONDS [JUNIT]
set -u
kvcmp=$1 dir=$2 seed=$3 limit=$4 junit=${5:-}
found_root=$dir/found
rm -rf "$found_root"
mkdir -p "$found_root" reports
for so in "$dir"/*.so; do
    name=$(basename "$so" .so)
    rm -f "$dir/$name.json" "$dir/$name.skipped"
    case $name in
        opt_*-avx512 | opt_*-avx2)
            isa=${name##*-}
            lacks=$("$kvcmp" --version | tr ';' '\n' | grep -o "the optimized backend's $isa path .*")
            if [ -n "$lacks" ]; then
                echo "$lacks" > "$dir/$name.skipped"
                continue
            fi ;;
    esac
    "$kvcmp" fuzz --candidate "$so" --seed "$seed" --seconds "$limit" --max-failures 1 --shrink-seconds 2 \
        --save "$found_root/$name" --json "$dir/$name.json" --quiet > "$dir/$name.log" 2>&1
done
exec "$kvcmp" report mutants --limit "$limit" --json reports/mutants.json ${junit:+--junit "$junit"} "$dir"

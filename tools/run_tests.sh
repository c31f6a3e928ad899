#!/usr/bin/env bash
# make test's driver: the build, each goal of TEST_EXTRA, then the unit
# tests, each part timed.  A part's output goes to build/test-logs/PART.log;
# the terminal gets one line per part (and the lines a reader must see: the
# expected upstream differences, the coverage totals), the whole log of a
# part that fails, the unit tests' own output, and one closing line:
#   make test: N passed, M failed in T s (build a s, fuzz-check b s, ...)
#
# usage: run_tests.sh LOG_DIR BUILD_COMMAND GOAL_COMMAND "GOALS" UNIT_TEST_COMMAND
#   GOAL_COMMAND runs one goal: "$GOAL_COMMAND goal".
set -u
log_dir=$1 build_command=$2 goal_command=$3 goals=$4 unit_command=$5
mkdir -p "$log_dir"
started=$(date +%s.%N)
passed=0 failed=0 times=""

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }'; }

finish() {
    echo "make test: $passed passed, $failed failed in $(seconds_since "$started") s (${times#, })"
    exit $((failed > 0))
}

# Lines of a passing part's log that belong on the terminal.
SHOWN='^KNOWN \[|expected upstream difference|^lines: |^branches: |^functions: '

# part NAME COMMAND: runs COMMAND with its output in the log.
part() {
    local name=$1 command=$2 log="$log_dir/$1.log" t0
    t0=$(date +%s.%N)
    if eval "$command" > "$log" 2>&1; then
        passed=$((passed + 1))
        local took; took=$(seconds_since "$t0")
        times="$times, $name $took s"
        printf '  ok     %-20s %4s s   (%s)\n' "$name" "$took" "$log"
        grep -E "$SHOWN" "$log" | awk '{ print "         " (length($0) > 190 ? substr($0, 1, 187) "..." : $0) }'
    else
        failed=$((failed + 1))
        times="$times, $name $(seconds_since "$t0") s"
        echo "  FAIL   $name: the last lines of $log:"
        tail -n 80 "$log" | sed 's/^/  | /'
        echo "  rerun it alone: make $name"
        finish
    fi
}

part build "$build_command"
for goal in $goals; do part "$goal" "$goal_command $goal"; done
# The unit tests last, in the open: Criterion's own summary, then ours.
t0=$(date +%s.%N)
if eval "$unit_command"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
times="$times, unit-tests $(seconds_since "$t0") s"
finish

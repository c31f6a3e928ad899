#!/usr/bin/env bash
# make test's driver: the build, the goals of TEST_EXTRA, then the unit
# tests, each part timed.  The output of the build and of the goals goes to
# build/test-logs/{build,checks}.log; the terminal gets one line per part
# with its time (and the lines a reader must see: the expected upstream
# differences, the coverage totals), the end of the log of a part that
# fails, Criterion's summary line of the unit tests (their whole output in
# LOG_DIR/unit-tests.log), and one closing line:
#   make test: N passed, M failed in T s (build a s, fuzz-check b s, ...)
# While the build runs, a progress line every PROGRESS_SECONDS (20):
#   ...    build    40 s   123 files compiled so far
# After a green run, LOG_DIR/summary.txt holds the closing line, the date
# and each part's time, one per line (a run that fails leaves none).
#
# usage: run_tests.sh LOG_DIR BUILD_COMMAND GOAL_COMMAND "GOALS" UNIT_TEST_COMMAND
# The goals run in one `GOAL_COMMAND --trace GOALS` (a goal that others
# need runs once); a goal's time runs from the start of its recipe, as
# make --trace reports it, to the start of the next.
set -u
log_dir=$1 build_command=$2 goal_command=$3 goals=$4 unit_command=$5
mkdir -p "$log_dir"
rm -f "$log_dir/summary.txt"
started=$(date +%s)
passed=0 failed=0 times=""

finish() {
    local closing="make test: $passed passed, $failed failed in $(($(date +%s) - started)) s (${times#, })"
    echo "$closing"
    if [ "$failed" = 0 ]; then
        {
            echo "$closing"
            echo "date: $(date '+%Y-%m-%d %H:%M:%S %z')"
            echo "${times#, }" | tr ',' '\n' | sed 's/^ *//' | awk '{ printf "%-20s %5s s\n", $1, $2 }'
        } > "$log_dir/summary.txt"
    fi
    exit $((failed > 0))
}

# Lines of a passing part's output that belong on the terminal, shortened.
SHOWN='^KNOWN \[|expected upstream difference|^lines: |^branches: |^functions: '
show() { grep -E "$SHOWN" | awk '{ print "         " (length($0) > 190 ? substr($0, 1, 187) "..." : $0) }'; }

ok() {   # NAME SECONDS LOG
    passed=$((passed + 1))
    times="$times, $1 $2 s"
    printf '  ok     %-20s %4s s   (%s)\n' "$1" "$2" "$3"
}

fail() {   # NAME SECONDS LOG RERUN
    failed=$((failed + 1))
    times="$times, $1 $2 s"
    echo "  FAIL   $1: the last lines of $3:"
    tail -n 80 "$3" | sed 's/^/  | /'
    echo "  rerun it alone: $4"
    finish
}

# The build's output goes to its log through a reader that counts the
# files compiled (make prints one "  CC     FILE" or CXX line for each)
# and, every PROGRESS_SECONDS (20), prints how many so far: it waits for
# input a second at a time, so that the line comes on time even while one
# long compile prints nothing.  In the foreground, so that ^C stops the
# build with it.
progress_seconds=${PROGRESS_SECONDS:-20}
progress() {   # NAME LOG
    local chunk line pending="" compiled=0 next=$((SECONDS + progress_seconds)) begun=$SECONDS status
    : > "$2"
    while :; do
        IFS= read -r -t 1 chunk
        status=$?
        if [ $status = 0 ]; then
            line=$pending$chunk pending=""
            printf '%s\n' "$line" >> "$2"
            case $line in "  CC "* | "  CXX "*) compiled=$((compiled + 1)) ;; esac
        elif [ $status -gt 128 ]; then
            pending=$pending$chunk   # timed out, perhaps within a line
        else
            line=$pending$chunk      # the end of the output
            [ -n "$line" ] && printf '%s\n' "$line" >> "$2"
            break
        fi
        if [ "$SECONDS" -ge "$next" ]; then
            printf '  ...    %-20s %4s s   %s files compiled so far\n' "$1" $((SECONDS - begun)) "$compiled"
            next=$((SECONDS + progress_seconds))
        fi
    done
}
set -o pipefail
t0=$(date +%s)
if eval "$build_command" 2>&1 | progress build "$log_dir/build.log"; then ok build $(($(date +%s) - t0)) "$log_dir/build.log"
else fail build $(($(date +%s) - t0)) "$log_dir/build.log" "$build_command"; fi

# The goals: each line of make's output stamped with the time, a goal's
# recipe starting at its "update target 'GOAL'" trace line.
log="$log_dir/checks.log"
current="" since=$(date +%s) goal_status=0
set -o pipefail
exec 3< <(eval "$goal_command --trace $goals" 2>&1; echo "__kvcmp_status $?")
: > "$log"
while IFS= read -r line <&3; do
    case $line in
    "__kvcmp_status "*) goal_status=${line#__kvcmp_status }; continue ;;
    esac
    for goal in $goals; do
        case $line in
        *": update target '$goal' due to"* | *": target '$goal' does not exist")
            now=$(date +%s)
            [ -n "$current" ] && { ok "$current" $((now - since)) "$log"; sed -n "/^== part $current\$/,\$p" "$log" | show; }
            echo "== part $goal" >> "$log"
            current=$goal since=$now ;;
        esac
    done
    printf '%s\n' "$line" >> "$log"
done
now=$(date +%s)
if [ "$goal_status" = 0 ]; then
    [ -n "$current" ] && { ok "$current" $((now - since)) "$log"; sed -n "/^== part $current\$/,\$p" "$log" | show; }
else
    fail "${current:-checks}" $((now - since)) "$log" "make ${current:-$goals}"
fi

# The unit tests last.  Their output (which holds what the negative tests
# make the commands print) goes to unit-tests.log; the terminal gets
# Criterion's summary line, and the failures with the log's end when any.
t0=$(date +%s)
unit_log="$log_dir/unit-tests.log"
if eval "$unit_command" > "$unit_log" 2>&1; then
    passed=$((passed + 1))
    printf '  ok     %-20s %4s s   (%s)\n' unit-tests $(($(date +%s) - t0)) "$unit_log"
    grep -E '^\[====\] Synthesis' "$unit_log" | sed 's/^/         /'
else
    failed=$((failed + 1))
    echo "  FAIL   unit-tests: the failing tests and the end of $unit_log:"
    grep -E '^\[FAIL\]|Assertion Failed|^\[====\] Synthesis' "$unit_log" | sed 's/^/  | /'
    tail -n 40 "$unit_log" | sed 's/^/  | /'
    echo "  rerun it alone: $unit_command"
fi
times="$times, unit-tests $(($(date +%s) - t0)) s"
finish

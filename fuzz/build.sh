#!/bin/bash -eu
# Build the kvcmp libFuzzer target the way OSS-Fuzz / ClusterFuzzLite do:
# they set CC, CFLAGS, LIB_FUZZING_ENGINE and OUT; run alone, this script
# uses clang with ASan+UBSan and writes to build/libfuzzer.
#   fuzz/build.sh && build/libfuzzer/kvcmp_fuzzer fixtures/corpus -max_total_time=60
SRC=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-clang}
CFLAGS=${CFLAGS:--O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined}
LIB_FUZZING_ENGINE=${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}
OUT=${OUT:-$SRC/build/libfuzzer}
WORK=${WORK:-$OUT/obj}
mkdir -p "$OUT" "$WORK"
# The contract needs IEEE arithmetic: no contraction, no fast-math.
COMMON="-std=c17 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -fopenmp"
AVX512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma"
# libkvcmp built instrumented (coverage guidance needs every object
# compiled with the fuzzer's flags), then the entry point linked to it.
objects=()
for src in "$SRC"/common/*.c "$SRC"/reference/*.c "$SRC"/optimized/*.c "$SRC"/harness/*/*.c; do
    case $src in */harness/mutants/*) continue ;; esac
    obj=$WORK/$(echo "${src#$SRC/}" | tr / _).o
    extra=""
    case $src in */optimized/*) extra=$AVX512 ;; esac
    $CC $CFLAGS $COMMON $extra -I"$SRC/include" -I"$SRC" -c "$src" -o "$obj"
    objects+=("$obj")
done
rm -f "$WORK/libkvcmp.a" && ar rcs "$WORK/libkvcmp.a" "${objects[@]}"
$CC $CFLAGS $COMMON -I"$SRC/include" -I"$SRC" -c "$SRC/fuzz/libfuzzer_entry.c" -o "$WORK/libfuzzer_entry.o"
$CC $CFLAGS $LIB_FUZZING_ENGINE -fopenmp "$WORK/libfuzzer_entry.o" "$WORK/libkvcmp.a" -o "$OUT/kvcmp_fuzzer" -lmpfr -lgmp -lcjson -lm -ldl
if command -v zip >/dev/null; then
    (cd "$SRC/fixtures/corpus" && zip -q -j "$OUT/kvcmp_fuzzer_seed_corpus.zip" ./*)
fi
echo "built $OUT/kvcmp_fuzzer"

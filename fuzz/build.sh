#!/bin/bash -eu
# Build the kvcmp libFuzzer target the way OSS-Fuzz / ClusterFuzzLite do:
# they set CC, CFLAGS, LIB_FUZZING_ENGINE, OUT (and SANITIZER); run alone,
# this script uses clang with ASan+UBSan and writes to build/libfuzzer.
#   fuzz/build.sh && mkdir -p build/corpus build/libfuzzer/artifacts &&
#   build/libfuzzer/kvcmp_fuzzer build/corpus fixtures/corpus -artifact_prefix=build/libfuzzer/artifacts/ -max_total_time=60
# KVCMP_FUZZ_SERIAL=1 builds without OpenMP (the default when
# SANITIZER=memory): see fuzz/omp_serial.c and fuzz/README.md.
SRC=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-clang}
CFLAGS=${CFLAGS:--O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined}
LIB_FUZZING_ENGINE=${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}
OUT=${OUT:-$SRC/build/libfuzzer}
WORK=${WORK:-$OUT/obj}
SERIAL=${KVCMP_FUZZ_SERIAL:-$([ "${SANITIZER:-}" = memory ] && echo 1 || echo 0)}
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)   # the seed corpus is zipped from inside fixtures/corpus
# The contract needs IEEE arithmetic: no contraction, no fast-math.
COMMON="-std=c17 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math"
OPENMP=-fopenmp
extra_objects=()
if [ "$SERIAL" = 1 ]; then
    OPENMP=""
    $CC $CFLAGS $COMMON -c "$SRC/fuzz/omp_serial.c" -o "$WORK/omp_serial.o"
    extra_objects+=("$WORK/omp_serial.o")
    echo "kvcmp: building without OpenMP (KVCMP_FUZZ_SERIAL=1): every parallel region runs on one thread"
fi
# The optimized kernels once per ISA, as the Makefile builds them
# (optimized/isa.h); the dispatch and the token checks for the baseline.
ISA_FLAGS_avx512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -DKVCMP_ISA_AVX512 -include $SRC/optimized/isa.h"
ISA_FLAGS_avx2="-mavx2 -mfma -Wno-psabi -DKVCMP_ISA_AVX2 -include $SRC/optimized/isa.h"
# libkvcmp built instrumented (coverage guidance needs every object
# compiled with the fuzzer's flags), then the entry point linked to it.
objects=()
compile() { # SOURCE OBJECT FLAGS...
    local src=$1 obj=$2
    shift 2
    $CC $CFLAGS $COMMON $OPENMP "$@" -I"$SRC/include" -I"$SRC" -c "$src" -o "$obj"
    objects+=("$obj")
}
for src in "$SRC"/common/*.c "$SRC"/reference/*.c "$SRC"/optimized/*.c "$SRC"/harness/*/*.c; do
    name=$(echo "${src#$SRC/}" | tr / _)
    case $src in
        */harness/mutants/*) continue ;;
        */optimized/backend.c | */optimized/validate_tokens.c) compile "$src" "$WORK/$name.o" ;;
        */optimized/*)
            for isa in avx512 avx2; do
                flags=ISA_FLAGS_$isa
                # shellcheck disable=SC2086
                compile "$src" "$WORK/$isa-$name.o" ${!flags}
            done ;;
        *) compile "$src" "$WORK/$name.o" ;;
    esac
done
rm -f "$WORK/libkvcmp.a" && ar rcs "$WORK/libkvcmp.a" "${objects[@]}"
$CC $CFLAGS $COMMON $OPENMP -I"$SRC/include" -I"$SRC" -c "$SRC/fuzz/libfuzzer_entry.c" -o "$WORK/libfuzzer_entry.o"
$CC $CFLAGS $LIB_FUZZING_ENGINE $OPENMP "$WORK/libfuzzer_entry.o" "$WORK/libkvcmp.a" ${extra_objects[@]+"${extra_objects[@]}"} \
    -o "$OUT/kvcmp_fuzzer" -lmpfr -lgmp -lcjson -lm -ldl
# What OSS-Fuzz and ClusterFuzzLite pick up beside the binary: its options
# (the dictionary, input size, time-out) and the seed corpus.
cp "$SRC/fuzz/kvcmp_fuzzer.options" "$SRC/fuzz/kvcmp_fuzzer.dict" "$OUT/"
if command -v zip >/dev/null; then
    rm -f "$OUT/kvcmp_fuzzer_seed_corpus.zip"
    (cd "$SRC/fixtures/corpus" && zip -q -j "$OUT/kvcmp_fuzzer_seed_corpus.zip" ./*)
fi
echo "built $OUT/kvcmp_fuzzer"

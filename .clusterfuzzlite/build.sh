#!/bin/bash -eu
# ClusterFuzzLite calls $SRC/build.sh with CC, CFLAGS, LIB_FUZZING_ENGINE
# and OUT set; kvcmp's own script honours all of them.
exec "$SRC/kvcmp/fuzz/build.sh"

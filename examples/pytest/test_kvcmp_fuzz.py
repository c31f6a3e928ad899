"""Bit-exact gate of a KV-compressor kernel against kvcmp's reference.

Copy this file into your repository's tests/ and set CANDIDATE to your
kernel's entry point: a callable candidate(case) -> outputs (see
`python3 -c "import kvcmp; help(kvcmp)"`).  Each stage is one test that
runs CASES generated cases of a fixed seed; a failure shows the
classified difference (region, count, largest distance in format steps,
the first failing element with both sides' bytes), the shrunk case saved
under SAVE_DIR, and the command that replays it.

Needs the kvcmp package (PYTHONPATH=<kvcmp>/python, or pip install
--no-build-isolation <kvcmp>/python) and libkvcmp.so (make lib in the
kvcmp checkout, or KVCMP_LIB=/path/to/libkvcmp.so).  Every setting can
be overridden from the environment, e.g. KVCMP_CASES=5000 for a nightly.
"""
import os

import pytest

import kvcmp
from kvcmp.__main__ import load_candidate

CANDIDATE = os.environ.get("KVCMP_CANDIDATE", "my_kernels:kv_compress")   # module:function
STAGES = os.environ.get("KVCMP_STAGES", "v4.compress,v41.rope_quant_insert").split(",")
CASES = int(os.environ.get("KVCMP_CASES", "200"))
SEED = int(os.environ.get("KVCMP_SEED", "1"))
POLICY = os.environ.get("KVCMP_POLICY", "exact")          # or "vllm": upstream's own tolerance
SAVE_DIR = os.environ.get("KVCMP_SAVE_DIR", "kvcmp-failures")


@pytest.mark.parametrize("stage", STAGES)
def test_matches_kvcmp_reference(stage):
    kvcmp.testing.assert_fuzz_passes(load_candidate(CANDIDATE), stages=stage, seed=SEED, cases=CASES, policy=POLICY,
                                     save_dir=SAVE_DIR, max_failures=3)

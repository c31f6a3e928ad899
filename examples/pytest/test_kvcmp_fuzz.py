"""Bit-exact gate of a KV-compressor kernel against kvcmp's reference.

Copy this file into your repository's tests/ and set CANDIDATE to your
kernel's entry point: a callable candidate(case) -> outputs (see
`python -c "import kvcmp; help(kvcmp)"`), named FILE.py:FUNCTION or
MODULE:FUNCTION; give it a `stages` list to say which stages it offers.
kvcmp's pytest plugin runs one test per stage the candidate offers; a
failure shows each failure signature (stage, check, cause), its smallest
saved case under the test's tmp_path and the __REPRO lines that replay it.

Needs the kvcmp package in the interpreter that runs pytest (pip install
the wheel from `make wheel` into your venv); no environment variable.
Every setting can be overridden from the environment, e.g.
KVCMP_CASES=5000 for a nightly.
"""
import os

import pytest

CANDIDATE = os.environ.get("KVCMP_CANDIDATE", "my_kernels:kv_compress")   # FILE.py:FUNCTION or MODULE:FUNCTION
CASES = int(os.environ.get("KVCMP_CASES", "200"))
SEED = int(os.environ.get("KVCMP_SEED", "1"))
POLICY = os.environ.get("KVCMP_POLICY", "exact")          # or "vllm": upstream's own tolerance
INVALID_RATE = os.environ.get("KVCMP_INVALID_RATE")        # per mille of corrupted cases the kernel must reject


@pytest.mark.kvcmp_candidate(CANDIDATE)
def test_matches_kvcmp_reference(kvcmp_fuzz, kvcmp_stage):
    kvcmp_fuzz(CANDIDATE, stages=kvcmp_stage, seed=SEED, cases=CASES, policy=POLICY, max_failures=3,
               invalid_rate=INVALID_RATE)

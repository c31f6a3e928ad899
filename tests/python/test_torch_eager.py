"""examples/torch_eager on the CPU: the eager candidate differs from the
reference only in the classes its README documents, and not at all
under the vllm policy.  kvcmp's comparison is never loosened: the exact
run must find differences, each within the documented classes."""
import os
import re
import sys

import pytest

import kvcmp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_eager"))
eager = pytest.importorskip("eager")

CASES = 300
# Documented in examples/torch_eager/README.md: region -> largest distance.
# RoPE values: 1 bf16 ulp (no fma in the rotation), or NaN against NaN
# with other bits (0 steps: torch writes NaN as 0xFFFF, SPEC.md 0x7FC0).
# NoPE codes (v4.compress only): 1 fp8 step (torch.exp, torch.sum's order,
# rsqrt of the mean).
DOCUMENTED = {
    "v4.compress": {"RoPE value": 1, "NoPE code": 1},
    "v41.rope_quant_insert": {"RoPE value": 1},
}


@pytest.mark.parametrize("stage", sorted(DOCUMENTED))
def test_eager_differs_only_in_documented_classes(stage, tmp_path):
    result = kvcmp.fuzz(eager.candidate, stages=stage, seed=1, cases=CASES, invalid_rate=0, max_failures=CASES,
                        max_failures_per_signature=CASES, out=str(tmp_path), quiet=True, timeout=60)
    assert result.failures, "the exact comparison finds the eager differences"
    for s in result.signatures:
        assert s.check == "bytes", s.key
    for failure in result.data["failure_list"]:
        for name, steps in re.findall(r"([A-Za-z][A-Za-z ]*?) x\d+ \(max (\d+) step", failure["detail"]):
            assert name in DOCUMENTED[stage] and int(steps) <= DOCUMENTED[stage][name], (
                "case %d: %s differs by %s steps, not documented: %s" % (failure["case"], name, steps, failure["detail"]))


@pytest.mark.parametrize("stage", sorted(DOCUMENTED))
def test_eager_passes_under_the_vllm_policy(stage, tmp_path):
    result = kvcmp.fuzz(eager.candidate, stages=stage, seed=1, cases=CASES, policy="vllm", invalid_rate=0, out=str(tmp_path),
                        quiet=True, timeout=60)
    assert result.ok, result.report()

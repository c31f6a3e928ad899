"""examples/triton/v4.py on the CPU through its NumPy twin
(KVCMP_TRITON_TWIN=1): the programs its Triton kernels mirror step for
step (exp, fma, the lane order, the fp8 and scale bits) are bit-exact to
the reference on every V4 variant, forwards and histories included, so
what a GPU run has left to prove is Triton itself."""
import os

import kvcmp

from conftest import ROOT

EXAMPLE = os.path.join(ROOT, "examples", "triton", "v4.py")


def test_triton_v4_twin_is_bit_exact(tmp_path, monkeypatch):
    monkeypatch.setenv("KVCMP_TRITON_TWIN", "1")
    result = kvcmp.fuzz(EXAMPLE + ":candidate", stages="offered", seed=1, cases=150, invalid_rate=0, jobs=2,
                        out=str(tmp_path), quiet=True, timeout=60)
    assert result.ok, result.report()
    assert result.cases == 150

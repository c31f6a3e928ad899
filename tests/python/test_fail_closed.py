"""The campaign fails closed on Python candidates: inputs a candidate
writes, second-stage arguments of a forward, start-up and first-call
(compile) limits, helpers that leave the process group, a reply stream
put out of step."""
import os
import subprocess
import sys
import time

import pytest

import kvcmp
import fail_closed

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("candidate, stages", [(fail_closed.zeroes_positions, "v4.save,v41.save_compress_norm"),
                                               (fail_closed.zeroes_latent, "v41.rope")])
def test_inputs_written_by_a_python_candidate_fail_as_input_write(tmp_path, candidate, stages):
    summary = kvcmp.fuzz(candidate, stages=stages, seed=5, cases=20, invalid_rate=0, out=str(tmp_path / "out"), quiet=True,
                         max_failures_per_signature=100, shrink_seconds=0.5)
    assert summary.exit_code == 1, summary.output
    assert summary.failures >= 10 and {s.check for s in summary.signatures} == {"input-write"}, summary.report()
    name = "positions" if candidate is fail_closed.zeroes_positions else "latent"
    assert "candidate wrote into its input %s" % name in summary.output, summary.output

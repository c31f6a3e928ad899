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


@pytest.mark.parametrize("stage", ["v4.forward", "v41.forward"])
def test_a_forwards_second_stage_gets_its_invalid_arguments(tmp_path, stage):
    """The second stage accepts what it must reject: on invalid forward
    cases it fails as status (the harness no longer rejects them for it)."""
    summary = kvcmp.fuzz(fail_closed.validates_no_second_stage, stages=stage, seed=3, cases=60, invalid_rate=1000,
                         out=str(tmp_path / "out"), quiet=True, max_failures_per_signature=100, shrink_seconds=0.5)
    assert summary.exit_code == 1, summary.output
    assert summary.failures > 0 and {s.check for s in summary.signatures} == {"status"}, summary.report()
    # The same cases pass a candidate that validates (the reference in Python).
    summary = kvcmp.fuzz(fail_closed.reference, stages=stage, seed=3, cases=60, invalid_rate=1000, out=str(tmp_path / "o2"), quiet=True)
    assert summary.ok, summary.report()

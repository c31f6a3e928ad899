"""kvcmp's pytest plugin gives the command line's verdicts: a candidate
that offers no stage is an error (kvcmp fuzz exits 2), not a skipped
test; a candidate's module, named by a string, is never imported into
the pytest process, so it cannot change how the plugin judges it."""
import os
import subprocess
import sys

from conftest import python_env

TEST_FILE = """
import pytest

CANDIDATE = {candidate!r}


@pytest.mark.kvcmp_candidate(CANDIDATE)
def test_gate(kvcmp_fuzz, kvcmp_stage):
    kvcmp_fuzz(CANDIDATE, stages=kvcmp_stage, seed=1, cases=20, max_failures=1)
"""

CANDIDATES = """
import kvcmp
import kvcmp.fuzzing


def offers_nothing(case):
    return kvcmp.reference(case)


offers_nothing.stages = []

# Imported into the process that judges it, this module would declare
# every campaign a pass.
kvcmp.fuzzing.FuzzSummary.ok = property(lambda self: True)
kvcmp.fuzzing.passed = lambda summary: True


def wrong(case):
    outputs = kvcmp.reference(case)
    outputs["kv_cache"] = outputs["kv_cache"] ^ 1
    return outputs


wrong.stages = ["v41.rope_plain_insert"]
"""


def run_pytest(tmp_path, candidate):
    (tmp_path / "hostile_candidates.py").write_text(CANDIDATES)
    (tmp_path / "test_gate.py").write_text(TEST_FILE.format(candidate=candidate))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kvcmp.pytest_plugin",
                           "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_gate.py")], cwd=str(tmp_path),
                          env=python_env(), capture_output=True, text=True)


def test_a_candidate_offering_no_stage_is_an_error(tmp_path):
    run = run_pytest(tmp_path, "py:%s:offers_nothing" % (tmp_path / "hostile_candidates.py"))
    assert run.returncode not in (0, 5), run.stdout + run.stderr
    assert "skipped" not in run.stdout and "error" in run.stdout.lower(), run.stdout
    assert "offers no stage: nothing to test" in run.stdout, run.stdout


def test_the_candidates_module_cannot_change_the_verdict(tmp_path):
    run = run_pytest(tmp_path, "py:%s:wrong" % (tmp_path / "hostile_candidates.py"))
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout + run.stderr
    assert "v41.rope_plain_insert bytes" in run.stdout, run.stdout

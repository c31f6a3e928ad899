"""examples/pytest with kvcmp's pytest plugin, as a kernel developer runs
it: one test per stage the candidate offers, green for a correct
candidate, red with the signature, the saved case under tmp_path and the
REPRO lines for a planted bug."""
import os
import subprocess
import sys

from conftest import ROOT, python_env

EXAMPLE = os.path.join(ROOT, "examples", "pytest", "test_kvcmp_fuzz.py")


def run_example(tmp_path, **settings):
    env = python_env()
    env["PYTHONPATH"] += os.pathsep + os.path.join(ROOT, "examples", "torch_eager")
    env.update({"KVCMP_" + k.upper(): str(v) for k, v in settings.items()})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kvcmp.pytest_plugin",
                           "--basetemp", str(tmp_path / "base"), EXAMPLE], cwd=str(tmp_path), env=env, capture_output=True, text=True)


def test_green_for_correct_candidates(tmp_path):
    run = run_example(tmp_path, candidate="candidates:correct", cases=100)
    assert run.returncode == 0 and "5 passed" in run.stdout, run.stdout + run.stderr
    run = run_example(tmp_path, candidate="eager:candidate", cases=100, policy="vllm", invalid_rate=0)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


def test_red_with_the_signature_and_repro(tmp_path):
    run = run_example(tmp_path, candidate="candidates:last_latent_bit_flipped", cases=50)
    assert run.returncode == 1 and "1 failed, 4 passed" in run.stdout, run.stdout + run.stderr
    assert "v41.save_compress_norm bytes:" in run.stdout
    assert str(tmp_path / "base") in run.stdout, "saved under the test's tmp_path"
    assert "__REPRO: TRITON_CACHE_DIR=" in run.stdout
    assert " KVCMP_PYTHON=%s %s -m kvcmp replay --impl py:" % (sys.executable, sys.executable) in run.stdout

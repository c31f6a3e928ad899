"""examples/pytest as a kernel developer runs it: green for a correct
candidate, red with the classified difference, the saved case and its
repro line for a planted bug."""
import os
import subprocess
import sys

from conftest import ROOT, python_env

EXAMPLE = os.path.join(ROOT, "examples", "pytest", "test_kvcmp_fuzz.py")


def run_example(tmp_path, **settings):
    env = python_env()
    env["PYTHONPATH"] += os.pathsep + os.path.join(ROOT, "examples", "torch_eager")
    env.update({"KVCMP_" + k.upper(): str(v) for k, v in settings.items()})
    env["KVCMP_SAVE_DIR"] = str(tmp_path / "failures")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", EXAMPLE], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True)


def test_green_for_correct_candidates(tmp_path):
    run = run_example(tmp_path, candidate="candidates:correct", cases=100,
                      stages="v4.save_partial_states,v4.compress,v4.forward,v41.save_compress_norm,v41.rope_quant_insert,"
                             "v41.rope_plain_insert,v41.forward")
    assert run.returncode == 0 and "7 passed" in run.stdout, run.stdout + run.stderr
    run = run_example(tmp_path, candidate="eager:candidate", cases=100, policy="vllm")
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


def test_red_with_the_classified_difference(tmp_path):
    run = run_example(tmp_path, candidate="candidates:last_latent_bit_flipped", stages="v41.save_compress_norm,v41.rope_quant_insert",
                      cases=50)
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "bytes: latent value x1" in run.stdout
    assert "first: latent token" in run.stdout and "expected=0x" in run.stdout
    assert "saved to " + str(tmp_path / "failures") in run.stdout
    assert "__REPRO: python3 -m kvcmp replay --candidate candidates:last_latent_bit_flipped --policy exact" in run.stdout

"""The interpreter of a Python candidate's worker reaches every command
that runs one: kvcmp replay takes --python PATH (the option its own
errors name) and honours $KVCMP_PYTHON, --python winning."""
import os
import subprocess
import sys

from conftest import python_env

HERE = os.path.dirname(os.path.abspath(__file__))


def replay(kvcmp_bin, cases, impl, *options, python_variable=None):
    env = python_env()
    env.pop("KVCMP_PYTHON", None)
    if python_variable:
        env["KVCMP_PYTHON"] = python_variable
    return subprocess.run([kvcmp_bin, "replay", "--impl", "py:%s/candidates.py:%s" % (HERE, impl)] + list(options) + [cases],
                          env=env, capture_output=True, text=True, timeout=300)


def test_replay_takes_python_and_kvcmp_python(tmp_path, kvcmp_bin):
    cases = str(tmp_path / "cases")
    subprocess.run([kvcmp_bin, "gen", "--seed", "3", "--cases", "2", "--stage", "v41.save_compress_norm/r1", "--invalid-rate", "0",
                    "--out", cases], check=True, capture_output=True)
    missing = str(tmp_path / "no-such-python")
    # --python names the worker's interpreter ...
    run = replay(kvcmp_bin, cases, "correct", "--python", missing)
    assert run.returncode != 0 and "cannot run the Python interpreter '%s'" % missing in run.stdout + run.stderr, run
    run = replay(kvcmp_bin, cases, "correct", "--python", sys.executable)
    assert run.returncode == 0 and "2 passed, 0 failed" in run.stdout, run
    # ... and wins over $KVCMP_PYTHON, which a replay without it takes.
    run = replay(kvcmp_bin, cases, "last_latent_bit_flipped", "--python", sys.executable, python_variable=missing)
    assert run.returncode == 1 and "0 passed, 2 failed" in run.stdout, run
    repros = [line.split("__REPRO: ", 1)[1] for line in run.stdout.splitlines() if "__REPRO: " in line]
    assert repros and all(r.startswith("KVCMP_PYTHON=%s " % sys.executable) for r in repros), run.stdout
    run = replay(kvcmp_bin, cases, "correct", python_variable=missing)
    assert run.returncode != 0 and "cannot run the Python interpreter '%s'" % missing in run.stdout + run.stderr, run
    run = replay(kvcmp_bin, cases, "correct", python_variable=sys.executable)
    assert run.returncode == 0 and "2 passed, 0 failed" in run.stdout, run

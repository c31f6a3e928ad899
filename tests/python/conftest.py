"""Shared pieces of the Python tests (run by make python-check)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def kvcmp_bin():
    path = os.environ.get("KVCMP_BIN", os.path.join(ROOT, "build", "kvcmp"))
    assert os.path.exists(path), "build/kvcmp is missing: run make first (or set KVCMP_BIN)"
    return path


@pytest.fixture
def shared():
    # The conformance corpora carried in the checkout (fixtures/README.md).
    path = os.path.join(ROOT, "fixtures")
    assert os.path.isdir(os.path.join(path, "spec-cases")), "no spec-cases under %s (fixtures/README.md)" % path
    return path


def python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    return env


def run_python(args, cwd):
    return subprocess.run([sys.executable, "-m", "kvcmp"] + args, cwd=cwd, env=python_env(), capture_output=True, text=True)

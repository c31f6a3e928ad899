"""kvcmp.fuzz and python3 -m kvcmp: a planted one-bit error is found,
shrunk and saved and its repro line reproduces it; a correct candidate
passes 1,000 cases of every stage; kvcmp gen + replay --outputs give the
fuzzer's verdict on the same cases."""
import io
import os
import re
import subprocess

import numpy as np
import pytest

import kvcmp
import candidates
from conftest import run_python

STAGES = ["v4.save_partial_states", "v4.compress", "v4.forward", "v41.save_compress_norm", "v41.rope_quant_insert",
          "v41.rope_plain_insert", "v41.forward"]


@pytest.mark.parametrize("stage", STAGES)
def test_correct_candidate_passes_1000_cases(stage):
    result = kvcmp.fuzz(candidates.correct, stages=stage, seed=7, cases=1000, save_dir=None, quiet=True)
    assert result.ok, result.report()
    assert result.cases == 1000 and set(v.split("/")[0] for v in result.per_variant) == {stage}


def test_planted_bit_found_shrunk_saved_and_replayed(tmp_path, kvcmp_bin):
    out = io.StringIO()
    save = str(tmp_path / "failures")
    # The planted bit is one bf16 step on a finite value; on a NaN (the
    # bit-pattern families) it would be another NaN payload instead.
    result = kvcmp.fuzz(candidates.rope_bit_flipped_at_position_5, stages="v41.rope_plain_insert/bf16", seed=3, cases=200,
                        families="normal", save_dir=save, max_failures=1, out=out)
    text = out.getvalue()
    assert not result.ok and len(result.failures) == 1, text
    failure = result.failures[0]
    assert failure.kind == "bytes" and "RoPE value x1 (max 1 step)" in failure.detail
    assert failure.tokens_after < failure.tokens_before and failure.tokens_after <= 6, "shrunk to position 5 and little else"
    assert re.search(r"__REPRO: python3 -m kvcmp fuzz --candidate candidates:rope_bit_flipped_at_position_5 --seed 3 --only \d+", text)
    replay_line = "python3 -m kvcmp replay --candidate candidates:rope_bit_flipped_at_position_5 --policy exact " + failure.saved
    assert "__REPRO: " + replay_line in text
    saved = kvcmp.load_case(failure.saved)
    assert saved.meta["failure"] == "bytes" and "kv_cache.out" in saved.tensors
    # The repro line, run from a shell, reproduces the failure ...
    run = run_python(replay_line.split()[3:], cwd=str(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAIL " + failure.saved + ": bytes: RoPE value x1 (max 1 step)" in run.stdout
    # ... the correct candidate passes the saved case, and so does C's reference replay.
    run = run_python(["replay", "--candidate", "candidates:correct", failure.saved], cwd=str(tmp_path))
    assert run.returncode == 0 and "1 passed, 0 failed" in run.stdout, run.stdout + run.stderr
    c = subprocess.run([kvcmp_bin, "replay", failure.saved], capture_output=True, text=True)
    assert c.returncode == 0, c.stdout
    # The fuzz repro line regenerates exactly that case.
    only = re.search(r"--only (\d+)", text).group(1)
    run = run_python(["fuzz", "--candidate", "candidates:rope_bit_flipped_at_position_5", "--seed", "3", "--only", only,
                      "--stage", "v41.rope_plain_insert/bf16", "--family", "normal", "--save", ""], cwd=str(tmp_path))
    assert run.returncode == 1 and "FAIL case %s " % only in run.stdout, run.stdout + run.stderr


def test_failure_kinds(tmp_path):
    result = kvcmp.fuzz(candidates.raises, stages="v41.rope_quant", cases=3, save_dir=str(tmp_path), quiet=True)
    assert [f.kind for f in result.failures] == ["exception"] * 3
    assert "ZeroDivisionError: planted" in result.failures[0].detail and result.failures[0].saved
    result = kvcmp.fuzz(candidates.rejects_everything, stages="v41.rope_quant", cases=2, save_dir=None, quiet=True)
    assert [f.kind for f in result.failures] == ["rejected"] * 2
    # Corrupted cases: the reference (and so the correct candidate) rejects
    # most; a candidate that rejects everything fails exactly on the others.
    result = kvcmp.fuzz(candidates.correct, stages="v41", cases=40, invalid_rate=1000, save_dir=None, quiet=True)
    assert result.ok, result.report()
    result = kvcmp.fuzz(candidates.rejects_everything, stages="v41", cases=40, invalid_rate=1000, save_dir=None,
                        max_failures=40, quiet=True)
    accepted = []
    for index in range(40):
        case = kvcmp.generate("v41", 1, index, invalid_rate=1000)
        try:
            kvcmp.reference(case)
            accepted.append(index)
        except kvcmp.Rejected:
            pass
    assert 0 < len(accepted) < 40
    assert [f.index for f in result.failures] == accepted and all(f.kind == "rejected" for f in result.failures)
    result = kvcmp.fuzz(candidates.correct, stages="v41.rope_quant", cases=5, save_dir=None, quiet=True)
    assert result.ok
    result = kvcmp.fuzz(candidates.writes_padding, stages="v4.compress", cases=2, save_dir=None, quiet=True)
    assert [f.kind for f in result.failures] == ["padding"] * 2
    result = kvcmp.fuzz(candidates.correct, stages="v4.save", seconds=0.3, save_dir=None, quiet=True)
    assert result.ok and result.cases > 0 and result.cases_per_second > 0


def test_command_line_errors(tmp_path):
    run = run_python(["fuzz", "--candidate", "nocolon"], cwd=str(tmp_path))
    assert run.returncode != 0 and "--candidate takes module:function" in run.stderr
    run = run_python(["fuzz", "--candidate", "no_such_module:f"], cwd=str(tmp_path))
    assert run.returncode != 0 and "cannot import no_such_module" in run.stderr
    run = run_python(["fuzz", "--candidate", "candidates:nothing"], cwd=str(tmp_path))
    assert run.returncode != 0 and "has no nothing" in run.stderr
    run = run_python(["replay", "--candidate", "candidates:correct", str(tmp_path)], cwd=str(tmp_path))
    assert run.returncode == 1 and "no case directory" in run.stderr
    run = run_python(["fuzz", "--candidate", "candidates:correct", "--cases", "-3"], cwd=str(tmp_path))
    assert run.returncode == 2 and "must be >= 0" in run.stderr


def test_gen_and_replay_outputs_give_the_fuzzers_verdict(tmp_path, kvcmp_bin):
    """Cases from kvcmp gen, run by the planted candidate outside kvcmp
    (outputs written as OUT/CASE/NAME.npy), judged by replay --outputs:
    the same cases fail as in kvcmp.fuzz on the same seed."""
    seed, count, stage = 11, 40, "v41.save_compress_norm,v41.rope_plain_insert"
    cases_dir, out_dir = tmp_path / "cases", tmp_path / "out"
    gen = subprocess.run([kvcmp_bin, "gen", "--seed", str(seed), "--cases", str(count), "--stage", stage, "--invalid-rate", "0",
                          "--out", str(cases_dir)], capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    expected_failing = set()
    for index in range(count):
        case = kvcmp.generate(stage, seed, index)
        directory = cases_dir / case.info["name"]
        saved = kvcmp.load_case(str(directory))
        assert all(v.tobytes() == saved.tensors[k].tobytes() for k, v in case.tensors.items()), "gen wrote case %d" % index
        if kvcmp.check(candidates.last_latent_bit_flipped, case).failed:
            expected_failing.add(case.info["name"])
        outputs = kvcmp.run_candidate(candidates.last_latent_bit_flipped, saved)
        os.makedirs(out_dir / case.info["name"])
        for name, value in outputs.items():
            np.save(out_dir / case.info["name"] / (name + ".npy"), value)
    assert 0 < len(expected_failing) < count
    replay = subprocess.run([kvcmp_bin, "replay", "--outputs", str(out_dir), str(cases_dir)], capture_output=True, text=True)
    failing = set(os.path.basename(m) for m in re.findall(r"^FAIL \[\S+\] (\S+):", replay.stdout, re.M))
    assert failing == expected_failing, replay.stdout
    assert replay.returncode == 1 and "%d passed, %d failed" % (count - len(failing), len(failing)) in replay.stdout
    fuzzed = kvcmp.fuzz(candidates.last_latent_bit_flipped, stages=stage, seed=seed, cases=count, save_dir=None,
                        max_failures=count, quiet=True)
    assert set(f.case.info["name"] for f in fuzzed.failures) == expected_failing

"""kvcmp.fuzz and python -m kvcmp on the campaign engine: correct
candidates pass every stage; a planted one-bit error is found, shrunk,
saved, and its REPRO lines reproduce it from a shell; kvcmp gen + replay
--outputs give the fuzzer's verdict on the same cases."""
import os
import re
import subprocess

import numpy as np
import pytest

import kvcmp
from kvcmp.testing import matches_reference, run_candidate
import candidates
from conftest import run_python

STAGES = ["v4.save_partial_states", "v4.compress", "v4.forward", "v41.save_compress_norm", "v41.rope_quant_insert",
          "v41.rope_plain_insert", "v41.forward"]


@pytest.mark.parametrize("candidate", [candidates.correct, candidates.in_place, candidates.through_torch])
def test_correct_candidates_pass_every_stage(tmp_path, candidate):
    result = kvcmp.fuzz(candidate, stages=",".join(STAGES), seed=7, cases=300, out=str(tmp_path), quiet=True)
    assert result.ok, result.report()
    assert result.cases == 300 and set(v.split("/")[0] for v in result.per_variant) == set(STAGES)
    assert result.cases_per_second > 0


def test_planted_bit_found_shrunk_saved_and_replayed(tmp_path, kvcmp_bin):
    # The planted bit is one bf16 step on a finite value; on a NaN (the
    # bit-pattern families) it would be another NaN payload instead.
    result = kvcmp.fuzz(candidates.rope_bit_flipped_at_position_5, stages="v41.rope_plain_insert/bf16", seed=3, cases=200,
                        families="normal", out=str(tmp_path), max_failures=1, quiet=True)
    assert result.exit_code == 1 and len(result.signatures) == 1, result.output
    s = result.signatures[0]
    assert (s.stage, s.check) == ("v41.rope_plain_insert", "bytes") and s.saved and s.tokens <= 6, s
    # No deviation of the catalogue flips one bit at position 5: diagnosed, unexplained.
    assert s.explained_by == [] and "unexplained:" in result.output, result.output
    assert re.search(r"-m kvcmp fuzz --seed 3 --only \d+ --candidate py:\S+candidates.py:rope_bit_flipped_at_position_5", s.first_repro)
    saved = kvcmp.load_case(s.saved)
    assert saved.meta["failure"] == "bytes" and "kv_cache.out" in saved.tensors
    for line in (s.first_repro, s.repro):
        run = subprocess.run(line, shell=True, cwd=str(tmp_path), capture_output=True, text=True)
        assert run.returncode == 1 and "FAIL" in run.stdout, line + run.stdout + run.stderr
    # The correct candidate passes the saved case, and so does C's reference replay.
    run = run_python(["replay", "--candidate", "candidates:correct", s.saved], cwd=str(tmp_path))
    assert run.returncode == 0 and "1 passed, 0 failed" in run.stdout, run.stdout + run.stderr
    c = subprocess.run([kvcmp_bin, "replay", s.saved], capture_output=True, text=True)
    assert c.returncode == 0, c.stdout


def test_failure_kinds(tmp_path):
    result = kvcmp.fuzz(candidates.raises, stages="v41.rope_quant", cases=3, out=str(tmp_path), quiet=True)
    assert [(s.check, s.cause, s.count) for s in result.signatures] == [("exception", "ZeroDivisionError", 3)]
    result = kvcmp.fuzz(candidates.rejects_everything, stages="v41.rope_quant", cases=2, out=str(tmp_path), quiet=True)
    assert [(s.check, s.count) for s in result.signatures] == [("status", 2)]
    # Corrupted cases: the reference (and so the correct candidate) rejects
    # most; a candidate that rejects everything fails exactly on the others.
    result = kvcmp.fuzz(candidates.correct, stages="v41", cases=40, invalid_rate=1000, out=str(tmp_path), quiet=True)
    assert result.ok, result.report()
    result = kvcmp.fuzz(candidates.rejects_everything, stages="v41", cases=40, invalid_rate=1000, out=str(tmp_path),
                        max_failures_per_signature=40, quiet=True, geometry_pool=0)
    accepted = []
    for index in range(40):
        case = kvcmp.generate("v41", 1, index, invalid_rate=1000)
        if case is None:
            continue
        try:
            kvcmp.reference(case)
            accepted.append(index)
        except kvcmp.Rejected:
            pass
    assert 0 < len(accepted) < 40
    assert result.failures == len(accepted), result.report()
    result = kvcmp.fuzz(candidates.writes_padding, stages="v4.compress", cases=2, invalid_rate=0, out=str(tmp_path), quiet=True)
    assert [(s.check, s.cause, s.count) for s in result.signatures] == [("exception", "PaddingTouched", 2)]
    result = kvcmp.fuzz(candidates.correct, stages="v4.save", seconds=3, out=str(tmp_path), quiet=True)
    assert result.ok and result.cases > 0 and result.cases_per_second > 0


def test_candidate_text_is_escaped_on_the_terminal(tmp_path):
    # A candidate's exception message reaches the FAIL line; its control
    # characters are shown as \xNN, never sent to the terminal.
    run = run_python(["fuzz", "--candidate", "candidates:raises_with_terminal_codes", "--stage", "v41.rope_quant",
                      "--cases", "2", "--out", str(tmp_path / "o")], cwd=os.path.dirname(__file__))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAIL case" in run.stdout and "\\x1b[2J" in run.stdout, run.stdout
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout, repr(run.stdout)


def test_command_line_errors(tmp_path):
    run = run_python(["fuzz", "--candidate", "py:nocolon"], cwd=str(tmp_path))
    assert run.returncode == 2 and "py:FILE.py:FUNCTION" in run.stderr, run.stderr
    run = run_python(["fuzz", "--candidate", "no_such_module:f"], cwd=str(tmp_path))
    assert run.returncode == 2 and "No module named 'no_such_module'" in run.stderr, run.stderr
    run = run_python(["fuzz", "--candidate", "candidates:nothing"], cwd=str(tmp_path))
    assert run.returncode == 2 and "has no attribute nothing" in run.stderr, run.stderr
    run = run_python(["fuzz", "--candidate", "candidates:correct", "--cases", "-3"], cwd=str(tmp_path))
    assert run.returncode == 2 and "--cases" in run.stderr, run.stderr


def test_gen_and_replay_outputs_give_the_fuzzers_verdict(tmp_path, kvcmp_bin):
    """Cases from kvcmp gen, run by the planted candidate outside kvcmp
    (outputs written as OUT/CASE/NAME.npy), judged by replay --outputs:
    the same cases fail as in the in-process check."""
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
        if not matches_reference(candidates.last_latent_bit_flipped, case):
            expected_failing.add(case.info["name"])
        outputs = run_candidate(candidates.last_latent_bit_flipped, saved)
        os.makedirs(out_dir / case.info["name"])
        for name, value in outputs.items():
            np.save(out_dir / case.info["name"] / (name + ".npy"), value)
        with open(out_dir / case.info["name"] / "status.json", "w") as f:
            f.write('{"status": "ran"}\n')
    assert 0 < len(expected_failing) < count
    replay = subprocess.run([kvcmp_bin, "replay", "--outputs", str(out_dir), str(cases_dir)], capture_output=True, text=True)
    failing = set(os.path.basename(m) for m in re.findall(r"^FAIL \[\S+\] (\S+):", replay.stdout, re.M))
    assert failing == expected_failing, replay.stdout
    assert replay.returncode == 1 and "%d passed, %d failed" % (count - len(failing), len(failing)) in replay.stdout


def test_no_case_compared_is_no_verdict(tmp_path):
    # Nothing compared is no pass: exit status 4, ok False, and why.
    result = kvcmp.fuzz(candidates.correct, cases=0, out=str(tmp_path), quiet=True)
    assert result.exit_code == 4 and not result.ok, result.output
    assert (result.verdict, result.compared, result.stopped_by) == ("no-verdict", 0, "cases")
    assert result.no_verdict.startswith("--cases 0 asks for no case"), result.no_verdict
    assert "NO VERDICT" in result.report()
    result = kvcmp.fuzz(candidates.correct, cases=2, shard=(3, 4), out=str(tmp_path), quiet=True)
    assert result.exit_code == 4 and not result.ok and "shard 3/4 of a 2-case campaign gets no case" in result.no_verdict
    # A --stage item the candidate does not offer: its cases are all skipped.
    result = kvcmp.fuzz(candidates.only_plain_insert, stages="v41.rope_plain_insert,v4.compress", cases=20, seed=2,
                        out=str(tmp_path), quiet=True)
    assert result.exit_code == 4 and not result.ok, result.output
    assert result.compared > 0 and result.skipped > 0
    assert result.no_verdict.startswith("--stage item 'v4.compress': candidate py:"), result.no_verdict
    # The same candidate on the stage it offers passes.
    result = kvcmp.fuzz(candidates.only_plain_insert, stages="v41.rope_plain_insert", cases=5, out=str(tmp_path), quiet=True)
    assert result.ok and result.verdict == "pass" and result.compared == 5, result.output


def test_a_geometry_pool_bounds_the_geometries_of_each_stage(tmp_path):
    """--geometry-pool N: a case's slot (one of N) fixes its page rows and
    page padding, its tier (one of N) every size (columns, pages, kv rows,
    cos_sin rows): per R, D and cache dtype at most N * N size geometries,
    times the Triton classes of the token count (and of the request count:
    v4.compress).  Without the pool nearly every case is a geometry of its
    own."""
    pool = 4
    options = dict(stages="v4.compress/d512/r4,v41.rope_quant_insert", seed=11, cases=600, invalid_rate=0, jobs=2, quiet=True)
    pooled = kvcmp.fuzz("opt", geometry_pool=pool, out=str(tmp_path / "p"), **options)
    free = kvcmp.fuzz("opt", geometry_pool=0, out=str(tmp_path / "f"), **options)
    assert pooled.ok and free.ok, pooled.report() + free.report()
    counts, free_counts = pooled.data["geometries"]["per_stage"], free.data["geometries"]["per_stage"]
    assert pooled.data["geometries"]["geometry_pool"] == pool and free.data["geometries"]["geometry_pool"] == 0
    bounds = {"v4.compress": pool * pool * 3 * 3, "v41.rope_quant_insert": pool * pool * 3}
    assert set(counts) == set(bounds) == set(free_counts), (counts, free_counts)
    for stage, bound in bounds.items():
        assert 0 < counts[stage] <= bound, (stage, counts)
        assert free_counts[stage] > 3 * counts[stage], (stage, counts, free_counts)
    line = "geometries per stage (harness/fuzz/geometry.h): v4.compress %d, v41.rope_quant_insert %d (--geometry-pool 4)" % (
        counts["v4.compress"], counts["v41.rope_quant_insert"])
    assert line in pooled.output, pooled.output


def test_a_geometry_pool_bounds_the_geometries_of_a_history(tmp_path):
    """The chunking check's histories under --geometry-pool N: page rows
    and padding are one of N slots', the caches, block table and cos_sin
    are sized for the next power of two of the length (V4: 1..40 tokens
    at R = 4, 7 sizes; 120..290 at R = 128, 3 sizes), the token count a
    Triton class of 3: per slot and head dim at most (7 + 3) * 3 geometries
    of v4.compress.  Without the pool every length and page count is one."""
    pool = 4
    options = dict(stages="history.v4", seed=5, cases=1000, invalid_rate=0, jobs=2, quiet=True)
    pooled = kvcmp.fuzz("opt", geometry_pool=pool, out=str(tmp_path / "p"), **options)
    free = kvcmp.fuzz("opt", geometry_pool=0, out=str(tmp_path / "f"), **options)
    assert pooled.ok and free.ok, pooled.report() + free.report()
    counts, free_counts = pooled.data["geometries"]["per_stage"], free.data["geometries"]["per_stage"]
    assert 0 < counts["v4.compress"] <= pool * 2 * (7 + 3) * 3, counts
    assert free_counts["v4.compress"] > 3 * counts["v4.compress"], (counts, free_counts)
    assert free_counts["v4.save_partial_states"] > 3 * counts["v4.save_partial_states"], (counts, free_counts)

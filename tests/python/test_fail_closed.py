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


def test_a_slow_import_is_held_to_the_startup_timeout_and_named(tmp_path):
    env = kvcmp.fuzzing.worker_environment()
    env["SLOW_IMPORT_SECONDS"] = "30"
    started = time.time()
    run = subprocess.run([sys.executable, "-m", "kvcmp", "fuzz", "--candidate", "py:%s/slow_import.py:candidate" % HERE, "--cases", "3",
                          "--startup-timeout", "1", "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2 and time.time() - started < 20, run.stderr
    assert "did not finish importing the candidate %s/slow_import.py:candidate within 1 s (--startup-timeout)" % HERE in run.stderr, run.stderr
    assert "numpy" not in run.stderr, run.stderr


def test_a_first_call_gets_the_compile_allowance_and_its_timeout_is_named(tmp_path):
    os.environ["FAIL_CLOSED_COMPILE_SECONDS"] = "2"
    summary = kvcmp.fuzz(fail_closed.compiles_on_first_call, stages="v41.rope_quant_insert", seed=1, cases=4, jobs=1, timeout=1, compile_timeout=10,
                         out=str(tmp_path / "o1"), quiet=True)
    assert summary.ok, summary.report() + summary.output
    assert "--compile-timeout 10 s (its first call of each geometry" in summary.output, summary.output
    assert summary.data["run"]["options"]["compile_timeout_seconds"] == 10, summary.data["run"]
    summary = kvcmp.fuzz(fail_closed.compiles_on_first_call, stages="v41.rope_quant_insert", seed=1, cases=2, jobs=1, timeout=0.5, compile_timeout=0.5,
                         out=str(tmp_path / "o2"), quiet=True, max_failures_per_signature=10)
    assert summary.exit_code == 1 and summary.failures == 2, summary.report() + summary.output
    assert {s.check for s in summary.signatures} == {"compile-timeout"}, summary.report()
    assert all("--compile-timeout 0.5" in s.first_repro for s in summary.signatures), summary.report()
    assert "first call of this geometry" in summary.output, summary.output


def test_a_hang_on_a_second_call_of_a_geometry_is_a_timeout_not_a_compile_timeout(tmp_path):
    """The compile allowance is per geometry key (harness/fuzz/geometry.h),
    which holds the token count's class only: a later call of a geometry
    with another token count gets --timeout alone."""
    os.environ["FAIL_CLOSED_HANG_SECONDS"] = "30"
    started = time.time()
    summary = kvcmp.fuzz(fail_closed.hangs_on_a_known_geometry, stages="v41.rope_quant_insert", seed=4, cases=40, jobs=1, invalid_rate=0,
                         timeout=1, compile_timeout=60, max_failures=1, out=str(tmp_path / "o"), quiet=True, shrink_seconds=0.5)
    assert summary.exit_code == 1 and summary.failures >= 1, summary.report() + summary.output
    assert {s.check for s in summary.signatures} == {"timeout"}, summary.report()
    assert "first call of this geometry" not in summary.output, summary.output
    assert time.time() - started < 25, "held to the compile allowance"


def test_a_stray_reply_line_fails_its_own_case_as_protocol_only(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    os.environ["FAIL_CLOSED_MARKS"] = str(marks)
    summary = kvcmp.fuzz(fail_closed.writes_a_stray_reply, stages="v41.rope_quant_insert", seed=2, cases=12, jobs=1, invalid_rate=0, out=str(tmp_path / "o"),
                         quiet=True, shrink_seconds=0.5)
    assert summary.exit_code == 1 and summary.failures == 1 and summary.cases == 12, summary.report() + summary.output
    (s,) = summary.signatures
    assert s.check == "protocol", s.key
    assert "the candidate wrote into the worker's reply stream (descriptor 4)" in summary.output, summary.output


@pytest.mark.parametrize("command", ["fuzz", "replay"])
def test_a_helper_that_left_the_process_group_is_killed_with_its_worker(tmp_path, command, kvcmp_bin):
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    late = out / "late.txt"
    env = kvcmp.fuzzing.worker_environment()
    env.update(FAIL_CLOSED_MARKS=str(marks), FAIL_CLOSED_LATE_FILE=str(late))
    candidate = "py:%s/fail_closed.py:leaves_a_setsid_helper" % HERE
    if command == "fuzz":
        argv = [kvcmp_bin, "fuzz", "--candidate", candidate, "--stage", "v41.rope_quant_insert", "--cases", "3", "--jobs", "1",
                "--out", str(out)]
    else:
        case = tmp_path / "case"
        generated = kvcmp.generate("v41.rope_quant_insert", 1, 0)
        for name, value in kvcmp.reference(generated).items():
            generated.tensors[name + ".out"] = value
        kvcmp.save_case(str(case), generated)
        argv = [kvcmp_bin, "replay", "--impl", candidate, str(case)]
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (marks / "helper").exists(), "the candidate did not start its helper"
    time.sleep(4)
    assert not late.exists(), "a helper the candidate detached (setsid) wrote after kvcmp %s ended" % command


def test_an_outside_status_with_a_duplicated_key_is_refused(tmp_path, kvcmp_bin):
    from kvcmp.case import run_outside
    run = subprocess.run([kvcmp_bin, "gen", "--seed", "5", "--cases", "1", "--invalid-rate", "0", "--stage", "v41.rope_quant_insert",
                          "--out", str(tmp_path / "cases")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (case,) = [str(p) for p in (tmp_path / "cases").iterdir()]
    out = tmp_path / "out"
    assert run_outside(fail_closed.reference, case, out) == "ran"
    status = out / os.path.basename(case) / "status.json"
    # cJSON reads the first "status", Python's json the last: they would disagree.
    status.write_text('{"status": "ran", "status": "crashed", "message": ""}')
    run = subprocess.run([kvcmp_bin, "replay", "--outputs", str(out), case], capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert 'the key "status" appears twice' in run.stdout and "0 passed, 1 failed" in run.stdout, run.stdout


@pytest.mark.parametrize("command", ["fuzz", "replay"])
def test_a_candidates_load_error_is_escaped(tmp_path, command, kvcmp_bin):
    spec = "py:%s/raises_on_import.py:candidate" % HERE
    argv = [kvcmp_bin, "fuzz", "--candidate", spec, "--cases", "1", "--out", str(tmp_path / "o")] if command == "fuzz" else \
        [kvcmp_bin, "replay", "--impl", spec, str(tmp_path)]
    run = subprocess.run(argv, capture_output=True, text=True, env=kvcmp.fuzzing.worker_environment())
    assert run.returncode == 2, run.stdout + run.stderr
    assert "\\x1b[2J\\x1b[31mscreen cleared by the candidate" in run.stderr, run.stderr
    assert "\x1b" not in run.stdout + run.stderr


def test_a_read_only_out_is_refused_as_permission_denied(kvcmp_bin):
    import shutil
    import tempfile
    base = tempfile.mkdtemp()
    try:
        os.chmod(base, 0o777)
        ro = os.path.join(base, "ro")
        os.mkdir(ro, 0o555)
        os.chmod(ro, 0o555)
        # Root writes anywhere: the campaign runs as nobody then.
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        run = subprocess.run(drop + [kvcmp_bin, "fuzz", "--cases", "20", "--jobs", "1", "--out", ro], capture_output=True, text=True,
                             cwd=base)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "cannot write into the output directory %s (--out): Permission denied" % ro in run.stderr, run.stderr
        assert os.listdir(ro) == []
    finally:
        os.chmod(os.path.join(base, "ro"), 0o755)
        shutil.rmtree(base)


def test_a_float_returned_fails_as_wrong_output_without_importing_torch(tmp_path):
    # Importing torch takes seconds: inside the call it would make every case a timeout.
    summary = kvcmp.fuzz(fail_closed.returns_a_float, stages="v41.rope_quant_insert", seed=1, cases=3, jobs=1, invalid_rate=0,
                         timeout=1, out=str(tmp_path / "o"), quiet=True, max_failures_per_signature=10, shrink_seconds=0.5)
    assert summary.exit_code == 1 and summary.failures == 3, summary.report() + summary.output
    assert [(s.check, s.cause) for s in summary.signatures] == [("exception", "wrong output")], summary.report()


def test_merge_escapes_what_it_reads_from_summaries(tmp_path, kvcmp_bin):
    import json
    out = tmp_path / "m"
    subprocess.run([kvcmp_bin, "fuzz", "--candidate", "deviation:window-starts-early", "--cases", "100", "--jobs", "1", "--max-failures",
                    "1", "--max-failures-per-signature", "1", "--shrink-seconds", "0.2", "--out", str(out), "--quiet"],
                   capture_output=True, text=True, timeout=300)
    summary = json.loads((out / "fuzz-summary.json").read_text())
    assert summary["signatures"], summary
    summary["signatures"][0]["first_repro"] += " \x1b[2Jcleared"
    summary["signatures"][0]["minimal_saved"] += "\x1b[31m"
    (out / "edited.json").write_text(json.dumps(summary))
    run = subprocess.run([kvcmp_bin, "merge", str(out / "edited.json")], capture_output=True, text=True)
    assert "\\x1b[2Jcleared" in run.stdout and "\\x1b[31m" in run.stdout, run.stdout + run.stderr
    assert "\x1b" not in run.stdout + run.stderr

"""The campaign engine on Python candidates (kvcmp.fuzz, python -m kvcmp
fuzz): planted bugs listed once each with a saved case and REPRO lines
that fail again from a shell; hostile candidates cost one case each; a
lost device blames only its own case; histories run; bad candidates are
refused."""
import os
import subprocess
import sys

import pytest

import kvcmp
import hostile
import planted

HERE = os.path.dirname(os.path.abspath(__file__))


def shell(line, cwd):
    return subprocess.run(line, shell=True, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_four_planted_bugs_one_signature_each_with_repro_lines_that_fail_again(tmp_path):
    out = str(tmp_path / "out")
    summary = kvcmp.fuzz(planted.candidate, seed=4, cases=1500, out=out, quiet=True, timeout=120)
    assert summary.exit_code == 1, summary.output
    keys = sorted(s.key for s in summary.signatures)
    assert len(keys) == 4, summary.report()
    found = {(s.stage, s.check) for s in summary.signatures}
    assert found == {("v41.rope_plain_insert", "bytes"), ("v41.save_compress_norm", "exception"), ("v4.compress", "exception"),
                     ("v41.rope_plain_insert", "status")}, keys
    causes = {s.stage + " " + s.check: s.cause for s in summary.signatures}
    assert causes["v41.save_compress_norm exception"] == "ValueError" and causes["v4.compress exception"] == "wrong output"
    assert causes["v41.rope_plain_insert status"] == "status ok vs bad-parameter"
    assert summary.cases == 1500 and summary.cases_per_second > 0
    for s in summary.signatures:
        assert s.saved and s.saved.startswith(out), s
        # The workers' Triton cache (OUT/triton-cache unless TRITON_CACHE_DIR is set) comes first.
        assert s.first_repro.startswith("TRITON_CACHE_DIR="), s.first_repro
        assert " KVCMP_PYTHON=%s %s -m kvcmp fuzz" % (sys.executable, sys.executable) in s.first_repro, s.first_repro
        for line in (s.first_repro, s.repro):
            run = shell(line, os.getcwd())
            assert run.returncode == 1 and "FAIL" in run.stdout, (line, run.stdout[-2000:], run.stderr[-2000:])


def run_hostile(tmp_path, candidate, **options):
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    os.environ["KVCMP_TEST_MARKS"] = str(marks)
    options.setdefault("timeout", 3)
    # No first-call allowance: a hang is a kernel hang here, not a compile-timeout (tests/python/test_fail_closed.py).
    options.setdefault("compile_timeout", 0)
    return kvcmp.fuzz(candidate, seed=2, cases=24, jobs=2, out=str(tmp_path / "out"), quiet=True,
                      max_failures_per_signature=100, **options)


@pytest.mark.parametrize("name, check, cause", [
    ("hangs", "timeout", ""),
    ("aborts", "exception", "signal 6"),
    ("segfaults", "exception", "signal 11"),
    ("underscore_exits_0", "exception", "exit status 0"),
    ("exits_0", "exception", "SystemExit"),
    ("raises_system_exit", "exception", "SystemExit"),
    ("raises_keyboard_interrupt", "exception", "KeyboardInterrupt"),
    ("wrong_dtype", "exception", "wrong output"),
    ("returns_string", "exception", "wrong output"),
    ("leaves_thread", "exception", "thread left running"),
])
def test_a_hostile_candidate_costs_one_case(tmp_path, name, check, cause):
    summary = run_hostile(tmp_path, getattr(hostile, name))
    assert summary.exit_code == 1, summary.output
    assert summary.cases == 24 and summary.failures == 1, summary.report() + summary.output
    (s,) = summary.signatures
    expected_check = "crash" if cause.startswith(("signal", "exit status")) else check
    assert s.check == expected_check and s.cause.startswith(cause), s.key
    assert s.saved or s.check == "timeout", s


def test_a_candidate_past_the_memory_limit_costs_one_case(tmp_path):
    summary = run_hostile(tmp_path, hostile.grows, rss_limit_mb=300)
    assert summary.exit_code == 1 and summary.failures == 1, summary.report() + summary.output
    assert summary.signatures[0].check == "memory" and summary.cases == 24


def test_a_lost_device_blames_its_own_case_only(tmp_path):
    seed, cases = 2, 60   # two of its first 60 cases write position 5 (the generator's current draws)
    summary = kvcmp.fuzz(hostile.sticky_device_error, seed=seed, cases=cases, invalid_rate=0, stages="v41.rope_quant_insert",
                         jobs=2, out=str(tmp_path / "out"), quiet=True, max_failures_per_signature=1000)
    chosen = [i for i in range(cases) if hostile.chosen(kvcmp.generate("v41.rope_quant_insert", seed, i))]
    assert 0 < len(chosen) < cases
    assert summary.exit_code == 1 and summary.cases == cases, summary.output
    (s,) = summary.signatures
    assert s.key == "v41.rope_quant_insert device-lost: RuntimeError", s.key
    assert s.count == len(chosen) and summary.failures == len(chosen), summary.report()
    assert hostile.chosen(kvcmp.load_case(s.saved)), "the saved case holds the inputs that fault"


def test_histories_and_stage_declarations(tmp_path):
    summary = kvcmp.fuzz(hostile.correct, seed=3, cases=150, stages="history,v41.rope", out=str(tmp_path / "out"), quiet=True)
    assert summary.ok, summary.report()
    assert summary.per_variant.get("history.v41", 0) > 0 and summary.per_variant.get("history.v4", 0) > 0, summary.per_variant
    assert summary.data["per_variant"]["history.v41"]["skipped"] == 0
    summary = kvcmp.fuzz(hostile.sticky_device_error, seed=3, cases=20, stages="v4.compress", out=str(tmp_path / "o2"), quiet=True)
    # Stages it does not declare are skipped; a campaign of nothing else is no verdict, never a pass.
    assert summary.skipped == 20 and summary.exit_code == 4 and not summary.ok, summary.report()
    assert kvcmp.stages_of(hostile.sticky_device_error) == ["v41.rope_quant_insert"]


def test_a_candidate_that_offers_nothing_or_cannot_load_is_refused(tmp_path):
    with pytest.raises(ValueError, match="offers no stage"):
        kvcmp.fuzz(hostile.offers_nothing, cases=5, out=str(tmp_path / "out"))
    run = subprocess.run([sys.executable, "-m", "kvcmp", "fuzz", "--candidate", "py:%s/hostile.py:nothing" % HERE, "--cases", "3",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, env=kvcmp.fuzzing.worker_environment())
    assert run.returncode == 2 and "has no attribute nothing" in run.stderr, run.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_metamorphic_checks_reach_a_python_candidate(tmp_path):
    """With every case checked again (--metamorphic-rate 1000), the candidate
    sees each case a second time with another thread count and a third time
    with its physical pages permuted (another block table)."""
    os.environ["KVCMP_TEST_CALL_LOG"] = str(tmp_path / "calls.txt")
    summary = kvcmp.fuzz(hostile.logs_block_tables, stages="v4.compress", seed=8, cases=20, invalid_rate=0, metamorphic_rate=1000,
                         out=str(tmp_path / "out"), quiet=True)
    assert summary.ok and summary.cases == 20, summary.report()
    tables = {}
    for line in open(tmp_path / "calls.txt"):
        case, table = line.strip().split("|")
        tables.setdefault(case, []).append(table)
    assert len(tables) == 20
    assert all(len(calls) == 3 for calls in tables.values()), [len(c) for c in tables.values()]
    assert sum(len(set(calls)) > 1 for calls in tables.values()) >= 10, "the permuted call did not get another block table"

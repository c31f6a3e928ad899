"""The outside-runner route (kvcmp gen -> a kernel run elsewhere ->
kvcmp replay --outputs) with kvcmp.case.run_outside: the status file
each case gets (SPEC.md section 10), a runner that crashes on one
must-reject case and dies on another failing exactly those two, and every
case gen writes (NaN eps included) loading in Python."""
import json
import math
import os
import re
import subprocess

import kvcmp
from kvcmp.case import run_outside, run_outside_tree, write_status
import candidates


def gen(kvcmp_bin, out, seed, cases, invalid_rate):
    run = subprocess.run([kvcmp_bin, "gen", "--seed", str(seed), "--cases", str(cases), "--invalid-rate", str(invalid_rate),
                          "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return sorted(os.path.join(str(out), d) for d in os.listdir(str(out)))


def must_reject(directory):
    with open(os.path.join(directory, "case.json")) as f:
        return json.load(f)["meta"]["must_reject"]


def replay(kvcmp_bin, outputs, cases):
    return subprocess.run([kvcmp_bin, "replay", "--outputs", str(outputs), str(cases)], capture_output=True, text=True)


def failing(stdout):
    return set(os.path.basename(m) for m in re.findall(r"^FAIL \[\S+\] (\S+):", stdout, re.M))


def test_crash_and_missing_status_on_must_reject_cases_fail(tmp_path, kvcmp_bin):
    dirs = gen(kvcmp_bin, tmp_path / "cases", 5, 60, 1000)
    rejects = [d for d in dirs if must_reject(d)]
    assert len(rejects) >= 2 and len(rejects) < len(dirs)
    crash_on, dies_on = os.path.basename(rejects[0]), os.path.basename(rejects[1])

    def crashes_on_one(case):
        if os.path.basename(case.path) == crash_on:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return candidates.correct(case)

    out = tmp_path / "out"
    counts = run_outside_tree(crashes_on_one, tmp_path / "cases", out)
    assert counts["crashed"] == 1 and counts["rejected"] == len(rejects) - 1 and counts["ran"] == len(dirs) - len(rejects)
    with open(out / crash_on / "status.json") as f:
        status = json.load(f)
    assert status["status"] == "crashed" and "RuntimeError: CUDA error" in status["message"]
    # The runner "died" on the second one: no status at all.
    os.remove(out / dies_on / "status.json")
    result = replay(kvcmp_bin, out, tmp_path / "cases")
    assert result.returncode == 1
    assert failing(result.stdout) == {crash_on, dies_on}, result.stdout
    assert "the outside runner crashed: RuntimeError: CUDA error" in result.stdout
    assert "no outside status: " in result.stdout
    assert "%d passed, 2 failed" % (len(dirs) - 2) in result.stdout
    # Run again correctly: every case passes (an earlier status never speaks for a new run).
    assert run_outside(candidates.correct, rejects[0], out) == "rejected"
    assert run_outside(candidates.correct, rejects[1], out) == "rejected"
    result = replay(kvcmp_bin, out, tmp_path / "cases")
    assert result.returncode == 0, result.stdout


def test_statuses_against_the_reference(tmp_path, kvcmp_bin):
    dirs = gen(kvcmp_bin, tmp_path / "cases", 5, 30, 300)
    valid = next(d for d in dirs if not must_reject(d))
    reject = next(d for d in dirs if must_reject(d))

    def refuses_all(case):
        raise kvcmp.Rejected("not supported here")

    # NAME.got.npy and status.got.json in the case directory itself.
    assert run_outside(refuses_all, valid) == "rejected"
    with open(os.path.join(valid, "status.got.json")) as f:
        assert json.load(f) == {"status": "rejected", "message": "not supported here"}
    result = subprocess.run([kvcmp_bin, "replay", "--outputs-in-case", valid], capture_output=True, text=True)
    assert result.returncode == 1 and "the outside runner rejected a case the reference runs: not supported here" in result.stdout
    assert run_outside(candidates.correct, valid) == "ran"
    assert os.path.exists(os.path.join(valid, kvcmp.load_case(valid).output_names[0] + ".got.npy"))
    assert subprocess.run([kvcmp_bin, "replay", "--outputs-in-case", valid], capture_output=True, text=True).returncode == 0
    # "ran" on a case the reference rejects fails.
    out = tmp_path / "out"
    write_status(out / os.path.basename(reject), "ran")
    result = replay(kvcmp_bin, out, reject)
    assert result.returncode == 1 and "the outside runner ran the case, but the reference rejects it" in result.stdout
    try:
        write_status(out, "fine")
        raise AssertionError("write_status accepted 'fine'")
    except ValueError as e:
        assert "ran, rejected, crashed" in str(e)


def test_every_case_gen_writes_loads_in_python(tmp_path, kvcmp_bin):
    dirs = gen(kvcmp_bin, tmp_path / "cases", 3, 400, 1000)
    nan_eps = 0
    for d in dirs:
        case = kvcmp.load_case(d)
        nan_eps += math.isnan(case.params.get("eps", 0.0))
    assert nan_eps > 0, "no NaN eps among %d invalid cases: pick another seed" % len(dirs)
    # Non-finite eps written by Python reads back as written.
    base = next(c for c in map(kvcmp.load_case, dirs) if "eps" in c.params)
    for eps in (float("nan"), float("inf"), -float("inf")):
        saved = str(tmp_path / ("eps-%s" % eps))
        kvcmp.save_case(saved, base.stage, dict(base.params, eps=eps), base.tensors, source="python test")
        with open(os.path.join(saved, "case.json")) as f:
            text = f.read()
        assert "null" not in text
        back = kvcmp.load_case(saved).params["eps"]
        assert (math.isnan(back) and math.isnan(eps)) or back == eps, (eps, back)
    # A case.json written by hand with "-inf" reads too; "NaN" is refused naming params.eps.
    path = os.path.join(saved, "case.json")
    with open(path) as f:
        doc = json.load(f)
    doc["params"]["eps"] = "-inf"
    with open(path, "w") as f:
        json.dump(doc, f)
    assert kvcmp.load_case(saved).params["eps"] == -float("inf")
    doc["params"]["eps"] = "NaN"
    with open(path, "w") as f:
        json.dump(doc, f)
    try:
        kvcmp.load_case(saved)
        raise AssertionError("eps \"NaN\" accepted")
    except kvcmp.Error as e:
        assert "params.eps must be a number" in str(e)

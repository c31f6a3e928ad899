"""One shape for every route a case takes to a Python candidate: a stage
call of a campaign's worker, kvcmp.generate(), a case that kvcmp gen
saved, and the stage-call table of docs/candidates.md all carry the same
tensors (names, dtypes, shapes, contents, which are written) and the same
params (cache_dtype, eps...)."""
import json
import os
import re
import subprocess

import numpy as np

import kvcmp
import recorder

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEED, CASES = 5, 400
WORKER_STAGES = ("v4.save_partial_states", "v4.compress", "v41.save_compress_norm", "v41.rope_quant_insert",
                 "v41.rope_plain_insert")


def campaign_calls(tmp_path, **options):
    """Every stage call the worker made in a campaign of the recorder."""
    log = tmp_path / "calls.jsonl"
    os.environ["KVCMP_TEST_CALL_LOG"] = str(log)
    try:
        summary = kvcmp.fuzz(recorder.record, seed=SEED, cases=CASES, jobs=1, out=str(tmp_path / "out"), quiet=True,
                             metamorphic_rate=0, **options)
    finally:
        del os.environ["KVCMP_TEST_CALL_LOG"]
    assert summary.exit_code == 0 and summary.cases == CASES, summary.output[-3000:]
    with open(log) as f:
        return [json.loads(line) for line in f]


def generated(index, **options):
    # A campaign of a Python candidate draws its page geometries from a
    # pool of 4 (--geometry-pool), and so does this.
    case = kvcmp.generate(seed=SEED, index=index, geometry_pool=4, **options)
    if case is None:
        return None, None
    return case, recorder.describe(case.stage, case.params, case.inputs, set(case.output_names))


def kinds(record):
    """What a call or a case is made of, values aside."""
    params = {k: (v if k == "cache_dtype" else type(v).__name__) for k, v in record["params"].items()}
    return json.dumps([record["stage"], params, sorted((n, t[0], len(t[1]), t[2]) for n, t in record["tensors"].items())],
                      sort_keys=True)


def test_every_worker_call_is_the_generated_case(tmp_path):
    calls = campaign_calls(tmp_path, invalid_rate=100)
    assert {c["stage"] for c in calls} == set(WORKER_STAGES), "the campaign missed a stage: pick another seed"
    seen = {json.dumps(c, sort_keys=True) for c in calls}
    matched, variants = 0, set()
    for index in range(CASES):
        case, expected = generated(index, invalid_rate=100)
        if case is None or case.stage.endswith(".forward"):
            continue
        variants.add(case.info["variant"])
        assert json.dumps(expected, sort_keys=True) in seen, (
            "case %d (%s) reached the candidate in another shape than kvcmp.generate() gives:\n generate: %s\n worker calls "
            "of that stage: %s" % (index, case.info["variant"], json.dumps(expected, sort_keys=True)[:1500],
                                   sorted({kinds(c) for c in calls if c["stage"] == case.stage})))
        matched += 1
    every = {"%s/d%d/r%d" % (s, d, r) for s in ("v4.save_partial_states", "v4.compress") for d in (512, 128) for r in (4, 128)}
    every |= {"v41.save_compress_norm/r1", "v41.save_compress_norm/r2", "v41.rope_quant_insert", "v41.rope_plain_insert/bf16",
              "v41.rope_plain_insert/fp8"}
    assert variants == every, "variants not generated: %s (pick another seed)" % sorted(every - variants)
    assert matched > 100


def test_forward_and_history_calls_have_their_stage_shape(tmp_path):
    # A forward or a history step calls the worker once per stage: each
    # call is made like a generated case of that stage.
    calls = campaign_calls(tmp_path, stages="v4.forward,v41.forward,history", invalid_rate=0)
    shapes = {}
    for index in range(600):
        case, expected = generated(index, stage=",".join(WORKER_STAGES), invalid_rate=0)
        if case is not None:
            shapes.setdefault(case.stage, set()).add(kinds(expected))
    assert {c["stage"] for c in calls} == set(WORKER_STAGES) - {"v41.rope_plain_insert"}   # a forward inserts fp8_ds_mla
    for call in calls:
        assert kinds(call) in shapes[call["stage"]], (kinds(call), sorted(shapes[call["stage"]]))


def test_saved_cases_are_the_generated_ones(tmp_path, kvcmp_bin):
    # kvcmp gen's case.json and NAME.npy files: the params and the tensors
    # of kvcmp.generate() (read from the files, not through kvcmp).
    out = tmp_path / "cases"
    subprocess.run([kvcmp_bin, "gen", "--seed", str(SEED), "--cases", "150", "--invalid-rate", "0", "--geometry-pool", "4",
                    "--out", str(out)], check=True, capture_output=True)
    _, documented = table_of_docs()
    checked, names = 0, sorted(os.listdir(out))
    for name in names:
        index = int(re.match(r"fuzz-s\d+-c(\d+)-", name).group(1))
        case, expected = generated(index, invalid_rate=0)
        assert case is not None and name == case.info["name"], name
        with open(out / name / "case.json") as f:
            params = json.load(f)["params"]
        assert sorted(params) == sorted(expected["params"]), (name, params, expected["params"])
        if case.stage in WORKER_STAGES:
            assert set(params) == documented[case.stage], (name, sorted(params), "docs/candidates.md Params:",
                                                           sorted(documented[case.stage]))
        files = sorted(f[:-4] for f in os.listdir(out / name) if f.endswith(".npy") and not f.endswith(".out.npy"))
        assert files == sorted(expected["tensors"]), (name, files, sorted(expected["tensors"]))
        for tensor in files:
            array = np.load(out / name / (tensor + ".npy"))
            assert [array.dtype.str, list(array.shape)] == expected["tensors"][tensor][:2], (name, tensor)
        checked += 1
    assert checked == len(names) > 100


def table_of_docs():
    """docs/candidates.md: per stage, its params line and the rows of its
    tensor table as {(name, dtype, written)}."""
    with open(os.path.join(ROOT, "docs", "candidates.md")) as f:
        text = f.read()
    section = text[text.index("## The stage-call table"):text.index("### Paged caches in memory")]
    stages, params, current = {}, {}, []
    for line in section.splitlines():
        heading = re.findall(r"\*\*(v4\.\w+|v41\.\w+)\*\*", line)
        if heading:
            current = heading
            for stage in current:
                stages.setdefault(stage, set())
        found = re.match(r"Params: (.*)\.$", line)
        if found and current:
            for stage in current:
                params[stage] = set(re.findall(r"`(\w+)`", found.group(1)))
        row = re.match(r"\| `(\w+)` \| `([<|\\]+\w+)` \| [^|]+ \| (in|in/out) \|", line)
        if row and current:
            for stage in current:
                stages[stage].add((row.group(1), row.group(2).replace("\\", ""), row.group(3) == "in/out"))
    return stages, params


def test_the_stage_call_table_is_what_the_worker_sends(tmp_path):
    calls = campaign_calls(tmp_path, invalid_rate=0)
    table, params = table_of_docs()
    for stage in WORKER_STAGES:
        sent = {(n, t[0], t[2]) for c in calls if c["stage"] == stage for n, t in c["tensors"].items()}
        assert table.get(stage) == sent, "docs/candidates.md, %s: the table lists %s, the worker sends %s" % (
            stage, sorted(table.get(stage, ())), sorted(sent))
        keys = {k for c in calls if c["stage"] == stage for k in c["params"]}
        assert params.get(stage) == keys, "docs/candidates.md, %s: Params: %s, the worker sends %s" % (
            stage, sorted(params.get(stage, ())), sorted(keys))

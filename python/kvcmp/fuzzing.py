"""kvcmp.fuzz: a Python candidate on the fuzzer's generated cases, each
failure shrunk by the C shrinker (the "still fails" test calls back into
Python), saved as a case directory and given __REPRO lines."""
import os
import sys
import time
import traceback

from .case import (Case, Rejected, candidate_name, compare, generate, reference, repro_command, save_case, shrink)
from .torch_case import PaddingTouched, TorchCase


def run_candidate(candidate, case):
    """Calls candidate(case) on a writable copy of the case's inputs and
    returns its outputs {name: array} (see the package docstring)."""
    work = Case(case.stage, case.params, {k: v.copy() for k, v in case.inputs.items()}, case.source, case.meta,
                case.path, dict(case.info))
    result = candidate(work)
    if result is None:
        return {name: work.tensors[name] for name in case.output_names}
    if isinstance(result, TorchCase):
        return result.outputs()
    return {name: (value.outputs()[name] if isinstance(value, TorchCase) else value) for name, value in dict(result).items()}


class Verdict:
    """The outcome of one case: kind is None (pass), "bytes", "rejected"
    (a valid case refused), "accepted-invalid" (a case the reference
    rejects was accepted), "padding" or "exception"."""

    def __init__(self, kind=None, detail="", result=None):
        self.kind, self.detail, self.result = kind, detail, result

    @property
    def failed(self):
        return self.kind is not None


def check(candidate, case, policy="exact"):
    try:
        outputs = run_candidate(candidate, case)
    except Rejected as e:
        try:
            reference(case)
        except Rejected as r:
            return Verdict(None, "rejected as the reference does (%s)" % r)
        return Verdict("rejected", "the candidate rejected a case the reference accepts: %s" % e)
    except PaddingTouched as e:
        return Verdict("padding", str(e))
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return Verdict("exception", "%s: %s (at %s:%d)" % (type(e).__name__, e, frame.filename, frame.lineno))
    result = compare(case, outputs, policy, candidate)
    if result.reference_status:
        return Verdict("accepted-invalid", result.summary, result)
    if result.failed:
        first = "; first: " + result.first.where if result.first else ""
        return Verdict("bytes", result.summary + first, result)
    return Verdict(None, result.summary or "bit-exact", result)


class Failure:
    def __init__(self, index, case, verdict):
        self.index, self.case, self.verdict = index, case, verdict
        self.kind, self.detail = verdict.kind, verdict.detail
        self.saved = None
        self.tokens_before = self.tokens_after = case.tokens
        self.repro = None

    def __repr__(self):
        return "Failure(case %d, %s, %s)" % (self.index, self.kind, self.saved)


class FuzzResult:
    def __init__(self, candidate, seed, policy):
        self.candidate, self.seed, self.policy = candidate_name(candidate), seed, policy
        self.cases = self.skipped = 0
        self.per_variant = {}
        self.failures = []
        self.seconds = 0.0

    @property
    def ok(self):
        return not self.failures

    @property
    def cases_per_second(self):
        return self.cases / self.seconds if self.seconds > 0 else 0.0

    def report(self):
        lines = ["fuzz: %d cases in %.1f s (%.0f cases/s), candidate %s, policy %s, seed %d: %d failure%s%s" % (
            self.cases, self.seconds, self.cases_per_second, self.candidate, self.policy, self.seed, len(self.failures),
            "" if len(self.failures) == 1 else "s",
            ", %d multi-step history cases skipped (kvcmp fuzz runs them)" % self.skipped if self.skipped else "")]
        for f in self.failures:
            lines.append("FAIL case %d [%s, family %s] %s: %s" % (f.index, f.case.info.get("variant"), f.case.info.get("family"),
                                                                   f.kind, f.detail))
            if f.saved:
                lines.append("  shrunk from %d to %d tokens, saved to %s" % (f.tokens_before, f.tokens_after, f.saved))
                lines.append("  __REPRO: " + f.repro)
        return "\n".join(lines)

    __str__ = report


def _fuzz_repro(candidate, case, policy):
    i = case.info
    command = "python3 -m kvcmp fuzz --candidate %s --seed %d --only %d --policy %s" % (
        candidate_name(candidate), i["seed"], i["index"], policy)
    if i["stages"]:
        command += " --stage " + i["stages"]
    if i["families"]:
        command += " --family " + i["families"]
    if i["invalid_rate"]:
        command += " --invalid-rate %d" % i["invalid_rate"]
    return command


def _failing_regions(verdict):
    if verdict.result is None:
        return set()
    return set(name for name, region in verdict.result.regions.items() if region.failing)


def _shrink_and_save(candidate, failure, policy, save_dir, shrink_seconds):
    case, kind = failure.case, failure.kind
    exception_type = failure.detail.split(":")[0] if kind == "exception" else None
    regions = _failing_regions(failure.verdict)

    def still_fails(smaller):
        # The same kind of failure, in the same regions (a reduction must
        # not turn a wrong RoPE value into, say, a row written that the
        # reference leaves alone).
        v = check(candidate, smaller, policy)
        return (v.kind == kind and _failing_regions(v) == regions and
                (exception_type is None or v.detail.split(":")[0] == exception_type))

    smaller, failure.tokens_before, failure.tokens_after = shrink(case, still_fails, shrink_seconds)
    tensors = dict(smaller.inputs)
    try:
        tensors.update({name + ".out": value for name, value in reference(smaller).items()})
    except Rejected:
        pass   # saved without outputs: an input to reject
    meta = {"generator": "kvcmp.fuzz (python)", "seed": case.info["seed"], "case": case.info["index"],
            "variant": case.info["variant"], "family": case.info["family"], "failure": kind,
            "candidate": candidate_name(candidate)}
    directory = os.path.join(save_dir, case.info["name"])
    save_case(directory, smaller.stage, smaller.params, tensors, source=smaller.source, meta=meta)
    failure.saved = directory
    failure.repro = repro_command(candidate, policy, directory)


def _indices(cases, seconds, only, started):
    if only is not None:
        yield only
        return
    index = 0
    while (cases is None or index < cases) and (seconds is None or time.monotonic() - started <= seconds):
        yield index
        index += 1


def fuzz(candidate, stages=None, seed=1, cases=None, seconds=None, policy="exact", save_dir="kvcmp-failures",
         families=None, invalid_rate=0, shrink_seconds=5.0, max_failures=10, only=None, quiet=False, out=None):
    """Runs candidate on generated cases 0, 1, ... of `seed` (`cases` of
    them, or for `seconds`; 100 cases when neither is given), compares
    every output byte with the reference under `policy`, and shrinks and
    saves each failure to save_dir (None: no shrinking, nothing saved).
    stages and families are lists or comma-separated name prefixes as in
    `kvcmp fuzz --stage/--family`; invalid_rate (per mille) corrupts cases
    on purpose, which the candidate must reject by raising kvcmp.Rejected.
    Returns a FuzzResult (ok, cases, failures, cases_per_second)."""
    out = out or sys.stdout
    if cases is None and seconds is None:
        cases = 100
    result = FuzzResult(candidate, seed, policy)
    started = time.monotonic()
    for index in _indices(cases, seconds, only, started):
        case = generate(stages, seed, index, families, invalid_rate)
        if case is None:
            result.skipped += 1
            continue
        result.cases += 1
        result.per_variant[case.info["variant"]] = result.per_variant.get(case.info["variant"], 0) + 1
        verdict = check(candidate, case, policy)
        if not verdict.failed:
            continue
        failure = Failure(index, case, verdict)
        result.failures.append(failure)
        print("FAIL case %d [%s, family %s] %s: %s\n  __REPRO: %s" % (
            index, case.info["variant"], case.info["family"], verdict.kind, verdict.detail,
            _fuzz_repro(candidate, case, policy)), file=out, flush=True)
        if save_dir:
            _shrink_and_save(candidate, failure, policy, save_dir, shrink_seconds)
            print("  shrunk case %d from %d to %d tokens, saved to %s\n  __REPRO: %s" % (
                index, failure.tokens_before, failure.tokens_after, failure.saved, failure.repro), file=out, flush=True)
        if len(result.failures) >= max_failures:
            break
    result.seconds = time.monotonic() - started
    if not quiet:
        print(result.report().split("\n")[0], file=out, flush=True)
    return result

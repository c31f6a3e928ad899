"""Assertions for test suites (pytest, unittest), in the spirit of
torch.testing.assert_close: the message is the classified difference and
the command that replays the saved case."""
import os
import tempfile

from .case import _call_candidate, compare, reference, save_case, Rejected
from .fuzzing import fuzz, passed


def _save_for_repro(case, save_dir):
    """The case with the reference's outputs, saved so that a repro line
    can name it; returns its directory."""
    if case.path:
        return case.path
    save_dir = save_dir or os.environ.get("KVCMP_SAVE_DIR") or tempfile.mkdtemp(prefix="kvcmp-failure-")
    name = case.info.get("name") or "case-%s" % case.stage
    directory = os.path.join(save_dir, name)
    tensors = dict(case.inputs)
    try:
        tensors.update({k + ".out": v for k, v in reference(case).items()})
    except Rejected:
        pass
    save_case(directory, case.stage, case.params, tensors, source=case.source or "python assert_matches_reference",
              meta=case.meta)
    return directory


def assert_matches_reference(case, outputs, policy="exact", candidate=None, save_dir=None):
    """Raises AssertionError unless outputs ({name: numpy array or torch
    tensor}) equal the reference's outputs on case under policy.  On
    failure the case is saved (save_dir, $KVCMP_SAVE_DIR or a temporary
    directory) and the message ends with the command that replays it."""
    result = compare(case, outputs, policy, candidate)
    if result.passed:
        return result
    case.path = _save_for_repro(case, save_dir)
    raise AssertionError("outputs differ from the kvcmp reference under policy %s\n%s" % (policy, result.message()))


def assert_fuzz_passes(candidate, **options):
    """kvcmp.fuzz(candidate, **options) with quiet output; raises
    AssertionError listing each failure signature (its cause, count,
    smallest saved case and __REPRO lines) when any case fails."""
    options.setdefault("quiet", True)
    result = fuzz(candidate, **options)
    if not passed(result):
        raise AssertionError(result.report())
    return result


def run_candidate(candidate, case):
    """candidate(case) in this process on a writable copy of the case's
    inputs; its outputs {name: array} (None: read back in place)."""
    return _call_candidate(candidate, case)


def matches_reference(candidate, case, policy="exact"):
    """True when candidate(case), run in this process, equals the reference
    (a rejection counts as equal when the reference rejects too)."""
    try:
        outputs = run_candidate(candidate, case)
    except Rejected:
        try:
            reference(case)
        except Rejected:
            return True
        return False
    return compare(case, outputs, policy).passed

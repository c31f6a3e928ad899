"""kvcmp.fuzz: libkvcmp's campaign engine (include/kvcmp/campaign.h) on a
Python candidate.

The campaign runs in a child process (``python -m kvcmp fuzz``, the same
engine as the ``kvcmp fuzz`` command); the candidate runs in supervised
worker interpreters (kvcmp._worker), so a candidate that hangs, crashes,
exits or loses its GPU costs one failing case, never the caller's process
or the campaign.  The result is the campaign's summary: its failure
signatures, each with its cause, count, smallest saved case and the
__REPRO lines that fail again when pasted into a shell."""
import json
import os
import shlex
import subprocess
import sys
import tempfile

from ._candidate import candidate_spec, offered_stages
from ._lib import LIB_PATH

# The options of `kvcmp fuzz` that fuzz() passes through, by keyword.
_OPTIONS = {"seed": "--seed", "cases": "--cases", "seconds": "--seconds", "stages": "--stage", "families": "--family",
            "policy": "--policy", "out": "--out", "save_dir": "--save", "invalid_rate": "--invalid-rate",
            "metamorphic_rate": "--metamorphic-rate", "jobs": "--jobs", "threads": "--threads",
            "max_failures": "--max-failures", "max_failures_per_signature": "--max-failures-per-signature",
            "shrink_seconds": "--shrink-seconds", "timeout": "--timeout", "rss_limit_mb": "--rss-limit-mb",
            "startup_timeout": "--startup-timeout", "compile_timeout": "--compile-timeout",
            "geometry_pool": "--geometry-pool", "shard": "--shard", "only": "--only", "junit": "--junit"}


def interpreter_command():
    """How this interpreter runs kvcmp: [sys.executable, "-m", "kvcmp"]."""
    return [sys.executable, "-m", "kvcmp"]


def worker_environment():
    """The environment of the campaign and its workers: this interpreter,
    this libkvcmp, and this process's import path (the candidate resolves
    there as it does here)."""
    env = dict(os.environ)
    env["KVCMP_PYTHON"] = sys.executable
    env["KVCMP_LIB"] = LIB_PATH
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [package_parent] + [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


class Signature:
    """One distinct failure of a campaign."""

    def __init__(self, entry):
        self.key = entry["signature"]
        self.stage, self.check, self.cause = entry["stage"], entry["check"], entry["cause"]
        self.regions = entry.get("regions", "")
        self.count = int(entry["count"])
        self.first_case = int(entry["first_case"])
        self.first_repro = entry["first_repro"]
        self.minimal_case = entry.get("minimal_case")
        self.tokens = entry.get("minimal_tokens")
        self.saved = entry.get("minimal_saved")
        self.repro = entry.get("minimal_repro")
        # The deviations (kvcmp/deviations.h) whose outputs equal the
        # candidate's on the minimal case; [] when none does or none ran.
        self.explained_by = list(entry.get("explained_by", []))

    def __repr__(self):
        return "Signature(%r, count=%d, saved=%r)" % (self.key, self.count, self.saved)


class FuzzSummary:
    """The campaign's summary (its JSON file, parsed): cases, compared
    (the cases run through both sides), cases_per_second, signatures (each
    with cause, count, smallest saved case and REPRO lines), exit_code (0
    pass, 1 failures, 3 an output not written, 4 no verdict: no case or
    fewer than asked compared, 128+N interrupted by signal N), verdict
    ("pass", "fail", "no-verdict", "interrupted", "write-failed"),
    stopped_by ("cases", "time", "max-failures", "interrupted", ...),
    no_verdict (why, when there is none), output."""

    def __init__(self, data, exit_code, json_path, output=""):
        self.data = data
        self.exit_code = exit_code
        self.verdict = data.get("verdict")
        self.stopped_by = data.get("stopped_by")
        self.no_verdict = data.get("no_verdict", "")
        self.compared = int(data.get("compared", 0))
        self.json_path = json_path
        self.output = output
        self.cases = int(data.get("cases", 0))
        self.failures = int(data.get("failures", 0))
        self.skipped = int(data.get("skipped", 0))
        self.seconds = float(data.get("seconds", 0.0))
        self.cases_per_second = float(data.get("cases_per_second", 0.0))
        self.interrupted = bool(data.get("interrupted", False))
        self.candidate = data.get("candidate")
        self.seed = data.get("seed")
        self.per_variant = {k: v["cases"] for k, v in data.get("per_variant", {}).items()}
        self.signatures = [Signature(e) for e in data.get("signatures", [])]

    @property
    def ok(self):
        """Only a campaign that compared every case it was asked for, and
        failed none, passes: the process's exit status and the summary's
        own verdict must both say so."""
        return self.exit_code == 0 and self.data.get("exit_status") == 0 and self.verdict == "pass" and self.compared > 0

    def report(self):
        lines = ["fuzz: %d cases in %.1f s (%.0f cases/s), candidate %s, seed %s: %d failure%s, %d signature%s" % (
            self.cases, self.seconds, self.cases_per_second, self.candidate, self.seed, self.failures,
            "" if self.failures == 1 else "s", len(self.signatures), "" if len(self.signatures) == 1 else "s")]
        lines.append("fuzz: verdict %s (exit status %d), stopped by %s" % (self.verdict, self.exit_code, self.stopped_by))
        if self.no_verdict:
            lines.append("fuzz: NO VERDICT: %s" % self.no_verdict)
        for i, s in enumerate(self.signatures, 1):
            lines.append("  [%d] %s  (%d failure%s)" % (i, s.key, s.count, "" if s.count == 1 else "s"))
            if s.explained_by:
                lines.append("      explained by: %s" % ", ".join(s.explained_by))
            lines.append("      __REPRO: %s" % s.first_repro)
            if s.saved:
                lines.append("      smallest saved case (%s tokens): %s" % (s.tokens, s.saved))
                lines.append("      __REPRO: %s" % s.repro)
        return "\n".join(lines)

    __str__ = report

    def __repr__(self):
        return "FuzzSummary(cases=%d, signatures=%r)" % (self.cases, [s.key for s in self.signatures])


def _arguments(spec, options):
    argv = ["--candidate", spec, "--python", sys.executable]
    for name, value in options.items():
        if name not in _OPTIONS:
            raise TypeError("kvcmp.fuzz() got an unexpected option %r (options: %s)" % (name, ", ".join(sorted(_OPTIONS))))
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = ",".join(value) if name in ("stages", "families") else "%d/%d" % tuple(value)
        argv += [_OPTIONS[name], str(value)]
    return argv


def fuzz(candidate, quiet=False, json_path=None, args=(), **options):
    """Runs a campaign of libkvcmp's engine on candidate (a callable
    candidate(case) -> outputs defined at module level, or a --candidate
    string) and returns its FuzzSummary.

    Options, as ``kvcmp fuzz`` has them: seed, cases or seconds (100 cases
    when neither is given), stages, families, policy, out (every output
    under it; default kvcmp-out), save_dir, invalid_rate, metamorphic_rate,
    jobs, threads, max_failures (distinct root causes), max_failures_per_signature,
    shrink_seconds, timeout, startup_timeout, compile_timeout, rss_limit_mb,
    geometry_pool, shard ((i, n)), only, junit; args adds raw command-line options.  quiet keeps the campaign's
    output in summary.output instead of printing it.  A bad option raises
    ValueError with the engine's message."""
    if options.get("cases") is None and options.get("seconds") is None and options.get("only") is None:
        options["cases"] = 100
    spec = candidate_spec(candidate)
    out = options.get("out") or "kvcmp-out"
    if json_path is None:
        os.makedirs(out, exist_ok=True)
        json_path = os.path.join(out, "fuzz-summary.json")
    argv = interpreter_command() + ["fuzz"] + _arguments(spec, options) + ["--json", json_path] + list(args)
    if quiet:
        argv.append("--quiet")
    if os.path.exists(json_path):
        os.remove(json_path)
    done = subprocess.run(argv, env=worker_environment(), stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.PIPE, text=True)
    if done.stderr and not quiet:
        sys.stderr.write(done.stderr)
    if done.returncode == 2 or not os.path.exists(json_path):
        raise ValueError("kvcmp fuzz refused to run (exit %d): %s" % (done.returncode, (done.stderr or "").strip()))
    with open(json_path) as f:
        data = json.load(f)
    return FuzzSummary(data, done.returncode, json_path, (done.stdout or "") + (done.stderr or ""))


def stages_of(candidate):
    """The stages a candidate offers (its .stages, else all), for
    parametrising a test per stage.  A candidate named by a string
    (FILE.py:FUNCTION, MODULE:FUNCTION) is asked in an interpreter of its
    own: its module is never imported into this process, where it could
    change how kvcmp judges it.  Raises ValueError when it cannot be
    loaded or is not a Python candidate."""
    if not isinstance(candidate, str):
        return offered_stages(candidate)
    spec = candidate_spec(candidate)
    if not spec.startswith("py:"):
        raise ValueError("cannot list the stages of %r: kvcmp_stage parametrises a Python candidate "
                         "(py:FILE.py:FUNCTION or MODULE:FUNCTION)" % candidate)
    with tempfile.TemporaryDirectory(prefix="kvcmp-stages-") as scratch:
        answer = os.path.join(scratch, "stages.json")
        code = ("import json, sys\n"
                "from kvcmp._candidate import offered_stages, resolve\n"
                "stages = offered_stages(resolve(sys.argv[1]))\n"
                "with open(sys.argv[2], 'w') as f:\n"
                "    json.dump(stages, f)\n")
        done = subprocess.run([sys.executable, "-c", code, spec[3:], answer], env=worker_environment(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0 or not os.path.exists(answer):
            raise ValueError("cannot load the candidate %s to list its stages (exit %d): %s" % (
                candidate, done.returncode, (done.stderr or "").strip()[-800:]))
        with open(answer) as f:
            stages = json.load(f)
    if not isinstance(stages, list) or not all(isinstance(s, str) for s in stages):
        raise ValueError("the candidate %s listed its stages as %r, not a list of names" % (candidate, stages))
    return stages


def passed(summary):
    """The campaign's verdict from what its process left: its exit status
    and the summary file it wrote (not an attribute that code in this
    process could replace).  True only when every case asked was
    compared and none failed."""
    try:
        with open(summary.json_path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    return (type(summary.exit_code) is int and summary.exit_code == 0 and data.get("exit_status") == 0
            and data.get("verdict") == "pass" and isinstance(data.get("compared"), (int, float)) and data["compared"] > 0)


def temporary_out():
    return tempfile.mkdtemp(prefix="kvcmp-out-")

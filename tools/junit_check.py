#!/usr/bin/python3
"""Reads every JUnit file a `make test` run wrote with python3's own XML
parser (what a CI system would do) and checks its counts against the run
that wrote it.

    tools/junit_check.py --fuzz XML JSON      kvcmp fuzz --junit XML --json JSON
    tools/junit_check.py --mutants XML JSON   kvcmp report mutants --junit XML --json JSON
    tools/junit_check.py --replay XML LOG     kvcmp replay --junit XML (stdout in LOG)
    tools/junit_check.py --criterion XML      Criterion --xml=XML

Exits 1 naming the file and the count that disagrees."""
import json
import re
import sys
import xml.etree.ElementTree as ET

problems = []


def counts(path):
    """(tests, failures, skipped) as the elements say, after checking that
    the headers say the same and every kvcmp failure carries a repro line."""
    root = ET.parse(path).getroot()
    if root.tag != "testsuites":
        problems.append(f"{path}: root element is <{root.tag}>, not <testsuites>")
    cases = list(root.iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    suites = root.findall("testsuite")
    header = (sum(int(s.get("tests", 0)) for s in suites), sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites))
    if header != (len(cases), len(failed)):
        problems.append(f"{path}: <testsuite> headers say {header[0]} tests, {header[1]} failures; "
                        f"the file holds {len(cases)} testcases, {len(failed)} failed")
    return root, cases, failed, skipped


def expect(path, what, got, want):
    if got != want:
        problems.append(f"{path}: {got} {what}, the run says {want}")


def kvcmp_failures_have_repro(path, failed):
    for c in failed:
        f = c.find("failure")
        if f is None or not f.get("message") or "__REPRO: " not in (f.text or ""):
            problems.append(f"{path}: failed testcase {c.get('name')!r} lacks a message or a __REPRO line")


def check_fuzz(xml, summary_path):
    _, cases, failed, skipped = counts(xml)
    summary = json.load(open(summary_path))
    clean = [v for v, t in summary["per_variant"].items() if t["failures"] == 0]
    # One failed testcase per failure signature, not per failing case, and
    # one of the campaign's own when it gave no verdict, was interrupted or
    # could not count its cases.
    own = sum(1 for key in ("no_verdict", "unaccounted") if summary.get(key)) + bool(summary.get("interrupted"))
    expect(xml, "failed testcases (signatures)", len(failed), len(summary["signatures"]) + own)
    expect(xml, "passed or skipped testcases (variants without failures)", len(cases) - len(failed), len(clean))
    expect(xml, "skipped testcases", len(skipped), sum(1 for v in clean if summary["per_variant"][v]["skipped"] == summary["per_variant"][v]["cases"]))
    kvcmp_failures_have_repro(xml, failed)


def check_mutants(xml, summary_path):
    _, cases, failed, skipped = counts(xml)
    summary = json.load(open(summary_path))
    expect(xml, "testcases", len(cases), len(summary["mutants"]))
    expect(xml, "skipped testcases (an ISA this CPU lacks)", len(skipped), sum(1 for m in summary["mutants"] if m.get("skipped")))
    expect(xml, "failed testcases (survivors)", len(failed),
           sum(1 for m in summary["mutants"] if not m["caught"] and not m.get("skipped")))
    kvcmp_failures_have_repro(xml, failed)


def check_replay(xml, log_path):
    _, cases, failed, skipped = counts(xml)
    totals = None
    for line in open(log_path):
        # Known upstream differences (KNOWN lines) are passing testcases.
        m = re.match(r"(\d+) passed, (\d+) failed(?:, (\d+) skipped)?(?:, (\d+) expected upstream differences?)?$", line.strip())
        if m:
            totals = [int(x or 0) for x in m.groups()]
    if totals is None:
        problems.append(f"{log_path}: no 'N passed, M failed' line")
        return
    # A replay that compared no case fails a testcase of its own.
    no_verdict = any(line.startswith("replay: NO VERDICT") for line in open(log_path))
    expect(xml, "testcases", len(cases), sum(totals) + no_verdict)
    expect(xml, "failed testcases", len(failed), totals[1] + no_verdict)
    expect(xml, "skipped testcases", len(skipped), totals[2])
    kvcmp_failures_have_repro(xml, failed)


def main(argv):
    i = 0
    checked = 0
    while i < len(argv):
        kind = argv[i]
        if kind == "--criterion":
            counts(argv[i + 1])
            i += 2
        elif kind in ("--fuzz", "--mutants", "--replay"):
            {"--fuzz": check_fuzz, "--mutants": check_mutants, "--replay": check_replay}[kind](argv[i + 1], argv[i + 2])
            i += 3
        else:
            sys.exit(f"junit_check: unknown argument {kind!r} (see the usage in {__file__})")
        checked += 1
    for p in problems:
        print(f"junit_check: {p}", file=sys.stderr)
    if problems:
        print("junit_check: the JUnit files above disagree with their runs; rerun the goal that wrote them "
              "(make fuzz-check, wrap-check, mutants-check, replay-junit) and read its output", file=sys.stderr)
        return 1
    print(f"junit_check: {checked} JUnit files parsed by python3's xml.etree, counts agree with their runs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Checks the example CI workflows (examples/ci/*.yml) as GitHub would
read them: valid YAML, a trigger, jobs with runs-on and steps, every step
either `uses` an action at a pinned version or `run`s a command, and
every kvcmp option those commands pass is one kvcmp accepts (asked of
build/kvcmp COMMAND --help).  Exits 1 naming the file and the problem."""
import re
import subprocess
import sys

import yaml

problems = []


def kvcmp_options(command):
    out = subprocess.run(["build/kvcmp"] + command.split() + ["--help"], capture_output=True, text=True)
    return set(re.findall(r"--[a-z][a-z0-9-]*", out.stdout + out.stderr))


def check_run(path, job, text):
    for line in re.findall(r"build/kvcmp ((?:report )?[a-z]+)([^\n]*)", text):
        command, rest = line
        known = kvcmp_options(command)
        for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest):
            if option not in known:
                problems.append(f"{path}: job {job}: kvcmp {command} has no option {option}")


def check(path):
    doc = yaml.safe_load(open(path))
    # YAML 1.1 reads a bare `on:` key as the boolean True.
    triggers = doc.get("on", doc.get(True))
    if not doc.get("name") or not triggers:
        problems.append(f"{path}: needs a name and an `on:` trigger")
    jobs = doc.get("jobs") or {}
    if not jobs:
        problems.append(f"{path}: no jobs")
    for name, job in jobs.items():
        if "runs-on" not in job or not job.get("steps"):
            problems.append(f"{path}: job {name} needs runs-on and steps")
        for step in job.get("steps", []):
            if ("uses" in step) == ("run" in step):
                problems.append(f"{path}: job {name}: a step needs exactly one of uses and run: {step}")
            elif "uses" in step and not re.search(r"@v?\d", step["uses"]):
                problems.append(f"{path}: job {name}: {step['uses']} is not pinned to a version")
            elif "run" in step:
                check_run(path, name, step["run"])


for path in sys.argv[1:]:
    check(path)
for p in problems:
    print(f"workflow_check: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"workflow_check: {len(sys.argv) - 1} workflows parse, their steps are well formed and their kvcmp options exist")

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
    # build/kvcmp in kvcmp's own checkout, kvcmp from PATH in action.yml.
    text = text.replace("\\\n", " ")   # a command continued on the next line
    commands = r"(?:report [a-z]+|fuzz|replay|gen|merge|bench|report)"
    for line in re.findall(r"(?:build/kvcmp|/bin/kvcmp\"|(?<![\w/.-])kvcmp) (%s)([^\n]*)" % commands, text):
        command, rest = line
        known = kvcmp_options(command)
        for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest):
            if option not in known:
                problems.append(f"{path}: job {job}: kvcmp {command} has no option {option}")


def check_action(path, doc):
    """A composite action: inputs, and steps that run a shell or use a pinned action."""
    runs = doc.get("runs") or {}
    if not doc.get("name") or runs.get("using") != "composite" or not runs.get("steps"):
        problems.append(f"{path}: a composite action needs a name, runs.using: composite and steps")
    for step in runs.get("steps", []):
        if "run" in step:
            if "shell" not in step:
                problems.append(f"{path}: a composite step that runs a command needs a shell")
            check_run(path, "action", step["run"])
        elif "uses" in step and not re.search(r"@v?\d", step["uses"]):
            problems.append(f"{path}: {step['uses']} is not pinned to a version")


def check(path):
    doc = yaml.safe_load(open(path))
    if "runs" in doc:
        check_action(path, doc)
        return
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
print(f"workflow_check: {len(sys.argv) - 1} workflows and actions parse, their steps are well formed and their kvcmp options exist")

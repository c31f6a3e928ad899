#!/usr/bin/python3
"""Plays a CI recipe the way a GitHub runner would run it, on this
machine, for make kernel-repo-check: the steps of a workflow job, or the
YAML step list of a README section, in order, in a workspace.

usage: action_play.py --action DIR --workspace DIR
                      (--workflow FILE --job NAME | --readme FILE --section TITLE)
                      [--with NAME=VALUE]... [--env-out FILE]

* `uses: kvcmp/kvcmp@...` runs DIR/action.yml, a composite action: its
  inputs are its defaults, the step's `with:` and then each --with; each
  of its steps runs when its `if:` holds, with its `env:` (expressions
  evaluated there), its `run:` script given to `bash -e -o pipefail` as
  GitHub's `shell: bash` does.  A `run:` script that holds an expression
  is refused: inputs reach scripts through env: only.
* `uses: actions/checkout@...` does nothing (the workspace is the
  checkout); `uses: actions/upload-artifact@...` lists what it would
  upload and fails when its path holds no file and it says
  `if-no-files-found: error`.  Any other action is refused.
* A workflow's own `run:` steps run in the workspace.
* GITHUB_ENV and GITHUB_PATH, written by a step, reach the next steps as
  on a runner; --env-out writes the environment the job ended with.

Expressions known: inputs.NAME, github.action_path, github.workspace,
github.run_number (1), runner.temp; conditions: always(), success(),
failure(), !cancelled(), inputs.NAME == '' and != '', joined by &&.
Anything else stops the play (exit 2), so the recipe and this player
change together.  Exit status: 0 the job passed, 1 a step failed."""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Unknown(Exception):
    pass


class Job:
    def __init__(self, action_dir, workspace):
        self.action_dir = os.path.abspath(action_dir)
        self.workspace = os.path.abspath(workspace)
        self.temp = tempfile.mkdtemp(prefix="runner-temp-")
        self.env = dict(os.environ)
        self.env.update({"GITHUB_WORKSPACE": self.workspace, "GITHUB_ACTIONS": "true", "CI": "true",
                         "RUNNER_TEMP": self.temp, "GITHUB_RUN_NUMBER": "1"})
        self.failed = False

    # ---- expressions ------------------------------------------------------

    def value(self, name, inputs):
        if name.startswith("inputs."):
            key = name[len("inputs."):]
            if inputs is None or key not in inputs:
                raise Unknown("input %s is not one of the action's" % key)
            return inputs[key]
        known = {"github.action_path": self.action_dir, "github.workspace": self.workspace, "github.run_number": "1",
                 "runner.temp": self.temp}
        if name not in known:
            raise Unknown("expression '%s'" % name)
        return known[name]

    def expand(self, text, inputs=None):
        return EXPRESSION.sub(lambda m: str(self.value(m.group(1), inputs)), str(text))

    def condition(self, text, inputs, failed):
        """A step's if:, default success()."""
        if text is None:
            return not failed
        text = str(text).strip()
        found = EXPRESSION.fullmatch(text)
        if found:
            text = found.group(1)
        result, always = True, False
        for term in (t.strip() for t in text.split("&&")):
            if term == "always()":
                always = True
            elif term == "success()":
                result = result and not failed
            elif term == "failure()":
                always, result = True, result and failed
            elif term == "!cancelled()":
                always = True
            else:
                m = re.fullmatch(r"(inputs\.[\w-]+)\s*(==|!=)\s*''", term)
                if not m:
                    raise Unknown("condition '%s'" % term)
                empty = self.value(m.group(1), inputs) == ""
                result = result and (empty if m.group(2) == "==" else not empty)
        return result and (always or not failed)

    # ---- running ----------------------------------------------------------

    def run_script(self, name, script, env, cwd):
        files = {key: os.path.join(self.temp, key.lower()) for key in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for path in files.values():
            open(path, "w").close()
        with tempfile.NamedTemporaryFile("w", suffix=".sh", dir=self.temp, delete=False) as f:
            f.write(script)
        full = dict(self.env)
        full.update(env)
        full.update(files)
        print("::step %s" % name, flush=True)
        status = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", f.name], cwd=cwd, env=full).returncode
        self.read_files(files)
        print("::step %s: %s" % (name, "ok" if status == 0 else "failed (exit %d)" % status), flush=True)
        return status == 0

    def read_files(self, files):
        with open(files["GITHUB_PATH"]) as f:
            for line in f.read().splitlines():
                if line:
                    self.env["PATH"] = line + os.pathsep + self.env.get("PATH", "")
        with open(files["GITHUB_ENV"]) as f:
            lines = f.read().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if "<<" in line and "=" not in line.split("<<", 1)[0]:
                key, delimiter = line.split("<<", 1)
                value = []
                while i < len(lines) and lines[i] != delimiter:
                    value.append(lines[i])
                    i += 1
                i += 1
                self.env[key] = "\n".join(value)
            elif "=" in line:
                key, value = line.split("=", 1)
                self.env[key] = value

    def composite(self, step, overrides):
        path = os.path.join(self.action_dir, "action.yml")
        with open(path) as f:
            action = yaml.safe_load(f)
        declared = action.get("inputs") or {}
        inputs = {k: str(v.get("default", "")) for k, v in declared.items()}
        given = dict((step.get("with") or {}))
        given.update(overrides)
        for key, value in given.items():
            if key not in declared:
                raise Unknown("the action has no input '%s'" % key)
            inputs[key] = self.expand(value)
        for key, spec in declared.items():
            if spec.get("required") and not inputs[key]:
                raise Unknown("input '%s' is required" % key)
        failed = False
        for inner in action["runs"]["steps"]:
            name = inner.get("name", "(unnamed)")
            script = inner.get("run")
            if script is None or inner.get("shell") != "bash":
                raise Unknown("action step %s: only `run:` steps with `shell: bash` are played" % name)
            if EXPRESSION.search(script):
                raise Unknown("action step %s: its run: script holds an expression; pass it through env:" % name)
            if not self.condition(inner.get("if"), inputs, failed):
                print("::step %s: skipped" % name, flush=True)
                continue
            env = {k: self.expand(v, inputs) for k, v in (inner.get("env") or {}).items()}
            if not self.run_script(name, script, env, self.workspace):
                failed = True
        return not failed

    def upload(self, step):
        options = step.get("with") or {}
        paths = [p for p in str(options.get("path", "")).split("\n") if p.strip()]
        found = []
        for p in paths:
            full = os.path.join(self.workspace, self.expand(p.strip()))
            for root, _, files in os.walk(full):
                found += [os.path.join(root, name) for name in files]
            if os.path.isfile(full):
                found.append(full)
        print("::upload %s: %d files" % (options.get("name", "artifact"), len(found)), flush=True)
        return bool(found) or options.get("if-no-files-found", "warn") != "error"

    def play(self, steps, overrides):
        for step in steps:
            name = step.get("name") or step.get("uses") or "run"
            if not self.condition(step.get("if"), None, self.failed):
                print("::step %s: skipped" % name, flush=True)
                continue
            uses = step.get("uses", "")
            if uses.startswith("kvcmp/kvcmp@"):
                ok = self.composite(step, overrides)
            elif uses.startswith("actions/checkout@"):
                ok = True
            elif uses.startswith("actions/upload-artifact@"):
                ok = self.upload(step)
            elif uses:
                raise Unknown("action %s" % uses)
            else:
                ok = self.run_script(name, self.expand(step["run"]), {k: self.expand(v) for k, v in (step.get("env") or {}).items()},
                                     self.workspace)
            self.failed = self.failed or not ok
        return not self.failed


def readme_steps(path, section):
    """The first ```yaml block under the heading `## SECTION`."""
    with open(path) as f:
        text = f.read()
    start = text.find("\n## " + section + "\n")
    if start < 0:
        raise Unknown("%s has no section '## %s'" % (path, section))
    block = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    if not block:
        raise Unknown("%s: section '%s' has no yaml block" % (path, section))
    return yaml.safe_load(block.group(1))


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    parser.add_argument("--action", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--workflow")
    parser.add_argument("--job")
    parser.add_argument("--readme")
    parser.add_argument("--section")
    parser.add_argument("--with", dest="overrides", action="append", default=[])
    parser.add_argument("--env-out")
    args = parser.parse_args()
    job = Job(args.action, args.workspace)
    try:
        if args.workflow:
            with open(args.workflow) as f:
                steps = yaml.safe_load(f)["jobs"][args.job]["steps"]
        else:
            steps = readme_steps(args.readme, args.section)
        overrides = dict(item.split("=", 1) for item in args.overrides)
        ok = job.play(steps, overrides)
    except Unknown as e:
        print("action_play: %s" % e, file=sys.stderr)
        return 2
    if args.env_out:
        with open(args.env_out, "w") as f:
            for key in ("PATH", "PKG_CONFIG_PATH", "PYTHONPATH", "KVCMP_PYTHON"):
                if key in job.env:
                    f.write("export %s=%s\n" % (key, shlex.quote(job.env[key])))
    print("::job %s" % ("passed" if ok else "failed"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

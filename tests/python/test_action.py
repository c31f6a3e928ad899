"""action.yml, the composite action a kernel repository's workflow uses,
run as GitHub runs it: each step's `${{ }}` expressions pasted into its
text, its `env:` values set, its script run by `bash -eo pipefail`.  The
inputs come from a pull request, so none may reach a script as text: a
candidate, an output folder, extra arguments or a regressions folder
holding quotes, `;` or `$(...)` is passed to kvcmp as it is and runs
nothing; an output folder that is a symbolic link is refused; every exit
status of kvcmp but 0 fails the step."""
import os
import re
import subprocess

import pytest
import yaml

from conftest import ROOT

ACTION = os.path.join(ROOT, "action.yml")
FAKE_KVCMP = """#!/bin/bash
printf '%s\\n' "$@" > "$KVCMP_FAKE_LOG"
exit "${KVCMP_FAKE_STATUS:-0}"
"""


def load_steps():
    with open(ACTION) as f:
        doc = yaml.safe_load(f)
    return doc, {step["name"]: step for step in doc["runs"]["steps"]}


def expand(text, inputs, action_path):
    """GitHub's expression substitution, for the expressions action.yml uses."""
    def value(match):
        expression = match.group(1).strip()
        if expression == "github.action_path":
            return action_path
        assert expression.startswith("inputs."), expression
        return str(inputs[expression[len("inputs."):]])
    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def run_step(tmp_path, name, **given):
    doc, steps = load_steps()
    inputs = {key: spec.get("default", "") for key, spec in doc["inputs"].items()}
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    fake = prefix / "bin" / "kvcmp"
    fake.write_text(FAKE_KVCMP)
    fake.chmod(0o755)
    inputs.update(prefix=str(prefix))
    inputs.update(given.pop("inputs"))
    step = steps[name]
    env = dict(os.environ)
    env.update({key: expand(str(text), inputs, ROOT) for key, text in step.get("env", {}).items()})
    env.update(KVCMP_FAKE_LOG=str(tmp_path / "kvcmp-argv"), KVCMP_FAKE_STATUS=str(given.get("status", 0)),
               GITHUB_ACTION_PATH=ROOT, GITHUB_PATH=str(tmp_path / "github-path"))
    script = tmp_path / "step.sh"
    script.write_text(expand(step["run"], inputs, ROOT))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=str(work), env=env,
                          capture_output=True, text=True)
    log = tmp_path / "kvcmp-argv"
    argv = log.read_text().split("\n")[:-1] if log.exists() else None
    return done, argv, work


def test_no_expression_inside_a_script():
    _, steps = load_steps()
    for name, step in steps.items():
        if "run" in step:
            assert "${{" not in step["run"], "step %r pastes an expression into its script" % name


@pytest.mark.parametrize("status", [1, 2, 3, 4, 130])
def test_hostile_inputs_reach_kvcmp_as_they_are(tmp_path, status):
    candidate = 'py:k.py:f" ; exit 0 ; "'
    out = "out $(touch PWNED) `touch PWNED2`"
    done, argv, work = run_step(tmp_path, "Fuzz the candidate", status=status,
                                inputs={"candidate": candidate, "out": out, "extra-args": "--stage v41 ;exit 0 $(touch PWNED3) *"})
    assert done.returncode == status, done.stdout + done.stderr
    assert argv is not None, "kvcmp was not run: " + done.stderr
    assert argv[:3] == ["fuzz", "--candidate", candidate], argv
    assert argv[argv.index("--out") + 1] == out and argv[argv.index("--junit") + 1] == out + "/fuzz.xml"
    assert argv[-7:] == ["--stage", "v41", ";exit", "0", "$(touch", "PWNED3)", "*"], argv
    assert not any(name.startswith("PWNED") for name in os.listdir(str(work))), os.listdir(str(work))


def test_a_passing_campaign_passes(tmp_path):
    done, argv, _ = run_step(tmp_path, "Fuzz the candidate", inputs={"candidate": "build/k.so"})
    assert done.returncode == 0 and argv[:3] == ["fuzz", "--candidate", "build/k.so"], done.stderr


def test_an_output_folder_through_a_link_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "work").mkdir()
    os.symlink(str(elsewhere), str(tmp_path / "work" / "kvcmp-out"))
    done, argv, _ = run_step(tmp_path, "Fuzz the candidate", inputs={"candidate": "build/k.so"})
    assert done.returncode != 0 and argv is None, done.stdout + done.stderr
    assert "symbolic link kvcmp-out" in done.stdout, done.stdout
    os.mkdir(str(tmp_path / "work" / "real"))
    os.symlink(str(elsewhere), str(tmp_path / "work" / "real" / "link"))
    done, argv, _ = run_step(tmp_path, "Fuzz the candidate", inputs={"candidate": "build/k.so", "out": "real/link/out"})
    assert done.returncode != 0 and argv is None and "symbolic link real/link" in done.stdout, done.stdout


def test_regressions_reach_replay_as_a_path(tmp_path):
    regressions = '--outputs-in-case"; exit 0; "'
    done, argv, _ = run_step(tmp_path, "Replay the regressions", status=1,
                             inputs={"candidate": "build/k.so", "regressions": regressions})
    assert done.returncode == 1, done.stderr
    assert argv[:3] == ["replay", "--impl", "build/k.so"] and argv[-2:] == ["--", regressions], argv

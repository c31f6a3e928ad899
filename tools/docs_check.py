#!/usr/bin/python3
"""Checks the documentation against the tree and the built kvcmp (make
docs-check, part of make test).  Run from the repository root:

    tools/docs_check.py --kvcmp build/kvcmp

- sizes: README.md under 400 lines, every docs/*.md under 800,
  ARCHITECTURE.md one screen (70 lines), and each
  docs page opens with a "## Contents" list whose links reach its headings;
- links: every relative link of README.md, SPEC.md, ARCHITECTURE.md,
  docs/*.md and measurements/README.md names a file or folder of the tree,
  and an #anchor names a heading of the page it points to; README.md links
  every docs page;
- SPEC.md stands alone: it names no path outside the repository;
- measurements: every file a page or a comment of optimized/ names exists
  (braces and * expanded), and measurements/README.md lists every file;
- options: every kvcmp option that a fenced example passes to a kvcmp
  command (build/kvcmp, kvcmp, python -m kvcmp) is one that command's
  --help lists;
- examples: every command of a ```console block ("$ COMMAND" lines) is
  run from the repository root and prints the lines shown below it ("..."
  stands for any number of lines);
- words: no tracked file outside tests/ and fixtures/ speaks of work
  sessions or numbered issues (the project speaks of itself).
Exits 1 naming each problem."""
import argparse
import glob
import os
import re
import subprocess
import sys

README_MAX, DOC_MAX, ARCHITECTURE_MAX = 400, 800, 70
PAGES = ["README.md", "SPEC.md", "ARCHITECTURE.md", "measurements/README.md"]
problems = []


def problem(text):
    problems.append(text)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_fence = False
    for line in read(path).splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence:
            continue
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def prose(text):
    """The text outside fenced blocks and inline code spans."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def links(text):
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", prose(text))


def check_links(page):
    base = os.path.dirname(page)
    for target in links(read(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(base, path)) if path else page
        if not os.path.exists(full):
            problem(f"{page}: link to {target}: no such file")
            continue
        if anchor and full.endswith(".md") and anchor not in anchors(full):
            problem(f"{page}: link to {target}: {full} has no heading #{anchor}")


def check_sizes(docs):
    n = len(read("README.md").splitlines())
    if n >= README_MAX:
        problem(f"README.md: {n} lines, the limit is {README_MAX}")
    n = len(read("ARCHITECTURE.md").splitlines())
    if n > ARCHITECTURE_MAX:
        problem(f"ARCHITECTURE.md: {n} lines, more than one screen ({ARCHITECTURE_MAX})")
    readme_links = {os.path.normpath(l.partition("#")[0]) for l in links(read("README.md"))}
    for page in docs:
        text = read(page)
        n = len(text.splitlines())
        if n >= DOC_MAX:
            problem(f"{page}: {n} lines, the limit is {DOC_MAX}")
        m = re.search(r"^## Contents\n\n((?:\s*- \[.*\n)+)", text, flags=re.M)
        if not m:
            problem(f"{page}: no '## Contents' list")
        elif not re.findall(r"\(#([^)]+)\)", m.group(1)):
            problem(f"{page}: its contents list links no heading")
        if page not in readme_links:
            problem(f"README.md does not link {page}")


def check_spec():
    text = read("SPEC.md")
    for pattern in (r"(?<!\.)\.\./", r"SEMANTICS", r"/work/", r"\bshared/"):
        for m in re.finditer(pattern, text):
            line = text.count("\n", 0, m.start()) + 1
            problem(f"SPEC.md:{line}: names a path outside the repository ({m.group(0)})")


def expand(name):
    """Brace alternatives {a,b} expanded, then globbed under measurements/."""
    m = re.search(r"\{([^{}]*)\}", name)
    if m:
        out = []
        for alternative in m.group(1).split(","):
            out += expand(name[:m.start()] + alternative + name[m.end():])
        return out
    return [name]


MEASUREMENT = r"(?:measurements/)?(20\d\d-\d\d-\d\d-[A-Za-z0-9{},*.-]*?\.(?:txt|log))"


def check_measurements(sources):
    files = {f for f in os.listdir("measurements") if f != "README.md"}
    for source in sources:
        for name in re.findall(MEASUREMENT, read(source)):
            for one in expand(name):
                if not (glob.glob(os.path.join("measurements", one)) if "*" in one else one in files):
                    problem(f"{source}: names measurements/{one}, which does not exist")
    listed = set()
    for name in re.findall(MEASUREMENT, read("measurements/README.md")):
        for one in expand(name):
            listed.update(os.path.basename(p) for p in glob.glob(os.path.join("measurements", one)))
    for f in sorted(files - listed):
        problem(f"measurements/README.md does not list {f}")


def fences(text):
    """(language, body) of every fenced block."""
    return re.findall(r"^```([a-z]*)\n(.*?)^```", text, flags=re.S | re.M)


HELP = {}


def known_options(kvcmp, command):
    if command not in HELP:
        out = subprocess.run([kvcmp] + command.split() + ["--help"], capture_output=True, text=True)
        HELP[command] = set(re.findall(r"--[a-z][a-z0-9-]*", out.stdout + out.stderr))
    return HELP[command]


def check_options(kvcmp, page):
    for language, body in fences(read(page)):
        if language in ("yaml", "python", "c", "json"):
            continue
        body = body.replace("\\\n", " ")
        for line in body.splitlines():
            m = re.search(r"(?:^|[\s/$])kvcmp\s+((?:report\s+(?:precision|parity|mutants)\b)|[a-z]+)(.*)", line)
            if not m or m.group(1) not in ("replay", "gen", "fuzz", "merge", "bench", "report") and not m.group(1).startswith("report"):
                continue
            command, rest = m.group(1), m.group(2)
            known = known_options(kvcmp, command)
            for option in re.findall(r"(?<![\w/=-])--[a-z][a-z0-9-]*", rest.split(" # ")[0]):
                if option not in known:
                    problem(f"{page}: example passes {option} to kvcmp {command}, which has no such option")


def check_console(kvcmp, page):
    for language, body in fences(read(page)):
        if language != "console":
            continue
        steps, current = [], None
        for line in body.splitlines():
            if line.startswith("$ "):
                current = (line[2:], [])
                steps.append(current)
            elif current:
                current[1].append(line)
        for command, expected in steps:
            run = re.sub(r"^build/kvcmp\b", kvcmp, command)
            out = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=300)
            if not matches((out.stdout + out.stderr).splitlines(), expected):
                problem(f"{page}: `{command}` printed\n    " + "\n    ".join((out.stdout + out.stderr).splitlines()[-20:])
                        + "\n  not\n    " + "\n    ".join(expected))


def matches(got, expected):
    if not expected:
        return not got
    if expected[0] == "...":
        return any(matches(got[i:], expected[1:]) for i in range(len(got) + 1))
    return bool(got) and got[0] == expected[0] and matches(got[1:], expected[1:])


WORDS = re.compile(r"session ?[0-9]|\bissue [0-9]+\b", re.I)


def check_words():
    try:
        files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return   # not a git checkout: nothing to list
    for path in files:
        if re.match(r"(tests|fixtures)/", path) or not os.path.isfile(path):
            continue
        try:
            text = read(path)
        except UnicodeDecodeError:
            continue
        for m in WORDS.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problem(f"{path}:{line}: '{m.group(0)}': say what the project does, not which work session or issue did it")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvcmp", default="build/kvcmp")
    args = parser.parse_args()
    kvcmp = os.path.abspath(args.kvcmp)
    docs = sorted(glob.glob("docs/*.md"))
    pages = PAGES + docs
    check_sizes(docs)
    for page in pages:
        check_links(page)
    check_spec()
    check_measurements(docs + ["README.md"] + sorted(glob.glob("optimized/*.[ch]")))
    for page in pages:
        check_options(kvcmp, page)
        check_console(kvcmp, page)
    check_words()
    for p in problems:
        print(f"docs_check: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"docs_check: README.md and {len(docs)} docs pages: sizes, contents, links, options and console examples check out")


main()

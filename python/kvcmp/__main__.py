"""python3 -m kvcmp fuzz|replay --candidate module:function ..."""
import argparse
import importlib
import os
import sys

from .case import load_case, repro_command
from .fuzzing import check, fuzz


def load_candidate(spec):
    """module:function (the module importable from sys.path, which holds
    the current directory under python3 -m)."""
    module_name, sep, function = spec.partition(":")
    if not sep or not module_name or not function:
        raise SystemExit("kvcmp: --candidate takes module:function (e.g. my_kernels:compress), not '%s'" % spec)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module_name)
    except ImportError as e:
        raise SystemExit("kvcmp: cannot import %s (%s); put its directory on PYTHONPATH" % (module_name, e))
    for part in function.split("."):
        if not hasattr(target, part):
            raise SystemExit("kvcmp: module %s has no %s (--candidate %s)" % (module_name, function, spec))
        target = getattr(target, part)
    return target


def find_cases(path):
    if os.path.isfile(os.path.join(path, "case.json")):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        if "case.json" in files:
            found.append(root)
            dirs[:] = []
    return sorted(found)


def cmd_replay(args):
    candidate = load_candidate(args.candidate)
    passed = failed = 0
    for path in args.paths:
        dirs = find_cases(path)
        if not dirs:
            print("kvcmp replay: no case directory (with case.json) under %s" % path, file=sys.stderr)
            failed += 1
        for directory in dirs:
            verdict = check(candidate, load_case(directory), args.policy)
            if verdict.failed or not args.quiet:
                print("%s %s: %s%s" % ("FAIL" if verdict.failed else "PASS", directory,
                                       verdict.kind + ": " if verdict.failed else "", verdict.detail))
            if verdict.failed:
                print("  __REPRO: " + repro_command(args.candidate, args.policy, directory))
                failed += 1
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def cmd_fuzz(args):
    candidate = load_candidate(args.candidate)
    result = fuzz(candidate, stages=args.stage, seed=args.seed, cases=args.cases, seconds=args.seconds, policy=args.policy,
                  save_dir=args.save or None, families=args.family, invalid_rate=args.invalid_rate,
                  shrink_seconds=args.shrink_seconds, max_failures=args.max_failures, only=args.only)
    return 0 if result.ok else 1


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0, not %s" % text)
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m kvcmp", description="fuzz and replay a Python candidate against kvcmp's reference")
    commands = parser.add_subparsers(dest="command", required=True)
    fuzz_parser = commands.add_parser("fuzz", help="run the candidate on generated cases")
    fuzz_parser.add_argument("--candidate", required=True, help="module:function")
    fuzz_parser.add_argument("--stage", help="variant name prefixes, comma-separated (kvcmp fuzz --list)")
    fuzz_parser.add_argument("--family", help="value family prefixes, comma-separated")
    fuzz_parser.add_argument("--seed", type=non_negative, default=1)
    count = fuzz_parser.add_mutually_exclusive_group()
    count.add_argument("--cases", type=non_negative)
    count.add_argument("--seconds", type=float)
    count.add_argument("--only", type=non_negative, help="just this case index")
    fuzz_parser.add_argument("--policy", choices=["exact", "vllm"], default="exact")
    fuzz_parser.add_argument("--save", default="kvcmp-failures", help="where shrunk failing cases go ('' = nowhere)")
    fuzz_parser.add_argument("--invalid-rate", type=non_negative, default=0, help="per mille of cases corrupted on purpose")
    fuzz_parser.add_argument("--shrink-seconds", type=float, default=5.0)
    fuzz_parser.add_argument("--max-failures", type=non_negative, default=10)
    replay_parser = commands.add_parser("replay", help="run the candidate on saved cases")
    replay_parser.add_argument("--candidate", required=True, help="module:function")
    replay_parser.add_argument("--policy", choices=["exact", "vllm"], default="exact")
    replay_parser.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    replay_parser.add_argument("paths", nargs="+", metavar="CASE")
    args = parser.parse_args(argv)
    return cmd_fuzz(args) if args.command == "fuzz" else cmd_replay(args)


if __name__ == "__main__":
    sys.exit(main())

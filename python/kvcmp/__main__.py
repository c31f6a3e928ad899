"""python -m kvcmp COMMAND ...: the kvcmp command, run by this interpreter.

The same commands and options as the ``kvcmp`` executable (``python -m
kvcmp fuzz --help``), over the libkvcmp.so this package loads; a Python
candidate is --candidate py:FILE.py:FUNCTION or py:MODULE:FUNCTION (plain
MODULE:FUNCTION is accepted), and its workers run under this interpreter,
which the __REPRO lines name.  `--candidate X` of replay means its --impl."""
import ctypes
import os
import shlex
import sys

USAGE = """usage: python -m kvcmp COMMAND [options]
  fuzz     differential fuzzing of a candidate against the reference (the campaign engine)
  replay   run case directories through a candidate and compare every byte
  gen      write generated cases as case directories (for outside implementations)
  report   precision and upstream-parity reports
  bench    throughput
Run 'python -m kvcmp COMMAND --help' for a command's options."""


def _python_candidate(value):
    if value.startswith("py:") or value in ("opt", "opt-avx512", "opt-avx2", "ref", "optimized", "reference") or ".so" in value:
        return value
    return "py:" + value if ":" in value else value


def _rewrite(command, argv):
    """--candidate MODULE:FUNCTION -> py:...; replay's --candidate is --impl;
    fuzz's workers run under this interpreter unless --python says otherwise."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in ("--candidate", "--impl") and (eq or i + 1 < len(argv)):
            value = value if eq else argv[i + 1]
            i += 0 if eq else 1
            out += ["--impl" if command == "replay" else name, _python_candidate(value)]
        else:
            out.append(arg)
        i += 1
    if command == "fuzz" and "--python" not in out:
        out = ["--python", sys.executable] + out
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    # libgomp reads its wait policy once, when it loads: set it before the
    # library does (idle spinning threads would steal the workers' cores).
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "passive"
        os.execv(sys.executable, [sys.executable, "-m", "kvcmp"] + argv)
    from .fuzzing import worker_environment
    os.environ.update(worker_environment())
    from ._lib import lib
    command, options = argv[0], _rewrite(argv[0], argv[1:])
    invocation = shlex.join([sys.executable, "-m", "kvcmp"]).encode()
    words = (ctypes.c_char_p * (len(options) + 1))(*[o.encode() for o in options], None)
    sys.stdout.flush()
    if command == "fuzz":
        return lib.kvc_campaign_main(invocation, len(options), words)
    return lib.kvc_ffi_command(invocation, command.encode(), len(options), words)


if __name__ == "__main__":
    sys.exit(main())

"""The outside runner of examples/torch_eager: runs eager.candidate on
every case directory kvcmp gen wrote and writes what kvcmp replay
--outputs reads (SPEC.md section 10): OUT/CASE/NAME.npy for each output
and OUT/CASE/status.json, "ran", "rejected" (the candidate raised
kvcmp.Rejected) or "crashed" (any other exception, with its message).  A
process that dies outright leaves no status.json, and replay fails the
case for it.

    build/kvcmp gen --seed 1 --cases 200 --stage v4.compress --out cases/
    KVCMP_DEVICE=cuda PYTHONPATH=python:examples/torch_eager \\
        python3 examples/torch_eager/run_cases.py cases/ out/
    build/kvcmp replay --outputs out/ cases/
"""
import sys

from kvcmp.case import run_outside_tree

import eager


def main(argv):
    if len(argv) != 3:
        print("usage: run_cases.py CASES_DIR OUT_DIR", file=sys.stderr)
        return 2
    counts = run_outside_tree(eager.candidate, argv[1], argv[2])
    print("run_cases: %d ran, %d rejected, %d crashed; judge with: build/kvcmp replay --outputs %s %s"
          % (counts["ran"], counts["rejected"], counts["crashed"], argv[2], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

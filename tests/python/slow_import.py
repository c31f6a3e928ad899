"""A Python candidate whose import takes SLOW_IMPORT_SECONDS (a framework
that loads slowly): tests/python/test_fail_closed.py."""
import os
import time

import kvcmp

time.sleep(float(os.environ.get("SLOW_IMPORT_SECONDS", "5")))


def candidate(case):
    return kvcmp.reference(case)

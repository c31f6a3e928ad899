"""A Python candidate whose import raises with terminal control codes in
its message: tests/python/test_fail_closed.py."""
raise RuntimeError("\x1b[2J\x1b[31mscreen cleared by the candidate")


def candidate(case):
    return None

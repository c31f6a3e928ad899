"""Python candidates that misbehave once (the first call that finds no
marker file in $KVCMP_TEST_MARKS creates it and misbehaves; every other
call is correct), and one that loses its device for good."""
import ctypes
import os
import sys
import threading
import time

import numpy as np

import kvcmp


def _first_time(name):
    path = os.path.join(os.environ["KVCMP_TEST_MARKS"], name)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def _once(name, misbehave):
    def candidate(case):
        if _first_time(name):
            return misbehave(case)
        return kvcmp.reference(case)
    candidate.__name__ = candidate.__qualname__ = name
    candidate.stages = ["v41.rope_quant_insert"]
    return candidate


_kept = []


def _grow(case):
    _kept.append(np.ones(400 << 20, np.uint8))   # 400 MB kept past the call
    return kvcmp.reference(case)


hangs = _once("hangs", lambda case: time.sleep(3600))
aborts = _once("aborts", lambda case: os.abort())
segfaults = _once("segfaults", lambda case: ctypes.string_at(0))
exits_0 = _once("exits_0", lambda case: sys.exit(0))
underscore_exits_0 = _once("underscore_exits_0", lambda case: os._exit(0))
raises_system_exit = _once("raises_system_exit", lambda case: (_ for _ in ()).throw(SystemExit(3)))
raises_keyboard_interrupt = _once("raises_keyboard_interrupt", lambda case: (_ for _ in ()).throw(KeyboardInterrupt()))
wrong_dtype = _once("wrong_dtype", lambda case: {k: v.astype(np.float32) for k, v in kvcmp.reference(case).items()})
returns_string = _once("returns_string", lambda case: "done")
leaves_thread = _once("leaves_thread", lambda case: (threading.Thread(target=time.sleep, args=(3600,)).start(),
                                                      kvcmp.reference(case))[1])
grows = _once("grows", _grow)

_device_dead = False


def chosen(case):
    """The input on which the simulated device faults: a batch that writes a row at position 5."""
    return any(p == 5 and s >= 0 for p, s in zip(case.inputs["positions"], case.inputs["slot_mapping"]))


def sticky_device_error(case):
    """Faults on the chosen input and on every call after it in the same
    process, like a CUDA illegal memory access."""
    global _device_dead
    if _device_dead or chosen(case):
        _device_dead = True
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return kvcmp.reference(case)


sticky_device_error.stages = ["v41.rope_quant_insert"]


def offers_nothing(case):
    return kvcmp.reference(case)


offers_nothing.stages = []


def correct(case):
    return kvcmp.reference(case)


def logs_block_tables(case):
    """Correct, and logs each call's norm weight (the case) and block table
    (the physical pages) to $KVCMP_TEST_CALL_LOG."""
    with open(os.environ["KVCMP_TEST_CALL_LOG"], "a") as f:
        f.write("%s|%s\n" % (case.inputs["norm_weight"].tobytes().hex()[:64], case.inputs["block_table"].tobytes().hex()))
    return kvcmp.reference(case)


logs_block_tables.stages = ["v4.compress"]

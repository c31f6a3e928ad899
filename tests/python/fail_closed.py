"""Python candidates for tests/python/test_fail_closed.py: each computes
the reference's outputs and then does one thing the campaign must not let
through."""
import os
import time

import numpy as np

import kvcmp


def zeroes_positions(case):
    """Right outputs, then positions zeroed in place (an input)."""
    out = kvcmp.reference(case)
    case.tensors["positions"][...] = 0
    return out


def zeroes_latent(case):
    """Right outputs, then the latent input zeroed (v41 inserts)."""
    out = kvcmp.reference(case)
    case.tensors["latent"][...] = 0
    return out


zeroes_latent.stages = ["v41.rope_quant_insert", "v41.rope_plain_insert"]


def validates_no_second_stage(case):
    """The reference, except that v4.compress and v41.rope_quant_insert
    accept what they should reject (they write nothing and return)."""
    try:
        return kvcmp.reference(case)
    except kvcmp.Rejected:
        if case.stage in ("v4.compress", "v41.rope_quant_insert"):
            return None
        raise


def reference(case):
    return kvcmp.reference(case)


def closes_descriptors_and_hangs(case):
    """Closes every descriptor it can (kvcmp's pipes among them) and sleeps."""
    os.closerange(0, 1024)
    time.sleep(3600)


_called = False


def compiles_on_first_call(case):
    """The first call in its process sleeps COMPILE_SECONDS (a JIT compiling); the
    others are the reference."""
    global _called
    if not _called:
        _called = True
        time.sleep(float(os.environ.get("FAIL_CLOSED_COMPILE_SECONDS", "1.5")))
    return kvcmp.reference(case)


compiles_on_first_call.stages = ["v41.rope_quant_insert"]


def _first_time(name):
    path = os.path.join(os.environ["FAIL_CLOSED_MARKS"], name)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def writes_a_stray_reply(case):
    """Once per campaign, a reply line of its own into the worker's reply
    stream (descriptor 4) before the worker's."""
    if _first_time("stray"):
        os.write(4, b'{"status": "ok"}\n')
    return kvcmp.reference(case)


writes_a_stray_reply.stages = ["v41.rope_quant_insert"]


def leaves_a_setsid_helper(case):
    """Once per campaign: a grandchild in a session of its own (out of the
    worker's process group) that writes FAIL_CLOSED_LATE_FILE 3 s later."""
    if _first_time("helper"):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3)
                with open(os.environ["FAIL_CLOSED_LATE_FILE"], "w") as f:
                    f.write("written after kvcmp ended\n")
            os._exit(0)
    return kvcmp.reference(case)


leaves_a_setsid_helper.stages = ["v41.rope_quant_insert"]


def returns_a_float(case):
    """A plain Python float for its output, not an array."""
    return {"kv_cache": 0.5}


returns_a_float.stages = ["v41.rope_quant_insert"]


_geometries = {}


def hangs_on_a_known_geometry(case):
    """A kernel already compiled for this geometry hangs: a call whose
    geometry (the stage's parameters, the kv cache's shape and strides, the
    cos_sin rows, the token count's class: 1, a multiple of 16, other) an
    earlier call of this process had with another token count sleeps
    FAIL_CLOSED_HANG_SECONDS, once per token count; the others are the
    reference."""
    tensors = case.tensors
    tokens = tensors["positions"].shape[0]
    token_class = 1 if tokens == 1 else 16 if tokens % 16 == 0 else 0
    key = (case.stage, tuple(sorted(case.params.items())), tensors["kv_cache"].shape, tensors["kv_cache"].strides,
           tensors["cos_sin"].shape, token_class)
    seen = _geometries.setdefault(key, set())
    if seen and tokens not in seen:   # its first call of this token count: a later call (a thread check) runs
        seen.add(tokens)
        time.sleep(float(os.environ.get("FAIL_CLOSED_HANG_SECONDS", "30")))
    seen.add(tokens)
    return kvcmp.reference(case)


hangs_on_a_known_geometry.stages = ["v41.rope_quant_insert"]

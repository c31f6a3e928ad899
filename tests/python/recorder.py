"""A correct Python candidate that logs what each stage call carries:
the stage, the params and, per tensor, its dtype, shape, whether the
stage writes it and a digest of its contents (as a C-order array), one
JSON line per call into $KVCMP_TEST_CALL_LOG."""
import hashlib
import json
import os
import struct

import numpy as np

import kvcmp


def describe(stage, params, tensors, outputs):
    """The record of one call (or of one case's inputs): comparable as JSON."""
    shown = {}
    for key, value in params.items():
        if key == "eps":   # as fp32 bits: NaN compares, -0.0 differs from 0.0
            value = "0x%08x" % struct.unpack("<I", struct.pack("<f", float(value)))[0]
        shown[key] = value
    return {"stage": stage, "params": shown,
            "tensors": {name: [np.dtype(array.dtype).str, list(array.shape), name in outputs,
                               hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()]
                        for name, array in tensors.items()}}


def record(case):
    line = describe(case.stage, case.params, case.inputs, set(case.output_names))
    with open(os.environ["KVCMP_TEST_CALL_LOG"], "a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return kvcmp.reference(case)

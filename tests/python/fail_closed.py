"""Python candidates for tests/python/test_fail_closed.py: each computes
the reference's outputs and then does one thing the campaign must not let
through."""
import os

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

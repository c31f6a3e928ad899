"""Candidates the tests fuzz: a correct one and planted bugs."""
import numpy as np

import kvcmp


def correct(case):
    return kvcmp.reference(case)


def only_plain_insert(case):
    return kvcmp.reference(case)


only_plain_insert.stages = ["v41.rope_plain_insert"]


def last_latent_bit_flipped(case):
    """One bit of the last latent value of every batch is wrong (stages
    that write a latent); other stages are right."""
    out = kvcmp.reference(case)
    if "latent" in out and out["latent"].size:
        out["latent"].reshape(-1)[-1] ^= 1
    return out


def rope_bit_flipped_at_position_5(case):
    """The low bit of the first RoPE value of the token at position 5 is
    wrong (V4.1 plain bf16 rows): found only when position 5 closes."""
    out = kvcmp.reference(case)
    cache = out["kv_cache"].reshape(-1, 512)
    for p, slot in zip(case.inputs["positions"], case.inputs["slot_mapping"]):
        if p == 5 and slot >= 0 and (p + 1) % case.params["compress_ratio"] == 0:
            cache[slot, 448] ^= 1
    return out


def in_place(case):
    """Writes the outputs into case.inputs and returns None."""
    for name, value in kvcmp.reference(case).items():
        case.inputs[name][...] = value


def through_torch(case):
    """Copies the reference's outputs into the padded torch tensors."""
    import torch
    t = case.to_torch("cpu", page_padding=128)
    for name, value in kvcmp.reference(case).items():
        target = t[name]
        if target.dtype == torch.bfloat16:
            target.copy_(kvcmp.bf16_to_torch(value))
        else:
            target.copy_(torch.from_numpy(value))
    return t


def writes_padding(case):
    t = case.to_torch("cpu", page_padding=64)
    name = case.output_names[-1]
    storage = t._storage[name][0]
    storage[-1] = 0
    return t


def raises(case):
    raise ZeroDivisionError("planted")


def raises_with_terminal_codes(case):
    raise ValueError("\x1b[2J\x1b[31mcleared\x07")


def rejects_everything(case):
    raise kvcmp.Rejected("planted refusal")


def quant_insert_only(case):
    """Correct, offering v41.rope_quant_insert alone."""
    return kvcmp.reference(case)


quant_insert_only.stages = ["v41.rope_quant_insert"]

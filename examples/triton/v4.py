"""Triton kernels for the V4 stages, written from SPEC.md 4.1 and 4.2, as a
kvcmp candidate: v4.save_partial_states and v4.compress (D = 512
fp8_ds_mla and D = 128 fp8_indexer, R = 4 and 128).  Offering both also
runs v4.forward and the history.v4 variants: the campaign calls the two
stages in order on one batch, as a model's step does.  (--stage takes
prefixes: "v4" would also pick the v41 variants, which are then skipped.)

    kvcmp fuzz --candidate py:examples/triton/v4.py:candidate --stage offered --invalid-rate 0

The kernels are in v4_triton.py, one program per token, one launch per
stage call.  They write straight into the paged caches with the page
stride the campaign chose (padding included), and take every integer they
specialise on (R, head dim, page rows, page stride) as a tl.constexpr:
with --geometry-pool a campaign compiles a few times, not per case.  They
do not validate their inputs (SPEC.md 8), hence --invalid-rate 0.  A
campaign compiles into OUT/triton-cache unless TRITON_CACHE_DIR is set:
set it to share the compiles between campaigns (tools/device_triton.sh
does; docs/speed.md has what that is worth on an H100).

KVCMP_TRITON_TWIN=1 runs v4_twin.py instead: the same programs in NumPy
on the CPU, step for step (no torch, no Triton), which a campaign holds
to the reference byte for byte where no GPU is at hand:

    KVCMP_TRITON_TWIN=1 kvcmp fuzz --candidate py:examples/triton/v4.py:candidate \\
        --stage offered --invalid-rate 0 --cases 300

Per call the host copies each input to the device once and the written
cache back once (pages and padding, so kvcmp sees every byte); the
state cache that compress only reads goes over without its padding.
"""
import os

import numpy as np

TWIN = os.environ.get("KVCMP_TRITON_TWIN") == "1"

if TWIN:
    import v4_twin as kernels

    def _dev(array):
        return np.array(array).reshape(-1)              # a copy, flat: the programs see pointers

    def _host(value, like):
        return value.reshape(like.shape)

    def _scratch(n):
        return np.zeros(n, np.float32)
else:
    import torch
    import v4_triton as kernels

    DEVICE = os.environ.get("KVCMP_DEVICE", "cuda")

    def _dev(array):
        return torch.from_numpy(np.ascontiguousarray(array)).to(DEVICE)

    def _host(value, like):
        return value.cpu().numpy().reshape(like.shape)

    def _scratch(n):
        return torch.empty(n, dtype=torch.float32, device=DEVICE)


def _pages(cache, item):
    """The whole memory of a paged cache [pages, rows, width] whose pages lie
    cache.strides[0] bytes apart: [pages, stride] in items, padding included."""
    pages, stride = cache.shape[0], cache.strides[0]
    whole = np.lib.stride_tricks.as_strided(cache, shape=(pages, stride // item), strides=(stride, item))
    return whole, stride // item


def _save_partial_states(case):
    x, R, D = case.inputs, case.params["compress_ratio"], case.params["head_dim"]
    W = (2 if R == 4 else 1) * D
    tokens = len(x["positions"])
    state, stride = _pages(x["state_cache"].view(np.int32), 4)
    if tokens == 0:
        return
    ints = np.stack([x["positions"], x["slot_mapping"]], axis=1)
    cache = _dev(state)
    kernels.save_partial_states[(tokens,)](
        _dev(x["kv"].view(np.int32)), _dev(x["score"].view(np.int32)), _dev(x["ape"].view(np.int32)), _dev(ints),
        cache, R=R, W=W, BS=x["state_cache"].shape[1], STRIDE=stride, enable_fp_fusion=False)
    state[...] = _host(cache, state)


def _compress(case):
    x, R, D = case.inputs, case.params["compress_ratio"], case.params["head_dim"]
    coff = 2 if R == 4 else 1
    tokens = len(x["positions"])
    kv, stride = _pages(x["kv_cache"], 1)
    if tokens == 0:
        return
    block_table = x["block_table"]
    ints = np.stack([x["positions"], x["slot_mapping"], x["kv_slot_mapping"],
                     x["token_to_req"].astype(np.int64) * block_table.shape[1]], axis=1)
    cache = _dev(kv)
    kernels.compress[(tokens,)](
        _dev(x["state_cache"].view(np.int32)), _dev(block_table), _dev(ints), _dev(x["norm_weight"]),
        _dev(x["cos_sin"]), cache, _scratch(tokens * D), float(np.float32(case.params["eps"])),
        R=R, D=D, W=coff * D, WIN=coff * R, H2=D if R == 4 else 0, BS=x["state_cache"].shape[1],
        KB=x["kv_cache"].shape[1], KV_STRIDE=stride, enable_fp_fusion=False)
    kv[...] = _host(cache, kv)                         # every byte back, the padding too: kvcmp checks it


def candidate(case):
    if case.stage == "v4.save_partial_states":
        _save_partial_states(case)
    else:
        _compress(case)


candidate.stages = ["v4.save_partial_states", "v4.compress"]

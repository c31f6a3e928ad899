"""Four planted bugs of four classes around a torch candidate (the
reference's outputs carried through torch), the way a user wraps a kernel."""
import torch, kvcmp


def candidate(case):
    out = {n: kvcmp.bf16_to_torch(v) if v.dtype.itemsize == 2 else torch.from_numpy(v) for n, v in kvcmp.reference(case).items()}
    if case.stage == "v41.rope_plain_insert" and case.params["cache_dtype"] == "bf16":
        kv, R = out["kv_cache"].view(-1, 512), case.params["compress_ratio"]
        rows = [int(s) for p, s in zip(case.inputs["positions"], case.inputs["slot_mapping"]) if s >= 0 and (p + 1) % R == 0]
        kv.view(torch.int16)[[r for r in rows if torch.isfinite(kv[r, 0])], 0] ^= 1     # 1: the last bit of a finite value
    if case.stage == "v41.save_compress_norm" and case.tokens > 12:
        raise ValueError("planted: more than 12 tokens")                                  # 2: an exception on long batches
    if case.stage == "v4.compress" and case.params["head_dim"] == 128:
        out["kv_cache"] = out["kv_cache"].float()                                         # 3: the wrong dtype
    if case.stage == "v41.rope_plain_insert" and case.params["cache_dtype"] == "fp8_e4m3" and case.tokens == 1:
        raise kvcmp.Rejected("planted: a single token")                                   # 4: a valid case rejected
    return out

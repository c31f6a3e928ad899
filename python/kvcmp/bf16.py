"""bf16 as numpy uint16 bits (numpy has no bfloat16), SPEC.md section 1:
round to nearest even on the 16 discarded bits, subnormals rounded like
any value, every NaN -> 0x7FC0; widening appends 16 zero bits."""
import numpy as np

BF16_NAN = 0x7FC0


def f32_to_bf16(x):
    """float32 array (or anything np.float32 accepts) -> uint16 bf16 bits."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (bits >> 16) & 1
    rounded = ((bits + np.uint32(0x7FFF) + lsb) >> 16).astype(np.uint16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, np.uint16(BF16_NAN), rounded).astype(np.uint16)


def bf16_to_f32(bits):
    """uint16 bf16 bits -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_to_torch(bits, device=None):
    """uint16 bf16 bits -> torch.bfloat16 tensor with the same bits."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint16).view(np.int16)).view(torch.bfloat16)
    return t.to(device) if device is not None else t


def torch_to_bf16(tensor):
    """torch.bfloat16 tensor (any device) -> uint16 bf16 bits."""
    import torch
    if tensor.dtype != torch.bfloat16:
        raise TypeError("torch_to_bf16 takes a torch.bfloat16 tensor, not %s" % tensor.dtype)
    return tensor.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16).copy()

"""Torch tensors as vLLM's callers pass them, and outputs read back.

* Paged caches (state_cache, kv_cache) are [pages, rows, row width]
  tensors whose pages are `page_stride` apart: with page_padding > 0 the
  tensor is a strided view into a larger buffer, the padding after every
  page filled with canary bytes 0xA5 that no kernel may touch (checked
  when the outputs are read back).  A fp8_ds_mla / fp8_indexer / fp8_e4m3
  cache is uint8 (the bytes of the page layout, SPEC.md section 3), a bf16
  cache torch.bfloat16, a state cache float32.
* Every uint16 tensor of a case (latent, the V4.1 norm weight, a bf16
  cache) is bf16 bits and becomes torch.bfloat16 with the same bits.
* Index tensors (block_table, slot mappings, positions, token_to_req,
  query_start_loc) keep their dtype (int32 / int64) and go to the device
  too, like everything else.
"""
import numpy as np

from .bf16 import bf16_to_torch, torch_to_bf16

CANARY = 0xA5


class PaddingTouched(AssertionError):
    """A kernel wrote into the padding between cache pages."""


class TorchCase:
    """case.to_torch(device, page_padding): tensors by name (tc["kv_cache"]
    or tc.kv_cache), the case's params, and outputs() to read the stage's
    outputs back in the case layout."""

    def __init__(self, case, device="cpu", page_padding=0):
        import torch
        self.case = case
        self.stage = case.stage
        self.params = case.params
        self.device = torch.device(device)
        self.page_padding = int(page_padding)
        self.tensors = {}
        self._storage = {}
        for name, array in case.inputs.items():
            self.tensors[name] = self._tensor(name, array)

    def _tensor(self, name, array):
        import torch
        if name in PAGED_TENSORS_3D and array.ndim == 3 and self.page_padding:
            return self._padded(name, array)
        if array.dtype == np.uint16:
            return bf16_to_torch(array, self.device)
        return torch.from_numpy(np.ascontiguousarray(array).copy()).to(self.device)

    def _padded(self, name, array):
        import torch
        pages, rows, width = array.shape
        item = array.dtype.itemsize
        if self.page_padding % item:
            raise ValueError("page_padding %d is not a multiple of %s's element size %d" % (self.page_padding, name, item))
        page_elems, pad_elems = rows * width, self.page_padding // item
        storage = torch.full(((page_elems + pad_elems) * pages * item,), CANARY, dtype=torch.uint8, device=self.device)
        dtype = {np.dtype("<f4"): torch.float32, np.dtype("<u2"): torch.bfloat16, np.dtype("u1"): torch.uint8}[array.dtype]
        typed = storage.view(dtype)
        view = typed.as_strided((pages, rows, width), (page_elems + pad_elems, width, 1))
        source = bf16_to_torch(array) if array.dtype == np.uint16 else torch.from_numpy(np.ascontiguousarray(array))
        view.copy_(source.to(self.device))
        self._storage[name] = (storage, page_elems * item, (page_elems + pad_elems) * item, pages)
        return view

    def __getitem__(self, name):
        return self.tensors[name]

    def __getattr__(self, name):
        tensors = self.__dict__.get("tensors", {})
        if name in tensors:
            return tensors[name]
        raise AttributeError(name)

    def _padding_intact(self, name):
        storage, page_bytes, stride, pages = self._storage[name]
        raw = storage.cpu().numpy().reshape(pages, stride)[:, page_bytes:]
        bad = np.nonzero(raw != CANARY)
        if bad[0].size:
            raise PaddingTouched("%s: byte %d of the padding after page %d was written (0x%02x, canary 0x%02x)"
                                 % (name, bad[1][0], bad[0][0], raw[bad[0][0], bad[1][0]], CANARY))

    def outputs(self):
        """The stage's outputs as numpy arrays in the case layout (bf16 as
        uint16 bits); raises PaddingTouched if page padding was written."""
        out = {}
        for name in self.case.output_names:
            t = self.tensors[name]
            if name in self._storage:
                self._padding_intact(name)
            out[name] = torch_to_bf16(t) if str(t.dtype) == "torch.bfloat16" else t.detach().cpu().contiguous().numpy().copy()
        return out


PAGED_TENSORS_3D = ("state_cache", "kv_cache")

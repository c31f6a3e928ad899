"""kvcmp for Python: fuzz and gate a Python (numpy, PyTorch, Triton...)
implementation of the DeepSeek-V4 / V4.1 KV-cache compressor stages bit
for bit against kvcmp's reference (SPEC.md), through libkvcmp.so.

The candidate calling convention
--------------------------------
A candidate is a callable ``candidate(case) -> outputs``:

* ``case`` is a :class:`kvcmp.Case` whose tensors are fresh, writable
  numpy copies: ``case.stage`` ("v4.compress", ...), ``case.params``
  (compress_ratio, head_dim, eps, and cache_dtype where the stage has
  one), ``case.inputs`` {name: array} in the case layout (SPEC.md 3 and
  10: paged caches [pages, rows, row width], bf16 as uint16 bits), and
  ``case.to_torch(device, page_padding=0)`` for the same tensors as torch
  tensors on a device, as vLLM's callers pass them.
* It returns the stage's outputs (``case.output_names``), named like the
  inputs ("kv_cache", "state_cache", "latent"), as a dict of numpy arrays
  or torch tensors (any device; torch.bfloat16 for bf16), or the TorchCase
  it got from ``case.to_torch`` (its outputs are read back), or None when
  it wrote its outputs in place into ``case.inputs``.
* It raises :class:`kvcmp.Rejected` to refuse an input (SPEC.md section 8;
  only needed with ``invalid_rate > 0``).

The API
-------
``load_case(dir)``, ``save_case(dir, stage, params, tensors)``,
``generate(stage, seed, index, family=None)`` (case i of seed S, the same
case ``kvcmp fuzz --seed S`` and ``kvcmp gen`` produce),
``reference(case)``, ``compare(case, outputs, policy="exact")``,
``shrink(case, still_fails)``, ``fuzz(candidate, stages=..., seed=...,
cases=... | seconds=..., policy=..., out=...)`` (libkvcmp's campaign
engine, the candidate in supervised worker interpreters; returns a
FuzzSummary with .signatures, .cases, .cases_per_second), ``stages_of``,
``DeviceLost`` (raise it when your device is unusable),
``kvcmp.testing.assert_matches_reference`` (one case, in this process)
and ``assert_fuzz_passes``, bf16 helpers ``f32_to_bf16``,
``bf16_to_f32``, ``bf16_to_torch``, ``torch_to_bf16``.  From a shell:
``python -m kvcmp fuzz --candidate py:FILE.py:FUNCTION ...`` and
``python -m kvcmp replay --candidate py:FILE.py:FUNCTION CASE...``.

A candidate says which stages it offers with a ``stages`` attribute
(``candidate.stages = ["v4.compress"]``); without one it offers all.

libkvcmp.so is found at $KVCMP_LIB, beside this package (a wheel carries
it), at build/libkvcmp.so of the checkout holding this package, at
PREFIX/lib of the prefix ``make install`` put it in, or through the
dynamic linker.
"""
from ._lib import Error
from .bf16 import bf16_to_f32, bf16_to_torch, f32_to_bf16, torch_to_bf16
from .case import (Case, CompareResult, Rejected, compare, generate, load_case, reference, save_case, shrink)
from ._worker import DeviceLost
from ._candidate import candidate_spec
from .fuzzing import FuzzSummary, Signature, fuzz, stages_of
from .torch_case import PaddingTouched, TorchCase
from . import testing

__all__ = ["Case", "CompareResult", "DeviceLost", "Error", "FuzzSummary", "PaddingTouched", "Rejected", "Signature",
           "TorchCase", "bf16_to_f32", "bf16_to_torch", "candidate_spec", "compare", "f32_to_bf16", "fuzz", "generate",
           "load_case", "reference", "save_case", "shrink", "stages_of", "testing", "torch_to_bf16"]

"""The Python API: every spec case round-trips (load, save, compare), bf16
helpers, torch tensors as vLLM passes them, the assertion message."""
import glob
import json
import os
import sys

import numpy as np
import pytest

import kvcmp
import candidates


def spec_cases(shared):
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(shared, "spec-cases", "*", "*", "case.json")))
    assert len(dirs) >= 100, "spec cases missing under %s" % shared
    return dirs


def test_every_spec_case_round_trips(shared, tmp_path):
    for directory in spec_cases(shared):
        case = kvcmp.load_case(directory)
        with open(os.path.join(directory, "case.json")) as f:
            assert case.stage == json.load(f)["stage"]
        names = sorted(f[:-4] for f in os.listdir(directory) if f.endswith(".npy"))
        assert sorted(case.tensors) == names, directory
        for name in names:
            assert case.tensors[name].tobytes() == np.load(os.path.join(directory, name + ".npy")).tobytes(), (directory, name)
        copy = tmp_path / os.path.basename(directory)
        kvcmp.save_case(str(copy), case.stage, case.params, case.tensors, source=case.source, meta=case.meta)
        back = kvcmp.load_case(str(copy))
        assert back.params == case.params and back.stage == case.stage
        for name in names:
            a, b = case.tensors[name], back.tensors[name]
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (directory, name)
        result = kvcmp.compare(back, case.expected)
        assert result.passed and not result.differs and result.bytes_compared > 0, (directory, result.summary)


def test_one_bit_difference_is_classified(shared):
    case = kvcmp.load_case(os.path.join(shared, "spec-cases", "v4.compress", "d512_r4_a_s0"))
    written = np.nonzero(case.expected["kv_cache"].reshape(-1) != case.inputs["kv_cache"].reshape(-1))[0]
    at = int(written[0])   # the first byte the stage writes: a NoPE code
    pages, rows, width = case.inputs["kv_cache"].shape
    page, row, column = at // (rows * width), at % (rows * width) // 576, at % (rows * width) % 576
    assert column < 448
    got = {"kv_cache": case.expected["kv_cache"].copy()}
    got["kv_cache"].reshape(-1)[at] ^= 1
    result = kvcmp.compare(case, got)
    assert result.failed and not result
    assert list(result.regions) == ["NoPE code"]
    region = result.regions["NoPE code"]
    assert (region.differing, region.failing) == (1, 1)
    assert result.first.tensor == "kv_cache" and result.first.offset == at and result.first.width == 1
    assert result.first.got[0] == result.first.expected[0] ^ 1
    assert result.first.expected[0] == case.expected["kv_cache"].reshape(-1)[at]
    assert "page %d row %d nope[%d] (NoPE code)" % (page, row, column) in result.first.where
    assert result.repro.startswith("%s -m kvcmp replay --impl py:" % sys.executable), result.repro
    vllm = kvcmp.compare(case, got, policy="vllm")
    assert vllm.passed and vllm.differs and vllm.regions["NoPE code"].failing == 0
    with pytest.raises(kvcmp.Error, match="unknown policy 'close'"):
        kvcmp.compare(case, got, policy="close")
    missing = kvcmp.compare(case, {})
    assert missing.failed and missing.missing == "kv_cache"
    with pytest.raises(TypeError, match="tensor kv_cache: dtype float64"):
        kvcmp.compare(case, {"kv_cache": np.zeros(3)})


def test_reference_and_generate(shared):
    case = kvcmp.generate("v4.forward/d128", seed=5, index=2)
    assert case.info["variant"].startswith("v4.forward/d128") and case.info["name"].startswith("fuzz-s5-c2-v4.forward_d128")
    assert case.output_names == ["state_cache", "kv_cache"]
    again = kvcmp.generate(["v4.forward/d128"], seed=5, index=2)
    assert all(v.tobytes() == again.tensors[k].tobytes() for k, v in case.tensors.items())
    assert kvcmp.generate("history", seed=1, index=0) is None
    with pytest.raises(kvcmp.Error, match="variant 'v9'"):
        kvcmp.generate("v9", 1, 0)
    invalid = kvcmp.generate("v41.rope_quant_insert", seed=6, index=0, invalid_rate=1000)   # a corruption the stage reads
    assert invalid.info["invalid"]
    with pytest.raises(kvcmp.Rejected, match="the reference rejects this case"):
        kvcmp.reference(invalid)
    assert kvcmp.compare(invalid, {}).reference_status != 0


def test_bf16_helpers():
    import torch
    special = np.array([0.0, -0.0, 1.0, 1.00390625, 1.005859375, 3.4e38, -3.4e38, 1e-40, -1e-45, np.inf, -np.inf], dtype=np.float32)
    rng = np.random.default_rng(1)
    values = np.concatenate([special, rng.standard_normal(10000).astype(np.float32),
                             rng.integers(0, 2**32, 10000, dtype=np.uint32).view(np.float32)])
    values = values[~np.isnan(values)]
    ours = kvcmp.f32_to_bf16(values)
    theirs = kvcmp.torch_to_bf16(torch.from_numpy(values).to(torch.bfloat16))
    assert np.array_equal(ours, theirs), "RNE like torch's conversion on every non-NaN value"
    assert kvcmp.f32_to_bf16(np.float32(1.00390625))[()] == 0x3F80, "a tie rounds to even"
    assert kvcmp.f32_to_bf16(np.float32(1.01171875))[()] == 0x3F82
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32).view(np.float32)
    assert list(kvcmp.f32_to_bf16(nans)) == [0x7FC0] * 4
    bits = rng.integers(0, 2**16, 1000, dtype=np.uint16)
    assert np.array_equal(kvcmp.f32_to_bf16(kvcmp.bf16_to_f32(bits)[~np.isnan(kvcmp.bf16_to_f32(bits))]),
                          bits[~np.isnan(kvcmp.bf16_to_f32(bits))])
    assert np.array_equal(kvcmp.torch_to_bf16(kvcmp.bf16_to_torch(bits)), bits)
    with pytest.raises(TypeError):
        kvcmp.torch_to_bf16(torch.zeros(2))


def test_to_torch_pages_padding_and_read_back():
    import torch
    case = kvcmp.generate("v4.compress/d512", seed=3, index=1)
    t = case.to_torch("cpu", page_padding=128)
    cache = t.kv_cache
    pages, rows, width = case.inputs["kv_cache"].shape
    assert cache.dtype == torch.uint8 and tuple(cache.shape) == (pages, rows, width)
    assert cache.stride() == (rows * width + 128, width, 1), "page padding through the page stride"
    assert t.state_cache.dtype == torch.float32 and t.block_table.dtype == torch.int32
    assert t["positions"].dtype == torch.int64
    assert np.array_equal(t.outputs()["kv_cache"], case.inputs["kv_cache"])
    v41 = kvcmp.generate("v41.save_compress_norm", seed=3, index=0).to_torch("cpu")
    assert v41.latent.dtype == torch.bfloat16 and v41.norm_weight.dtype == torch.bfloat16
    with pytest.raises(AttributeError):
        v41.no_such_tensor
    with pytest.raises(kvcmp.PaddingTouched, match="padding after page"):
        candidates.writes_padding(case).outputs()
    with pytest.raises(ValueError, match="not a multiple"):
        kvcmp.generate("v4.save_partial_states", 1, 0).to_torch("cpu", page_padding=2)


def test_candidate_return_conventions():
    for name in ("correct", "in_place", "through_torch"):
        candidate = getattr(candidates, name)
        result = kvcmp.fuzz(candidate, cases=60, save_dir=None, quiet=True)
        assert result.ok and result.cases > 40, (name, result.report())


def test_assert_matches_reference(tmp_path):
    case = kvcmp.generate("v41.rope_plain_insert/bf16", seed=2, index=0)
    outputs = kvcmp.reference(case)
    assert kvcmp.testing.assert_matches_reference(case, outputs).passed
    outputs["kv_cache"] = outputs["kv_cache"].copy()
    slot = int(case.inputs["slot_mapping"][case.inputs["slot_mapping"] >= 0][0])
    outputs["kv_cache"].reshape(-1, 512)[slot, 500] ^= 1
    with pytest.raises(AssertionError) as raised:
        kvcmp.testing.assert_matches_reference(case, outputs, candidate="my_kernels:insert", save_dir=str(tmp_path))
    message = str(raised.value)
    assert "RoPE value x1 (max 1 step)" in message and "first: kv_cache row" in message
    saved = os.path.join(str(tmp_path), case.info["name"])
    assert "__REPRO: %s -m kvcmp replay --impl py:my_kernels:insert --policy exact %s" % (sys.executable, saved) in message
    assert os.path.exists(os.path.join(saved, "kv_cache.out.npy"))

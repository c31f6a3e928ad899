"""Writes stay inside: a tensor name is a plain file name, so
save_case cannot write outside the case directory; an existing case is
replaced whole; the outside runner's files are written aside and never
through a link planted in the case directory."""
import os

import numpy as np
import pytest

import kvcmp
from kvcmp.case import OUTSIDE_GOT_STATUS_FILE, run_outside

BAD_NAMES = ["../../x", "a/b", "..", ".hidden", "a..b", "", "line\nbreak", "bell\x07"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_save_case_refuses_a_tensor_name_that_is_not_plain(tmp_path, name):
    case = kvcmp.generate("v41.rope_quant_insert", seed=1, index=0)
    tensors = dict(case.tensors)
    tensors[name] = np.zeros(3, dtype=np.float32)
    target = tmp_path / "deep" / "er" / "case"
    with pytest.raises(ValueError) as raised:
        kvcmp.save_case(str(target), case.stage, case.params, tensors)
    assert repr(name) in str(raised.value) and "plain file name" in str(raised.value)
    assert not os.path.exists(str(tmp_path / "deep")), "something was written"
    assert not os.path.exists(str(tmp_path / "deep" / "x.npy"))


def test_save_case_replaces_an_existing_case_whole(tmp_path):
    case = kvcmp.generate("v41.rope_quant_insert", seed=1, index=0)
    target = str(tmp_path / "case")
    kvcmp.save_case(target, case)
    stale = os.path.join(target, "kv_cache.got.npy")
    np.save(stale, np.zeros(2, dtype=np.uint8))
    inputs_only = {k: v for k, v in case.tensors.items() if not k.endswith(".out")}
    kvcmp.save_case(target, case.stage, case.params, inputs_only)
    assert sorted(os.listdir(target)) == sorted(["case.json"] + [k + ".npy" for k in inputs_only])
    assert os.listdir(str(tmp_path)) == ["case"], "a temporary directory was left"


def test_save_case_refuses_a_symbolic_link_and_a_folder_of_other_things(tmp_path):
    case = kvcmp.generate("v41.rope_quant_insert", seed=1, index=0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    with pytest.raises(kvcmp.Error, match="symbolic link"):
        kvcmp.save_case(str(link), case)
    assert os.listdir(str(elsewhere)) == []
    (elsewhere / "notes.txt").write_text("mine")
    with pytest.raises(kvcmp.Error, match="holds something besides a case"):
        kvcmp.save_case(str(elsewhere), case)
    assert os.listdir(str(elsewhere)) == ["notes.txt"]


def test_run_outside_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    case = kvcmp.generate("v41.rope_quant_insert", seed=1, index=0)
    case_dir = str(tmp_path / "case")
    kvcmp.save_case(case_dir, case)
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    names = [k[:-4] for k in case.tensors if k.endswith(".out")]
    for name in names:
        os.symlink(str(victim), os.path.join(case_dir, name + ".got.npy"))
    os.symlink(str(victim), os.path.join(case_dir, OUTSIDE_GOT_STATUS_FILE))
    assert run_outside(kvcmp.reference, case_dir) == "ran"
    assert victim.read_text() == "untouched"
    for name in names:
        path = os.path.join(case_dir, name + ".got.npy")
        assert not os.path.islink(path) and np.load(path).tobytes() == case.tensors[name + ".out"].tobytes()
    assert not os.path.islink(os.path.join(case_dir, OUTSIDE_GOT_STATUS_FILE))
    assert not [f for f in os.listdir(case_dir) if f.startswith(".")], "a temporary file was left"


def test_run_outside_reports_an_output_name_that_is_not_plain(tmp_path):
    case = kvcmp.generate("v41.rope_quant_insert", seed=1, index=0)
    case_dir = str(tmp_path / "cases" / "case")
    kvcmp.save_case(case_dir, case)
    status = run_outside(lambda c: {"../../escaped": np.zeros(2, dtype=np.float32)}, case_dir, str(tmp_path / "out"))
    assert status == "crashed"
    assert not os.path.exists(str(tmp_path / "escaped.npy")) and not os.path.exists(str(tmp_path / "cases" / "escaped.npy"))

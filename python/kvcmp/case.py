"""Cases (SPEC.md section 10), the generator, the reference and the
classified comparison, over libkvcmp's flat C API (include/kvcmp/ffi.h)."""
import ctypes
import json
import os
import sys
import tempfile

import numpy as np

from . import _lib
from ._candidate import candidate_spec
from ._lib import lib, Error
from .bf16 import torch_to_bf16

# numpy dtype of each .npy dtype code; tensors of other dtypes are refused.
_NUMPY_DTYPES = [np.dtype("<f4"), np.dtype("<i8"), np.dtype("<i4"), np.dtype("<u2"), np.dtype("u1")]
# Bit-for-bit aliases a caller may hand over (int16 bits are bf16 bits).
_ALIASES = {np.dtype("<i2"): np.dtype("<u2"), np.dtype("i1"): np.dtype("u1")}

PAGED_TENSORS = ("state_cache", "kv_cache")
# The stages whose params hold eps (an RMSNorm); the others' params have
# none, as their stage calls and case.json files have none
# (docs/candidates.md, the stage-call table).
EPS_STAGES = ("v4.compress", "v4.forward", "v41.save_compress_norm", "v41.forward")


class Rejected(Exception):
    """An implementation refuses its input (SPEC.md section 8).  The
    reference raises it for a case it rejects; a candidate raises it to
    reject a case (the fuzzer's invalid cases must be rejected)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class _Handle:
    """An owned kvc_ffi_case pointer."""

    def __init__(self, pointer):
        self.pointer = pointer

    def __del__(self):
        if self.pointer:
            lib.kvc_ffi_case_free(self.pointer)
            self.pointer = None


def _check_tensor_name(name):
    """A tensor's name becomes a file name in a case directory
    (NAME.npy): it must be a plain one, so that no name writes outside."""
    text = str(name)
    if (not text or len(text.encode()) > 255 or text.startswith(".") or "/" in text or ".." in text
            or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)):
        raise ValueError("tensor name %r is not a plain file name (no '/', no '..', no leading '.', no control "
                         "characters): rename the tensor" % (name,))


def _write_aside(path, write):
    """write(file) into a new temporary beside path (O_EXCL: a link planted
    at its name is never followed), then renamed over path: a kill leaves
    the old file or none, and a link at path is replaced, never written
    through."""
    directory, base = os.path.split(path)
    fd, temp = tempfile.mkstemp(dir=directory or ".", prefix="." + base + ".partial-")
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def _as_array(name, value):
    """numpy array or torch tensor -> a C-order numpy array of a case dtype."""
    _check_tensor_name(name)
    if not isinstance(value, np.ndarray):
        # A torch tensor means torch is loaded: never import it here (a
        # float or a list would pay for torch's import, seconds, in a
        # worker's timed call).
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            value = torch_to_bf16(value) if value.dtype == torch.bfloat16 else value.detach().cpu().contiguous().numpy()
        else:
            value = np.asarray(value)
    dtype = _ALIASES.get(value.dtype, value.dtype)
    if dtype not in _NUMPY_DTYPES:
        raise TypeError("tensor %s: dtype %s is not a case dtype (float32, int64, int32, uint16 = bf16 bits, uint8)"
                        % (name, value.dtype))
    return np.ascontiguousarray(value).view(dtype)


class Case:
    """A case: stage, params, tensors (inputs NAME, expected results
    NAME.out, outside outputs NAME.got), as numpy arrays in the case
    layout (paged caches [pages, rows, row width], bf16 as uint16 bits).

    ``info`` says where a generated case came from (seed, index, variant,
    family, invalid); ``path`` where it was loaded from or saved to."""

    def __init__(self, stage, params, tensors, source="", meta=None, path=None, info=None):
        self.stage = stage
        self.params = dict(params)
        self.tensors = {name: _as_array(name, value) for name, value in tensors.items()}
        self.source = source
        self.meta = meta
        self.path = path
        self.info = info or {}
        self._handle = None

    def __repr__(self):
        return "Case(%s, %s, %s)" % (self.stage, self.params, sorted(self.tensors))

    @property
    def inputs(self):
        return {k: v for k, v in self.tensors.items() if not k.endswith((".out", ".got"))}

    @property
    def expected(self):
        """The NAME.out tensors, keyed NAME."""
        return {k[:-4]: v for k, v in self.tensors.items() if k.endswith(".out")}

    @property
    def output_names(self):
        """Names of the tensors the stage writes, e.g. ["state_cache", "kv_cache"]."""
        names = lib.kvc_ffi_output_names(self.handle()).decode()
        return names.split(",") if names else []

    @property
    def tokens(self):
        return int(self.tensors["positions"].shape[0]) if "positions" in self.tensors else 0

    def copy(self):
        """A deep copy (writable arrays)."""
        return Case(self.stage, self.params, {k: v.copy() for k, v in self.tensors.items()}, self.source, self.meta,
                    self.path, dict(self.info))

    def handle(self):
        """The C handle of this case, built once (treat tensors as read-only after)."""
        if self._handle is None:
            self._handle = _Handle(_build_handle(self.stage, self.params, self.tensors, self.source, self.meta))
        return self._handle.pointer

    def to_torch(self, device="cpu", page_padding=0):
        """The inputs as torch tensors on `device`, as vLLM's callers pass
        them (see kvcmp.torch_case.TorchCase)."""
        from .torch_case import TorchCase
        return TorchCase(self, device, page_padding)


def _build_handle(stage, params, tensors, source="", meta=None):
    err = _lib.error_buffer()
    h = lib.kvc_ffi_case_create(stage.encode(), int(params.get("compress_ratio", 0)), int(params.get("head_dim", 0)),
                                float(params.get("eps", 0.0)), (params.get("cache_dtype") or "").encode(), err, len(err))
    _lib.check(h, err)
    owned = _Handle(h)
    for name, array in tensors.items():
        a = _as_array(name, array)
        code = _NUMPY_DTYPES.index(a.dtype)
        shape = (ctypes.c_int64 * 4)(*a.shape)
        ok = lib.kvc_ffi_tensor_put(h, name.encode(), code, a.ndim, shape, a.ctypes.data, a.nbytes, err, len(err)) == 0
        _lib.check(ok, err)
    meta_text = json.dumps(meta) if isinstance(meta, (dict, list)) else (meta or "")
    _lib.check(lib.kvc_ffi_case_set_source(h, (source or "").encode(), meta_text.encode(), err, len(err)) == 0, err)
    owned.pointer = None   # the caller owns it now
    return h


def _case_from_handle(h, path=None, info=None):
    """A Case holding copies of a handle's tensors (the handle may be borrowed)."""
    ratio, head_dim, eps, dtype = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_float(), ctypes.c_char_p()
    lib.kvc_ffi_case_params(h, ctypes.byref(ratio), ctypes.byref(head_dim), ctypes.byref(eps), ctypes.byref(dtype))
    stage = lib.kvc_ffi_case_stage(h).decode()
    params = {"compress_ratio": ratio.value, "head_dim": head_dim.value}
    if stage in EPS_STAGES:
        params["eps"] = float(np.float32(eps.value))
    if dtype.value:
        params["cache_dtype"] = dtype.value.decode()
    tensors = {}
    code, ndim, shape, nbytes = ctypes.c_int(), ctypes.c_int(), (ctypes.c_int64 * 4)(), ctypes.c_int64()
    for i in range(lib.kvc_ffi_tensor_count(h)):
        name = lib.kvc_ffi_tensor_name(h, i)
        lib.kvc_ffi_tensor_info(h, name, ctypes.byref(code), ctypes.byref(ndim), shape)
        data = lib.kvc_ffi_tensor_data(h, name, ctypes.byref(nbytes))
        dims = tuple(shape[k] for k in range(ndim.value))
        if nbytes.value:
            raw = (ctypes.c_uint8 * nbytes.value).from_address(data)
            array = np.frombuffer(raw, dtype=_NUMPY_DTYPES[code.value]).reshape(dims).copy()
        else:
            array = np.zeros(dims, dtype=_NUMPY_DTYPES[code.value])
        tensors[name.decode()] = array
    meta = lib.kvc_ffi_case_meta(h).decode()
    case = Case(stage, params, tensors, lib.kvc_ffi_case_source(h).decode(),
                json.loads(meta) if meta else None, path, info)
    return case


def load_case(directory):
    """Reads a case directory (case.json and NAME.npy files)."""
    err = _lib.error_buffer()
    h = lib.kvc_ffi_case_load(os.fsencode(directory), err, len(err))
    _lib.check(h, err)
    owned = _Handle(h)
    case = _case_from_handle(h, path=str(directory))
    case._handle = owned
    return case


def save_case(directory, stage, params=None, tensors=None, source="python", meta=None):
    """Writes a case directory; stage may also be a Case (then params and
    tensors come from it).  Returns the saved Case.  The directory is
    written aside and renamed into place; an existing case directory is
    replaced whole, anything else there (a symbolic link, a folder of
    other files) is refused with kvcmp.Error.  Tensor names must be plain
    file names (ValueError otherwise)."""
    if isinstance(stage, Case):
        case = stage
        stage, params, tensors, source, meta = case.stage, case.params, case.tensors, case.source or source, case.meta
    h = _Handle(_build_handle(stage, params or {}, tensors or {}, source, meta))
    err = _lib.error_buffer()
    _lib.check(lib.kvc_ffi_case_save(h.pointer, os.fsencode(directory), err, len(err)) == 0, err)
    saved = Case(stage, params or {}, tensors or {}, source, meta, path=str(directory))
    saved._handle = h
    return saved


def generate(stage=None, seed=1, index=0, family=None, invalid_rate=0, geometry_pool=0):
    """Case `index` of seed `seed`: the case `kvcmp fuzz --seed SEED
    --stage STAGE --family FAMILY --invalid-rate INVALID_RATE
    --geometry-pool GEOMETRY_POOL` (and `kvcmp gen` with the same options)
    runs as its case INDEX.  stage and family are comma-separated name
    prefixes or lists ("v4.compress", "v41.rope_quant_insert",
    "v4.compress/d512/r4"; None = all), invalid_rate is per mille.  A
    campaign of a Python candidate draws its page geometries from a pool
    of 4 unless told otherwise: its case INDEX is this one with
    geometry_pool=4.  Returns None for a multi-step history variant."""
    stages = _join(stage)
    families = _join(family)
    info = _lib.GenInfo()
    err = _lib.error_buffer()
    h = lib.kvc_ffi_generate_pooled(int(seed), int(index), stages.encode(), families.encode(), int(invalid_rate),
                                    int(geometry_pool), ctypes.byref(info), err, len(err))
    if not h:
        if info.history:
            return None
        raise Error(err.value.decode())
    owned = _Handle(h)
    details = {"seed": int(seed), "index": int(index), "stages": stages, "families": families,
               "invalid_rate": int(invalid_rate), "variant": info.variant.decode(), "family": info.family.decode(),
               "invalid": info.invalid.decode(), "name": info.name.decode()}
    case = _case_from_handle(h, info=details)
    case._handle = owned
    return case


def _join(items):
    if items is None:
        return ""
    return items if isinstance(items, str) else ",".join(items)


def reference(case):
    """The reference's outputs on the case's inputs: {name: array} in the
    case layout.  Raises Rejected when the reference rejects the case."""
    out = ctypes.c_void_p()
    err = _lib.error_buffer()
    status = lib.kvc_ffi_reference(case.handle(), ctypes.byref(out), err, len(err))
    if status != 0:
        raise Rejected("the reference rejects this case: " + err.value.decode(errors="replace"), status)
    owned = _Handle(out.value)
    return _case_from_handle(owned.pointer).tensors


class Region:
    """Differences in one region (NoPE code, scale byte, RoPE value...)."""

    def __init__(self, name, differing, failing, max_steps):
        self.name, self.differing, self.failing = name, differing, failing
        self.max_steps = float("inf") if max_steps == 2**63 - 1 else max_steps   # inf: NaN vs number, untouched row

    def __repr__(self):
        return "Region(%r, differing=%d, failing=%d, max_steps=%s)" % (self.name, self.differing, self.failing, self.max_steps)


class FirstElement:
    """The first failing element: tensor, byte offset, width, region,
    both sides' bytes (little-endian as stored), and where in words."""

    def __init__(self, report):
        self.tensor = report.first_tensor.decode()
        self.offset = report.first_offset
        self.width = report.first_width
        self.region = _lib.REGION_NAMES[report.first_region]
        self.expected = bytes(report.first_expected[:self.width])
        self.got = bytes(report.first_got[:self.width])
        self.where = report.first.decode()

    def __repr__(self):
        return "FirstElement(%s)" % self.where


class CompareResult:
    """The classified comparison of an implementation's outputs ("got")
    with the reference's ("expected") on one case."""

    def __init__(self, case, report, policy, candidate=None):
        self.case = case
        self.policy = policy
        self.failed = bool(report.failed)
        self.passed = not self.failed
        self.differs = bool(report.differs)
        self.reference_status = report.reference_status
        self.missing = report.missing_name.decode() if report.missing else None
        self.regions = {name: Region(name, report.differing[i], report.failing[i], report.max_steps[i])
                        for i, name in enumerate(_lib.REGION_NAMES) if report.differing[i]}
        self.bytes_compared = report.bytes_compared
        self.first = FirstElement(report) if report.has_first else None
        self.summary = report.summary.decode()
        self.candidate = candidate

    @property
    def repro(self):
        """The command that replays the case (once it is saved)."""
        if not self.case.path:
            return None
        return repro_command(self.candidate, self.policy, self.case.path)

    def __bool__(self):
        return self.passed

    def message(self):
        lines = ["%s [%s]: %s" % ("PASS" if self.passed else "FAIL", self.case.stage, self.summary or "bit-exact")]
        if self.first:
            lines.append("  first: " + self.first.where)
        if self.case.info.get("variant"):
            i = self.case.info
            lines.append("  case %d of seed %d (variant %s, family %s)" % (i["index"], i["seed"], i["variant"], i["family"]))
        if self.case.path and self.failed:
            lines.append("  case saved in " + self.case.path)
            lines.append("  __REPRO: " + self.repro)
        return "\n".join(lines)

    __str__ = message


def candidate_name(candidate):
    """module:function of a callable (or the string itself)."""
    if candidate is None:
        return "MODULE:FUNCTION"
    if isinstance(candidate, str):
        return candidate
    return "%s:%s" % (getattr(candidate, "__module__", "?"), getattr(candidate, "__qualname__", getattr(candidate, "__name__", "?")))


def repro_command(candidate, policy, path):
    """The command that replays the case at path through candidate, with
    this interpreter (whose python -m kvcmp also runs the candidate)."""
    import shlex
    import sys
    try:
        spec = candidate_spec(candidate) if candidate is not None else "py:FILE.py:FUNCTION"
    except ValueError:
        spec = "py:" + candidate_name(candidate)
    return "%s -m kvcmp replay --impl %s --policy %s %s" % (shlex.quote(sys.executable), spec, policy, path)


def compare(case, outputs, policy="exact", candidate=None):
    """Compares outputs ({name: numpy array or torch tensor}, named like
    the inputs: "kv_cache") with the reference's on the case's inputs,
    under policy "exact" (every byte) or "vllm" (SPEC.md 9.12)."""
    got = {name: value for name, value in dict(outputs).items()}
    h = _Handle(_build_handle(case.stage, case.params, got))
    report = _lib.Report()
    err = _lib.error_buffer()
    _lib.check(lib.kvc_ffi_compare(case.handle(), h.pointer, policy.encode(), ctypes.byref(report), err, len(err)) == 0, err)
    return CompareResult(case, report, policy, candidate)


def shrink(case, still_fails, seconds=5.0):
    """The C shrinker (fewer requests and tokens, simpler values) on a
    copy of case, keeping each reduction for which still_fails(Case) is
    true.  Returns (smaller Case, tokens before, tokens after)."""
    h = _Handle(_build_handle(case.stage, case.params, case.inputs, case.source, case.meta))
    errors = []

    def bridge(candidate_handle, _context):
        try:
            return 1 if still_fails(_case_from_handle(candidate_handle, info=case.info)) else 0
        except Exception as e:   # a broken predicate must not be taken for a failure
            errors.append(e)
            return 0

    callback = _lib.STILL_FAILS(bridge)
    before, after = ctypes.c_int64(), ctypes.c_int64()
    lib.kvc_ffi_shrink(h.pointer, callback, None, float(seconds), ctypes.byref(before), ctypes.byref(after))
    smaller = _case_from_handle(h.pointer, info=case.info)
    return smaller, before.value, after.value


# ---- outside runners (kvcmp gen -> your kernel -> kvcmp replay --outputs) ----

OUTSIDE_STATUS_FILE = "status.json"           # OUTPUTS/CASE/status.json
OUTSIDE_GOT_STATUS_FILE = "status.got.json"   # beside NAME.got.npy in the case directory
OUTSIDE_STATES = ("ran", "rejected", "crashed")


def write_status(directory, status, message="", got=False):
    """Writes an outside runner's status file into directory (SPEC.md
    section 10): {"status": "ran" | "rejected" | "crashed", "message": ...}
    as status.json (got=True: status.got.json, beside NAME.got.npy in a
    case directory).  Written aside and renamed, so a runner killed
    mid-write leaves no status, which kvcmp replay counts as a failure."""
    if status not in OUTSIDE_STATES:
        raise ValueError("status must be one of %s, not %r" % (", ".join(OUTSIDE_STATES), status))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, OUTSIDE_GOT_STATUS_FILE if got else OUTSIDE_STATUS_FILE)
    text = json.dumps({"status": status, "message": str(message)}) + "\n"
    _write_aside(path, lambda f: f.write(text.encode()))
    return path


def _call_candidate(candidate, case):
    """candidate(case) on a writable copy of the inputs -> {name: output},
    by the package's calling convention (see kvcmp's docstring)."""
    from .torch_case import TorchCase
    work = Case(case.stage, case.params, {k: v.copy() for k, v in case.inputs.items()}, case.source, case.meta, case.path,
                dict(case.info))
    result = candidate(work)
    if result is None:
        return {name: work.tensors[name] for name in case.output_names}
    if isinstance(result, TorchCase):
        return result.outputs()
    return {name: (value.outputs()[name] if isinstance(value, TorchCase) else value) for name, value in dict(result).items()}


def run_outside(candidate, case_dir, outputs_dir=None):
    """Runs candidate(case) on the case directory case_dir the way an
    outside runner does for ``kvcmp replay --outputs``: its outputs go to
    outputs_dir/CASE/NAME.npy and the status to outputs_dir/CASE/status.json
    (outputs_dir None: NAME.got.npy and status.got.json in case_dir, which
    only ``kvcmp replay --outputs-in-case`` reads).

    The status is "ran" (outputs written first, the status last),
    "rejected" when the candidate raises kvcmp.Rejected (nothing written),
    or "crashed" with the exception when it raises anything else.  A
    process that dies outright writes no status, and kvcmp replay fails
    the case for it.  Returns the status."""
    name = os.path.basename(os.path.normpath(str(case_dir)))
    target = os.path.join(str(outputs_dir), name) if outputs_dir is not None else str(case_dir)
    got = outputs_dir is None
    status_path = os.path.join(target, OUTSIDE_GOT_STATUS_FILE if got else OUTSIDE_STATUS_FILE)
    if os.path.exists(status_path):
        os.remove(status_path)   # an earlier run's status must not speak for this one
    try:
        case = load_case(str(case_dir))
        outputs = _call_candidate(candidate, case)
        arrays = {k: _as_array(k, v) for k, v in dict(outputs).items()}
    except Rejected as e:
        write_status(target, "rejected", str(e), got)
        return "rejected"
    except Exception as e:   # the runner's own failure, reported, never raised
        import traceback
        frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        where = " (at %s:%d)" % (frame.filename, frame.lineno) if frame else ""
        write_status(target, "crashed", "%s: %s%s" % (type(e).__name__, e, where), got)
        return "crashed"
    os.makedirs(target, exist_ok=True)
    for key, array in arrays.items():
        _write_aside(os.path.join(target, key + (".got.npy" if got else ".npy")), lambda f, a=array: np.save(f, a))
    write_status(target, "ran", "", got)
    return "ran"


def run_outside_tree(candidate, cases_dir, outputs_dir):
    """run_outside on every case directory under cases_dir (as kvcmp gen
    writes them), outputs under outputs_dir.  Returns {status: count}."""
    counts = {s: 0 for s in OUTSIDE_STATES}
    for root, dirs, files in os.walk(str(cases_dir)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "case.json" in files:
            dirs[:] = []
            counts[run_outside(candidate, root, outputs_dir)] += 1
    return counts

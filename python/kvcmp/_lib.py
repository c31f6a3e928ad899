"""ctypes binding of include/kvcmp/ffi.h (libkvcmp.so).

The library is found, in order, at $KVCMP_LIB, beside this file (a wheel
built by ``make wheel`` carries it), at build/libkvcmp.so of the checkout
this package lives in (python/kvcmp/../../build), at PREFIX/lib of the
prefix ``make install PREFIX=...`` put this package in
(PREFIX/share/kvcmp/python/kvcmp), and through the dynamic linker.
"""
import ctypes
import ctypes.util
import os

ABI_VERSION = 1
SOVERSION = 1   # the Makefile's KVCMP_SOVERSION: make install's libkvcmp.so.1
REGIONS = 8  # KVC_FFI_REGIONS

# .npy dtype codes of kvcmp/npy.h, and their numpy names.
DTYPES = ["<f4", "<i8", "<i4", "<u2", "|u1"]


class Report(ctypes.Structure):
    """kvc_ffi_report; its size is checked against the library's."""
    _fields_ = [
        ("failed", ctypes.c_int),
        ("differs", ctypes.c_int),
        ("reference_status", ctypes.c_int),
        ("missing", ctypes.c_int),
        ("missing_name", ctypes.c_char * 64),
        ("differing", ctypes.c_int64 * REGIONS),
        ("failing", ctypes.c_int64 * REGIONS),
        ("max_steps", ctypes.c_int64 * REGIONS),
        ("bytes_compared", ctypes.c_int64),
        ("has_first", ctypes.c_int),
        ("first_tensor", ctypes.c_char * 48),
        ("first_offset", ctypes.c_int64),
        ("first_width", ctypes.c_int),
        ("first_expected", ctypes.c_uint8 * 4),
        ("first_got", ctypes.c_uint8 * 4),
        ("first_region", ctypes.c_int),
        ("first", ctypes.c_char * 320),
        ("summary", ctypes.c_char * 640),
    ]


class GenInfo(ctypes.Structure):
    _fields_ = [
        ("variant", ctypes.c_char * 64),
        ("family", ctypes.c_char * 32),
        ("invalid", ctypes.c_char * 96),
        ("history", ctypes.c_int),
        ("name", ctypes.c_char * 128),
    ]


STILL_FAILS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _candidates():
    env = os.environ.get("KVCMP_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libkvcmp.so")
    yield os.path.join(here, "..", "..", "build", "libkvcmp.so")
    parts = here.split(os.sep)
    if parts[-4:] == ["share", "kvcmp", "python", "kvcmp"]:   # an installed prefix
        yield os.sep.join(parts[:-4] + ["lib", "libkvcmp.so.%d" % SOVERSION])
    found = ctypes.util.find_library("kvcmp")
    if found:
        yield found
    yield "libkvcmp.so.1"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise OSError("kvcmp: cannot load libkvcmp.so; tried " + "; ".join(tried) +
                  ". Build it with `make lib` in the kvcmp checkout, or set KVCMP_LIB=/path/to/libkvcmp.so")


def _declare(lib):
    P, S, I, I64, F = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
    E = [ctypes.c_char_p, ctypes.c_size_t]  # error buffer, size
    table = {
        "kvc_ffi_abi_version": (I, []),
        "kvc_ffi_case_create": (P, [S, ctypes.c_int32, ctypes.c_int32, F, S] + E),
        "kvc_ffi_case_load": (P, [S] + E),
        "kvc_ffi_case_save": (I, [P, S] + E),
        "kvc_ffi_case_free": (None, [P]),
        "kvc_ffi_case_stage": (S, [P]),
        "kvc_ffi_case_params": (None, [P, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
                                       ctypes.POINTER(F), ctypes.POINTER(S)]),
        "kvc_ffi_case_source": (S, [P]),
        "kvc_ffi_case_meta": (S, [P]),
        "kvc_ffi_case_set_source": (I, [P, S, S] + E),
        "kvc_ffi_tensor_count": (I, [P]),
        "kvc_ffi_tensor_name": (S, [P, I]),
        "kvc_ffi_tensor_info": (I, [P, S, ctypes.POINTER(I), ctypes.POINTER(I), ctypes.POINTER(I64)]),
        "kvc_ffi_tensor_data": (P, [P, S, ctypes.POINTER(I64)]),
        "kvc_ffi_tensor_put": (I, [P, S, I, I, ctypes.POINTER(I64), P, I64] + E),
        "kvc_ffi_output_names": (S, [P]),
        "kvc_ffi_generate": (P, [ctypes.c_uint64, I64, S, S, I, ctypes.POINTER(GenInfo)] + E),
        "kvc_ffi_generate_pooled": (P, [ctypes.c_uint64, I64, S, S, I, I, ctypes.POINTER(GenInfo)] + E),
        "kvc_ffi_reference": (I, [P, ctypes.POINTER(P)] + E),
        "kvc_ffi_report_size": (ctypes.c_size_t, []),
        "kvc_ffi_region_count": (I, []),
        "kvc_ffi_region_name": (S, [I]),
        "kvc_ffi_compare": (I, [P, P, S, ctypes.POINTER(Report)] + E),
        "kvc_ffi_shrink": (I, [P, STILL_FAILS, P, ctypes.c_double, ctypes.POINTER(I64), ctypes.POINTER(I64)]),
        "kvc_campaign_main": (I, [S, I, ctypes.POINTER(S)]),
        "kvc_ffi_command": (I, [S, S, I, ctypes.POINTER(S)]),
    }
    for name, (restype, argtypes) in table.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    if lib.kvc_ffi_abi_version() != ABI_VERSION:
        raise OSError("kvcmp: libkvcmp's ffi ABI is version %d, this package speaks %d (rebuild with make lib)"
                      % (lib.kvc_ffi_abi_version(), ABI_VERSION))
    if lib.kvc_ffi_report_size() != ctypes.sizeof(Report):
        raise OSError("kvcmp: kvc_ffi_report is %d bytes in libkvcmp, %d here (package and library out of step)"
                      % (lib.kvc_ffi_report_size(), ctypes.sizeof(Report)))
    return lib


lib = _declare(_load())
# The file the library was loaded from: a worker interpreter loads the same one.
LIB_PATH = os.path.abspath(lib._name) if os.sep in lib._name else lib._name
REGION_NAMES = [lib.kvc_ffi_region_name(i).decode() for i in range(lib.kvc_ffi_region_count())]


class Error(Exception):
    """A refusal of the kvcmp library (bad tensor, unknown stage...)."""


def error_buffer():
    return ctypes.create_string_buffer(512)


def check(ok, buf):
    if not ok:
        raise Error(buf.value.decode(errors="replace"))

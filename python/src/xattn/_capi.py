"""The C library through ctypes: loading it, its structs and its functions.

Only the public API (include/xattn.h, xattn_reference.h, xattn_cuda.h) is
bound. The structs below mirror the header field by field; at load time the
library reports the size of each struct it fills (their ``struct_size``), and a
library whose sizes do not match this module is refused with a message, rather
than read wrongly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import operator
import os
import sys
from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint,
    c_uint16,
    c_uint64,
    c_void_p,
)
from pathlib import Path

from ._errors import input_error

# ---- enums (values never change once released, xattn.h) -------------------

STATUS_NAMES = {
    0: "OK",
    -1: "INVALID_ARGUMENT",
    -2: "INVALID_DTYPE",
    -3: "INVALID_SHAPE",
    -4: "INVALID_STRIDE",
    -5: "OUT_OF_BOUNDS",
    -6: "INVALID_LENGTHS",
    -7: "SIZE_OVERFLOW",
    -8: "OUT_OF_MEMORY",
    -9: "UNSUPPORTED",
    -10: "BACKEND_UNAVAILABLE",
    -11: "DEVICE_NOT_FOUND",
    -12: "BACKEND",
    -13: "BUILD_FAILED",
    -14: "WRONG_CONTEXT",
    -15: "BUSY",
    -16: "IO",
    -17: "INTERNAL",
}
STATUS = {name: code for code, name in STATUS_NAMES.items()}

DTYPES = {"f32": 0, "f16": 1, "bf16": 2}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# K/V-only dtypes: the library's codes (records name them); fp8 is not bound here yet.
Q8_0 = 5
# fp8 K/V caches (k and v only; q and o stay f32/f16/bf16)
FP8_DTYPES = {"fp8e4m3": 3, "fp8e5m2": 4}
DTYPE_NAMES.update({3: "fp8e4m3", 4: "fp8e5m2", Q8_0: "q8_0"})
DTYPE_SIZES = {"f32": 4, "f16": 2, "bf16": 2}

BACKENDS = {"auto": -1, "cpu": 0, "opencl": 1, "cuda": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}

ALGOS = {"auto": 0, "naive": 1, "flash": 2, "splitkv": 3}
ALGO_NAMES = {v: k for k, v in ALGOS.items()}

ALIGN_TOP_LEFT = 0
ALIGN_BOTTOM_RIGHT = 1

OPT_NUM_THREADS = 1
OPT_MEMORY_LIMIT = 2
OPT_CPU_SIMD = 3
OPT_POISON = 4

EXPORT_FORMATS = {"json": 0, "csv": 1, "trace": 2}

DEVICE_TYPES = {0: "other", 1: "cpu", 2: "gpu", 3: "accelerator"}


# ---- structs ------------------------------------------------------------------


class Tensor(Structure):
    _fields_ = [
        ("buffer", c_void_p),
        ("offset", c_size_t),
        ("dtype", c_int),
        ("shape", c_int64 * 4),
        ("strides", c_int64 * 4),
    ]


class AttnDesc(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("q", Tensor),
        ("k", Tensor),
        ("v", Tensor),
        ("o", Tensor),
        ("lse", Tensor),
        ("bias", Tensor),
        ("scale", c_float),
        ("softcap", c_float),
        ("alibi_slopes", POINTER(c_float)),
        ("causal", c_int),
        ("align", c_int),
        ("window_left", c_int64),
        ("window_right", c_int64),
        ("seqlens_q", POINTER(c_int32)),
        ("seqlens_k", POINTER(c_int32)),
        ("cu_seqlens_q", POINTER(c_int32)),
        ("cu_seqlens_k", POINTER(c_int32)),
        ("num_seqs", c_int64),
        ("algo", c_int),
        ("num_splits", c_int),
        ("sinks", Tensor),
        ("block_table", POINTER(c_int32)),
        ("max_pages_per_seq", c_int64),
        ("k_new", Tensor),
        ("v_new", Tensor),
        ("k_scale", Tensor),
        ("v_scale", Tensor),
    ]


class RunInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("algo_requested", c_int),
        ("algo_chosen", c_int),
        ("reason", c_char * 160),
        ("num_splits", c_int),
        ("workspace_bytes", c_uint64),
        ("device_ms", c_double),
        ("num_phases", c_int),
        ("phase_names", (c_char * 16) * 4),
        ("phase_ms", c_double * 4),
        ("build_ms", c_double),
        ("tile_q", c_int),
        ("tile_k", c_int),
        ("device_mem_total", c_uint64),
        ("device_mem_free", c_uint64),
        ("tile_heads", c_int),
        ("kernel", c_char * 32),
        ("matrix_units", c_int),
        ("append_ms", c_double),
        ("append_bytes", c_uint64),
    ]


class Record(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("seq", c_uint64),
        ("backend", c_int),
        ("device", c_int),
        ("device_name", c_char * 128),
        ("algo_requested", c_int),
        ("algo_chosen", c_int),
        ("reason", c_char * 160),
        ("q_dtype", c_int),
        ("kv_dtype", c_int),
        ("batch", c_int64),
        ("heads", c_int64),
        ("kv_heads", c_int64),
        ("sq", c_int64),
        ("sk", c_int64),
        ("head_dim", c_int64),
        ("head_dim_v", c_int64),
        ("causal", c_int),
        ("align", c_int),
        ("window_left", c_int64),
        ("window_right", c_int64),
        ("scale", c_float),
        ("softcap", c_float),
        ("has_bias", c_int),
        ("has_alibi", c_int),
        ("has_lse", c_int),
        ("varlen", c_int),
        ("padded", c_int),
        ("num_splits", c_int),
        ("range", c_char * 64),
        ("host_submit_us", c_double),
        ("host_return_us", c_double),
        ("device_start_us", c_double),
        ("device_end_us", c_double),
        ("device_ms", c_double),
        ("num_phases", c_int),
        ("phase_names", (c_char * 16) * 4),
        ("phase_ms", c_double * 4),
        ("phase_start_us", c_double * 4),
        ("build_ms", c_double),
        ("workspace_bytes", c_uint64),
        ("mem_current_bytes", c_uint64),
        ("mem_peak_bytes", c_uint64),
        ("device_mem_total", c_uint64),
        ("device_mem_free", c_uint64),
        ("flops_dense", c_double),
        ("flops_useful", c_double),
        ("flops_executed", c_double),
        ("bytes_min", c_double),
        ("bytes_actual", c_double),
        ("gflops_useful", c_double),
        ("gflops_executed", c_double),
        ("gbytes_per_s", c_double),
        ("padding_waste", c_double),
        ("pct_fma_ceiling", c_double),
        ("pct_bw_ceiling", c_double),
        ("tile_q", c_int),
        ("tile_k", c_int),
        ("tile_heads", c_int),
        ("kernel", c_char * 32),
        ("matrix_units", c_int),
        ("work_counted", c_int),
        ("has_sinks", c_int),
        ("page_size", c_int64),
        ("append_tokens", c_int64),
        ("append_ms", c_double),
        ("append_bytes", c_uint64),
    ]


class DeviceInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_int),
        ("index", c_int),
        ("name", c_char * 256),
        ("vendor", c_char * 128),
        ("driver_version", c_char * 128),
        ("platform", c_char * 128),
        ("description", c_char * 512),
        ("compute_units", c_int),
        ("global_mem_bytes", c_uint64),
        ("local_mem_bytes", c_uint64),
        ("cache_bytes", c_uint64),
        ("max_work_group_size", c_size_t),
        ("fp16_supported", c_int),
        ("fp64_supported", c_int),
        ("compute_capability", c_int),
        ("cpu_features", c_char * 128),
        ("device_type", c_int),
    ]


class MemStats(Structure):
    _fields_ = [
        ("current_bytes", c_uint64),
        ("peak_bytes", c_uint64),
        ("alloc_count", c_uint64),
        ("limit_bytes", c_uint64),
    ]


class Ceilings(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("fma_f32_gflops", c_double),
        ("fma_f16_gflops", c_double),
        ("fma_bf16_gflops", c_double),
        ("read_gbps", c_double),
        ("copy_gbps", c_double),
        ("from_cache", c_int),
        ("cache_path", c_char * 512),
        ("mma_f16_gflops", c_double),
        ("mma_bf16_gflops", c_double),
        ("load_others", c_double),
        ("under_load", c_int),
    ]


# The library fills these whole (their struct_size says how big it thinks they
# are). They are read through a scratch area with room to spare, so that a newer
# library with appended fields cannot write past the Python object; only a
# library whose struct is *smaller* than this module's is refused.
_SPARE = 4096


def new_filled(cls):
    """A zeroed scratch area for a struct the library fills, and a typed view of it."""
    raw = ctypes.create_string_buffer(ctypes.sizeof(cls) + _SPARE)
    return raw, cls.from_buffer(raw)


# ---- loading ------------------------------------------------------------------


class LibraryNotFound(ImportError):
    pass


def _candidates():
    """Where the library is looked for, in order, with a label for messages."""
    env = os.environ.get("XATTN_LIBRARY")
    if env:
        yield "XATTN_LIBRARY", env
        return  # an explicit choice is never silently replaced
    here = Path(__file__).resolve().parent
    for name in ("libxattn.so", "libxattn.dylib", "xattn.dll"):
        p = here / "_lib" / name
        if p.exists():
            yield "bundled", str(p)
    found = ctypes.util.find_library("xattn")
    if found:
        yield "system", found
    for name in ("libxattn.so.0", "libxattn.so"):
        yield "system", name


# ctypes turns a Python int into a C integer modulo 2^bits (2**64 + 3 into 3), a
# double into a float by rounding (1e50 into infinity), and passes bytes with a NUL
# inside as a shorter string, all silently. The package checks each user-facing
# number where it is given, naming the argument (_arrays.host_int, host_f32); as a
# last line, every bound function whose parameters are C integers, floats or
# strings refuses a value its C type cannot hold, rather than pass another one.
_INT_CODES = "bBhHiIlLqQ"


def _param_check(t):
    """(lo, hi, type name) for an integer parameter type, ("float",) / ("char*",)
    for the others checked, None for the rest (pointers, structs)."""
    code = getattr(t, "_type_", None)
    if isinstance(code, str) and code in _INT_CODES:
        bits = 8 * ctypes.sizeof(t)
        if code.islower():
            return -(1 << (bits - 1)), (1 << (bits - 1)) - 1, f"int{bits}"
        return 0, (1 << bits) - 1, f"uint{bits}"
    if t is c_float:
        return ("float",)
    if t is c_char_p:
        return ("char*",)
    return None


def _guarded(name, f, argtypes):
    """f, or a function that checks f's integer, float and string arguments first
    (XattnInputError naming the function, the argument, the value and the range)."""
    checks = [(i, c) for i, c in ((i, _param_check(t)) for i, t in enumerate(argtypes)) if c is not None]
    if not checks:
        return f

    def call(*args):
        for i, c in checks:
            if i >= len(args):
                break  # ctypes says so
            a = args[i]
            if len(c) == 3:
                if type(a) is not int:  # numpy integers too: ctypes takes anything with __index__
                    try:
                        a = operator.index(a)
                    except TypeError:
                        continue  # not an integer: ctypes refuses it
                if not c[0] <= a <= c[1]:
                    raise input_error("SIZE_OVERFLOW" if c[2][0] == "u" and a > c[1] else "INVALID_ARGUMENT",
                                      f"{name}: argument {i + 1} ({c[2]}) is {a}, outside {c[0]}..{c[1]} "
                                      "(refused: it would be wrapped into another value)")
            elif c[0] == "float":
                try:
                    x = float(a) if isinstance(a, (int, float)) else math.nan
                except OverflowError:  # an int beyond any double: beyond float32 too
                    x = 1e300
                if math.isfinite(x) and math.isinf(c_float(x).value):
                    raise input_error("INVALID_ARGUMENT", f"{name}: argument {i + 1} (float) is {a!r}, beyond "
                                      "float32's range (refused: it would become infinite)")
            elif isinstance(a, bytes) and b"\0" in a:
                raise input_error("INVALID_ARGUMENT", f"{name}: argument {i + 1} (char*) {a!r} contains a NUL "
                                  "(refused: the library would read a shorter string)")
        return f(*args)

    call.__name__ = name
    call.__wrapped__ = f
    return call


def _declare(lib):
    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)
        setattr(lib, name, _guarded(name, f, argtypes))

    vp = c_void_p
    fn("xattn_version_number", c_uint)
    fn("xattn_version_string", c_char_p)
    fn("xattn_status_string", c_char_p, c_int)
    fn("xattn_status_name", c_char_p, c_int)
    fn("xattn_last_error", c_char_p)
    fn("xattn_backend_compiled", c_int, c_int)
    fn("xattn_backend_available", c_int, c_int)
    fn("xattn_device_count", c_int, c_int, POINTER(c_int))
    fn("xattn_device_get_info", c_int, c_int, c_int, vp)
    fn("xattn_ctx_create", c_int, c_int, c_int, POINTER(vp))
    fn("xattn_ctx_destroy", None, vp)
    fn("xattn_ctx_sync", c_int, vp)
    fn("xattn_ctx_backend", c_int, vp)
    fn("xattn_ctx_device_info", c_int, vp, vp)
    fn("xattn_ctx_set_option", c_int, vp, c_int, c_int64)
    fn("xattn_ctx_get_option", c_int, vp, c_int, POINTER(c_int64))
    fn("xattn_ctx_mem_stats", c_int, vp, POINTER(MemStats))
    fn("xattn_ctx_reset_peak", c_int, vp)
    fn("xattn_buffer_alloc", c_int, vp, c_size_t, POINTER(vp))
    fn("xattn_buffer_wrap_host", c_int, vp, vp, c_size_t, POINTER(vp))
    fn("xattn_buffer_free", None, vp)
    fn("xattn_buffer_write", c_int, vp, c_size_t, vp, c_size_t)
    fn("xattn_buffer_read", c_int, vp, c_size_t, vp, c_size_t)
    fn("xattn_buffer_size", c_size_t, vp)
    fn("xattn_attn_desc_init", None, POINTER(AttnDesc))
    fn("xattn_attention", c_int, vp, POINTER(AttnDesc), vp)
    fn("xattn_attention_check", c_int, vp, POINTER(AttnDesc))
    fn("xattn_profiler_enable", c_int, vp, c_int)
    fn("xattn_profiler_count", c_int, vp, POINTER(c_size_t))
    fn("xattn_profiler_get", c_int, vp, c_size_t, vp)
    fn("xattn_profiler_reset", c_int, vp)
    fn("xattn_range_push", c_int, vp, c_char_p)
    fn("xattn_range_pop", c_int, vp)
    fn("xattn_profiler_export", c_int, vp, c_int, c_char_p)
    fn("xattn_ceilings_measure", c_int, vp, c_int, vp)
    fn("xattn_ceilings_get", c_int, vp, vp)
    fn("xattn_reference_attention", c_int, vp, POINTER(AttnDesc), vp, vp)
    fn("xattn_f32_to_f16", c_uint16, c_float)
    fn("xattn_f32_to_bf16", c_uint16, c_float)
    fn("xattn_quantize_q8_0", c_int, vp, vp, c_int64)
    fn("xattn_dequantize_q8_0", c_int, vp, vp, c_int64)
    # The sized entry points (xattn.h, "ABI"): the library writes no more than
    # this module's structs hold. Older libraries have only the plain symbols.
    sized = (
        ("xattn_device_get_info", (c_int, c_int, vp), DeviceInfo),
        ("xattn_ctx_device_info", (vp, vp), DeviceInfo),
        ("xattn_attn_desc_init", (POINTER(AttnDesc),), AttnDesc),
        ("xattn_attention", (vp, POINTER(AttnDesc), vp), RunInfo),
        ("xattn_profiler_get", (vp, c_size_t, vp), Record),
        ("xattn_ceilings_measure", (vp, c_int, vp), Ceilings),
        ("xattn_ceilings_get", (vp, vp), Ceilings),
    )
    for name, args, cls in sized:
        if not hasattr(lib, name + "_sized"):
            continue
        f = getattr(lib, name + "_sized")
        f.restype = None if name == "xattn_attn_desc_init" else c_int
        f.argtypes = list(args) + [c_size_t]
        f = _guarded(name + "_sized", f, f.argtypes)
        size = ctypes.sizeof(cls)
        setattr(lib, name, lambda *a, _f=f, _n=size: _f(*a, _n))
    # CUDA interop exists only in libraries built with the CUDA backend.
    if hasattr(lib, "xattn_cuda_ctx_create_on_stream"):
        fn("xattn_cuda_ctx_create_on_stream", c_int, c_int, vp, POINTER(vp))
        fn("xattn_cuda_buffer_wrap", c_int, vp, vp, c_size_t, POINTER(vp))
        fn("xattn_cuda_ctx_device_ordinal", c_int, vp)


def _check_abi(lib, path):
    """Refuses a library whose structs differ from this module's (see above)."""
    d = AttnDesc()
    lib.xattn_attn_desc_init(ctypes.byref(d))
    if d.struct_size != ctypes.sizeof(AttnDesc):
        raise LibraryNotFound(
            f"xattn: the library {path} has a {d.struct_size}-byte xattn_attn_desc, this "
            f"package expects {ctypes.sizeof(AttnDesc)}: it belongs to another version of xattn"
        )
    raw, info = new_filled(DeviceInfo)
    if lib.xattn_device_get_info(0, 0, ctypes.addressof(info)) == 0:
        if info.struct_size < ctypes.sizeof(DeviceInfo):
            raise LibraryNotFound(
                f"xattn: the library {path} has a {info.struct_size}-byte xattn_device_info, "
                f"this package expects at least {ctypes.sizeof(DeviceInfo)}"
            )


def load():
    """Loads the library: $XATTN_LIBRARY, else the copy installed with the
    package, else the system's (the loader's search path). Returns (lib, path)."""
    tried = []
    for label, path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{label} {path}: {e}")
            if label == "XATTN_LIBRARY":
                break
            continue
        _declare(lib)
        _check_abi(lib, path)
        return lib, path
    raise LibraryNotFound(
        "xattn: cannot load the C library libxattn ("
        + "; ".join(tried)
        + "). Install the package with 'pip install ./python' (which builds it), install "
        "libxattn on the system's library path, or set XATTN_LIBRARY to its path."
    )


lib, library_path = load()

if sys.byteorder != "little":  # pragma: no cover - the C library's f16/bf16 bits assume it too
    raise ImportError("xattn: the Python package supports little-endian machines only")

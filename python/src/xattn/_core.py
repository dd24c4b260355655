"""Contexts, attention, the reference, devices: the public API over the C library."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import ctypes
import os
import threading
import time
from ctypes import byref, c_int, c_int64, c_size_t, c_void_p

import numpy as np

from . import _arrays
from ._capi import (
    ALGO_NAMES,
    ALGOS,
    ALIGN_BOTTOM_RIGHT,
    ALIGN_TOP_LEFT,
    BACKEND_NAMES,
    BACKENDS,
    DEVICE_TYPES,
    DTYPE_NAMES,
    DTYPES,
    EXPORT_FORMATS,
    OPT_CPU_SIMD,
    OPT_MEMORY_LIMIT,
    OPT_NUM_THREADS,
    OPT_POISON,
    FP8_DTYPES,
    Q8_0,
    AttnDesc,
    Ceilings,
    DeviceInfo,
    MemStats,
    Record,
    RunInfo,
    lib,
    new_filled,
)
from ._errors import XattnError, input_error, make_error

_OPTIONS = {
    "threads": OPT_NUM_THREADS,
    "memory_limit": OPT_MEMORY_LIMIT,
    "cpu_simd": OPT_CPU_SIMD,
    "poison": OPT_POISON,
}


def _option_value(name: str, value) -> int:
    """An option's value as the int64 the library takes (checked, never wrapped);
    the library checks each option's own range. poison is a flag: a bool is fine."""
    if name not in _OPTIONS:
        raise input_error("INVALID_ARGUMENT", f"option: '{name}' is not one of {sorted(_OPTIONS)}")
    return _arrays.host_int(value, name, *_arrays.INT64, allow_bool=name == "poison", note=" (int64)")


def _c_string(b: bytes, name: str) -> bytes:
    """b as the NUL-terminated string the library reads: one with a NUL inside
    would be cut there (another file, another name), so it is refused."""
    if b"\0" in b:
        raise input_error("INVALID_ARGUMENT", f"{name}: {b!r} contains a NUL character (a C string ends there)")
    return b


def _check(status: int) -> None:
    if status != 0:
        msg = lib.xattn_last_error()
        raise make_error(status, msg.decode("utf-8", "replace") if msg else "")


def _s(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def version() -> str:
    """The version of the C library in use ("0.1.0")."""
    return _s(lib.xattn_version_string())


# ---- records and device descriptions as dicts -----------------------------------


def _struct_dict(s, skip=("struct_size",)) -> dict:
    d = {}
    for name, _ in s._fields_:
        if name in skip:
            continue
        v = getattr(s, name)
        if isinstance(v, bytes):
            v = _s(v)
        elif isinstance(v, ctypes.Array):
            v = [(_s(x.value) if isinstance(x, ctypes.Array) else x) for x in v]
        d[name] = v
    return d


def record_dict(r: Record) -> dict:
    """A record as a dict with the C record's field names; enums as their names
    ("flash", "f16", "cpu", "bottom-right"), phase lists cut to num_phases."""
    d = _struct_dict(r)
    d["backend"] = BACKEND_NAMES.get(r.backend, "?")
    for k in ("algo_requested", "algo_chosen"):
        d[k] = ALGO_NAMES.get(d[k], "?")
    for k in ("q_dtype", "kv_dtype"):
        d[k] = DTYPE_NAMES.get(d[k], "?")
    d["align"] = "top-left" if r.align == ALIGN_TOP_LEFT else "bottom-right"
    n = max(0, min(4, r.num_phases))
    d["phase_names"] = [_s(r.phase_names[i].value) for i in range(n)]
    d["phase_ms"] = list(r.phase_ms[:n])
    d["phase_start_us"] = list(r.phase_start_us[:n])
    return d


def _device_dict(info: DeviceInfo) -> dict:
    d = _struct_dict(info)
    d["backend"] = BACKEND_NAMES.get(info.backend, "?")
    d["device_type"] = DEVICE_TYPES.get(info.device_type, "other")
    return d


def backends() -> dict:
    """Each backend: whether this build has it, whether it is usable here and why not."""
    out = {}
    for name in ("cpu", "opencl", "cuda"):
        code = BACKENDS[name]
        compiled = bool(lib.xattn_backend_compiled(code))
        st = lib.xattn_backend_available(code)
        reason = "" if st == 0 else _s(lib.xattn_last_error() or b"")
        out[name] = {"compiled": compiled, "available": st == 0, "reason": reason}
    return out


def devices() -> list:
    """Every device of every available backend, as dicts (the fields of xattn_device_info)."""
    out = []
    for name, st in backends().items():
        if not st["available"]:
            continue
        n = c_int(0)
        _check(lib.xattn_device_count(BACKENDS[name], byref(n)))
        for i in range(n.value):
            raw, info = new_filled(DeviceInfo)
            _check(lib.xattn_device_get_info(BACKENDS[name], i, ctypes.addressof(info)))
            out.append(_device_dict(info))
    return out


# ---- contexts ------------------------------------------------------------------


class Context:
    """One device on one backend, with its queue, its buffers, its program cache
    and its profiler. Keep one alive between calls: creating a context and building
    kernels (OpenCL) are paid once. A context serves one thread at a time (calls
    from several Python threads are serialized).

    ``Context("cuda", 0, stream=torch.cuda.current_stream().cuda_stream)`` submits
    to the caller's CUDA stream. ``keep_records=True`` keeps every call's record
    (``records()``, ``export()``); by default each call's record is returned by the
    call and then dropped.
    """

    def __init__(self, backend: str = "cpu", device: int = 0, *, threads=None, stream=None,
                 memory_limit=None, cpu_simd=None, poison=False, keep_records=False):
        if backend not in BACKENDS:
            raise input_error("INVALID_ARGUMENT", f"backend: '{backend}' is not auto, cpu, opencl or cuda")
        device = _arrays.host_int(device, "device", 0, _arrays.INT32[1], note=" (a device index)")
        if stream is not None:
            stream = _arrays.host_int(stream, "stream", *_arrays.UINT64, note=" (a cudaStream_t, as an int)")
        # The options are checked before the context exists: a refused one creates nothing.
        opts = [(nm, _option_value(nm, val)) for nm, val in (("threads", threads), ("memory_limit", memory_limit),
                                                             ("cpu_simd", cpu_simd), ("poison", poison))
                if val is not None]
        self._lock = threading.RLock()
        self._ptr = c_void_p()
        self.stream = stream
        if stream is not None:
            if backend != "cuda":
                raise input_error("INVALID_ARGUMENT", f"stream: only CUDA contexts take a stream (backend '{backend}')")
            if not hasattr(lib, "xattn_cuda_ctx_create_on_stream"):
                raise make_error(-10, "cuda: this build of the library has no CUDA backend")
            _check(lib.xattn_cuda_ctx_create_on_stream(device, c_void_p(stream), byref(self._ptr)))
        else:
            _check(lib.xattn_ctx_create(BACKENDS[backend], device, byref(self._ptr)))
        try:
            self.backend = BACKEND_NAMES[lib.xattn_ctx_backend(self._ptr)]
            raw, info = new_filled(DeviceInfo)
            _check(lib.xattn_ctx_device_info(self._ptr, ctypes.addressof(info)))
            self.device_info = _device_dict(info)
            self.device = self.device_info["index"]
            self.keep_records = bool(keep_records)
            _check(lib.xattn_profiler_enable(self._ptr, 1))
            for name, value in opts:
                if name != "poison" or value:
                    _check(lib.xattn_ctx_set_option(self._ptr, _OPTIONS[name], c_int64(value)))
        except BaseException:  # (the library's own range checks, threads=5000): no context is left behind
            self.close()
            raise

    # lifetime
    def close(self) -> None:
        """Frees the context (waits for its work). Idempotent."""
        with self._lock:
            if self._ptr:
                lib.xattn_ctx_destroy(self._ptr)
                self._ptr = c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"xattn.Context({self.backend}:{self.device} {self.device_info.get('name', '')!r})"

    def _handle(self):
        if not self._ptr:
            raise input_error("INVALID_ARGUMENT", "context: already closed")
        return self._ptr

    # options and state
    def set_option(self, name: str, value: int) -> None:
        """threads, memory_limit (bytes, 0 = none), cpu_simd (0 best, 1 portable,
        2 avx2, 3 avx512), poison (0/1)."""
        if name not in _OPTIONS:
            raise input_error("INVALID_ARGUMENT", f"option: '{name}' is not one of {sorted(_OPTIONS)}")
        value = _option_value(name, value)
        with self._lock:
            _check(lib.xattn_ctx_set_option(self._handle(), _OPTIONS[name], c_int64(value)))

    def get_option(self, name: str) -> int:
        if name not in _OPTIONS:
            raise input_error("INVALID_ARGUMENT", f"option: '{name}' is not one of {sorted(_OPTIONS)}")
        v = c_int64()
        with self._lock:
            _check(lib.xattn_ctx_get_option(self._handle(), _OPTIONS[name], byref(v)))
        return v.value

    def sync(self) -> None:
        with self._lock:
            _check(lib.xattn_ctx_sync(self._handle()))

    def mem_stats(self) -> dict:
        """The context allocator's current and peak bytes, allocations, limit."""
        s = MemStats()
        with self._lock:
            _check(lib.xattn_ctx_mem_stats(self._handle(), byref(s)))
        return _struct_dict(s)

    def reset_peak(self) -> None:
        with self._lock:
            _check(lib.xattn_ctx_reset_peak(self._handle()))

    def ceilings(self, measure: bool = False, force: bool = False):
        """The device's measured ceilings (dict), or None when none are known and
        measure is False. measure=True runs the micro-benchmarks when they are not
        cached (seconds); force=True runs them even then."""
        raw, c = new_filled(Ceilings)
        with self._lock:
            if measure or force:
                _check(lib.xattn_ceilings_measure(self._handle(), 1 if force else 0, ctypes.addressof(c)))
            else:
                st = lib.xattn_ceilings_get(self._handle(), ctypes.addressof(c))
                if st == -9:  # UNSUPPORTED: none known yet
                    return None
                _check(st)
        return _struct_dict(c)

    # profiler
    def records(self) -> list:
        """The records held (keep_records=True), oldest first, as dicts."""
        with self._lock:
            return [record_dict(r) for r in self._records()]

    def _records(self):
        n = c_size_t()
        _check(lib.xattn_profiler_count(self._handle(), byref(n)))
        out = []
        for i in range(n.value):
            raw, r = new_filled(Record)
            _check(lib.xattn_profiler_get(self._handle(), i, ctypes.addressof(r)))
            if r.struct_size < ctypes.sizeof(Record):
                raise make_error(-17, f"record: the library's record is {r.struct_size} bytes, expected "
                                 f"at least {ctypes.sizeof(Record)}")
            out.append(r)
        return out

    def reset_records(self) -> None:
        with self._lock:
            _check(lib.xattn_profiler_reset(self._handle()))

    def export(self, path: str, format: str = "json") -> None:
        """Writes the records held as JSON (schema xattn.records/1), CSV or a
        Chrome/Perfetto trace."""
        if format not in EXPORT_FORMATS:
            raise input_error("INVALID_ARGUMENT", f"format: '{format}' is not json, csv or trace")
        p = _c_string(os.fsencode(path), "path")
        with self._lock:
            _check(lib.xattn_profiler_export(self._handle(), EXPORT_FORMATS[format], p))

    @contextlib.contextmanager
    def range(self, name: str):
        """A named user range around the calls made inside it (records carry its name)."""
        nm = _c_string(str(name).encode("utf-8", "surrogateescape"), "name")
        with self._lock:
            _check(lib.xattn_range_push(self._handle(), nm))
        try:
            yield
        finally:
            with self._lock:
                _check(lib.xattn_range_pop(self._handle()))

    # attention
    def attention(self, q, k, v, **kwargs):
        """xattn.attention on this context."""
        return attention(q, k, v, backend=self, **kwargs)

    def reference(self, q, k, v, **kwargs):
        return reference(q, k, v, backend=self, **kwargs)


_default_lock = threading.Lock()
_defaults: dict = {}


def _default_context(backend: str, device: int, stream=None) -> Context:
    # checked before the lookup: True or 1.0 would find the context of device 1
    device = _arrays.host_int(device, "device", 0, _arrays.INT32[1], note=" (a device index)")
    key = (backend, device, stream)
    with _default_lock:
        ctx = _defaults.get(key)
        if ctx is None or not ctx._ptr:
            ctx = Context(backend, device, stream=stream)
            _defaults[key] = ctx
        return ctx


@atexit.register
def _close_defaults():
    with _default_lock:
        for ctx in _defaults.values():
            ctx.close()
        _defaults.clear()


# ---- one call --------------------------------------------------------------------


_CAUSAL = {False: None, None: None, "top-left": ALIGN_TOP_LEFT, "bottom-right": ALIGN_BOTTOM_RIGHT}


class _Prepared:
    """A call's descriptor, its wrapped buffers and everything they point to."""

    def __init__(self):
        self.desc = AttnDesc()
        lib.xattn_attn_desc_init(byref(self.desc))
        self.buffers = []  # (xattn_buffer*, View or None, sync_back)
        self.keep = []  # host arrays the descriptor points to
        self.staged = []  # (buffer, view) outputs to copy back (copy=True)

    def free(self):
        for b in self.buffers:
            lib.xattn_buffer_free(b)
        self.buffers = []


def _resolve_context(backend, device, views) -> Context:
    if isinstance(backend, Context):
        return backend
    on_cuda = [v for v in views if v.device == "cuda"]
    if on_cuda:
        if backend not in ("auto", "cuda"):
            raise input_error("INVALID_ARGUMENT",
                              f"backend: '{backend}' with CUDA tensors (use 'cuda' or 'auto', or move them to the CPU)")
        idx = on_cuda[0].device_index
        stream = None
        if on_cuda[0].kind == "torch":
            t = _arrays._torch()
            stream = t.cuda.current_stream(idx).cuda_stream
        return _default_context("cuda", idx, stream=stream)
    if backend == "auto":
        backend = "cpu"  # host memory: the CPU runs on it in place
    if backend not in BACKENDS:
        raise input_error("INVALID_ARGUMENT", f"backend: '{backend}' is not auto, cpu, opencl, cuda or a Context")
    return _default_context(backend, device)


def _layout_4d(v, layout, name, packed):
    """(shape, strides) in the library's logical order [B, S, H, D]."""
    if layout not in ("bshd", "bhsd"):
        raise input_error("INVALID_ARGUMENT", f"layout: '{layout}' is not 'bshd' or 'bhsd'")
    shape, st = list(v.shape), list(v.strides)
    if packed and len(shape) == 3:
        shape, st = [1] + shape, [0] + st
    if len(shape) != 4:
        need = "[T, H, D] or [1, T, H, D]" if packed else ("[B, S, H, D]" if layout == "bshd" else "[B, H, S, D]")
        raise input_error("INVALID_SHAPE", f"{name}: {len(v.shape)}-D {list(v.shape)}, expected {need} ({layout})")
    if layout == "bhsd":
        shape = [shape[0], shape[2], shape[1], shape[3]]
        st = [st[0], st[2], st[1], st[3]]
    return shape, st


def _from_logical(shape4, layout, packed3):
    """The caller-facing shape of a logical [B, S, H, D] tensor."""
    b, s, h, d = shape4
    if packed3:
        return (s, h, d) if layout == "bshd" else (h, s, d)
    return (b, s, h, d) if layout == "bshd" else (b, h, s, d)


def _q8_0_view(vx, name):
    """A q8_0 cache given as its bytes (uint8, ggml's blocks of 34 bytes along the
    last dimension: an f16 scale then 32 int8): the same view in values, as the
    library addresses it (last extent / 34 * 32, strides / 34 * 32)."""
    if vx.itemsize != 1 or vx.dtype not in ("uint8", "torch.uint8"):
        raise input_error("INVALID_DTYPE", f"{name}: dtype {vx.dtype}, expected uint8 (the bytes of q8_0 "
                          "blocks, with kv_dtype='q8_0')")
    nb = vx.shape[-1] if vx.shape else 0
    if nb % 34:
        raise input_error("INVALID_SHAPE", f"{name}: last dimension {nb} bytes is not whole q8_0 blocks "
                          "(34 bytes per 32 values)")
    if nb > 1 and vx.strides[-1] != 1:
        raise input_error("INVALID_STRIDE", f"{name}: the last dimension's stride is {vx.strides[-1]} "
                          "bytes (a q8_0 row's blocks are contiguous)")
    for n, s in zip(vx.shape[:-1], vx.strides[:-1]):
        if n > 1 and s % 34:
            raise input_error("INVALID_STRIDE", f"{name}: byte strides {list(vx.strides)} are not whole "
                              "q8_0 blocks (34 bytes)")
    return dataclasses.replace(vx, shape=tuple(vx.shape[:-1]) + (nb // 34 * 32,),
                               strides=tuple(s // 34 * 32 for s in vx.strides[:-1]) + (1,), dtype="q8_0")


def _fp8_view(vx, name, want):
    """k or v of an fp8 cache: a torch float8_e4m3fn / float8_e5m2 tensor, or
    (numpy has no fp8) uint8 bytes with kv_dtype "fp8e4m3" / "fp8e5m2", seen as
    that dtype. Anything else is returned as it is (checked as the other dtypes)."""
    if vx.dtype in FP8_DTYPES:
        if want is not None and vx.dtype != want:
            raise input_error("INVALID_DTYPE", f"{name}: dtype {vx.dtype}, but kv_dtype is {want!r}")
        return vx
    if want is None:
        return vx
    if vx.itemsize != 1 or vx.dtype not in ("uint8", "torch.uint8"):
        raise input_error("INVALID_DTYPE", f"{name}: dtype {vx.dtype}, expected uint8 (the fp8 bytes) or a "
                          f"torch float8 tensor, with kv_dtype={want!r}")
    return dataclasses.replace(vx, dtype=want)


def quantize_q8_0(x):
    """float32 values (last dimension a multiple of 32) -> uint8 q8_0 blocks, the
    last dimension D -> D / 32 * 34 bytes, as ggml's quantize_row_q8_0_ref (the
    library's xattn_quantize_q8_0). A numpy array; torch tensors go through numpy."""
    if _arrays.is_torch_tensor(x):
        x = x.detach().cpu()
        x = (x if x.dtype == _arrays._torch().float64 else x.float()).numpy()
    src = np.asarray(x)
    if src.dtype.kind not in "iuf":
        raise input_error("INVALID_DTYPE", f"x: dtype {src.dtype}, expected real numbers (float32)")
    with np.errstate(over="ignore"):
        a = np.ascontiguousarray(src, dtype=np.float32)
    if src.dtype != np.float32:  # a value float32 cannot hold would be quantized as infinity
        bad = np.isfinite(src) & ~np.isfinite(a)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise input_error("INVALID_ARGUMENT", f"x{list(idx)}: {float(src[idx])!r} is beyond float32's range "
                              f"(|x| <= {_arrays.FLT_MAX:.8g})")
    if a.ndim < 1 or a.shape[-1] % 32:
        raise input_error("INVALID_SHAPE", f"x: shape {list(a.shape)}, the last dimension must be a multiple of 32")
    out = np.empty(a.shape[:-1] + (a.shape[-1] // 32 * 34,), dtype=np.uint8)
    _check(lib.xattn_quantize_q8_0(a.ctypes.data_as(c_void_p), out.ctypes.data_as(c_void_p), a.size))
    return out


def dequantize_q8_0(blocks):
    """uint8 q8_0 blocks (last dimension a multiple of 34) -> float32 values."""
    src = np.asarray(blocks.detach().cpu().numpy() if _arrays.is_torch_tensor(blocks) else blocks)
    if src.dtype != np.uint8:  # astype would wrap 300 into 44: only bytes' values pass
        if src.dtype.kind not in "iu":
            raise input_error("INVALID_DTYPE", f"blocks: dtype {src.dtype}, expected uint8 (q8_0 bytes)")
        bad = (src > 255) if src.dtype.kind == "u" else (src < 0) | (src > 255)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise input_error("INVALID_ARGUMENT", f"blocks{list(idx)}: {int(src[idx])} is out of range, expected "
                              "a byte in 0..255")
    b = np.ascontiguousarray(src, dtype=np.uint8)
    if b.ndim < 1 or b.shape[-1] % 34:
        raise input_error("INVALID_SHAPE", f"blocks: shape {list(b.shape)}, the last dimension must be a "
                          "multiple of 34")
    out = np.empty(b.shape[:-1] + (b.shape[-1] // 34 * 32,), dtype=np.float32)
    _check(lib.xattn_dequantize_q8_0(b.ctypes.data_as(c_void_p), out.ctypes.data_as(c_void_p), out.size))
    return out


def _dtype_code(v, name):
    if v.dtype not in DTYPES:
        raise input_error("INVALID_DTYPE", f"{name}: dtype {v.dtype} (expected float32, float16 or bfloat16)")
    return DTYPES[v.dtype]


def _wrap(ctx: Context, prep: _Prepared, v, name: str, output: bool, copy: bool):
    """A buffer over v's memory; returns the xattn_buffer pointer."""
    n = v.span_bytes()
    if n > _arrays.UINT64[1]:  # a foreign array's numbers: the size_t would wrap
        raise input_error("SIZE_OVERFLOW", f"{name}: {v.describe()} spans {n} bytes, beyond size_t "
                          f"(0..{_arrays.UINT64[1]})")
    buf = c_void_p()
    h = ctx._handle()
    if n == 0:
        # An empty view (Sq = 0, ...): the call is a no-op, but the descriptor still
        # needs a buffer; a small library one stands in.
        _check(lib.xattn_buffer_alloc(h, 16, byref(buf)))
        prep.buffers.append(buf)
        return buf
    if v.device == "cuda":
        if ctx.backend != "cuda":
            raise input_error("INVALID_ARGUMENT", f"{name}: a CUDA array on a {ctx.backend} context")
        _check(lib.xattn_cuda_buffer_wrap(h, c_void_p(v.ptr), n, byref(buf)))
        prep.buffers.append(buf)
        return buf
    st = lib.xattn_buffer_wrap_host(h, c_void_p(v.ptr), n, byref(buf))
    if st == -9 and copy:  # this backend cannot use host memory in place: stage it
        _check(lib.xattn_buffer_alloc(h, n, byref(buf)))
        prep.buffers.append(buf)
        if output:
            prep.staged.append((buf, v, n))
        else:
            _check(lib.xattn_buffer_write(buf, 0, c_void_p(v.ptr), n))
        return buf
    if st == -9:
        msg = _s(lib.xattn_last_error() or b"")
        raise make_error(st, f"{name}: {msg}; pass device arrays (CUDA tensors) or copy=True to stage host arrays")
    _check(st)
    prep.buffers.append(buf)
    if output and ctx.backend == "opencl":
        # CL_MEM_USE_HOST_PTR: the device may keep its own copy until the memory is
        # read through the queue; reading it onto itself brings the result home.
        prep.staged.append((buf, v, n))
    return buf


def _set_tensor(t, buf, v, shape, strides):
    t.buffer = buf
    t.offset = 0
    t.dtype = Q8_0 if v.dtype == "q8_0" else FP8_DTYPES[v.dtype] if v.dtype in FP8_DTYPES else DTYPES[v.dtype]
    lo, hi = _arrays.INT64
    for i in range(4):
        n, st = int(shape[i]), int(strides[i])
        if not (lo <= n <= hi and lo <= st <= hi):  # int64 fields: ctypes would wrap
            raise input_error("SIZE_OVERFLOW", f"{v.kind} array {list(v.shape)}: extent {n} or stride {st} "
                              f"beyond int64 ({lo}..{hi})")
        t.shape[i] = n
        t.strides[i] = st


def _overlap(a, b) -> bool:
    if a.device != "cpu" or b.device != "cpu":
        return a.device == b.device and a.ptr == b.ptr and a.size > 0
    lo1, hi1 = a.ptr, a.ptr + a.span_bytes()
    lo2, hi2 = b.ptr, b.ptr + b.span_bytes()
    if hi1 <= lo2 or hi2 <= lo1:
        return False
    return bool(np.shares_memory(_arrays.host_bytes_view(a), _arrays.host_bytes_view(b), max_work=10**6))


def _prepare(ctx, q, k, v, *, layout, causal, align, window, softcap, alibi_slopes, bias, seqlens_q,
             seqlens_k, cu_seqlens_q, cu_seqlens_k, scale, return_lse, sinks, block_table, k_new, v_new,
             kv_dtype, k_scale, v_scale, algo, num_splits, out, need_outputs, copy):
    """Builds the descriptor; returns (prep, out_obj, lse_obj, meta). q, k, v are
    the callers' arrays or their views (_arrays.View) already made."""
    # The numbers first (before any buffer is wrapped): each is checked against the
    # C type it becomes, never wrapped or rounded into another value by ctypes.
    if scale is not None:
        scale = _arrays.host_f32(scale, "scale", nonzero=True, note=", or None for 1/sqrt(D)")
    if softcap is not None:
        softcap = _arrays.host_f32(softcap, "softcap", nonneg=True, note="; 0 = off")
    if window is not None:
        if isinstance(window, (str, bytes)):
            raise input_error("INVALID_ARGUMENT", f"window: {window!r} is not (left, right)")
        try:
            left, right = window
        except (TypeError, ValueError):
            raise input_error("INVALID_ARGUMENT", f"window: {window!r} is not (left, right)") from None
        window = tuple(-1 if x is None else max(-1, _arrays.host_int(
            x, f"window[{i}]", *_arrays.INT64, note=" (int64; None or negative = unbounded)"))
            for i, x in enumerate((left, right)))
    num_splits = _arrays.host_int(num_splits, "num_splits", 0, _arrays.INT32[1],
                                  note=" (0 = automatic; the library takes 1..4096)")
    vq, vk, vv = (x if isinstance(x, _arrays.View) else _arrays.view_of(x, n)
                  for x, n in ((q, "q"), (k, "k"), (v, "v")))
    packed = cu_seqlens_q is not None or cu_seqlens_k is not None
    if packed and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise input_error("INVALID_LENGTHS", "cu_seqlens_q and cu_seqlens_k: give both or neither")
    if packed and (seqlens_q is not None or seqlens_k is not None):
        raise input_error("INVALID_LENGTHS", "seqlens_q/k and cu_seqlens_q/k exclude each other")
    if kv_dtype not in (None, "q8_0") and kv_dtype not in FP8_DTYPES:
        raise input_error("INVALID_DTYPE", f"kv_dtype: {kv_dtype!r} is not None (k and v's own dtype), "
                          "'q8_0' (uint8 arrays of ggml's blocks), 'fp8e4m3' or 'fp8e5m2' (uint8 arrays of "
                          "fp8 bytes)")
    q8 = kv_dtype == "q8_0"
    fp8_want = kv_dtype if kv_dtype in FP8_DTYPES else None
    rk, rv = vk, vv  # the arrays' own views: their bytes are what the buffers wrap
    if q8:
        vk, vv = _q8_0_view(vk, "k"), _q8_0_view(vv, "v")
    else:
        vk, vv = _fp8_view(vk, "k", fp8_want), _fp8_view(vv, "v", fp8_want)
    for vx, nm in ((vq, "q"),) + (() if q8 else ((vk, "k"), (vv, "v"))):
        if nm == "q" or vx.dtype not in FP8_DTYPES:  # k and v's pairing is the library's check
            _dtype_code(vx, nm)
    fp8 = vk.dtype in FP8_DTYPES
    devs = {(x.device, x.device_index) for x in (vq, vk, vv)}
    if len(devs) > 1:
        raise input_error("INVALID_ARGUMENT", f"q, k, v: on different devices {sorted(devs)}")
    packed3 = packed and len(vq.shape) == 3
    qs, qst = _layout_4d(vq, layout, "q", packed)
    ks, kst = _layout_4d(vk, layout, "k", packed)
    vs, vst = _layout_4d(vv, layout, "v", packed)
    if algo not in ALGOS:
        raise input_error("INVALID_ARGUMENT", f"algo: '{algo}' is not auto, naive, flash or splitkv")
    if causal is True:
        raise input_error("INVALID_ARGUMENT",
                          "causal: True is ambiguous when Sq != Sk: say 'top-left' (PyTorch's is_causal) or "
                          "'bottom-right' (FlashAttention's causal)")
    if causal not in _CAUSAL:
        raise input_error("INVALID_ARGUMENT", f"causal: {causal!r} is not False, 'top-left' or 'bottom-right'")
    if align is not None and align not in ("top-left", "bottom-right"):
        raise input_error("INVALID_ARGUMENT", f"align: {align!r} is not 'top-left' or 'bottom-right'")

    if (k_new is None) != (v_new is None):
        raise input_error("INVALID_ARGUMENT", f"{'v_new' if k_new is not None else 'k_new'}: None while "
                          f"{'k_new' if k_new is not None else 'v_new'} is given (an append needs both)")
    append = k_new is not None
    if append and need_outputs:
        for vx, nm in ((vk, "k"), (vv, "v")):
            if vx.readonly:
                raise input_error("INVALID_ARGUMENT", f"{nm}: a read-only array, but k_new/v_new are "
                                  "written into it")

    # The host parameter arrays, checked and converted before any buffer exists.
    slopes = None
    if alibi_slopes is not None:
        slopes = _arrays.host_float32(alibi_slopes, "alibi_slopes")
        if slopes.shape[0] != qs[2]:
            raise input_error("INVALID_SHAPE", f"alibi_slopes: {slopes.shape[0]} slopes for {qs[2]} query heads")
    lengths = {}
    for nm, val in (("seqlens_q", seqlens_q), ("seqlens_k", seqlens_k)):
        if val is not None:
            lengths[nm] = a = _arrays.host_int32(val, nm)
            if a.shape[0] != qs[0]:
                raise input_error("INVALID_LENGTHS", f"{nm}: {a.shape[0]} lengths for a batch of {qs[0]}")
    cq = ck = None
    if packed:
        cq = _arrays.host_int32(cu_seqlens_q, "cu_seqlens_q")
        ck = _arrays.host_int32(cu_seqlens_k, "cu_seqlens_k")
        if cq.shape[0] != ck.shape[0] or cq.shape[0] < 1:
            raise input_error("INVALID_LENGTHS", f"cu_seqlens_q/k: {cq.shape[0]} and {ck.shape[0]} offsets "
                              "(expected num_seqs + 1 each)")
    bt = None
    if block_table is not None:
        raw = block_table.detach().cpu().numpy() if _arrays.is_torch_tensor(block_table) else block_table
        try:
            raw = np.asarray(raw)
        except (ValueError, TypeError, OverflowError) as e:
            raise input_error("INVALID_SHAPE", f"block_table: not a 2-D array of page indices ({e})") from None
        if raw.ndim != 2 or raw.shape[0] != qs[0] or raw.shape[1] < 1:
            raise input_error("INVALID_SHAPE", f"block_table: shape {list(raw.shape)}, expected "
                              f"[B, max_pages_per_seq] with B = {qs[0]}")
        bt = _arrays.host_int32(block_table if isinstance(block_table, (list, tuple)) else raw, "block_table",
                                status="OUT_OF_BOUNDS", ndim=2)

    prep = _Prepared()
    d = prep.desc
    try:
        _set_tensor(d.q, _wrap(ctx, prep, vq, "q", False, copy), vq, qs, qst)
        # An append writes the caches: staged copies must come back to them.
        _set_tensor(d.k, _wrap(ctx, prep, rk, "k", append and need_outputs, copy), vk, ks, kst)
        _set_tensor(d.v, _wrap(ctx, prep, rv, "v", append and need_outputs, copy), vv, vs, vst)
        if append:
            for x, nm, t in ((k_new, "k_new", d.k_new), (v_new, "v_new", d.v_new)):
                rx = _arrays.view_of(x, nm)
                vx = _q8_0_view(rx, nm) if q8 else _fp8_view(rx, nm, fp8_want)
                if not q8 and vx.dtype not in FP8_DTYPES:
                    _dtype_code(vx, nm)
                if (vx.device, vx.device_index) != (vq.device, vq.device_index):
                    raise input_error("INVALID_ARGUMENT", f"{nm}: not on q's device")
                xs, xst = _layout_4d(vx, layout, nm, False)
                _set_tensor(t, _wrap(ctx, prep, rx, nm, False, copy), vx, xs, xst)
        if sinks is not None:
            vsk = _arrays.view_of(sinks, "sinks")
            if vsk.dtype != "f32" or len(vsk.shape) != 1:
                raise input_error("INVALID_SHAPE" if vsk.dtype == "f32" else "INVALID_DTYPE",
                                  f"sinks: {vsk.dtype} {list(vsk.shape)}, expected float32 [Hq] ({qs[2]})")
            if (vsk.device, vsk.device_index) != (vq.device, vq.device_index):
                raise input_error("INVALID_ARGUMENT", "sinks: not on q's device")
            _set_tensor(d.sinks, _wrap(ctx, prep, vsk, "sinks", False, copy), vsk,
                        [1, 1, vsk.shape[0], 1], [0, 0, vsk.strides[0], 0])
        for sc, nm, t in ((k_scale, "k_scale", d.k_scale), (v_scale, "v_scale", d.v_scale)):
            if sc is None:
                continue
            if not fp8:
                raise input_error("INVALID_ARGUMENT", f"{nm}: given, but k is {vk.dtype} (the scales are "
                                  "those of an fp8 cache)")
            vsc = _arrays.view_of(sc, nm)
            if vsc.dtype != "f32" or len(vsc.shape) != 1 or vsc.shape[0] != ks[2]:
                raise input_error("INVALID_SHAPE" if vsc.dtype == "f32" else "INVALID_DTYPE",
                                  f"{nm}: {vsc.dtype} {list(vsc.shape)}, expected float32 [Hkv] ({ks[2]})")
            if (vsc.device, vsc.device_index) != (vq.device, vq.device_index):
                raise input_error("INVALID_ARGUMENT", f"{nm}: not on q's device")
            _set_tensor(t, _wrap(ctx, prep, vsc, nm, False, copy), vsc, [1, 1, vsc.shape[0], 1],
                        [0, 0, vsc.strides[0], 0])
        if bt is not None:
            prep.keep.append(bt)
            d.block_table = bt.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            d.max_pages_per_seq = bt.shape[1]

        o_shape4 = [qs[0], qs[1], qs[2], vs[3]]
        out_obj = None
        if need_outputs:
            if out is None:
                out_obj = _arrays.empty_like_source(vq, _from_logical(o_shape4, layout, packed3), vq.dtype)
            else:
                out_obj = out
            vo = _arrays.view_of(out_obj, "out")
            if vo.readonly:
                raise input_error("INVALID_ARGUMENT", "out: a read-only array")
            if (vo.device, vo.device_index) != (vq.device, vq.device_index):
                raise input_error("INVALID_ARGUMENT", f"out: on {vo.device}:{vo.device_index}, q on "
                                  f"{vq.device}:{vq.device_index}")
            os_, ost = _layout_4d(vo, layout, "out", packed)
            if list(os_) != o_shape4:
                raise input_error("INVALID_SHAPE", f"out: shape {list(vo.shape)}, expected "
                                  f"{list(_from_logical(o_shape4, layout, packed3))}")
            if vo.dtype != vq.dtype:
                raise input_error("INVALID_DTYPE", f"out: dtype {vo.dtype}, expected q's {vq.dtype}")
            for vx, nm in ((vq, "q"), (rk, "k"), (rv, "v")):
                if _overlap(vo, vx):
                    raise input_error("INVALID_ARGUMENT", f"out: overlaps {nm} (the output must not share "
                                      "memory with an input)")
            _set_tensor(d.o, _wrap(ctx, prep, vo, "out", True, copy), vo, os_, ost)
        else:  # the reference only validates the output view: a scratch buffer
            n = int(np.prod(o_shape4)) * _arrays_itemsize(vq.dtype)
            buf = c_void_p()
            _check(lib.xattn_buffer_alloc(ctx._handle(), max(n, 16), byref(buf)))
            prep.buffers.append(buf)
            b_, s_, h_, dv_ = o_shape4
            d.o.buffer, d.o.offset, d.o.dtype = buf, 0, DTYPES[vq.dtype]
            for i, (ext, st_) in enumerate(zip(o_shape4, (s_ * h_ * dv_, h_ * dv_, dv_, 1))):
                d.o.shape[i], d.o.strides[i] = ext, st_

        lse_obj = None
        if return_lse:
            b_, s_, h_ = qs[0], qs[1], qs[2]
            lse_shape = (h_, s_) if packed3 else (b_, h_, s_)
            if need_outputs:
                lse_obj = _arrays.empty_like_source(vq, lse_shape, "f32")
                vl = _arrays.view_of(lse_obj, "lse")
                buf = _wrap(ctx, prep, vl, "lse", True, copy)
            else:
                buf = c_void_p()
                _check(lib.xattn_buffer_alloc(ctx._handle(), max(b_ * h_ * s_ * 4, 16), byref(buf)))
                prep.buffers.append(buf)
            d.lse.buffer, d.lse.offset, d.lse.dtype = buf, 0, DTYPES["f32"]
            for i, (ext, st_) in enumerate(zip((b_, h_, s_, 1), (h_ * s_, s_, 1, 1))):
                d.lse.shape[i], d.lse.strides[i] = ext, st_

        if bias is not None:
            vb = _arrays.view_of(bias, "bias")
            if vb.dtype not in ("f32", "f16"):
                hint = " (a boolean mask: convert it to 0 / -inf first)" if "bool" in vb.dtype else ""
                raise input_error("INVALID_DTYPE", f"bias: dtype {vb.dtype}, expected float32 or float16{hint}")
            if (vb.device, vb.device_index) != (vq.device, vq.device_index):
                raise input_error("INVALID_ARGUMENT", "bias: not on q's device")
            if not 2 <= len(vb.shape) <= 4:
                raise input_error("INVALID_SHAPE", f"bias: {len(vb.shape)}-D {list(vb.shape)}, expected "
                                  "[Sq, Sk], [H, Sq, Sk] or [B, H, Sq, Sk]")
            pad = 4 - len(vb.shape)
            bs, bst = [1] * pad + list(vb.shape), [0] * pad + list(vb.strides)
            _set_tensor(d.bias, _wrap(ctx, prep, vb, "bias", False, copy), vb, bs, bst)

        if slopes is not None:
            prep.keep.append(slopes)
            d.alibi_slopes = slopes.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        for nm, a in lengths.items():
            prep.keep.append(a)
            setattr(d, nm, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))
        if packed:
            prep.keep += [cq, ck]
            d.cu_seqlens_q = cq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            d.cu_seqlens_k = ck.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            d.num_seqs = cq.shape[0] - 1

        if scale is not None:
            d.scale = scale
        if softcap is not None:
            d.softcap = softcap
        if _CAUSAL[causal] is not None:
            d.causal = 1
            d.align = _CAUSAL[causal]
        if align is not None:
            want = ALIGN_TOP_LEFT if align == "top-left" else ALIGN_BOTTOM_RIGHT
            if d.causal and want != d.align:
                raise input_error("INVALID_ARGUMENT", f"align: '{align}' contradicts causal='{causal}'")
            d.align = want
        if window is not None:
            d.window_left, d.window_right = window
        d.algo = ALGOS[algo]
        d.num_splits = num_splits
    except BaseException:
        prep.free()
        raise
    meta = {"layout": layout, "packed3": packed3, "o_shape4": o_shape4, "views": (vq, vk, vv)}
    return prep, out_obj, lse_obj, meta


# The problem's options, shared by attention() and reference() (same names, same meaning).
_OPTION_NAMES = ("layout", "causal", "align", "window", "softcap", "alibi_slopes", "bias", "seqlens_q",
                 "seqlens_k", "cu_seqlens_q", "cu_seqlens_k", "scale", "return_lse", "sinks", "block_table",
                 "k_new", "v_new", "kv_dtype", "k_scale", "v_scale")


def _options(args: dict) -> dict:
    return {name: args[name] for name in _OPTION_NAMES}


def _arrays_itemsize(dt: str) -> int:
    return 4 if dt == "f32" else 2


def attention(q, k, v, *, layout="bshd", causal=False, window=None, softcap=0, alibi_slopes=None,
              bias=None, seqlens_q=None, seqlens_k=None, cu_seqlens_q=None, cu_seqlens_k=None,
              scale=None, return_lse=False, algo="auto", backend="auto", device=0, out=None,
              align=None, num_splits=0, copy=False, sinks=None, block_table=None, k_new=None, v_new=None,
              kv_dtype=None, k_scale=None, v_scale=None, name=None, record=True):
    """Attention over arrays, in place: numpy arrays, torch tensors (CPU or CUDA),
    or anything with __array_interface__ / __cuda_array_interface__.

    layout "bshd": q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv] (as
    FlashAttention); "bhsd": [B, H, S, D] (as PyTorch's SDPA). Any strides work
    (views, transposes, slices). Packed batches (cu_seqlens_q/k) take [T, H, D]
    (or [1, T, H, D]). causal: False, "top-left" (PyTorch's is_causal) or
    "bottom-right" (FlashAttention); window (left, right), None or negative =
    unbounded; softcap; alibi_slopes [Hq]; bias [B|1, H|1, Sq, Sk] (f32/f16,
    additive, -inf allowed); seqlens_q/k [B] for padded batches; scale (default
    1/sqrt(D)); sinks [Hq] f32 (one logit per query head in each row's softmax
    denominator, never in O); block_table [B, max_pages_per_seq] int32 (host):
    k and v are then page pools [num_pages, page_size, Hkv, D] ("bhsd":
    [num_pages, Hkv, page_size, D]) and seqlens_k is required; k_new/v_new
    [B, S_new, Hkv, D] (append, then attend: written into k and v at
    seqlens_k[b].., which stays the cache length before the append; the caller
    advances it); kv_dtype "q8_0": k and v (and k_new/v_new) are uint8 arrays of
    ggml's q8_0 blocks, the last dimension D / 32 * 34 bytes (quantize_q8_0 makes
    them; the CPU backend runs them); fp8 caches: k and v as torch.float8_e4m3fn /
    torch.float8_e5m2 tensors, or uint8 arrays of fp8 bytes with kv_dtype "fp8e4m3" /
    "fp8e5m2" (numpy has no fp8), with optional k_scale / v_scale float32 [Hkv]
    (K = fp8 value * k_scale[h], FlashAttention 3's descale_k / descale_v; the CPU
    backend runs them); algo "auto", "naive", "flash", "splitkv"; backend "auto" (CUDA for
    CUDA tensors, the CPU for host memory), "cpu", "opencl", "cuda", or a Context.

    out: an array to write O into (its memory is used as it is). Returns
    (out, record), or (out, lse, record) with return_lse, where lse is f32
    [B, Hq, Sq] and record a dict with the C record's fields (times, phases, FLOPs,
    bytes, memory). copy=True lets a backend that cannot use host memory in place
    (CUDA) stage host arrays through buffers of its own. Raises XattnError (an
    XattnInputError, also a ValueError, for bad arguments) with the library's
    status name and message.

    name: a label for the call (the layer it serves); with torch.profiler active
    (after ``import xattn.torch``), each call is a ``record_function`` range named
    by it, the backend and the algorithm (docs/python.md, "Inside PyTorch").
    xattn has no backward pass: torch tensors that require grad are refused while
    grad mode is on (run under torch.no_grad() or pass .detach()'ed tensors).
    record=False returns None in the record's place (the library still keeps it
    with keep_records=True): the conversion to a dict is skipped.
    """
    _refuse_requires_grad(((q, "q"), (k, "k"), (v, "v"), (bias, "bias"), (sinks, "sinks")))
    views = [_arrays.view_of(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"))]
    ctx = _resolve_context(backend, device, views)
    opts = _options(locals())
    tracer = _tracer  # the range covers the whole call: checks, wrapping, the run, the record
    span = tracer.begin(ctx, name, algo) if tracer is not None else None
    rec, t_call, t_back = None, 0, 0
    try:
        with ctx._lock:
            prep, out_obj, lse_obj, meta = _prepare(ctx, *views, **opts, algo=algo, num_splits=num_splits,
                                                    out=out, need_outputs=True, copy=copy)
            try:
                h = ctx._handle()
                raw, info = new_filled(RunInfo)
                pdesc, pinfo = byref(prep.desc), ctypes.addressof(info)
                t_call = time.monotonic_ns()  # CLOCK_MONOTONIC, the records' clock: brackets the C call
                st = lib.xattn_attention(h, pdesc, pinfo)
                t_back = time.monotonic_ns()
                _check(st)
                for buf, vw, n in prep.staged:
                    _check(lib.xattn_buffer_read(buf, 0, c_void_p(vw.ptr), n))
                if record or span is not None:
                    rec = _last_record(ctx)
                    if rec is None:  # no record (cannot happen with profiling on): the run info
                        rec = _struct_dict(info)
                elif not ctx.keep_records:
                    _check(lib.xattn_profiler_reset(h))
            finally:
                prep.free()
    finally:
        if span is not None:
            tracer.end(span, rec, t_call, t_back)
    if not record:
        rec = None
    if return_lse:
        return out_obj, lse_obj, rec
    return out_obj, rec


# A tracer of the calls (xattn.torch installs one: torch.profiler ranges and the
# records' times on PyTorch's time base). begin(ctx, name, algo) -> span or None
# (None: not tracing now); end(span, record or None, t_call, t_back) closes it, with
# CLOCK_MONOTONIC nanoseconds read just before and just after the C call (0: no call).
_tracer = None


def set_tracer(tracer) -> None:
    """Installs (or, with None, removes) the call tracer (used by xattn.torch)."""
    global _tracer
    _tracer = tracer


def _refuse_requires_grad(items) -> None:
    """xattn has no backward pass: a tensor that requires grad, in grad mode, would
    come back without a graph. Refused, saying how to proceed."""
    import sys

    t = sys.modules.get("torch")
    if t is None or not t.is_grad_enabled():
        return
    for x, nm in items:
        if isinstance(x, t.Tensor) and x.requires_grad:
            raise input_error("INVALID_ARGUMENT",
                              f"{nm}: requires grad, but xattn has no backward pass (its output would carry "
                              "no graph and gradients would silently stop here); run the call under "
                              "torch.no_grad() or torch.inference_mode(), or pass .detach()'ed tensors")


def _last_record(ctx: Context):
    n = c_size_t()
    h = ctx._handle()
    _check(lib.xattn_profiler_count(h, byref(n)))
    if n.value == 0:
        return None
    raw, r = new_filled(Record)
    _check(lib.xattn_profiler_get(h, n.value - 1, ctypes.addressof(r)))
    if r.struct_size < ctypes.sizeof(Record):
        raise make_error(-17, f"record: {r.struct_size} bytes from the library, expected at least "
                         f"{ctypes.sizeof(Record)}")
    d = record_dict(r)
    if not ctx.keep_records:
        _check(lib.xattn_profiler_reset(h))
    return d


def reference(q, k, v, *, layout="bshd", causal=False, window=None, softcap=0, alibi_slopes=None,
              bias=None, seqlens_q=None, seqlens_k=None, cu_seqlens_q=None, cu_seqlens_k=None,
              scale=None, return_lse=False, backend="auto", device=0, align=None, copy=False,
              sinks=None, block_table=None, k_new=None, v_new=None, kv_dtype=None, k_scale=None,
              v_scale=None):
    """The library's double-precision reference (xattn_reference.h) for the same
    arguments as attention(): a plain loop, sharing no code with the kernels.
    Returns O as a float64 numpy array in the caller's layout ([B, Sq, Hq, Dv] for
    bshd, [B, Hq, Sq, Dv] for bhsd, [T, H, Dv] / [H, T, Dv] packed), or (O, LSE)
    with return_lse (LSE [B, Hq, Sq]). Padding rows are 0 (LSE -inf), as every
    kernel writes them."""
    views = [_arrays.view_of(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"))]
    ctx = _resolve_context(backend, device, views)
    with ctx._lock:
        prep, _, _, meta = _prepare(ctx, *views, **_options(locals()), algo="auto", num_splits=0,
                                    out=None, need_outputs=False, copy=copy)
        try:
            b, s, h, dv = meta["o_shape4"]
            o_ref = np.empty((b, s, h, dv), dtype=np.float64)
            lse_ref = np.empty((b, h, s), dtype=np.float64) if return_lse else None
            _check(lib.xattn_reference_attention(
                ctx._handle(), byref(prep.desc), o_ref.ctypes.data_as(c_void_p),
                lse_ref.ctypes.data_as(c_void_p) if lse_ref is not None else None))
        finally:
            prep.free()
    if meta["layout"] == "bhsd":
        o_ref = o_ref.transpose(0, 2, 1, 3)
    if meta["packed3"]:
        o_ref = o_ref[0]
        if lse_ref is not None:
            lse_ref = lse_ref[0]
    o_ref = np.ascontiguousarray(o_ref)
    return (o_ref, lse_ref) if return_lse else o_ref


__all__ = ["Context", "XattnError", "attention", "backends", "devices", "dequantize_q8_0", "quantize_q8_0",
           "reference", "version"]

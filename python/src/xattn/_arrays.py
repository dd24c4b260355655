"""Arrays in, arrays out, without copies.

An input is described by where its first element lives, its shape and its
strides in elements, whatever object holds it: a numpy array (its
``__array_interface__``), a torch tensor (``data_ptr()`` and ``stride()``, on
the CPU or a CUDA device), any object with ``__array_interface__`` or
``__cuda_array_interface__`` (CuPy, Numba, ...). Nothing is copied: the
library reads and writes that memory through a buffer that wraps it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import input_error

_NUMPY_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def _torch():
    """The torch module if it is already imported (never imports it: torch is optional)."""
    import sys

    return sys.modules.get("torch")


def is_torch_tensor(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


@dataclass
class View:
    """One strided array as the C library sees it."""

    obj: Any  # the caller's object, kept alive while the view is used
    kind: str  # "numpy", "torch", "cuda-array"
    device: str  # "cpu" or "cuda"
    device_index: int
    ptr: int  # address of element [0, 0, ...]
    shape: tuple
    strides: tuple  # elements, >= 0
    dtype: str  # "f32", "f16", "bf16", or the source's own name when unsupported
    itemsize: int
    readonly: bool = False

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def span_bytes(self) -> int:
        """Bytes from the first element to the end of the last one (0 when empty)."""
        if self.size == 0:
            return 0
        last = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return (last + 1) * self.itemsize

    def describe(self) -> str:
        return f"{self.kind} {self.dtype} {list(self.shape)} strides {list(self.strides)}"


def _torch_dtype_name(t, dtype):
    names = {t.float32: "f32", t.float16: "f16", t.bfloat16: "bf16"}
    # fp8 K/V caches (torch 2.1 and later): OCP E4M3 (no infinities) and E5M2
    for attr, name in (("float8_e4m3fn", "fp8e4m3"), ("float8_e5m2", "fp8e5m2")):
        if hasattr(t, attr):
            names[getattr(t, attr)] = name
    return names.get(dtype, str(dtype))


def view_of(x, name: str) -> View:
    """Describes x (without copying it); raises XattnInputError naming `name` when
    x is not an array the library can use in place."""
    t = _torch()
    if t is not None and isinstance(x, t.Tensor):
        if x.layout != t.strided:
            raise input_error("INVALID_ARGUMENT", f"{name}: a {x.layout} tensor (expected a dense, strided one)")
        if x.device.type not in ("cpu", "cuda"):
            raise input_error(
                "INVALID_ARGUMENT", f"{name}: a tensor on '{x.device}' (expected the CPU or a CUDA device)"
            )
        strides = tuple(int(s) for s in x.stride())
        if any(s < 0 for s in strides):
            raise input_error("INVALID_STRIDE", f"{name}: negative strides {list(strides)} (flip a copy instead)")
        return View(
            obj=x,
            kind="torch",
            device=x.device.type,
            device_index=x.device.index if x.device.index is not None else 0,
            ptr=int(x.data_ptr()),
            shape=tuple(int(s) for s in x.shape),
            strides=strides,
            dtype=_torch_dtype_name(t, x.dtype),
            itemsize=int(x.element_size()),
        )
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_interface(x, cai, name, device="cuda")
    if isinstance(x, np.ndarray) or hasattr(x, "__array_interface__"):
        a = x if isinstance(x, np.ndarray) else np.asarray(x)  # a view, never a copy
        return _from_numpy(a, x, name)
    raise input_error(
        "INVALID_ARGUMENT",
        f"{name}: a {type(x).__name__} is not an array (expected a numpy array, a torch tensor, or an "
        "object with __array_interface__ / __cuda_array_interface__)",
    )


def _from_numpy(a: np.ndarray, owner, name: str) -> View:
    dt = _NUMPY_DTYPES.get(a.dtype)
    if dt is None:  # (dtype.name is slow to compute: only for the other dtypes)
        dt = "bf16" if a.dtype.name == "bfloat16" else a.dtype.name  # ml_dtypes.bfloat16
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        raise input_error("INVALID_DTYPE", f"{name}: big-endian data ({a.dtype.str})")
    item = a.itemsize
    if any(s % item for s in a.strides):
        raise input_error(
            "INVALID_STRIDE", f"{name}: byte strides {list(a.strides)} are not multiples of the element size {item}"
        )
    strides = tuple(s // item for s in a.strides)
    if any(s < 0 for s in strides):
        raise input_error("INVALID_STRIDE", f"{name}: negative strides {list(strides)} (flip a copy instead)")
    ptr = a.__array_interface__["data"][0]
    return View(
        obj=owner,
        kind="numpy",
        device="cpu",
        device_index=0,
        ptr=int(ptr),
        shape=tuple(int(s) for s in a.shape),
        strides=strides,
        dtype=dt,
        itemsize=item,
        readonly=not a.flags.writeable,
    )


def _from_interface(owner, iface: dict, name: str, device: str) -> View:
    typestr = iface.get("typestr", "")
    dt = {"<f4": "f32", "<f2": "f16"}.get(typestr, typestr)
    if typestr == "<V2" and "bfloat16" in str(getattr(owner, "dtype", "")):
        dt = "bf16"
    item = int(typestr[2:]) if typestr[2:].isdigit() else 0
    shape = tuple(int(s) for s in iface["shape"])
    st = iface.get("strides")
    if st is None:  # C-contiguous
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    else:
        if item == 0 or any(s % item for s in st):
            raise input_error("INVALID_STRIDE", f"{name}: byte strides {list(st)} are not multiples of {item}")
        strides = tuple(int(s) // item for s in st)
    if any(s < 0 for s in strides):
        raise input_error("INVALID_STRIDE", f"{name}: negative strides {list(strides)}")
    ptr, ro = iface["data"]
    dev_index = 0
    if device == "cuda":
        dev = getattr(owner, "device", None)
        dev_index = int(getattr(dev, "id", 0) or 0)
    return View(owner, "cuda-array", device, dev_index, int(ptr or 0), shape, strides, dt, item, bool(ro))


def empty_like_source(src: View, shape: tuple, dtype: str):
    """A new, C-contiguous array of the same family and device as `src`."""
    if src.kind == "torch":
        t = _torch()
        tdt = {"f32": t.float32, "f16": t.float16, "bf16": t.bfloat16}[dtype]
        dev = t.device(src.device, src.device_index) if src.device == "cuda" else t.device("cpu")
        return t.empty(shape, dtype=tdt, device=dev)
    if src.kind == "cuda-array":
        try:
            import cupy  # noqa: F401 - the usual owner of __cuda_array_interface__

            cdt = {"f32": "float32", "f16": "float16"}.get(dtype)
            if cdt is None:
                raise input_error("INVALID_DTYPE", f"no CuPy dtype for {dtype}")
            with cupy.cuda.Device(src.device_index):
                return cupy.empty(shape, dtype=cdt)
        except ImportError:
            raise input_error(
                "INVALID_ARGUMENT", "CUDA arrays other than torch tensors need CuPy to allocate outputs; pass out="
            ) from None
    if dtype == "bf16":
        try:
            import ml_dtypes

            return np.empty(shape, dtype=ml_dtypes.bfloat16)
        except ImportError:
            raise input_error(
                "INVALID_DTYPE", "a bf16 numpy output needs ml_dtypes (pip install ml_dtypes), or pass out="
            ) from None
    return np.empty(shape, dtype={"f32": np.float32, "f16": np.float16}[dtype])


def host_int32(x, name: str):
    """A small host array of int32 (lengths, offsets): copied, they are parameters, not tensors."""
    if is_torch_tensor(x):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim != 1:
        raise input_error("INVALID_LENGTHS", f"{name}: expected a 1-D array of integers, got shape {list(a.shape)}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise input_error("INVALID_LENGTHS", f"{name}: expected integers, got {a.dtype}")
    if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
        raise input_error("INVALID_LENGTHS", f"{name}: values beyond int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def host_float32(x, name: str):
    if is_torch_tensor(x):
        x = x.detach().float().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise input_error("INVALID_ARGUMENT", f"{name}: expected a 1-D array, got shape {list(a.shape)}")
    return np.ascontiguousarray(a, dtype=np.float32)


def host_bytes_view(v: View) -> np.ndarray:
    """The memory of a CPU view as a numpy array of unsigned integers of its element
    size, with its strides: for exact overlap tests (np.shares_memory) on any source."""
    n = v.span_bytes()
    if n == 0:
        return np.empty(0, dtype=np.uint8)
    udt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[v.itemsize]
    raw = (ctypes.c_uint8 * n).from_address(v.ptr)
    base = np.frombuffer(raw, dtype=udt)
    return np.lib.stride_tricks.as_strided(
        base, shape=v.shape, strides=tuple(s * v.itemsize for s in v.strides), writeable=False
    )

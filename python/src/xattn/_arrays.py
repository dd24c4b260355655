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
import math
import numbers
import operator
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
    # A foreign object's numbers become C int64 extents and strides, a pointer
    # and a size_t span: each is checked before (ctypes would wrap them).
    shape = tuple(host_int(s, f"{name}.shape[{i}]", 0, INT64[1], status="INVALID_SHAPE")
                  for i, s in enumerate(iface["shape"]))
    st = iface.get("strides")
    if st is not None:
        st = tuple(host_int(s, f"{name}.strides[{i}]", *INT64, status="INVALID_STRIDE") for i, s in enumerate(st))
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
    if any(s > INT64[1] for s in strides):
        raise input_error("SIZE_OVERFLOW", f"{name}: shape {list(shape)} has strides {list(strides)} beyond "
                          f"int64 ({_range_text(*INT64)})")
    ptr, ro = iface["data"]
    ptr = host_int(ptr or 0, f"{name}: the data pointer", *UINT64)
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


# ---- numbers before they become C numbers ------------------------------------------
#
# ctypes converts a Python int to a C integer modulo 2^bits and a double to a float
# by rounding (1e-50 becomes 0, 1e50 infinity), silently. Every number the package
# hands to the library goes through one of these checks first, so that a value the
# C type cannot hold is refused, naming the argument, the value and the range,
# rather than run as another value.

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
FLT_MAX = float(np.finfo(np.float32).max)  # 3.4028235e+38
FLT_MIN = float(np.finfo(np.float32).tiny)  # 1.1754944e-38, the smallest normal float32


def _range_text(lo: int, hi: int) -> str:
    return f"{lo}..{hi}"


def host_int(value, name: str, lo: int, hi: int, *, status: str = "INVALID_ARGUMENT", note: str = "",
             allow_bool: bool = False) -> int:
    """value as a Python int in lo..hi, or XattnInputError (status) naming `name`,
    the value and the range. Python and numpy integers (anything with __index__)
    are accepted; floats are not (numpy's rule for sizes and indices); a bool only
    with allow_bool (a flag), since True where a count or a position is expected
    is a mistake, not 1."""
    if not allow_bool and isinstance(value, (bool, np.bool_)):
        raise input_error(status, f"{name}: {value!r} is a bool, expected an integer in "
                          f"{_range_text(lo, hi)}{note}")
    try:
        i = operator.index(value)
    except TypeError:
        raise input_error(status, f"{name}: {value!r} ({type(value).__name__}) is not an integer, expected an "
                          f"integer in {_range_text(lo, hi)}{note}") from None
    if not lo <= i <= hi:
        raise input_error(status, f"{name}: {i} is out of range, expected an integer in "
                          f"{_range_text(lo, hi)}{note}")
    return i


def host_f32(value, name: str, *, nonneg: bool = False, nonzero: bool = False, status: str = "INVALID_ARGUMENT",
             note: str = "") -> float:
    """value as a Python float that a C float holds as given: finite, at most
    FLT_MAX in magnitude and, unless 0, at least FLT_MIN (a smaller one would be
    flushed towards 0, and 0 means "off" or "the default"). nonneg / nonzero add
    those conditions. Else XattnInputError naming `name`, the value and the range."""
    want = ("a finite" + (", non-zero" if nonzero else "") + " number" + (" >= 0" if nonneg else "")
            + f" that float32 holds ({FLT_MIN:.8g} <= |x| <= {FLT_MAX:.8g}"
            + ("" if nonzero else ", or 0") + ")" + note)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise input_error(status, f"{name}: {value!r} ({type(value).__name__}) is not a number, expected {want}")
    try:
        x = float(value)
    except (OverflowError, ValueError, TypeError):
        raise input_error(status, f"{name}: {value!r} does not fit a float, expected {want}") from None
    if not math.isfinite(x):
        raise input_error(status, f"{name}: {x!r} is not finite, expected {want}")
    if (nonneg and x < 0) or (nonzero and x == 0):
        raise input_error(status, f"{name}: {x!r}, expected {want}")
    if math.isinf(ctypes.c_float(x).value):
        raise input_error(status, f"{name}: {x!r} is beyond float32's range (it would become infinite), "
                          f"expected {want}")
    if x != 0 and abs(x) < FLT_MIN:
        raise input_error(status, f"{name}: {x!r} is below float32's smallest normal number (it would not "
                          f"reach the library as given), expected {want}")
    return x


def _index_text(name: str, idx) -> str:
    return name + "".join(f"[{int(i)}]" for i in idx)


def host_int32(x, name: str, status: str = "INVALID_LENGTHS", ndim: int = 1):
    """A small host array of int32 (lengths, offsets, page indices): copied, they
    are parameters, not tensors. Every value is checked to lie in int32's range
    before the conversion (numpy's astype would wrap it); the first one outside
    is named with its index."""
    lo, hi = INT32
    rng = f"an integer in {_range_text(lo, hi)} (int32)"
    if is_torch_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as e:
        raise input_error(status, f"{name}: not an array of integers ({e})") from None
    if a.ndim != ndim:
        raise input_error(status, f"{name}: expected a {ndim}-D array of integers, got shape {list(a.shape)}")
    if a.size == 0:
        return np.zeros(a.shape, dtype=np.int32)
    kind = a.dtype.kind
    if kind == "f" and not isinstance(x, np.ndarray):
        # numpy makes float64 of a list that mixes ints beyond int64 with others
        # ([2**63, 3]): such a list is seen element by element, as Python ints
        o = np.asarray(x, dtype=object)
        if all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in o.flat):
            a, kind = o, "O"
    if kind == "O":  # Python ints beyond int64 (or anything else): one by one
        for idx, e in np.ndenumerate(a):
            host_int(e, _index_text(name, idx), lo, hi, status=status, note=" (int32)")
        return np.array(a.tolist(), dtype=np.int32)
    if kind not in "iu":
        got = "bool" if kind == "b" else str(a.dtype)
        raise input_error(status, f"{name}: values of dtype {got}, expected integers in {_range_text(lo, hi)} "
                          "(int32)")
    bad = (a > hi) if kind == "u" else (a < lo) | (a > hi)
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        raise input_error(status, f"{_index_text(name, idx)}: {int(a[idx])} is out of range, expected {rng}")
    return np.ascontiguousarray(a, dtype=np.int32)


def host_float32(x, name: str, status: str = "INVALID_ARGUMENT"):
    """A small host array of float32 parameters (ALiBi slopes), every value checked
    as host_f32 does (finite, held by float32 as given) before the conversion."""
    if is_torch_tensor(x):
        x = x.detach().cpu().double().numpy()
    try:
        a = np.asarray(x)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"dtype {'bool' if a.dtype.kind == 'b' else a.dtype}")
        a = a.astype(np.float64)
    except (ValueError, TypeError, OverflowError) as e:
        raise input_error(status, f"{name}: not an array of real numbers ({e})") from None
    if a.ndim != 1:
        raise input_error(status, f"{name}: expected a 1-D array, got shape {list(a.shape)}")
    with np.errstate(over="ignore", under="ignore"):
        f = a.astype(np.float32)
    bad = ~np.isfinite(f) | ((a != 0) & (np.abs(a) < FLT_MIN))
    if bad.any():
        i = int(np.argwhere(bad)[0][0])
        host_f32(float(a[i]), f"{name}[{i}]", status=status)  # raises, saying why
    return np.ascontiguousarray(f)


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

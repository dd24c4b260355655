"""xattn: portable attention (CPU, OpenCL, CUDA) with one measurement model.

The package binds the C library's public API through ctypes:

    out, rec = xattn.attention(q, k, v, layout="bhsd", causal="top-left")

takes numpy arrays and torch tensors without copying them and returns the
output and the call's record (times, phases, FLOPs, bytes, memory). A
``Context`` keeps a device, its buffers and its program cache alive between
calls; ``reference`` is the double-precision reference; ``devices`` lists what
this machine has. ``xattn.torch`` captures and profiles the attention calls of
a PyTorch model (``python -m xattn profile --help``). docs/python.md is the
manual.
"""

from ._capi import library_path
from ._core import Context, attention, backends, dequantize_q8_0, devices, quantize_q8_0, reference, version
from ._errors import XattnError, XattnInputError

__version__ = "0.1.0"

__all__ = [
    "Context",
    "XattnError",
    "XattnInputError",
    "attention",
    "backends",
    "dequantize_q8_0",
    "devices",
    "library_path",
    "quantize_q8_0",
    "reference",
    "version",
]

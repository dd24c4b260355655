"""The package's exceptions: each carries the library's status name and message."""

from __future__ import annotations

# Kept apart from _capi so that argument checks can raise before the library loads.
_STATUS_CODES = {
    "OK": 0,
    "INVALID_ARGUMENT": -1,
    "INVALID_DTYPE": -2,
    "INVALID_SHAPE": -3,
    "INVALID_STRIDE": -4,
    "OUT_OF_BOUNDS": -5,
    "INVALID_LENGTHS": -6,
    "SIZE_OVERFLOW": -7,
    "OUT_OF_MEMORY": -8,
    "UNSUPPORTED": -9,
    "BACKEND_UNAVAILABLE": -10,
    "DEVICE_NOT_FOUND": -11,
    "BACKEND": -12,
    "BUILD_FAILED": -13,
    "WRONG_CONTEXT": -14,
    "BUSY": -15,
    "IO": -16,
    "INTERNAL": -17,
}
_STATUS_BY_CODE = {v: k for k, v in _STATUS_CODES.items()}

# Statuses that say the caller's input was wrong (XattnInputError, also a ValueError).
_INPUT_STATUSES = {-1, -2, -3, -4, -5, -6, -7}


class XattnError(RuntimeError):
    """A failed call. ``status`` is the library's code (negative), ``status_name``
    its name (``"XATTN_STATUS_INVALID_SHAPE"``), ``message`` the library's message,
    which names the field and the value."""

    def __init__(self, status: int, message: str):
        self.status = int(status)
        self.status_name = "XATTN_STATUS_" + _STATUS_BY_CODE.get(self.status, f"UNKNOWN({status})")
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


class XattnInputError(XattnError, ValueError):
    """A call refused because of its arguments (the INVALID_*, OUT_OF_BOUNDS,
    SIZE_OVERFLOW statuses); also a ValueError."""


def make_error(status: int, message: str) -> XattnError:
    cls = XattnInputError if status in _INPUT_STATUSES else XattnError
    return cls(status, message)


def input_error(status_name: str, message: str) -> XattnError:
    """An error found by the Python layer before calling the library."""
    return make_error(_STATUS_CODES[status_name], message)

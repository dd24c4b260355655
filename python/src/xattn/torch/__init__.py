"""The PyTorch bridge: capture the attention calls of a real forward pass and
profile them on every xattn backend and algorithm (docs/python.md).

    cap = xattn.torch.capture(model, **batch)        # or: with xattn.torch.capture(model) as cap:
    cap.write_cases("cases.json")                     # replay with: xattn bench --cases cases.json
    prof = xattn.torch.profile(model, **batch, out_dir="profile")
    print(prof.text())

Needs torch (pip install "./python[torch]").
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError("xattn.torch needs PyTorch: pip install \"./python[torch]\" (or pip install torch)") from e

from ._capture import AttentionCall, Capture, TensorInfo, capture
from ._profile import Profile, profile

__all__ = ["AttentionCall", "Capture", "Profile", "TensorInfo", "capture", "profile"]

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
from ._sdpa import scaled_dot_product_attention
from ._trace import export_chrome_trace
from ._hf import attention_options, set_attention_options, xattn_attention_forward
from ._hf import register as _register_hf

_register_hf()  # attn_implementation="xattn" in transformers, where it is installed

__all__ = ["AttentionCall", "Capture", "Profile", "TensorInfo", "attention_options", "capture",
           "export_chrome_trace", "profile", "scaled_dot_product_attention", "set_attention_options",
           "xattn_attention_forward"]

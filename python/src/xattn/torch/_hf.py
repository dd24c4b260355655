"""transformers' attention registry: attn_implementation="xattn".

``import xattn.torch`` registers ``xattn_attention_forward`` under the name
"xattn" in transformers' AttentionInterface (and SDPA's mask builder under the
same name in its AttentionMaskInterface, so models build the masks SDPA gets),
so that

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="xattn")
    model.set_attn_implementation("xattn")          # or on a loaded model

runs every attention layer on xattn. K/V heads are passed as the model has them
(GQA without repeat_kv copies); masks that are padding / causality / a sliding
window become lengths / causal / window; softcap (Gemma 2) and attention sinks
(gpt-oss's s_aux) are xattn options. What xattn cannot do (dropout in training
mode, output_attentions, a mask it cannot take) is an error naming the layer:
nothing falls back to another implementation.

The backend, device and algorithm: ``xattn.torch.attention_options(backend=...,
device=..., algo=...)`` (a context manager, or call ``.set()`` on its result to
keep them); by default the CPU for host tensors and CUDA for CUDA tensors.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from .._errors import XattnError, make_error
from ._sdpa import _ALGOS, _BACKENDS

_opts = {"backend": None, "device": None, "algo": None}
_opts_lock = threading.Lock()


@contextlib.contextmanager
def attention_options(backend=None, device=None, algo=None):
    """The backend ("cpu", "opencl", "cuda"; None = the tensors' own), device index
    and algorithm ("auto", "naive", "flash", "splitkv") of attn_implementation="xattn"
    inside the block."""
    if backend is not None and backend not in _BACKENDS:
        raise ValueError(f"backend: {backend!r} is not None, 'cpu', 'opencl' or 'cuda'")
    if algo is not None and algo not in _ALGOS:
        raise ValueError(f"algo: {algo!r} is not None, 'auto', 'naive', 'flash' or 'splitkv'")
    with _opts_lock:
        saved = dict(_opts)
        _opts.update(backend=backend, device=device, algo=algo)
    try:
        yield dict(_opts)
    finally:
        with _opts_lock:
            _opts.clear()
            _opts.update(saved)


def set_attention_options(backend=None, device=None, algo=None) -> None:
    """As attention_options, kept until changed."""
    with attention_options(backend, device, algo):
        snap = dict(_opts)
    with _opts_lock:
        _opts.update(snap)


def _layer_name(module) -> str:
    idx = getattr(module, "layer_idx", None)
    cls = type(module).__name__
    return f"{cls}[{idx}]" if idx is not None else cls


def _refuse(layer: str, why: str):
    raise make_error(-9, f"attn_implementation='xattn', layer {layer}: {why}")


def xattn_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                            softcap=None, sliding_window=None, s_aux=None, position_bias=None, **kwargs):
    """transformers' attention function signature: query [B, Hq, L, D], key/value
    [B, Hkv, S, D]; returns (attn_output [B, L, Hq, Dv], None)."""
    layer = _layer_name(module)
    if dropout and dropout > 0:
        _refuse(layer, f"attention dropout {dropout} (xattn has no dropout; is the model in training mode? "
                "call model.eval())")
    if kwargs.get("output_attentions", False):
        _refuse(layer, "output_attentions=True (xattn never forms the attention weights; use "
                "attn_implementation='eager' to get them)")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        _refuse(layer, "the activations require grad, but xattn has no backward pass; run the model under "
                "torch.no_grad() or torch.inference_mode() (generate() does)")
    if s_aux is None:
        s_aux = kwargs.get("sinks")
    q_length = query.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # as transformers' SDPA integration: is_causal (top-left) only without a mask and beyond decode
    is_causal = bool(q_length > 1 and attention_mask is None and is_causal)
    if is_causal and key.shape[2] > q_length:  # an empty static cache's prefill (see sdpa_attention_forward)
        key, value = key[:, :, :q_length], value[:, :, :q_length]
        if position_bias is not None:
            position_bias = position_bias[:, :, :, :q_length]
    if position_bias is not None:
        from transformers.integrations.sdpa_attention import create_position_bias_mask

        attention_mask = create_position_bias_mask(position_bias, attention_mask, is_causal, query, key)
        is_causal = False
    if attention_mask is not None and attention_mask.dtype != torch.bool and attention_mask.dtype != query.dtype:
        attention_mask = attention_mask.to(query.dtype)
    if softcap is not None and not softcap > 0:
        softcap = None
    with _opts_lock:
        opts = dict(_opts)
    be = opts["backend"] or ("cuda" if query.is_cuda else "cpu")
    dev = opts["device"] if opts["device"] is not None else ((query.device.index or 0) if query.is_cuda else 0)
    try:
        out = torch.ops.xattn.sdpa(query, key, value, attention_mask, is_causal, scaling,
                                   query.shape[1] != key.shape[1], float(softcap or 0.0),
                                   s_aux if s_aux is not None else None, be, int(dev), opts["algo"] or "auto",
                                   layer)
    except XattnError as e:
        raise type(e)(e.status, f"attn_implementation='xattn', layer {layer}: {e.message}") from e
    return out.transpose(1, 2).contiguous(), None


_registered = False


def register() -> bool:
    """Registers "xattn" with transformers (done by ``import xattn.torch`` when
    transformers is installed). Returns False when transformers is not."""
    global _registered
    if _registered:
        return True
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except Exception:  # not installed, or an install that does not import: no registration
        return False
    AttentionInterface.register("xattn", xattn_attention_forward)
    AttentionMaskInterface.register("xattn", sdpa_mask)
    _registered = True
    return True


__all__ = ["attention_options", "register", "set_attention_options", "xattn_attention_forward"]

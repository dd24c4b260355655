"""attn_implementation="xattn" in transformers: the same greedy tokens as "sdpa" over
a 32-token generation and logits within f32 tolerance, on a tiny random Llama (GQA)
and on all-MiniLM-L6-v2's embeddings, on the CPU and OpenCL backends; errors that
name the layer."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install './python[torch]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import xattn  # noqa: E402
import xattn.torch as xt  # noqa: E402
from xattn._numerics import rel_l2  # noqa: E402


def _backends():
    out = ["cpu"]
    if xattn.backends()["opencl"]["available"]:
        out.append("opencl")
    return out


def tiny_llama(attn):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.set_attn_implementation(attn)
    return model.eval()


class _CountCalls:
    """Counts the xattn calls (records) made inside the block."""

    def __init__(self):
        self.calls = []

    def __enter__(self):
        from xattn import _core

        self._orig = _core.attention
        outer = self

        def counted(*a, **k):
            k["record"] = True  # the drop-in skips the record's conversion; the test reads it
            out = outer._orig(*a, **k)
            outer.calls.append(out[-1])
            return out

        _core.attention = counted
        return self

    def __exit__(self, *exc):
        from xattn import _core

        _core.attention = self._orig


@pytest.mark.parametrize("backend", _backends())
def test_llama_generate_same_tokens_and_logits(backend):
    ref = tiny_llama("sdpa")
    x = tiny_llama("sdpa")
    x.load_state_dict(ref.state_dict())
    x.set_attn_implementation("xattn")
    assert x.config._attn_implementation == "xattn"
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 256, (2, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # left padding, as generate() batches prompts
    ids[1, :4] = 0
    kw = dict(max_new_tokens=32, do_sample=False, min_new_tokens=32, pad_token_id=0)
    with torch.no_grad():
        want = ref.generate(input_ids=ids, attention_mask=mask, **kw)
        with xt.attention_options(backend=backend), _CountCalls() as cc:
            got = x.generate(input_ids=ids, attention_mask=mask, **kw)
    assert got.shape == want.shape == (2, 11 + 32)
    assert torch.equal(got, want)
    # every layer of every step ran on xattn, with the K/V heads as the model has them
    assert len(cc.calls) == 3 * 32
    assert all(r["backend"] == backend and r["heads"] == 8 and r["kv_heads"] == 2 for r in cc.calls)
    # logits of the whole sequence (prefill with padding, then one step with a cache)
    with torch.no_grad():
        full_mask = torch.ones_like(want)
        full_mask[1, :4] = 0
        lw = ref(input_ids=want, attention_mask=full_mask).logits
        with xt.attention_options(backend=backend):
            lg = x(input_ids=want, attention_mask=full_mask).logits
    keep = full_mask.bool()  # padded positions' logits are not used by anyone
    assert rel_l2(lg[keep].double().numpy(), lw[keep].double().numpy()) < 2e-5
    assert float((lg[keep] - lw[keep]).abs().max()) < 1e-3


def test_llama_causal_and_decode_use_lengths_not_bias():
    """Without padding, prefill is causal top-left and decode has no mask: no bias."""
    ref, x = tiny_llama("sdpa"), tiny_llama("xattn")
    ids = torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), _CountCalls() as cc:
        got = x.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
        want = ref.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert torch.equal(got, want)
    pre = cc.calls[:3]
    assert all(r["causal"] and r["align"] == "top-left" and not r["has_bias"] for r in pre)
    dec = cc.calls[3:]
    assert all(r["sq"] == 1 and not r["has_bias"] for r in dec)


@pytest.mark.parametrize("backend", _backends())
def test_minilm_embeddings(backend):
    try:
        from xattn.torch._models import minilm_path

        path = minilm_path()
    except ImportError as e:
        pytest.skip(str(e))
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    ref = AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()
    x = AutoModel.from_pretrained(path, attn_implementation="xattn").eval()
    sentences = ["xattn runs every attention layer of this model.", "A short one.",
                 "Padding makes the batch rectangular, and the lengths tell xattn which keys are real."]
    batch = tok(sentences, padding=True, return_tensors="pt")

    def embed(model):
        out = model(**batch).last_hidden_state
        m = batch["attention_mask"].unsqueeze(-1).float()
        e = (out * m).sum(1) / m.sum(1)
        return torch.nn.functional.normalize(e, dim=-1)

    with torch.no_grad():
        want = embed(ref)
        with xt.attention_options(backend=backend), _CountCalls() as cc:
            got = embed(x)
    assert len(cc.calls) == 6  # six layers
    assert all(r["padded"] and not r["has_bias"] for r in cc.calls)  # key padding as lengths
    assert rel_l2(got.double().numpy(), want.double().numpy()) < 2e-6
    cos = (got * want).sum(-1)
    assert bool(torch.all(cos > 1 - 1e-6))


def test_errors_name_the_layer():
    x = tiny_llama("xattn")
    ids = torch.randint(3, 256, (1, 5), generator=torch.Generator().manual_seed(3))
    x.train()
    x.config.attention_dropout = 0.1
    for layer in x.model.layers:
        layer.self_attn.attention_dropout = 0.1
    with torch.no_grad(), pytest.raises(xattn.XattnError, match=r"layer LlamaAttention\[0\].*dropout"):
        x(input_ids=ids)
    x.eval()
    with pytest.raises(xattn.XattnError, match=r"layer LlamaAttention\[0\].*no backward pass"):
        x(input_ids=ids)  # grad mode on: the weights require grad


def test_softcap_and_sinks_are_passed():
    """The function itself with softcap and sinks (Gemma 2, gpt-oss): against the
    library's double-precision reference with the same options."""
    from xattn.torch._hf import xattn_attention_forward

    class M(torch.nn.Module):
        is_causal = True
        layer_idx = 4
        num_key_value_groups = 2

    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(1, 4, 6, 32, generator=g), torch.randn(1, 2, 6, 32, generator=g), \
        torch.randn(1, 2, 6, 32, generator=g)
    sinks = torch.randn(4, generator=g)
    with torch.no_grad():
        out, w = xattn_attention_forward(M(), q, k, v, None, scaling=0.2, softcap=30.0, s_aux=sinks)
    assert w is None and out.shape == (1, 6, 4, 32)
    ref = xattn.reference(q, k, v, layout="bhsd", causal="top-left", scale=0.2, softcap=30.0, sinks=sinks)
    assert rel_l2(out.transpose(1, 2).double().numpy(), ref) < 1e-5
    plain = xattn.reference(q, k, v, layout="bhsd", causal="top-left", scale=0.2)
    assert rel_l2(plain, ref) > 1e-3  # the options changed the result

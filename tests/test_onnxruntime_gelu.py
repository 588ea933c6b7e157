"""export(optimize_for="onnxruntime"): GELU written out in elementwise ops (before opset 20 the
converters write aten.gelu as its formula; transformers' GELU modules write it in Python ops) as
com.microsoft FastGelu (the tanh approximation) or Gelu (erf). Each file runs in onnxruntime at
sizes other than the traced ones, against eager and against the plain export."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
import transformers
from support import check, run_ort

import fastonnx

OPSET = 18  # ONNX's own Gelu from 20 on: the converters write the formula before


class Activation(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.proj = torch.nn.Linear(16, 32)
        self.act = act

    def forward(self, x):
        return self.act(self.proj(x))


FORMS = {
    # aten.gelu, converted to its formula; a factor of the activation's input after it
    "aten-tanh": ("FastGelu", lambda h: torch.nn.functional.gelu(h, approximate="tanh") * h),
    "aten-erf": ("Gelu", lambda h: torch.nn.functional.gelu(h)),
    # transformers' NewGELUActivation (gpt2's gelu_new): other orders, Pow for the cube
    "gelu-new": (
        "FastGelu",
        lambda h: 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0)))),
    ),
    "cube-as-products": ("FastGelu", lambda h: h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h))) * 0.5),
    # GELUActivation's python form: a Div by sqrt(2)
    "erf-div": ("Gelu", lambda h: h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))),
}


def _export(model, args, fuse: bool, **kwargs) -> fastonnx.ExportResult:
    return fastonnx.export(
        model.eval(), args, optimize_for="onnxruntime" if fuse else None, opset_version=OPSET, **kwargs
    )


def _ops(result) -> Counter:
    return Counter(n.op_type for n in result.model_proto.graph.node)


def _compare(model, fused, plain, x, rtol=1e-5, atol=1e-5) -> None:
    with torch.no_grad():
        expected = model(x)
    expected = (expected.logits if hasattr(expected, "logits") else expected).float().numpy()
    got = run_ort(fused.model_proto, [x])[0].astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got, run_ort(plain.model_proto, [x])[0].astype(np.float32), rtol=rtol, atol=atol)


_DYNAMIC = dict(input_names=["x"], dynamic_axes={"x": {0: "batch", 1: "seq"}})


@pytest.mark.parametrize("form", list(FORMS))
def test_gelu_forms_fuse(form):
    op, act = FORMS[form]
    torch.manual_seed(0)
    model = Activation(act)
    fused, plain = (_export(model, (torch.randn(2, 3, 16),), fuse, **_DYNAMIC) for fuse in (True, False))
    ops = _ops(fused)
    assert ops[op] == 1 and not {"Tanh", "Erf", "Pow"} & set(ops), ops
    assert dict(fused.native.rewrites["counts"]) == {op: 1}
    assert next(n.domain for n in fused.model_proto.graph.node if n.op_type == op) == "com.microsoft"
    check(fused.model_proto)
    _compare(model, fused, plain, torch.randn(4, 7, 16) * 3)


@pytest.mark.parametrize(
    "act",
    [
        # a constant that is not the formula's
        lambda h: 0.5 * h * (1.0 + torch.tanh(0.79 * (h + 0.044715 * torch.pow(h, 3.0)))),
        # the tanh read outside the pattern too
        lambda h: torch.cat([0.5 * h * (1.0 + (t := torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))), t], -1),
        # x times something else than 0.5 * (1 + erf)
        lambda h: 0.25 * h * (1.0 + torch.erf(h / math.sqrt(2.0))),
    ],
    ids=["other-constant", "inner-value-read-outside", "other-product"],
)
def test_what_is_not_gelu_stays_plain(act):
    torch.manual_seed(0)
    model = Activation(act)
    fused, plain = (_export(model, (torch.randn(2, 3, 16),), fuse, **_DYNAMIC) for fuse in (True, False))
    assert not {"FastGelu", "Gelu"} & set(_ops(fused))
    _compare(model, fused, plain, torch.randn(4, 7, 16) * 3)


def test_float16_fuses_and_bfloat16_stays_plain_and_says_why():
    torch.manual_seed(0)
    half = Activation(FORMS["gelu-new"][1]).half()
    fused, plain = (
        _export(half, (torch.randn(2, 3, 16, dtype=torch.float16),), fuse, **_DYNAMIC) for fuse in (True, False)
    )
    assert _ops(fused)["FastGelu"] == 1
    _compare(half, fused, plain, torch.randn(4, 7, 16, dtype=torch.float16), rtol=1e-2, atol=1e-2)

    bf16 = Activation(FORMS["gelu-new"][1]).to(torch.bfloat16)
    fused = _export(bf16, (torch.randn(2, 3, 16, dtype=torch.bfloat16),), True, **_DYNAMIC)
    assert "FastGelu" not in _ops(fused)
    assert any("FastGelu: left plain" in line and "bfloat16" in line for line in fused.native.rewrites["lines"])


def _tiny(config_class, model_class, **extra):
    torch.manual_seed(0)
    config = config_class(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        use_cache=False,
        **extra,
    )
    return model_class(config).eval()


@pytest.mark.parametrize(
    ("build", "op"),
    [
        # gelu_new in its Python ops
        (
            lambda: _tiny(transformers.GPT2Config, transformers.GPT2LMHeadModel, n_embd=32, n_layer=2, n_head=4),
            "FastGelu",
        ),
        # gelu_pytorch_tanh between gate and up (act(gate) * up)
        (
            lambda: _tiny(transformers.GemmaConfig, transformers.GemmaForCausalLM, num_key_value_heads=2, head_dim=8),
            "FastGelu",
        ),
        # erf GELU
        (
            lambda: _tiny(transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM, hidden_act="gelu"),
            "Gelu",
        ),
    ],
    ids=["gpt2", "gemma", "gpt_neox"],
)
def test_decoders_gelus_fuse(build, op):
    model = build()
    tokens = {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch", 1: "seq"}}}
    args = (torch.randint(4, 96, (2, 5)),)
    fused, plain = (_export(model, args, fuse, **tokens) for fuse in (True, False))
    assert _ops(fused)[op] == 2, _ops(fused)  # one per layer
    check(fused.model_proto)
    _compare(model, fused, plain, torch.randint(4, 96, (3, 7)), rtol=1e-4, atol=1e-4)

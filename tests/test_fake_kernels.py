"""The quick fake kernel of scaled_dot_product_attention (frontends/export/fake_kernels.py): the
same fake result and the same guards as the op's own decomposition, the same exported file, and
that file right in onnxruntime at sizes other than the traced ones."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from support import assert_matches, record_quick_attention
from torch._dispatch.python import enable_python_dispatcher
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.nn.attention import SDPBackend, sdpa_kernel

import fastonnx
from fastonnx.frontends.export import fake_kernels, trace
from fastonnx.frontends.export.fake_kernels import quick_fake_kernels

_SDPA = torch.ops.aten.scaled_dot_product_attention.default
_KEY = torch._C.DispatchKey.CompositeImplicitAutograd

D, S = True, False  # a dynamic and a static dimension
# (q, k, v, mask) shapes and which of their dimensions are symbolic; the op's keyword arguments.
CASES = {
    "plain": ([(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), None], [(D, S, D, S)] * 3, {}),
    "float mask": (
        [(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), (2, 1, 5, 7)],
        [(D, S, D, S)] * 3 + [(D, D, D, D)],
        {},
    ),
    "bool mask": (
        [(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), (2, 1, 5, 7)],
        [(D, S, D, S)] * 3 + [(D,) * 4],
        {"bool_mask": True},
    ),
    "broadcast mask": (
        [(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), (1, 1, 5, 7)],
        [(D, S, D, S)] * 3 + [(S, S, D, D)],
        {},
    ),
    "2-d mask, every dim symbolic": (
        [(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), (5, 7)],
        [(D,) * 4] * 3 + [(D, D)],
        {},
    ),
    "gqa": ([(2, 8, 5, 64), (2, 2, 7, 64), (2, 2, 7, 64), None], [(D, S, D, S)] * 3, {"enable_gqa": True}),
    "causal": ([(2, 8, 5, 64), (2, 8, 5, 64), (2, 8, 5, 64), None], [(D, S, D, S)] * 3, {"is_causal": True}),
    "value width, scale": ([(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 32), None], [(D, S, D, S)] * 3, {"scale": 0.3}),
    "3-d": ([(2, 5, 64), (2, 7, 64), (2, 7, 64), None], [(D, D, D)] * 3, {}),
    "batch 1 against 2": ([(1, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), None], [(D, S, D, S)] * 3, {}),
    # Calls the real op refuses: the kernel must leave the error to it.
    "key and value lengths differ": ([(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 9, 64), None], [(D, S, D, S)] * 3, {}),
    "batches differ": ([(2, 8, 5, 64), (3, 8, 7, 64), (3, 8, 7, 64), None], [(D, S, D, S)] * 3, {}),
    "widths differ": ([(2, 8, 5, 64), (2, 8, 7, 32), (2, 8, 7, 64), None], [(D, S, D, D)] * 3, {}),
    "mask and causal": (
        [(2, 8, 5, 64), (2, 8, 5, 64), (2, 8, 5, 64), (5, 5)],
        [(D, S, D, S)] * 3 + [(D, D)],
        {"is_causal": True},
    ),
    "half mask": (
        [(2, 8, 5, 64), (2, 8, 7, 64), (2, 8, 7, 64), (2, 1, 5, 7)],
        [(D, S, D, S)] * 3 + [(D,) * 4],
        {"half_mask": True},
    ),
}


def _fake_call(shapes, dynamic, options, quick: bool, backends=(SDPBackend.MATH,), device="cpu"):
    """The op on fake tensors of symbolic sizes under the Python dispatcher (as torch.export runs
    it, with the math backend alone as transformers' exporter traces): its result's metadata or
    error, and what the shape environment learned, canonically."""
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    options = dict(options)
    mask_dtype = (
        torch.bool if options.pop("bool_mask", False) else torch.half if options.pop("half_mask", False) else None
    )
    tensors = []
    for i, (shape, dims) in enumerate(zip(shapes, [*dynamic, None])):  # no dims for no mask
        if shape is None:
            tensors.append(None)
            continue
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dims])
        real = torch.empty(shape, dtype=mask_dtype if i == 3 and mask_dtype else torch.float32, device=device)
        tensors.append(mode.from_tensor(real, symbolic_context=context, source=ConstantSource(f"t{i}")))
    kernels = quick_fake_kernels() if quick else contextlib.nullcontext()
    try:
        with kernels, mode, enable_python_dispatcher(), torch.no_grad(), sdpa_kernel(list(backends)):
            out = F.scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3], **options)
        result = (tuple(map(str, out.shape)), tuple(map(str, out.stride())), out.dtype, out.device)
    except RuntimeError as e:
        result = ("error", type(e).__name__)
    # Unified sizes as classes (the order the checks are made in picks which symbol stands for
    # a class, not what is known); guards with the unifications applied.
    classes: dict = {}
    for symbol in env.replacements:
        classes.setdefault(env.replace(symbol), {env.replace(symbol)}).add(symbol)
    guards = {str(env.replace(g.expr)) for g in env.guards} - {"True"}
    return result, sorted(map(sorted, map(lambda c: map(str, c), classes.values()))), sorted(guards)


# The CPU with the math backend alone (transformers' exporter); the meta device (a model built
# there, as export-hf builds it), where the op decomposes to math whatever is enabled.
PLACES = {
    "cpu, math": ("cpu", (SDPBackend.MATH,)),
    "meta, every backend": ("meta", tuple(b for name, b in SDPBackend.__members__.items() if name != "ERROR")),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("case", CASES)
def test_the_fake_result_and_guards_are_the_decompositions(case, place):
    shapes, dynamic, options = CASES[case]
    device, backends = PLACES[place]
    quick = _fake_call(shapes, dynamic, options, quick=True, backends=backends, device=device)
    assert quick == _fake_call(shapes, dynamic, options, quick=False, backends=backends, device=device)


def test_the_kernel_is_used_for_the_plain_call_and_removed_after(monkeypatch):
    taken = record_quick_attention(monkeypatch)
    shapes, dynamic, options = CASES["float mask"]
    _fake_call(shapes, dynamic, options, quick=True)
    assert taken == [True]
    assert _KEY not in _SDPA.py_kernels
    # With the flash backend enabled, the op's own kernel runs (its fake result has other strides).
    _fake_call(shapes, dynamic, options, quick=True, backends=(SDPBackend.MATH, SDPBackend.FLASH_ATTENTION))
    assert taken == [True, False]
    # On the meta device the op decomposes to math whatever is enabled.
    _fake_call(shapes, dynamic, options, quick=True, backends=PLACES["meta, every backend"][1], device="meta")
    assert taken == [True, False, True]
    # Nested blocks share one installation; an error inside still removes it.
    with pytest.raises(ValueError), quick_fake_kernels():
        with quick_fake_kernels():
            assert _SDPA.py_kernels[_KEY] is fake_kernels._sdpa
        assert _SDPA.py_kernels[_KEY] is fake_kernels._sdpa
        raise ValueError
    assert _KEY not in _SDPA.py_kernels


class Attention(torch.nn.Module):
    """Multi-head attention over a past, with the variants models use."""

    def __init__(self, variant: str):
        super().__init__()
        self.variant = variant
        self.qkv = torch.nn.Linear(32, 64 if variant == "gqa" else 96)

    def forward(self, x, past, mask):
        b, t, _ = x.shape
        heads = (4, 2, 2) if self.variant == "gqa" else (4, 4, 4)
        q, k, v = self.qkv(x).split([h * 8 for h in heads], -1)
        q, k, v = (y.view(b, t, h, 8).transpose(1, 2) for y, h in zip((q, k, v), heads))
        k = torch.cat([past, k], 2)
        v = torch.cat([past, v], 2)
        if self.variant == "bool mask":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :] > 0)
        elif self.variant == "float mask":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :] * -1e4, scale=0.2)
        elif self.variant == "gqa":
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v)
        return out.transpose(1, 2).reshape(b, t, -1)


def _inputs(variant: str, batch: int, query: int, past: int):
    g = torch.Generator().manual_seed(batch * 100 + query * 10 + past)
    heads = 2 if variant == "gqa" else 4
    mask = (torch.rand(batch, past + query, generator=g) > 0.3).float()
    mask[:, -1] = 1
    return torch.randn(batch, query, 32, generator=g), torch.randn(batch, heads, past, 8, generator=g), mask


@pytest.mark.parametrize("variant", ["plain", "bool mask", "float mask", "gqa"])
def test_an_export_with_the_kernel_is_the_export_without_it(variant, monkeypatch):
    model = Attention(variant).eval()
    args = _inputs(variant, 2, 3, 4)
    axes = {"x": {0: "batch", 1: "query"}, "past": {0: "batch", 2: "past"}, "mask": {0: "batch", 1: "total"}}
    taken = record_quick_attention(monkeypatch)
    with sdpa_kernel(SDPBackend.MATH):  # as transformers' exporter traces
        quick = fastonnx.export(model, args, input_names=list(axes), dynamic_axes=axes).model_proto
        assert taken and all(taken)
        monkeypatch.setattr(trace, "quick_fake_kernels", contextlib.nullcontext)
        decomposed = fastonnx.export(model, args, input_names=list(axes), dynamic_axes=axes).model_proto
    assert quick.SerializeToString() == decomposed.SerializeToString()
    for batch, query, past in [(1, 1, 6), (3, 5, 2), (2, 3, 4)]:
        assert_matches(quick, model, _inputs(variant, batch, query, past), rtol=1e-4, atol=1e-5)

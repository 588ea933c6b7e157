"""Shared test helpers: export with fastonnx, check the model, run it in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import torch

import fastonnx
from fastonnx import _C

# The target opsets the op table and the model tests run at: the oldest fastonnx writes, the ones
# torch.onnx users pin most (17, 18 the default), 21, and the newest.
OPSET_MATRIX = (_C.MIN_OPSET, 17, _C.DEFAULT_OPSET, 21, _C.MAX_OPSET)


def check(model_proto: onnx.ModelProto) -> None:
    """Every model a test exports must pass the full checker (which also runs strict shape
    inference)."""
    onnx.checker.check_model(model_proto, full_check=True)


def onnx_layout(t: torch.Tensor) -> torch.Tensor:
    """A tensor as the ONNX graph holds it: a complex tensor as its (real, imaginary) pairs in a
    trailing dimension of 2."""
    return torch.view_as_real(t) if t.is_complex() else t


def run_ort(model_proto: onnx.ModelProto, inputs: list[torch.Tensor]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        model_proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: onnx_layout(t).detach().cpu().numpy() for i, t in zip(sess.get_inputs(), inputs)}
    return sess.run(None, feeds)


def flat_tensors(value) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def export_and_compare(
    model: torch.nn.Module,
    args: tuple,
    *,
    kwargs: dict | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-4,
    **export_kwargs,
) -> onnx.ModelProto:
    """Export, run the full checker, run in onnxruntime and compare every output with eager
    PyTorch. ``atol`` is scaled by each output's magnitude so deep nets with large activations
    are not held to an absolute bound meant for unit-sized values. ``kwargs`` must be in the
    order of ``forward``'s parameters (the order of the ONNX inputs)."""
    model = model.eval()
    proto = fastonnx.export(model, args, kwargs=kwargs, **export_kwargs).model_proto
    assert_matches(proto, model, args, kwargs=kwargs, rtol=rtol, atol=atol)
    return proto


def assert_matches(proto: onnx.ModelProto, model: torch.nn.Module, args: tuple, *, kwargs: dict | None = None,
                   rtol: float, atol: float) -> None:
    """Full checker, then onnxruntime against eager PyTorch (see export_and_compare)."""
    check(proto)
    kwargs = kwargs or {}
    with torch.no_grad():
        expected = [onnx_layout(t) for t in flat_tensors(model(*args, **kwargs))]
    actual = run_ort(proto, flat_tensors((args, kwargs)))
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected)):
        scale = max(1.0, float(want.abs().max())) if want.numel() and want.is_floating_point() else 1.0
        torch.testing.assert_close(
            torch.from_numpy(np.asarray(got)),
            want,
            rtol=rtol,
            atol=atol * scale,
            msg=lambda m, i=i: f"output {i}: {m}",
        )


def assert_declared_shapes_hold(model_proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """Runs the model with every value the graph declares a type for as an output, and checks
    each runtime shape against the declared one: a static dim is that size, and each symbolic
    dim name stands for one size throughout the graph. This catches a converter that computes
    the right elements in the wrong layout, and a dynamic dim that was quietly fixed (both
    would still pass the checker)."""
    proto = onnx.ModelProto()
    proto.CopyFrom(model_proto)
    graph = proto.graph
    declared = {v.name: v for v in list(graph.value_info) + list(graph.output)}
    initializers = {i.name for i in graph.initializer}
    names = [n for n in declared if n not in initializers and n not in feeds]
    outputs = {o.name for o in graph.output}
    graph.output.extend(declared[n] for n in names if n not in outputs)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    order = [o.name for o in sess.get_outputs()]
    results = dict(zip(order, sess.run(None, feeds)))
    symbols: dict[str, tuple[int, str]] = {}
    for i in graph.input:
        for d, size in zip(i.type.tensor_type.shape.dim, np.asarray(feeds[i.name]).shape) if i.name in feeds else ():
            if d.HasField("dim_param"):
                seen = symbols.setdefault(d.dim_param, (size, i.name))
                assert seen[0] == size, f"`{d.dim_param}` is {seen[0]} in input `{seen[1]}` but {size} in `{i.name}`"
    for name in names:
        dims = declared[name].type.tensor_type.shape.dim
        actual = np.asarray(results[name]).shape
        assert len(dims) == len(actual), f"`{name}` is declared with rank {len(dims)}, runs with shape {actual}"
        for i, (d, size) in enumerate(zip(dims, actual)):
            if d.HasField("dim_value"):
                assert d.dim_value == size, f"`{name}` dim {i} is declared {d.dim_value}, runs as {size}"
            elif d.HasField("dim_param"):
                seen = symbols.setdefault(d.dim_param, (size, name))
                assert seen[0] == size, (f"`{d.dim_param}` is {seen[0]} in `{seen[1]}` but {size} in `{name}` "
                                         f"(dim {i})")


class Lambda(torch.nn.Module):
    """A model computing ``fn(x)``: an op or a few under test."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Lambda2(Lambda):
    """A model computing ``fn(x, y)``."""

    def forward(self, x, y):
        return self.fn(x, y)


class TwoInTwoOut(torch.nn.Module):
    """The smallest model with two inputs, two outputs and a weight: for tests of export()'s arguments."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.lin(x).relu(), (x * y).sum(1)


def two_in_two_out_args() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 4), torch.randn(2, 4)


def scaled_tanh_op(name: str):
    """A torch.library custom op, tanh(x) * scale, registered as ``name`` (a name per test file, as
    each file registers its own converter for it)."""

    @torch.library.custom_op(name, mutates_args=())
    def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
        return torch.tanh(x) * scale

    @scaled_tanh.register_fake
    def _(x, scale):
        return torch.empty_like(x)

    return scaled_tanh


def record_quick_attention(monkeypatch) -> list[bool]:
    """Whether each scaled_dot_product_attention call traced from here on took the trace's quick
    fake kernel (frontends/export/fake_kernels.py), in order."""
    from fastonnx.frontends.export import fake_kernels

    taken: list[bool] = []
    plain = fake_kernels._plain
    monkeypatch.setattr(fake_kernels, "_plain", lambda *a: taken.append(plain(*a)) or taken[-1])
    return taken

"""Python converters for custom ops (torch.library) and for overriding built-in ones."""

from __future__ import annotations

import onnx
import pytest
import torch
from support import assert_matches, check, export_and_compare, scaled_tanh_op

import fastonnx

scaled_tanh = scaled_tanh_op("fastonnx_test::scaled_tanh")


@torch.library.custom_op("fastonnx_test::split_signs", mutates_args=())
def split_signs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.clamp(min=0), x.clamp(max=0)


@split_signs.register_fake
def _(x):
    return torch.empty_like(x), torch.empty_like(x)


class UsesCustomOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        pos, neg = split_signs(self.lin(x))
        return scaled_tanh(pos, 2.5) + neg


@pytest.fixture
def converters():
    def convert_scaled_tanh(g, x, scale):
        assert x.dtype == torch.float32 and x.shape == (4, 6)
        return g.op("Mul", g.op("Tanh", x), g.constant(scale, dtype=x.dtype))

    def convert_split_signs(g, x):
        zero = g.constant(0.0)
        return g.op("Max", x, zero), g.op("Min", x, zero)

    fastonnx.register_converter("fastonnx_test::scaled_tanh", convert_scaled_tanh)
    fastonnx.register_converter("fastonnx_test::split_signs", convert_split_signs)
    yield
    fastonnx.unregister_converter("fastonnx_test::scaled_tanh")
    fastonnx.unregister_converter("fastonnx_test::split_signs")


def test_torch_library_custom_ops_end_to_end(converters):
    proto = export_and_compare(UsesCustomOps().eval(), (torch.randn(4, 6),), rtol=1e-5, atol=1e-6)
    assert {"Tanh", "Max", "Min"} <= {n.op_type for n in proto.graph.node}


# An op with no kernel to trace (as a C++ op's), only the shapes of its result.
_NO_KERNEL = torch.library.Library("fastonnx_test_opaque", "DEF")
_NO_KERNEL.define("scaled(Tensor x, float scale) -> Tensor")
torch.library.register_fake("fastonnx_test_opaque::scaled", lambda x, scale: torch.empty_like(x), lib=_NO_KERNEL)


class UsesAnOpaqueOp(torch.nn.Module):
    def forward(self, x):
        return torch.ops.fastonnx_test_opaque.scaled(x, 2.0)


def test_without_a_converter_the_custom_op_is_listed():
    with pytest.raises(fastonnx.UnsupportedOpsError, match="fastonnx_test_opaque::scaled"):
        fastonnx.export(UsesAnOpaqueOp(), (torch.randn(4, 6),))


def test_custom_domain_and_attributes():
    """torch.onnx-style attribute suffixes, several outputs, a custom domain with its version."""

    def convert(g, x, scale):
        y, z = g.op("ScaledTanh", x, domain="mylib", outputs=2, scale_f=scale, mode_s="fast", axes_i=[0, 1])
        return g.op("Add", y, z)

    fastonnx.register_converter("fastonnx_test::scaled_tanh", convert)
    try:
        class M(torch.nn.Module):
            def forward(self, x):
                return scaled_tanh(x, 0.5)

        proto = fastonnx.export(M(), (torch.randn(3),), custom_opsets={"mylib": 2}).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::scaled_tanh")
    node = next(n for n in proto.graph.node if n.op_type == "ScaledTanh")
    assert node.domain == "mylib" and len(node.output) == 2
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"scale": 0.5, "mode": b"fast", "axes": [0, 1]}
    assert {(o.domain, o.version) for o in proto.opset_import} == {("", 18), ("mylib", 2)}
    onnx.checker.check_model(proto)


def test_override_a_builtin_converter():
    def relu_as_max(g, x):
        return g.op("Max", x, g.constant(0.0, dtype=x.dtype))

    fastonnx.register_converter("aten::relu", relu_as_max)
    try:
        proto = export_and_compare(torch.nn.ReLU(), (torch.randn(5),))
    finally:
        fastonnx.unregister_converter("aten::relu")
    assert [n.op_type for n in proto.graph.node] == ["Max"]


def test_converter_only_from_an_opset():
    def convert(g, x, scale):
        return g.op("Mul", g.op("Tanh", x), g.constant(scale, dtype=x.dtype))

    fastonnx.register_converter("fastonnx_test::scaled_tanh", convert, opset=20)

    class M(torch.nn.Module):
        def forward(self, x):
            return scaled_tanh(x, 2.0)

    try:
        check(fastonnx.export(M(), (torch.randn(3),), opset_version=20).model_proto)
        with pytest.raises(fastonnx.ConversionError, match="scaled_tanh"):
            fastonnx.export(M(), (torch.randn(3),), opset_version=18)
    finally:
        fastonnx.unregister_converter("fastonnx_test::scaled_tanh")


@pytest.mark.parametrize(
    "name, fn, error",
    [("scaled_tanh", lambda g, x: x, "namespace::op"), ("a::b", 3, "must be callable")],
)
def test_bad_registrations(name, fn, error):
    with pytest.raises((ValueError, TypeError), match=error):
        fastonnx.register_converter(name, fn)


def test_a_converter_that_returns_the_wrong_thing():
    fastonnx.register_converter("fastonnx_test::split_signs", lambda g, x: x)
    try:
        class M(torch.nn.Module):
            def forward(self, x):
                return split_signs(x)

        with pytest.raises(fastonnx.ConversionError, match="must return 2 value"):
            fastonnx.export(M(), (torch.randn(3),))
    finally:
        fastonnx.unregister_converter("fastonnx_test::split_signs")


def test_an_output_a_converter_cannot_compute_is_refused_where_it_is_read():
    """A converter may return None for an output after the first that ONNX cannot compute, as
    torch.onnx's symbolic functions do; a model that reads that output is a ConversionError."""
    fastonnx.register_converter("fastonnx_test::split_signs", lambda g, x: (g.op("Relu", x), None))
    try:

        class FirstOnly(torch.nn.Module):
            def forward(self, x):
                return split_signs(x)[0] * 2

        class Both(torch.nn.Module):
            def forward(self, x):
                pos, neg = split_signs(x)
                return pos + neg

        export_and_compare(FirstOnly(), (torch.randn(3, 4),))
        with pytest.raises(fastonnx.ConversionError, match="gives no ONNX value for its output 1, which the model"):
            fastonnx.export(Both(), (torch.randn(3, 4),))
        fastonnx.register_converter("fastonnx_test::split_signs", lambda g, x: (None, g.op("Relu", x)))
        with pytest.raises(fastonnx.ConversionError, match="None for an output after the first"):
            fastonnx.export(FirstOnly(), (torch.randn(3, 4),))
    finally:
        fastonnx.unregister_converter("fastonnx_test::split_signs")


@torch.library.custom_op("fastonnx_test::soft_clip", mutates_args=())
def soft_clip(x: torch.Tensor, limit: float) -> torch.Tensor:
    return limit * torch.tanh(x / limit)


@soft_clip.register_fake
def _(x, limit):
    return torch.empty_like(x)


@torch.library.custom_op("fastonnx_test::twice_plus", mutates_args=(), device_types="cpu")
def twice_plus(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


@twice_plus.register_fake
def _(x, y):
    return torch.empty_like(x)


class UsesPythonKernels(torch.nn.Module):
    def forward(self, x):
        return twice_plus(soft_clip(x, 2.0), x)


def test_custom_ops_without_converters_are_traced_through_their_python_kernels(tmp_path):
    report = tmp_path / "report.md"
    x = torch.randn(3, 5) * 4
    proto = export_and_compare(UsesPythonKernels(), (x,), dynamic_shapes=({0: "n"},), report=str(report))
    assert "Tanh" in {n.op_type for n in proto.graph.node} and not any(n.domain for n in proto.graph.node)
    text = report.read_text()
    assert "Python implementation" in text and "soft_clip" in text and "twice_plus" in text


# Kernels given to Library.impl, as torch.library's older API registers them: for CPU, and for
# CompositeExplicitAutograd (every backend).
_IMPL = torch.library.Library("fastonnx_test_impl", "DEF")
_IMPL.define("gated(Tensor x, float bias) -> Tensor")
_IMPL.define("halved(Tensor x) -> Tensor")
_IMPL.impl("gated", lambda x, bias: x * torch.sigmoid(x + bias), "CPU")
_IMPL.impl("halved", lambda x: x / 2 - x.mean(), "CompositeExplicitAutograd")
torch.library.register_fake("fastonnx_test_impl::gated", lambda x, bias: torch.empty_like(x), lib=_IMPL)
torch.library.register_fake("fastonnx_test_impl::halved", lambda x: torch.empty_like(x), lib=_IMPL)


def test_kernels_given_to_library_impl_are_traced_too():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.fastonnx_test_impl.halved(torch.ops.fastonnx_test_impl.gated(x, 0.5))

    proto = export_and_compare(M(), (torch.randn(4, 3),), dynamic_shapes=({0: "n"},))
    assert "Sigmoid" in {n.op_type for n in proto.graph.node} and not any(n.domain for n in proto.graph.node)
    assert_matches(proto, M(), (torch.randn(7, 3),), rtol=1e-4, atol=1e-5)


def test_a_registered_converter_wins_over_the_python_kernel():
    def clip(g, x, limit):
        return g.op("Clip", x, g.constant(-limit), g.constant(limit))

    fastonnx.register_converter("fastonnx_test::soft_clip", clip)
    try:
        proto = fastonnx.export(UsesPythonKernels(), (torch.randn(3, 5),)).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::soft_clip")
    assert "Clip" in {n.op_type for n in proto.graph.node} and "Tanh" not in {n.op_type for n in proto.graph.node}


def test_unsupported_custom_op_shows_a_converter_stub():
    with pytest.raises(fastonnx.UnsupportedOpsError) as info:
        fastonnx.export(UsesAnOpaqueOp(), (torch.randn(4, 6),))
    message = str(info.value)
    assert "def convert_fastonnx_test_opaque_scaled(g, x, scale):" in message
    assert 'fastonnx.register_converter("fastonnx_test_opaque::scaled", convert_fastonnx_test_opaque_scaled)' in message


@torch.library.custom_op("fastonnx_test::scaled_by_sum", mutates_args=())
def scaled_by_sum(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    for _ in range(int(x.abs().sum().item())):  # a Python loop over the data: no trace without values
        out = out * 2
    return out


@scaled_by_sum.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_python_kernel_that_does_not_trace_is_listed_with_the_others():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.fastonnx_test_opaque.scaled(scaled_by_sum(x), 2.0)

    with pytest.raises(fastonnx.UnsupportedOpsError) as info:
        fastonnx.export(M(), (torch.randn(3),))
    message = str(info.value)
    assert "fastonnx_test::scaled_by_sum" in message and "fastonnx_test_opaque::scaled" in message
    assert "its Python implementation does not trace (" in message

"""Converters written for torch.onnx run unchanged: the examples of PyTorch's and onnxruntime's
ONNX docs as written, with only `torch.onnx.export` -> `fastonnx.export` and
`torch.onnx.register_custom_op_symbolic` -> `fastonnx.register_custom_op_symbolic`."""

from __future__ import annotations

import onnx
import onnxscript
import pytest
import torch
from torch.onnx import symbolic_helper

import fastonnx
from support import export_and_compare, run_ort


@torch.library.custom_op("custom_ops::foo_forward", mutates_args=())
def foo_forward(input1: torch.Tensor, input2: torch.Tensor, attr1: float, attr2: int) -> torch.Tensor:
    return input1 * attr1 + input2 * attr2


@foo_forward.register_fake
def _(input1, input2, attr1, attr2):
    return torch.empty_like(input1)


@pytest.fixture
def registry():
    """The names a test registers, unregistered afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        fastonnx.unregister_custom_op_symbolic(name)


def nodes(proto: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in proto.graph.node]


# --- torch.onnx docs (TorchScript-based exporter) ---------------------------------------------


class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g, input):
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class MyModule(torch.nn.Module):
    def forward(self, x):
        return MyRelu.apply(x) * 2


def test_autograd_function_static_symbolic():
    proto = export_and_compare(MyModule(), (torch.randn(3, 4),))
    assert "Clip" in nodes(proto)
    program = fastonnx.export(MyModule(), (torch.randn(3, 4),)).exported_program
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert any(t.startswith("fastonnx_autograd.") for t in targets)  # traced as one op, not its forward
    assert "aten.clamp.default" not in targets


class NoSymbolic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(min=0) + 1

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_autograd_function_without_symbolic_is_traced_through():
    class M(torch.nn.Module):
        def forward(self, x):
            return NoSymbolic.apply(x)

    proto = export_and_compare(M(), (torch.randn(3, 4),))
    assert not any(n.domain for n in proto.graph.node)


class TwoOutputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        return x * scale, x - scale

    @staticmethod
    def symbolic(g, x, scale):
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(scale))), g.op(
            "Sub", x, g.op("Constant", value_t=torch.tensor(scale))
        )


def test_autograd_function_with_several_outputs_and_a_number():
    class M(torch.nn.Module):
        def forward(self, x):
            a, b = TwoOutputs.apply(x, 1.5)
            return a + b

    export_and_compare(M(), (torch.randn(2, 3),))


class NewStyle(torch.autograd.Function):
    """torch's newer style: forward without ctx, setup_context apart."""

    @staticmethod
    def forward(x, limit: float):
        return x.clamp(-limit, limit)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def symbolic(g, x, limit):
        return g.op("Min", g.op("Max", x, g.constant(-limit)), g.constant(limit))


def test_autograd_function_of_the_newer_style():
    class M(torch.nn.Module):
        def forward(self, x):
            return NewStyle.apply(x, 0.5) + 1

    proto = export_and_compare(M(), (torch.randn(4),))
    assert "Max" in nodes(proto) and "Clip" not in nodes(proto)  # the symbolic, not the traced forward


def test_custom_domain_op_name_and_custom_opsets(registry):
    """The docs' custom operator example: `custom_domain::Foo` with its version from
    custom_opsets."""

    def symbolic_foo_forward(g, input1, input2, attr1, attr2):
        return g.op("custom_domain::Foo", input1, input2, attr1_f=attr1, attr2_i=attr2)

    fastonnx.register_custom_op_symbolic("custom_ops::foo_forward", symbolic_foo_forward, 9)
    registry.append("custom_ops::foo_forward")

    class FooModel(torch.nn.Module):
        def __init__(self, attr1, attr2):
            super().__init__()
            self.attr1 = attr1
            self.attr2 = attr2

        def forward(self, input1, input2):
            return torch.ops.custom_ops.foo_forward(input1, input2, self.attr1, self.attr2)

    example_input1 = torch.randn(2, 3)
    proto = fastonnx.export(FooModel(0.5, 2), (example_input1, example_input1), custom_opsets={"custom_domain": 2})
    node = proto.model_proto.graph.node[0]
    assert (node.domain, node.op_type) == ("custom_domain", "Foo")
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute} == {"attr1": 0.5, "attr2": 2}
    assert ("custom_domain", 2) in {(o.domain, o.version) for o in proto.model_proto.opset_import}


def test_parse_args_of_torch_onnx(registry):
    """A symbolic decorated with torch.onnx's parse_args, for an ATen op, every argument of the
    schema given positionally (elu's alpha, scale and input_scale)."""

    @symbolic_helper.parse_args("v", "f", "none", "none")
    def elu(g, input, alpha, scale, input_scale):
        return g.op("Elu", input, alpha_f=alpha)

    fastonnx.register_custom_op_symbolic("::elu", elu, 9)
    registry.append("::elu")
    proto = export_and_compare(torch.nn.ELU(alpha=0.7), (torch.randn(5),))
    assert nodes(proto) == ["Elu"]


def test_fastonnx_parse_args_checks_kinds(registry):
    @fastonnx.parse_args("v", "i")
    def elu(g, input, alpha):
        return g.op("Elu", input, alpha_f=alpha)

    fastonnx.register_custom_op_symbolic("aten::elu", elu, 9)
    registry.append("aten::elu")
    with pytest.raises(fastonnx.ConversionError, match="alpha=0.7 is not of kind 'i'"):
        fastonnx.export(torch.nn.ELU(alpha=0.7), (torch.randn(5),))


def test_register_custom_op_symbolic_opset_and_name_checks(registry):
    with pytest.raises(ValueError, match="namespace::op"):
        fastonnx.register_custom_op_symbolic("elu", lambda g, x: x, 9)
    fastonnx.register_custom_op_symbolic("::relu", lambda g, x, *_: g.op("Relu", x), 20)
    registry.append("::relu")
    proto = fastonnx.export(torch.nn.ReLU(), (torch.randn(3),), opset_version=18).model_proto
    assert nodes(proto) == ["Relu"]  # fastonnx's own converter below the symbolic's opset


# --- onnxruntime docs: "Export PyTorch model with custom ONNX operators" ---------------------


def test_onnxruntime_contrib_op(registry):
    def my_inverse(g, self):
        return g.op("com.microsoft::Inverse", self)

    fastonnx.register_custom_op_symbolic("::inverse", my_inverse, 1)
    registry.append("::inverse")

    class CustomInverse(torch.nn.Module):
        def forward(self, x):
            return torch.inverse(x) + x

    x = torch.randn(3, 3) + 3 * torch.eye(3)
    proto = fastonnx.export(CustomInverse(), (x,)).model_proto
    assert ("com.microsoft", "Inverse") in {(n.domain, n.op_type) for n in proto.graph.node}
    (out,) = run_ort(proto, [x])
    torch.testing.assert_close(torch.from_numpy(out), CustomInverse()(x), rtol=1e-4, atol=1e-4)


# --- onnxscript functions (torch.onnx's onnxscript_op) -----------------------------------------

from onnxscript.onnx_opset import opset15 as op  # noqa: E402

custom_opset = onnxscript.values.Opset(domain="onnx-script", version=1)


@onnxscript.script(custom_opset)
def Selu(X):  # noqa: N802 (the docs' name)
    alpha = 1.67326  # auto wrapped as Constants
    gamma = 1.0507
    alphaX = op.CastLike(alpha, X)  # noqa: N806
    gammaX = op.CastLike(gamma, X)  # noqa: N806
    neg = gammaX * (alphaX * op.Exp(X) - alphaX)
    pos = gammaX * X
    zero = op.CastLike(0, X)
    return op.Where(X <= zero, neg, pos)


def test_onnxscript_op_is_a_local_function_written_once(registry):
    def custom_selu(g, X):  # noqa: N803
        return g.onnxscript_op(Selu, X).setType(X.type())

    fastonnx.register_custom_op_symbolic(symbolic_name="aten::selu", symbolic_fn=custom_selu, opset_version=15)
    registry.append("aten::selu")

    class TwoSelus(torch.nn.Module):
        def forward(self, x):
            return torch.selu(torch.selu(x) - 1)

    proto = export_and_compare(
        TwoSelus(), (torch.randn(1, 2, 3, 4),), opset_version=15, custom_opsets={"onnx-script": 2}
    )
    assert [(f.domain, f.name) for f in proto.functions] == [("onnx-script", "Selu")]
    assert [n.op_type for n in proto.graph.node].count("Selu") == 2
    assert ("onnx-script", 2) in {(o.domain, o.version) for o in proto.opset_import}


# --- the rest of torch.onnx's GraphContext --------------------------------------------------


def test_graph_attribute_loop_body_from_a_nested_context(registry):
    """A Loop whose body (a `_g` attribute) is built with g.subgraph: x doubled n times."""

    def repeat_double(g, x, n):
        assert (x.type().scalarType(), x.type().sizes(), x.type().dim(), x.type().dtype()) == (
            "Float",
            [2, 3],
            2,
            torch.float32,
        )

        def body(b, i, cond, acc):
            return cond, b.op("Add", acc, acc)

        loop_body = g.subgraph(body, (torch.int64, []), (torch.bool, []), (x.dtype, list(x.shape)))
        return g.op("Loop", g.constant(n), g.constant(True), x, body_g=loop_body)

    fastonnx.register_custom_op_symbolic("custom_ops::foo_forward", lambda g, a, b, s, n: repeat_double(g, a, n), 1)
    registry.append("custom_ops::foo_forward")

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.custom_ops.foo_forward(x, x, 0.0, 3)

    x = torch.randn(2, 3)
    proto = fastonnx.export(M(), (x,)).model_proto
    assert "Loop" in nodes(proto)
    (out,) = run_ort(proto, [x])
    torch.testing.assert_close(torch.from_numpy(out), x * 8)


def test_constant_of_shape_with_a_tensor_value(registry):
    def zeros_like(g, input1, input2, attr1, attr2):
        return g.op("ConstantOfShape", g.op("Shape", input1), value_t=torch.tensor([attr1]))

    fastonnx.register_custom_op_symbolic("custom_ops::foo_forward", zeros_like, 1)
    registry.append("custom_ops::foo_forward")

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.custom_ops.foo_forward(x, x, 2.5, 0)

    x = torch.randn(2, 3)
    (out,) = run_ort(fastonnx.export(M(), (x,)).model_proto, [x])
    torch.testing.assert_close(torch.from_numpy(out), torch.full((2, 3), 2.5))


def test_aten_fallback_is_refused(registry):
    fastonnx.register_custom_op_symbolic("::relu", lambda g, x: g.at("relu", x), 1)
    registry.append("::relu")
    with pytest.raises(fastonnx.ConversionError, match="ATen fallback"):
        fastonnx.export(torch.nn.ReLU(), (torch.randn(3),))


# --- torch.onnx docs (dynamo-based exporter): torch.onnx.ops.symbolic ---------------------------


class CustomOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normal torch operators can interleave with the symbolic ops during ONNX export
        x = x + 1

        # Create a symbolic ONNX operator with the name "CustomOp" in the "custom_domain" domain.
        # The output tensor will have the specified dtype and shape
        val = torch.onnx.ops.symbolic(
            "custom_domain::CustomOp",
            (x,),
            dict(attr_key="attr_value"),
            dtype=x.dtype,
            shape=x.shape,
            version=1,
        )

        # The result of the symbolic op can be used in normal torch operations during ONNX export
        return torch.nn.functional.relu(val)


def test_torch_onnx_ops_symbolic():
    proto = fastonnx.export(CustomOp(), (torch.randn(2, 3),)).model_proto
    node = next(n for n in proto.graph.node if n.op_type == "CustomOp")
    assert node.domain == "custom_domain"
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute} == {"attr_key": b"attr_value"}
    assert nodes(proto) == ["Add", "CustomOp", "Relu"]


def test_onnxscript_function_of_another_opset_is_refused_clearly(registry):
    """ONNX requires a local function's ops to mean the same at the model's opset: Selu's
    LessOrEqual (opset 15) is redefined by opset 16."""
    fastonnx.register_custom_op_symbolic("aten::selu", lambda g, X: g.onnxscript_op(Selu, X), 15)  # noqa: N803
    registry.append("aten::selu")
    with pytest.raises(fastonnx.ConversionError, match="uses LessOrEqual of opset 15, which opset 18"):
        fastonnx.export(torch.nn.SELU(), (torch.randn(2, 3),), opset_version=18)


# --- torch.onnx docs (dynamo-based exporter): custom_translation_table with onnxscript ----------

from onnxscript import opset18 as op18  # noqa: E402


def custom_aten_add(self, other, alpha: float = 1.0):
    if alpha != 1.0:
        alpha = op18.CastLike(alpha, other)
        other = op18.Mul(other, alpha)
    # To distinguish the custom implementation from the builtin one, we switch the order of the inputs
    return op18.Add(other, self)


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_custom_translation_table_overrides_an_aten_op():
    x, y = torch.tensor([1.0]), torch.tensor([2.0])
    proto = export_and_compare(Model(), (x, y), custom_translation_table={torch.ops.aten.add.Tensor: custom_aten_add})
    add = next(n for n in proto.graph.node if n.op_type == "Add")
    assert list(add.input) == [i.name for i in proto.graph.input][::-1]  # the custom converter's order
    assert fastonnx.converters.registry.converter_for(torch.ops.aten.add.Tensor, 18) is None  # only for that export


microsoft_op = onnxscript.values.Opset(domain="com.microsoft", version=1)


def custom_aten_gelu(self, approximate: str = "none"):
    return microsoft_op.Gelu(self)


@pytest.mark.xfail(
    raises=fastonnx.ConversionError,
    reason="onnxscript 0.7.2's Opset makes no op that onnx.defs lacks (com.microsoft's Gelu): the docs' "
    "example fails inside onnxscript, before any exporter sees it",
)
def test_custom_translation_table_to_an_onnxruntime_contrib_op():
    x = torch.randn(3, 4)
    proto = fastonnx.export(
        torch.nn.GELU(), (x,), custom_translation_table={torch.ops.aten.gelu.default: custom_aten_gelu}
    ).model_proto
    assert [(n.domain, n.op_type) for n in proto.graph.node] == [("com.microsoft", "Gelu")]
    (out,) = run_ort(proto, [x])
    torch.testing.assert_close(torch.from_numpy(out), torch.nn.functional.gelu(x), rtol=1e-4, atol=1e-5)


@torch.library.custom_op("mylibrary::add_and_round_op", mutates_args=())
def add_and_round_op(input: torch.Tensor) -> torch.Tensor:
    return torch.round(input + input)


@add_and_round_op.register_fake
def _(tensor_x):
    return torch.empty_like(tensor_x)


def onnx_add_and_round(input):
    add_x = op18.Add(input, input)
    round_x = op18.Round(add_x)
    return round_x


def test_custom_translation_table_for_a_custom_op():
    class M(torch.nn.Module):
        def forward(self, x):
            return add_and_round_op(x)

    proto = export_and_compare(
        M(),
        (torch.randn(3),),
        custom_translation_table={torch.ops.mylibrary.add_and_round_op.default: onnx_add_and_round},
    )
    assert [n.op_type for n in proto.graph.node] == ["Add", "Round"]


def test_graph_attributes_of_an_if(registry):
    """If branches (`_g` attributes without inputs) read the outer graph's values."""

    def sign_switch(g, input1, input2, attr1, attr2):
        positive = g.op("Greater", g.op("ReduceSum", input1, keepdims_i=0), g.constant(0.0))
        then_branch = g.subgraph(lambda b: b.op("Add", input1, input2))
        else_branch = g.subgraph(lambda b: b.op("Sub", input1, input2))
        return g.op("If", positive, then_branch_g=then_branch, else_branch_g=else_branch)

    fastonnx.register_custom_op_symbolic("custom_ops::foo_forward", sign_switch, 1)
    registry.append("custom_ops::foo_forward")

    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.ops.custom_ops.foo_forward(x, y, 0.0, 0)

    x, y = torch.randn(2, 3), torch.randn(2, 3)
    proto = fastonnx.export(M(), (x, y)).model_proto
    for sign in (1, -1):
        a = sign * x.abs()
        (out,) = run_ort(proto, [a, y])
        torch.testing.assert_close(torch.from_numpy(out), a + y if sign > 0 else a - y)

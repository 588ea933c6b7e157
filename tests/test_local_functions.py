"""export_modules_as_functions: module calls as ONNX local functions (the full checker runs on
every export, see conftest.py)."""

import onnx
import pytest
import torch
from support import check, export_and_compare, run_ort, scaled_tanh_op
from torch import nn

import fastonnx
from fastonnx import _C
from fastonnx.core.dtypes import dtype_code

DOMAIN = "fastonnx.functions"


class Block(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(self.act(self.fc(x)) + x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(x).softmax(-1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.Sequential(Block(), Block(), Block())
        self.head = Head()

    def forward(self, x):
        return self.head(self.blocks(x) * 2)


def calls(proto, name: str) -> list:
    return [n for n in proto.graph.node if n.domain == DOMAIN and n.op_type == name]


def functions(proto) -> dict[str, object]:
    return {f.name: f for f in proto.functions}


def test_repeated_blocks_share_one_function():
    proto = export_and_compare(Net(), (torch.randn(2, 8),), export_modules_as_functions={Block})
    name = f"{Block.__module__}.{Block.__qualname__}"
    assert list(functions(proto)) == [name]
    assert [n.name for n in calls(proto, name)] == ["blocks.0", "blocks.1", "blocks.2"]
    assert {n.op_type for n in proto.graph.node} == {name, "Mul", "Gemm", "Softmax"}
    assert (DOMAIN, 1) in {(o.domain, o.version) for o in proto.opset_import}
    function = functions(proto)[name]
    assert function.domain == DOMAIN
    assert [o.domain for o in function.opset_import] == [""]
    # The weights are inputs: each call passes its own.
    assert len(function.input) == 1 + 4
    assert {i for n in calls(proto, name) for i in n.input} >= {"blocks.0.fc.weight", "blocks.2.norm.bias"}
    assert not proto.graph.initializer[0].name.startswith("_")
    assert "Constant" in {n.op_type for n in function.node}  # GELU's constants live in the body


def test_every_submodule_with_true_nests_functions():
    proto = export_and_compare(Net(), (torch.randn(2, 8),), export_modules_as_functions=True)
    names = set(functions(proto))
    assert {f"torch.nn.modules.{m}" for m in ("linear.Linear", "activation.GELU", "normalization.LayerNorm",
                                                "container.Sequential")} <= names
    block = functions(proto)[f"{Block.__module__}.{Block.__qualname__}"]
    # The block calls the functions of its submodules, which come before it.
    assert {n.op_type for n in block.node} == {"torch.nn.modules.linear.Linear", "torch.nn.modules.activation.GELU",
                                               "torch.nn.modules.normalization.LayerNorm", "Add"}
    assert (DOMAIN, 1) in {(o.domain, o.version) for o in block.opset_import}
    order = [f.name for f in proto.functions]
    assert order.index("torch.nn.modules.linear.Linear") < order.index(block.name)
    # The head's Linear (8 -> 3) differs from the blocks' (8 -> 8): a function of its own.
    assert "torch.nn.modules.linear.Linear_1" in names
    assert [n.op_type for n in proto.graph.node] == ["torch.nn.modules.container.Sequential", "Mul",
                                                     f"{Head.__module__}.{Head.__qualname__}"]


def test_a_module_called_twice_is_two_calls():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return self.block(self.block(x))

    proto = export_and_compare(Twice(), (torch.randn(2, 8),), export_modules_as_functions={Block})
    assert len(proto.functions) == 1
    assert len(calls(proto, proto.functions[0].name)) == 2


def test_bodies_that_differ_get_functions_of_their_own():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.narrow, self.wide = Block(8), Block(16)
            self.up = nn.Linear(8, 16)

        def forward(self, x):
            return self.wide(self.up(self.narrow(x)))

    proto = export_and_compare(Two(), (torch.randn(2, 8),), export_modules_as_functions={Block})
    name = f"{Block.__module__}.{Block.__qualname__}"
    assert sorted(functions(proto)) == [name, name + "_1"]


def test_dynamic_batch():
    batch = torch.export.Dim("batch")
    proto = export_and_compare(Net(), (torch.randn(3, 8),), export_modules_as_functions={Block, Head},
                               dynamic_shapes=({0: batch},))
    assert len(proto.functions) == 2
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_gpt2_blocks():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, use_cache=False)
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 100, (2, 7))
    proto = export_and_compare(model, (ids,), export_modules_as_functions={GPT2Block})
    name = f"{GPT2Block.__module__}.{GPT2Block.__qualname__}"
    assert list(functions(proto)) == [name]
    assert len(calls(proto, name)) == 2


def test_default_makes_no_functions():
    proto = export_and_compare(Net(), (torch.randn(2, 8),))
    assert len(proto.functions) == 0
    assert {o.domain for o in proto.opset_import} == {""}
    assert len(export_and_compare(Net(), (torch.randn(2, 8),), export_modules_as_functions=set()).functions) == 0


@pytest.mark.parametrize(
    "value, message",
    [
        ({Block, "Linear"}, "'Linear', which is not a torch.nn.Module subclass"),
        ({int}, "<class 'int'>, which is not a torch.nn.Module subclass"),
        ("Block", "must be True, False or a set of torch.nn.Module subclasses"),
        (Block, "must be True, False or a set of torch.nn.Module subclasses"),
    ],
)
def test_bad_selection(value, message):
    with pytest.raises(fastonnx.ArgumentError, match="export_modules_as_functions") as info:
        fastonnx.export(Net(), (torch.randn(2, 8),), export_modules_as_functions=value)
    assert message in str(info.value)
    assert isinstance(info.value, (TypeError, ValueError))


def test_needs_opset_15():
    with pytest.raises(fastonnx.ArgumentError, match="opset_version 15 or later"):
        fastonnx.export(Net(), (torch.randn(2, 8),), opset_version=14, export_modules_as_functions=True)


def _session_model(build) -> onnx.ModelProto:
    """A model built on the native session directly: ``build(session, x, node)`` returns the
    output; ``node(op, *inputs)`` adds an ONNX node in the current scope."""
    session = _C.Session(18)
    x = session.add_input("x", dtype_code(torch.float32), [2])

    def node(op, *inputs):
        (out,) = session.add_node("", op, list(inputs), [], 1)
        session.set_meta(out, dtype_code(torch.float32), [2])
        return out

    out = build(session, x, node)
    session.set_outputs([(out, "y")])
    return onnx.load_from_string(session.finish("test").to_bytes())


def test_a_call_whose_values_are_read_before_its_end_stays_inlined():
    """Outlining puts the call where its last node was; a node of another scope that reads the
    call's values before that place keeps the call's nodes inlined (in its parent)."""

    def build(session, x, node):
        scope = session.add_scope("Interleaved", "inner", 0)
        session.set_scope(scope)
        a = node("Relu", x)
        session.set_scope(0)
        b = node("Neg", a)
        session.set_scope(scope)
        c = node("Add", a, b)
        session.set_scope(0)
        return node("Abs", c)

    proto = _session_model(build)
    assert len(proto.functions) == 0
    assert [n.op_type for n in proto.graph.node] == ["Relu", "Neg", "Add", "Abs"]
    check(proto)


def test_nested_scopes_call_each_other():
    def build(session, x, node):
        outer = session.add_scope("Outer", "outer", 0)
        inner = session.add_scope("Inner", "outer.inner", outer)
        session.set_scope(outer)
        a = node("Relu", x)
        session.set_scope(inner)
        b = node("Neg", a)
        session.set_scope(outer)
        c = node("Add", a, b)
        session.set_scope(0)
        return node("Abs", c)

    proto = _session_model(build)
    check(proto)
    assert [f.name for f in proto.functions] == ["Inner", "Outer"]
    assert [n.op_type for n in proto.functions[1].node] == ["Relu", "Inner", "Add"]
    assert [(n.op_type, n.name) for n in proto.graph.node] == [("Outer", "outer"), ("Abs", "Abs")]
    x = torch.tensor([-1.0, 2.0])
    (y,) = run_ort(proto, [x])
    assert y.tolist() == [0.0, 0.0]


scaled_tanh = scaled_tanh_op("fastonnx_test::functions_scaled_tanh")


class UsesCustomOp(nn.Module):
    def forward(self, x):
        return scaled_tanh(x, 2.0) + 1


def test_custom_domains_in_function_bodies():
    """A Python converter's nodes belong to the module call of their FX node; the function
    imports their domain at the version custom_opsets gives, as the model does."""

    def convert(g, x, scale):
        return g.op("ScaledTanh", x, domain="mylib", scale_f=scale)

    class Net2(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = UsesCustomOp(), UsesCustomOp()

        def forward(self, x):
            return self.b(self.a(x))

    fastonnx.register_converter("fastonnx_test::functions_scaled_tanh", convert)
    try:
        proto = fastonnx.export(Net2(), (torch.randn(3),), custom_opsets={"mylib": 2},
                                export_modules_as_functions={UsesCustomOp}).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::functions_scaled_tanh")
    (function,) = proto.functions
    assert [n.op_type for n in function.node] == ["Constant", "ScaledTanh", "Add"]
    assert {(o.domain, o.version) for o in function.opset_import} == {("", 18), ("mylib", 2)}
    assert {(o.domain, o.version) for o in proto.opset_import} == {("", 18), ("mylib", 2), (DOMAIN, 1)}
    assert [n.name for n in proto.graph.node] == ["a", "b"]


@pytest.mark.parametrize("name", ["resnet18", "t5", "lstm_word_lm"])
def test_every_submodule_of_test_nets(name):
    """Convolutions with batch norms folded into them, an encoder-decoder whose layers share a
    position bias, recurrent layers: every submodule a function, still matching eager."""
    from models.nets import TEST_NETS
    from models.transformers_nets import MODELS

    model, args, *kwargs = (TEST_NETS.get(name) or MODELS[name])()
    proto = export_and_compare(model, args, kwargs=kwargs[0] if kwargs else None, export_modules_as_functions=True)
    assert proto.functions


def test_an_omitted_input_keeps_the_positions_apart():
    """Clip(x, c) and Clip(x, <omitted>, c) are different bodies (min vs max)."""
    bound = torch.tensor(0.5)

    def build(session, x, node):
        c = session.add_initializer("", dtype_code(torch.float32), [], bound.data_ptr(), 4, bound)
        outs = []
        for i, inputs in enumerate([[x, c], [x, None, c]]):
            session.set_scope(session.add_scope("Clamp", f"clamp{i}", 0))
            (out,) = session.add_node("", "Clip", inputs, [], 1)
            session.set_meta(out, dtype_code(torch.float32), [2])
            outs.append(out)
        session.set_scope(0)
        return node("Add", *outs)

    proto = _session_model(build)
    check(proto)
    assert [f.name for f in proto.functions] == ["Clamp", "Clamp_1"]
    (y,) = run_ort(proto, [torch.tensor([0.0, 1.0])])
    assert y.tolist() == [0.5, 1.5]  # max(x, .5) + min(x, .5)


class CondBlock(nn.Module):
    """A branch on the data, both branches reading the block's weights (outer values of the If's
    subgraphs, which become inputs of the function)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.lin(x).relu(), lambda x: x * self.scale - 1, (x,))


def test_control_flow_inside_functions():
    class Net3(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b = CondBlock(), CondBlock()

        def forward(self, x):
            return self.b(self.a(x) + 0.5)

    model = Net3().eval()
    proto = fastonnx.export(model, (torch.ones(2, 4),), export_modules_as_functions=True).model_proto
    for x in (torch.ones(2, 4), -torch.ones(2, 4), torch.randn(2, 4)):
        check(proto)
        (y,) = run_ort(proto, [x])
        torch.testing.assert_close(torch.from_numpy(y), model(x).detach(), rtol=1e-4, atol=1e-5)
    block = f"{CondBlock.__module__}.{CondBlock.__qualname__}"
    # Bodies with subgraphs are not compared (each If owns its subgraphs): a function per call.
    assert [n.op_type for n in proto.graph.node if n.domain == DOMAIN] == [block, block + "_1"]
    function = functions(proto)[block]
    (if_node,) = [n for n in function.node if n.op_type == "If"]
    assert {a.name for a in if_node.attribute} == {"then_branch", "else_branch"}
    assert {"a.lin.weight", "a.scale"} <= set(function.input)

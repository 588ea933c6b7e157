"""Fuzzing what the native core parses: the arguments of an FX node as the registry unpacks them.

A malformed FX graph (wrong argument types for a mapped op) must fail with a ConversionError that
names the node, and the native Session, driven directly with random arguments for random
converters (mostly well-typed, to reach deep into the converters, sometimes not), must either
convert or raise that error: never another exception, never a crash (run these under the
sanitizers too: README, "Sanitizers").
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, reject
from hypothesis import strategies as st

import fastonnx
from fastonnx import _C
from fastonnx.core.dtypes import dtype_code
from fuzz import fuzz_settings


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.lin = torch.nn.Linear(4, 5)

    def forward(self, x):
        y = self.conv(x).relu().sum(dim=[2, 3])
        return (self.lin(y) + 1).softmax(-1)


def _program() -> torch.export.ExportedProgram:
    return torch.export.export(Small().eval(), (torch.randn(2, 3, 6, 6),))


def _node(ep: torch.export.ExportedProgram, name: str) -> torch.fx.Node:
    return next(n for n in ep.graph.nodes if n.name == name)


def _others(ep, node):
    return [n for n in ep.graph.nodes if n.op == "placeholder" and n is not node]


# (node, argument position or keyword, a replacement: a value or f(ep) -> value, the error)
MALFORMED = [
    ("relu", 0, "x", "aten::relu (FX node `relu`): argument `self`: expected a tensor, got a string"),
    ("sum_1", 1, ["a"], "aten::sum.dim_IntList (FX node `sum_1`): argument `dim`: expected an int, got a string"),
    ("sum_1", 1, 2.5, "(FX node `sum_1`): argument `dim`: expected an int, got a float"),
    ("conv2d", "stride", "2", "aten::conv2d (FX node `conv2d`): argument `stride`: expected an int, got a string"),
    ("linear", 1, lambda ep: _others(ep, None)[:2], "(FX node `linear`): argument `weight`: expected a tensor, got a list"),
    ("add", 1, torch.tensor(1.0), "aten::add.Tensor (FX node `add`): argument `other`: expected a tensor, a number, "
     "a string, a bool, None or a list of them, got a value of type Tensor"),
    ("softmax", 1, 2**70, "aten::softmax.int (FX node `softmax`): argument `dim`: the int 1180591620717411303424 does not "
     "fit in int64"),
    ("softmax", 1, lambda ep: _others(ep, None)[0], "(FX node `softmax`): argument `dim`: expected an int, got a tensor"),
    ("softmax", "dtype", "no", "(FX node `softmax`): argument `dtype`: expected a dtype, got a string"),
    ("softmax", "half_to_float", False, "aten::softmax.int (FX node `softmax`): 2 positional argument(s) and keyword(s) "
     "['half_to_float'] do not fit the schema's arguments (self, dim, dtype)"),
    ("relu", 1, 0, "aten::relu (FX node `relu`): 2 positional argument(s)"),
]


@pytest.mark.parametrize("name, position, replacement, message", MALFORMED, ids=lambda x: str(x)[:20])
def test_malformed_fx_graph_names_the_node(name, position, replacement, message):
    ep = _program()
    node = _node(ep, name)
    value = replacement(ep) if callable(replacement) else replacement
    if isinstance(position, str):
        node.kwargs = {**node.kwargs, position: value}
    else:
        node.args = node.args[:position] + (value,) + node.args[position + 1 :]
    with pytest.raises(fastonnx.ConversionError) as info:
        fastonnx.export(ep)
    assert message in str(info.value)


_WRONG = st.sampled_from(["x", 1.5, math.nan, None, True, ["a"], [[1, 2]], 2**63, -(2**70), object(), b"b", torch.float32,
                          torch.tensor([1.0]), {"k": 1}])


# Values no argument of these nodes takes (a string only where a string is meant, and then one
# the converter rejects).
_MALFORMED = st.sampled_from(["x", ["a"], [[1, 2]], 2**63, -(2**70), object(), b"b", torch.tensor([1.0]), {"k": 1},
                              [torch.tensor(1.0)], ["a", 1]])


@fuzz_settings(60)
@given(data=st.data())
def test_malformed_fx_graph_fuzz(data):
    """Any argument of any node replaced by a value of a kind it never takes: the export fails
    with a ConversionError naming that node."""
    ep = _program()
    nodes = [n for n in ep.graph.nodes if n.op == "call_function" and n.args]
    node = data.draw(st.sampled_from(nodes), label="node")
    position = data.draw(st.integers(0, len(node.args) - 1), label="position")
    value = data.draw(_MALFORMED, label="value")
    node.args = node.args[:position] + (value,) + node.args[position + 1 :]
    with pytest.raises(fastonnx.ConversionError) as info:
        fastonnx.export(ep)
    assert f"(FX node `{node.name}`)" in str(info.value)


# -- the native Session, driven directly -------------------------------------------------------

_DTYPES = [torch.float32, torch.float16, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.int8,
           torch.uint8, torch.bool]
_STRINGS = ["mean", "none", "sum", "floor", "trunc", "tanh", "same", "valid", "constant", "reflect", "x", ""]


def _converters() -> list[tuple[int, str, list, torch._ops.OpOverload]]:
    """(converter id, overload, the schema arguments in the converter's order, the op)."""
    out = []
    for op_id, (name, arg_names, _) in enumerate(_C.op_table()):
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        schema = {a.name: a for a in op._schema.arguments} if op is not None else {}
        if schema and all(n in schema for n in arg_names):
            out.append((op_id, name, [schema[n] for n in arg_names], op))
    return out


CONVERTERS = _converters()


def _shape() -> st.SearchStrategy[list]:
    return st.lists(st.integers(0, 4) | st.sampled_from(["s0", "s1"]), max_size=4)


def _base_type(arg) -> tuple[str, bool]:
    t = str(arg.real_type)
    if t.startswith("Optional["):
        return t[len("Optional["):-1], True
    return t, False


def _typed(arg, refs: list) -> st.SearchStrategy:
    """A value of the schema argument's type, as the lowering encodes it. What torch itself
    guarantees holds: a Python number stands in a tensor slot only as the `other` operand (as
    in `x + 1`), and tensor lists are not empty."""
    t, optional = _base_type(arg)
    small_int = st.integers(-4, 6)  # the int64 bounds are tested where they are parsed
    # `int[N]`: N values, one for all, or none (pooling strides); `int[]`: any number.
    lengths = st.sampled_from([0, 1, arg.N]) if arg.N and arg.N > 1 else st.integers(0, 4)
    tensor = st.sampled_from(refs)
    if arg.name == "other":
        tensor = tensor | st.integers(-3, 3) | st.floats(-2, 2) | st.booleans()
    by_type = {
        "Tensor": tensor,
        "List[Tensor]": st.lists(st.sampled_from(refs), min_size=1, max_size=3),
        "List[Optional[Tensor]]": st.lists(st.none() | st.sampled_from(refs), min_size=1, max_size=3),
        "int": small_int,
        "ScalarType": st.sampled_from([dtype_code(d) for d in _DTYPES]),
        "List[int]": lengths.flatmap(lambda n: st.lists(small_int, min_size=n, max_size=n)),
        "float": st.floats(allow_nan=True, allow_infinity=True),
        "List[float]": st.lists(st.floats(-4, 4), max_size=4),
        "List[bool]": st.lists(st.booleans(), max_size=4),
        "bool": st.booleans(),
        "str": st.sampled_from(_STRINGS),
        "number": st.integers(-3, 3) | st.floats(allow_nan=True) | st.booleans(),
        "Device": st.none(),
        "Layout": st.none(),
        "MemoryFormat": st.none(),
        "Generator": st.none(),
    }
    value = by_type.get(t, _WRONG)
    return (st.none() | value) if optional else value


# Values of the wrong kind for each argument type, whatever the converter (an int is a valid
# SymInt as a tensor, so tensors are not among the wrong values for ints). Devices, layouts and
# memory formats mean nothing in ONNX: their converters ignore them.
_NOT_A = {
    "Tensor": st.sampled_from(["x", ["a"], {"k": 1}, b"b"]),
    "List[Tensor]": st.sampled_from(["x", 1.5, [["a"]]]),
    "int": st.sampled_from(["x", 1.5, ["a"], {"k": 1}]),
    "List[int]": st.sampled_from(["x", 1.5, ["a"], [1.5]]),
    "float": st.sampled_from(["x", ["a"], {"k": 1}]),
    "bool": st.sampled_from(["x", 1.5, ["a"]]),
    "str": st.sampled_from([1, 1.5, ["a"]]),
    "number": st.sampled_from(["x", ["a"], {"k": 1}]),
    "ScalarType": st.sampled_from(["x", 1.5, ["a"]]),
}


def _session(opset: int, inputs: list) -> tuple:
    session = _C.Session(opset)
    return session, [session.add_input(f"in{i}", dtype_code(dt), shape) for i, (dt, shape) in enumerate(inputs)]


@st.composite
def session_cases(draw):
    opset = draw(st.integers(_C.MIN_OPSET, _C.MAX_OPSET))
    inputs = draw(st.lists(st.tuples(st.sampled_from(_DTYPES), _shape()), min_size=1, max_size=3))
    op_id, name, schema, op = draw(st.sampled_from(CONVERTERS))
    return opset, inputs, op_id, name, schema, op


_METAS = st.lists(st.none() | st.tuples(st.sampled_from([dtype_code(d) for d in _DTYPES]), _shape()), min_size=1, max_size=3)


@fuzz_settings(60)
@given(case=session_cases(), data=st.data())
def test_wrong_argument_type_names_node_and_argument(case, data):
    """One argument of the wrong kind, the others well-typed: the registry's unpacking rejects
    it, naming the node and the argument, before any converter runs."""
    opset, inputs, op_id, name, schema, _ = case
    wrongable = [i for i, a in enumerate(schema) if _base_type(a)[0] in _NOT_A]
    if not wrongable:
        return
    session, refs = _session(opset, inputs)
    args = [data.draw(_typed(a, refs), label=a.name) for a in schema]
    at = data.draw(st.sampled_from(wrongable), label="wrong argument")
    args[at] = data.draw(_NOT_A[_base_type(schema[at])[0]], label="wrong value")
    with pytest.raises(fastonnx.ConversionError) as info:
        session.convert(op_id, args, data.draw(_METAS, label="metas"), "fuzzed")
    assert f"aten::{name} (FX node `fuzzed`): argument `{schema[at].name}`: expected " in str(info.value)


_TORCH_DTYPES = {dtype_code(d): d for d in _DTYPES}


def _torch_result(op, schema, args, inputs):
    """What torch's meta kernel makes of these arguments (symbolic sizes taken as 2), or None
    when torch refuses them."""
    shapes = {i: (dt, [2 if isinstance(d, str) else d for d in shape]) for i, (dt, shape) in enumerate(inputs)}

    def to_torch(arg, value):
        if isinstance(value, _C.ValueRef):
            dtype, shape = shapes[value.id]
            return torch.empty(shape, dtype=dtype, device="meta")
        if isinstance(value, list):
            return [to_torch(arg, v) for v in value]
        if _base_type(arg)[0] == "Tensor" and isinstance(value, (bool, int, float)):
            return torch.scalar_tensor(value, dtype=torch.tensor(value).dtype, device="meta")
        if _base_type(arg)[0] == "ScalarType" and value is not None:
            return _TORCH_DTYPES[value]
        if _base_type(arg)[0] == "Device":  # factories (arange, full) would allocate on the CPU
            return torch.device("meta")
        return value

    positional = [to_torch(a, v) for a, v in zip(schema, args) if not a.kwarg_only]
    keywords = {a.name: to_torch(a, v) for a, v in zip(schema, args) if a.kwarg_only}
    try:
        return op(*positional, **keywords)
    except Exception:  # noqa: BLE001 - torch refusing the arguments, in whatever words
        return None


def _meta(value):
    if isinstance(value, torch.Tensor) and value.dtype in _DTYPES:
        return (dtype_code(value.dtype), list(value.shape))
    return None


@fuzz_settings(300)
@given(case=session_cases(), data=st.data())
def test_session_convert_fuzz(case, data):
    """Random well-typed arguments for a random converter, kept when torch's own (meta) kernel
    accepts them, since converters may rely on what torch checks: the converter converts, or
    raises a ConversionError that names the node. Nothing else, no crash, and no memory touched
    that is not its own (the sanitizer run)."""
    opset, inputs, op_id, name, schema, op = case
    session, refs = _session(opset, inputs)
    args = [data.draw(_typed(a, refs), label=a.name) for a in schema]
    result = _torch_result(op, schema, args, inputs)
    if result is None:
        reject()
    metas = [_meta(r) for r in result] if isinstance(result, (tuple, list)) else [_meta(result)]
    try:
        outs = session.convert(op_id, args, metas, "fuzzed")
    except fastonnx.ConversionError as e:
        assert "(FX node `fuzzed`)" in str(e), str(e)
        return
    session.set_outputs([(ref, f"out{i}") for i, ref in enumerate(outs)])
    assert session.finish("fuzz").to_bytes()


# Converters whose Scalar arguments torch.export may leave to the graph (a symbolic size,
# `.item()`), with the positions of those arguments: all but those the spec lists as `static:`.
_COMPUTABLE = [
    (op_id, name, schema, op, [i for i, a in enumerate(schema) if _base_type(a)[0] == "number" and not static >> i & 1])
    for (op_id, name, schema, op), (_, _, static) in zip(CONVERTERS, (_C.op_table()[c[0]] for c in CONVERTERS))
]
_COMPUTABLE = [c for c in _COMPUTABLE if c[4]]


@fuzz_settings(200)
@given(data=st.data())
def test_computed_scalars_convert(data):
    """Every Scalar argument a converter does not declare `static:` takes a number the graph
    computes (a 0-d int64, float64 or bool value) wherever it takes a constant: the converter
    may refuse the arguments for other reasons, never because the number is not a constant."""
    opset = data.draw(st.integers(_C.MIN_OPSET, _C.MAX_OPSET), label="opset")
    inputs = data.draw(st.lists(st.tuples(st.sampled_from(_DTYPES), _shape()), min_size=1, max_size=3), label="inputs")
    op_id, name, schema, op, computable = data.draw(st.sampled_from(_COMPUTABLE), label="converter")
    session, refs = _session(opset, inputs)
    args = [data.draw(_typed(a, refs), label=a.name) for a in schema]
    result = _torch_result(op, schema, args, inputs)
    if result is None:
        reject()
    for i in computable:
        if isinstance(args[i], (bool, int, float)):
            dtype = torch.bool if isinstance(args[i], bool) else torch.float64 if isinstance(args[i], float) else torch.int64
            args[i] = session.add_input(f"number{i}", dtype_code(dtype), [])
    metas = [_meta(r) for r in result] if isinstance(result, (tuple, list)) else [_meta(result)]
    try:
        session.convert(op_id, args, metas, "fuzzed")
    except fastonnx.ConversionError as e:
        assert "needs as a constant" not in str(e), f"{name}: {e}"


def test_static_arguments_have_a_decomposition():
    """A node whose `static:` argument the graph computes is decomposed: each op that declares
    one needs a decomposition, or that case has no way through."""
    from fastonnx.lowering.decompose import decomposition_of

    for op_id, name, schema, op in CONVERTERS:
        if _C.op_table()[op_id][2]:
            assert decomposition_of(op, core=True) is not None, name


@pytest.mark.parametrize(
    "args, metas, message",
    [
        ([_C.ValueRef(77)], [None], "an argument refers to graph value 77, which does not exist"),
        ([object()], [None], "argument `self`: expected a tensor, a number, a string, a bool, None or a list of them, "
         "got a value of type object"),
        ([2**64], [None], "argument `self`: the int 18446744073709551616 does not fit in int64"),
        ([None], [(6, [-2])], "a dimension must be a size (an int >= 0) or a symbol (a str), got -2"),
        ([None], [(6, [1.5])], "got 1.5"),
        ([None], [(1000, [])], "unknown torch dtype code 1000"),
        ([None], [(6 + 256, [])], "unknown torch dtype code 262"),
        ([None], ["meta"], "output metadata must be None or (dtype code, [dims])"),
    ],
)
def test_session_rejects_malformed_calls(args, metas, message):
    """What the fuzzer once found, or could: each is a ConversionError naming the node."""
    session = _C.Session(18)
    session.add_input("x", dtype_code(torch.float32), [2])
    relu = next(op_id for op_id, name, _, _ in CONVERTERS if name == "relu")
    with pytest.raises(fastonnx.ConversionError) as info:
        session.convert(relu, args, metas, "node_7")
    assert str(info.value).startswith("aten::relu (FX node `node_7`): ")
    assert message in str(info.value)


def test_session_rejects_unknown_converter_and_outputs():
    session = _C.Session(18)
    x = session.add_input("x", dtype_code(torch.float32), [2])
    with pytest.raises(fastonnx.ConversionError, match=r"converter #100000 \(FX node `n`\): no converter with this id"):
        session.convert(100000, [x], [None], "n")
    with pytest.raises(fastonnx.ConversionError, match="output `y` refers to graph value 5, which does not exist"):
        session.set_outputs([(_C.ValueRef(5), "y")])


def test_weight_buffer_must_match_its_shape():
    """The serializer reads as many bytes as the shape says; a shorter buffer is refused."""
    session = _C.Session(18)
    t = torch.zeros(4)
    with pytest.raises(fastonnx.ConversionError, match="weight `w`: a buffer of 8 bytes at an address for 16 bytes"):
        session.add_initializer("w", dtype_code(torch.float32), [4], t.data_ptr(), 8, t)
    with pytest.raises(fastonnx.ConversionError, match="weight `w`: a buffer of 16 bytes at null"):
        session.add_initializer("w", dtype_code(torch.float32), [4], 0, 16, t)
    with pytest.raises(fastonnx.ConversionError, match="weight `w` has a dynamic shape"):
        session.add_initializer("w", dtype_code(torch.float32), ["s0"], t.data_ptr(), 16, t)


def test_a_float_beyond_int64_in_an_int_constant():
    """Found by the fuzzer under UBSan: a float constant made for an int64 tensor was cast
    whatever its size (undefined behaviour)."""
    session = _C.Session(18)
    x = session.add_input("x", dtype_code(torch.int64), [2])
    add = next(op_id for op_id, name, _, _ in CONVERTERS if name == "add.Scalar")
    with pytest.raises(fastonnx.ConversionError, match=r"\(FX node `add`\): the number -2\.18506e\+226 has no int64 value"):
        session.convert(add, [x, -2.18506e226, 1], [None], "add")

"""TorchScript's ``prim::`` nodes and its builtins on Python values in the translator: constants,
lists and tuples become Python values, ``prim::NumToTensor``/``aten::Int`` pairs and integer
arithmetic become arithmetic on sizes (so a size the tracer recorded stays a size of the graph),
and a tensor's sizes, rank, dtype and element count are read from its fake value."""

from __future__ import annotations

import functools
import operator

import torch

from ...core.dtypes import scalar_type_code
from ...errors import ConversionError
from .aten_nodes import Rows
from .control_flow import chosen
from .fake_values import known_equal
from .lists import positions
from .nodes import inputs
from .optionals import refuse_optional
from .packed_sequences import BatchSizes
from .quantized import QTensor
from .sequences import at, is_sequence, length, refuse_sequence
from .translator import Handler, Opaque, Outputs, Translator, holds_node

aten = torch.ops.aten

_PYTHON_TYPES = {int: (int, torch.SymInt), float: (float, torch.SymFloat), bool: (bool, torch.SymBool)}


def _constant(t: Translator, node):
    value = node.output().toIValue() if node.outputsSize() else None
    if isinstance(value, list | tuple) and any(isinstance(x, torch.Tensor) for x in value):
        # torch's constant propagation folds a list of constant tensors (indices) into one
        # constant: each tensor is a constant of the graph.
        return type(value)(t.constant_node(x) if isinstance(x, torch.Tensor) else x for x in value)
    if isinstance(value, torch.Tensor):
        n = t.constant_node(value)
        if value.numel() <= 64 and not value.is_quantized:
            t.known[node.output()] = value
        if value.dim() == 0 and not value.is_floating_point() and not value.is_complex():
            t.sizes[node.output()] = int(value)
        return n
    return value


def _list_construct(t: Translator, node):
    ins = inputs(node)
    values = [t.env[v] for v in ins]
    if (
        values
        and any(v in t.known for v in ins)
        and all(v in t.known or not holds_node(x) for v, x in zip(ins, values))
    ):
        t.known[node.output()] = [t.known.get(v, x) for v, x in zip(ins, values)]
    return values


def _list_unpack(t: Translator, node):
    value = t.env[node.input()]
    if isinstance(value, list | tuple):
        return Outputs(value)
    refuse_sequence(f"`{node.kind()}`", [value])  # (its length is no number of names)
    return Outputs(t.emit(operator.getitem, (value, i)) for i in range(node.outputsSize()))


def _tuple_index(t: Translator, node):
    seq, index = (t.env[v] for v in inputs(node))
    return seq[index]


def _getitem(t: Translator, node):
    seq, index = (t.env[v] for v in inputs(node))
    if is_sequence(seq):
        return at(t, seq, index, node.inputsAt(0).type().getElementType())
    if isinstance(seq, list | tuple) and isinstance(index, int):
        return seq[index]
    if isinstance(seq, list | tuple) and seq and isinstance(index, torch.fx.Node):
        # At a position the graph computes: a list of tensors of one type, stacked and selected.
        vals = [t.fake_of(x) if isinstance(x, torch.fx.Node) else None for x in seq]
        tensors = [v for v in vals if isinstance(v, torch.Tensor)]
        first = tensors[0] if tensors else None
        if (
            first is None
            or len(tensors) < len(vals)
            or not all(v.dtype == first.dtype and v.dim() == first.dim() for v in tensors)
        ):
            raise ConversionError(
                "a scripted list of other than tensors of one dtype and rank, read at a computed position"
            )
        if all(all(known_equal(a, b) for a, b in zip(v.shape, first.shape)) for v in tensors):
            return t.emit(aten.select.int, (t.emit(aten.stack.default, (list(seq),)), 0, index))
        # (of several shapes: the one at the position, chosen by Ifs)
        return chosen(t, positions(t, index, len(seq)), list(seq))
    return t.op(node)


def _range_length(t: Translator, node):
    """The trip count of ``for i in range(lo, hi, step)`` in a scripted loop."""
    lo, hi, step = (t.env[v] for v in node.inputs())
    if not isinstance(step, int) or step == 0:
        raise ConversionError("a scripted range() with a step that is not a constant is not supported")
    if step < 0:
        lo, hi, step = hi, lo, -step
    span = t.arithmetic(operator.add, [t.arithmetic(operator.sub, [hi, lo]), step - 1])
    return t.arithmetic(torch.sym_max, [t.arithmetic(operator.floordiv, [span, step]), 0])


def _derive_index(t: Translator, node):
    index, start, step = (t.env[v] for v in node.inputs())
    return t.arithmetic(operator.add, [start, t.arithmetic(operator.mul, [index, step])])


def _len(t: Translator, node):
    seq = t.env[node.input()]
    if is_sequence(seq):
        return length(t, seq)
    if isinstance(seq, list | tuple):
        return len(seq)
    if isinstance(seq, Rows):
        return t.size_of(seq.tensor, seq.dim)
    if isinstance(seq, torch.fx.Node) and isinstance(t.fake_of(seq), torch.Tensor) and t.fake_of(seq).dim() > 0:
        return t.size_of(seq, 0)  # (a size, not the example's: torch's len() of a fake tensor guards on it)
    return t.op(node)


def _num_to_tensor(t: Translator, node):
    size = t.env[node.input()]
    t.sizes[node.output()] = size
    dtype = torch.float64 if isinstance(t.fake_of(size), float | torch.SymFloat) else torch.int64
    if isinstance(size, int | float):
        t.known[node.output()] = torch.tensor(size, dtype=dtype)
    return t.emit(aten.scalar_tensor.default, (size,), {"dtype": dtype})


def _number(t: Translator, node, cast=None):
    """``aten::Int`` and its kin: the size a 0-d tensor was made from, else the tensor's
    value (an unbacked symbol when it depends on data), converted by ``cast`` (int, float,
    bool; None keeps the number's own type)."""
    v = node.input()
    if v in t.known:
        number = t.known[v].item()
    elif v in t.sizes:
        number = t.sizes[v]
    else:
        value = t.env[v]
        if not isinstance(value, torch.fx.Node):
            return value if cast is None else cast(value)
        # (a number the graph computes, float(x.size(1)), is one already)
        number = t.read_number(value) if isinstance(t.fake_of(value), torch.Tensor) else value
    if cast is None or isinstance(t.fake_of(number), _PYTHON_TYPES[cast]):
        return number
    if cast is bool:
        return t.arithmetic(operator.ne, [number, 0])
    return t.arithmetic(torch.sym_int if cast is int else torch.sym_float, [number])


def _int(t: Translator, node):
    return _number(t, node, int)


def _float(t: Translator, node):
    return _number(t, node, float)


def _bool(t: Translator, node):
    return _number(t, node, bool)


def _extreme(fn) -> Handler:
    """``prim::min`` and ``prim::max`` of numbers, or of a list of them (``enumerate`` makes one of
    its lists' lengths): computed on the numbers, as sizes where they are sizes."""

    def extreme(t: Translator, node):
        values = [t.env[v] for v in inputs(node)]
        if len(values) == 1 and isinstance(values[0], list | tuple):
            values = list(values[0])
        if not values or any(isinstance(t.fake_of(v), torch.Tensor) for v in values):
            return t.op(node)
        return functools.reduce(lambda a, b: t.arithmetic(fn, [a, b]), values)

    return extreme


def _size(t: Translator, node):
    ins = [t.env[v] for v in inputs(node)]
    if isinstance(ins[0], QTensor):
        ins[0] = ins[0].ints
    if isinstance(ins[0], BatchSizes):  # batch_sizes.size(0): the longest sequence's length
        longest = t.emit(aten.max.default, (ins[0].packed.lengths,))
        return t.read_number(longest)
    val = t.fake_of(ins[0])
    if len(ins) == 2:
        dim = ins[1] % val.dim()
        return t.size_of(ins[0], dim)
    return [t.size_of(ins[0], d) for d in range(val.dim())]


def _shape_as_tensor(t: Translator, node):
    """A tensor's shape as a 1-D tensor (torchvision's detection models take sizes this way);
    its elements stay the sizes they are for a select or slice of it."""
    value = t.env[node.input()]
    sizes = [t.size_of(value, d) for d in range(t.fake_of(value).dim())]
    parts = [t.emit(aten.scalar_tensor.default, (s,), {"dtype": torch.int64}) for s in sizes]
    shape = t.emit(aten.stack.default, (parts,))
    t.shape_tensors[node.output()] = sizes
    if all(isinstance(x, int) for x in sizes):
        t.known[node.output()] = torch.tensor(sizes, dtype=torch.int64)
    return shape


def _dim(t: Translator, node):
    value = t.env[node.input()]
    return t.fake_of(value.ints if isinstance(value, QTensor) else value).dim()


def _dtype(t: Translator, node):
    return scalar_type_code(t.fake_of(t.env[node.input()]).dtype)


def _dtype_test(t: Translator, node):
    """``x.is_floating_point()`` and its kin: a property of the dtype, known when exporting (so
    an ``if`` on it is decided, as the TorchScript exporter's constant folding decides it)."""
    value = t.env[node.inputsAt(0)]
    if not isinstance(value, torch.fx.Node) or not isinstance(t.fake_of(value), torch.Tensor):
        return t.op(node)
    test = node.kind().removeprefix("aten::")
    return bool(getattr(t.fake_of(value), test)())


def _device_type(t: Translator, node):
    return _device(t, node).type  # (`x.device.type`, of a Device value)


def _layout(t: Translator, node):
    return 0  # torch.strided: the layout of every tensor the translation makes (see nodes.bind)


def _device(t: Translator, node):
    return torch.device("cpu")


def _numel(t: Translator, node):
    tensor = t.env[node.input()]
    numel = t.fake_of(tensor).numel()
    return numel if isinstance(numel, int) else t.emit(aten.sym_numel.default, (tensor,))


class ScriptObject(Opaque):
    """A TorchScript object whose attributes the graph reads and sets: the frozen module
    (``prim::CreateObject``), whose attributes the forward sets, or one of its submodules. An
    attribute is what the graph set it to last, else the module's value as exported."""

    def __init__(self, module: torch._C.ScriptModule):
        self.module = module
        self.values: dict = {}


def _create_object(t: Translator, node):
    if t.script_module is None:
        raise ConversionError("prim::CreateObject of an object other than the module itself is not supported")
    return ScriptObject(t.script_module)


def _get_attr(t: Translator, node):
    owner, name = t.env[node.input()], node.s("name")
    if not isinstance(owner, ScriptObject):
        raise ConversionError(f"reading attribute `{name}` of a {node.input().type()} is not supported")
    if name not in owner.values:
        value = owner.module.getattr(name)  # type: ignore[attr-defined]  # (not in torch's stubs)
        if isinstance(value, torch.Tensor):
            value = t.constant_node(value)
        elif isinstance(value, torch._C.ScriptModule):
            value = ScriptObject(value)
        elif isinstance(value, torch._C.ScriptObject):
            raise ConversionError(f"attribute `{name}` is a TorchScript object ({node.output().type()})")
        owner.values[name] = value
    return owner.values[name]


def _set_attr(t: Translator, node):
    owner, value = (t.env[v] for v in inputs(node))
    if not isinstance(owner, ScriptObject):
        raise ConversionError(f"setting attribute `{node.s('name')}` of a {node.inputsAt(0).type()} is not supported")
    owner.values[node.s("name")] = value
    return Outputs()


def _is(t: Translator, node):
    """``a is b``, of which TorchScript keeps only tests against None (an Optional argument)."""
    a, b = (t.env[v] for v in inputs(node))
    refuse_optional(f"`{node.kind()}`", (a, b))
    same = (a is None) == (b is None) if a is None or b is None else a is b
    return same if node.kind() == "aten::__is__" else not same


def _same(t: Translator, node):
    """A node whose output is its input to ONNX: a cast of TorchScript's types, or ``x.data``
    (the tensor without its autograd history)."""
    return t.env[node.input()]


HANDLERS: dict[str, Handler] = {
    "prim::CreateObject": _create_object,
    "prim::GetAttr": _get_attr,
    "prim::SetAttr": _set_attr,
    "aten::__is__": _is,
    "aten::__isnot__": _is,
    "prim::unchecked_cast": _same,
    "prim::data": _same,
    "prim::Constant": _constant,
    "prim::ListConstruct": _list_construct,
    "prim::TupleConstruct": _list_construct,
    "prim::ListUnpack": _list_unpack,
    "prim::TupleUnpack": _list_unpack,
    "prim::TupleIndex": _tuple_index,
    "aten::__getitem__": _getitem,
    "aten::__range_length": _range_length,
    "aten::__derive_index": _derive_index,
    "aten::len": _len,
    "prim::NumToTensor": _num_to_tensor,
    "aten::Int": _int,
    "aten::Float": _float,
    "aten::Bool": _bool,
    "aten::ScalarImplicit": _number,
    "aten::IntImplicit": _int,
    "aten::FloatImplicit": _float,
    "prim::ImplicitTensorToNum": _number,
    "aten::size": _size,
    "aten::_shape_as_tensor": _shape_as_tensor,
    "aten::dim": _dim,
    "prim::dtype": _dtype,
    "aten::is_floating_point": _dtype_test,
    "aten::is_complex": _dtype_test,
    "aten::is_signed": _dtype_test,
    "prim::device": _device,
    "prim::layout": _layout,
    "prim::type": _device_type,
    "aten::numel": _numel,
    "prim::min": _extreme(torch.sym_min),
    "prim::max": _extreme(torch.sym_max),
}

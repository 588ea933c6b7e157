"""TorchScript's builtins on lists in the translator. A scripted ``List[t]`` is a Python list of its
items (FX nodes, numbers), as ``prim::ListConstruct`` makes it, and TorchScript's list is a
reference: ``append``, ``+=``, ``l[i] = v`` change the one list every name of it reads. torch's
own list ops take only TorchScript's typed lists (a Python list is no ``List[t]`` to them), so
they are done here on the Python list. ``torch.tensor`` of numbers the graph computes (sizes,
values read from data) is a stack of 0-d tensors."""

from __future__ import annotations

import sympy
import torch

from ...core.dtypes import dtype_of_scalar_type
from ...errors import ConversionError
from .fake_values import known_equal
from .nodes import inputs
from .sequences import appended, is_sequence
from .translator import Handler, Outputs, Translator, holds_node

aten = torch.ops.aten


def _list_of(t: Translator, node) -> list | None:
    """The node's first input when it is a list the translation holds as one (None otherwise:
    the node is the tensor op of that name)."""
    first = node.inputsAt(0)
    value = t.env[first]
    if first.type().kind() != "ListType" or not isinstance(value, list):
        return None
    if node.kind() in _MUTATING:  # (its value recorded when it was made is no longer it)
        t.known.pop(first, None)
    return value


_MUTATING = {
    "aten::append",
    "aten::add_",
    "aten::extend",
    "aten::_set_item",
    "aten::insert",
    "aten::pop",
    "aten::Delete",
}


def _append(t: Translator, node):
    seq = t.env[node.inputsAt(0)]
    if is_sequence(seq):  # (every later read of the list reads the new sequence)
        t.env[node.inputsAt(0)] = new = appended(t, seq, t.env[node.inputsAt(1)])
        t.appended.setdefault(node.inputsAt(0), t.fake_of(new))
        return new
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    items.append(t.env[node.inputsAt(1)])
    return items


def _extend(t: Translator, node):
    """``a += b`` (``aten::add_.t``) and ``a.extend(b)``: ``a``, with ``b``'s items after its own."""
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    items.extend(t.env[node.inputsAt(1)])
    return items if node.outputsSize() else Outputs()


def _concatenated(t: Translator, node):
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    return items + list(t.env[node.inputsAt(1)])


def _sliced(t: Translator, node):
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    start, end, step = (_bound(t, t.env[v], len(items)) for v in inputs(node)[1:])
    if not all(x is None or isinstance(x, int) for x in (start, end, step)):
        raise ConversionError("a slice of a scripted list at a position the graph computes is not supported")
    return items[start:end:step]


def _bound(t: Translator, position, length: int):
    """A bound of a slice of a list of ``length`` items, a number known when exporting: a size
    (``x.shape[1 : x.size(2)]``) is tested against the list's ends, and where it falls inside
    taken at the example's value (the list's items, a rank of the graph, need it known): the
    axis is then static, as JitProgram.fixed reports."""
    val = t.fake_of(position) if isinstance(position, torch.fx.Node) else position
    if not isinstance(val, torch.SymInt):
        return position
    if val >= length:
        return length
    if val <= -length:
        return -length
    return int(val)


def _set_item(t: Translator, node):
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    index, value = (t.env[v] for v in inputs(node)[1:])
    if isinstance(index, int):
        items[index] = value
        return items
    # At a position the graph computes: each item is the value where the position is its own.
    like = t.fake_of(value)
    if not isinstance(like, torch.Tensor) or not all(_alike(t.fake_of(x), like) for x in items):
        raise ConversionError(
            "writing into a scripted list at a position the graph computes needs a list of tensors "
            "of the value's type and shape"
        )
    for i, hit in enumerate(positions(t, index, len(items))):
        items[i] = t.emit(aten.where.self, (hit, value, items[i]))
    return items


def _alike(a, b: torch.Tensor) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.dtype == b.dtype
        and a.dim() == b.dim()
        and all(known_equal(x, y) for x, y in zip(a.shape, b.shape))
    )


def positions(t: Translator, index, length: int) -> list:
    """For each position of a list of ``length`` items, a 0-d bool tensor: whether ``index`` (a
    number the graph computes, negative from the end as Python's) is that position."""
    if isinstance(t.fake_of(index), torch.Tensor):
        position = t.emit(aten._to_copy.default, (index,), {"dtype": torch.int64})
    else:
        position = t.emit(aten.scalar_tensor.default, (index,), {"dtype": torch.int64})
    position = t.emit(aten.remainder.Scalar, (position, length))
    return [t.emit(aten.eq.Scalar, (position, i)) for i in range(length)]


def _known_index(node, index) -> int:
    if not isinstance(index, int):
        raise ConversionError(f"{node.kind()} of a scripted list at a position the graph computes is not supported")
    return index


def _pop(t: Translator, node):
    """``l.pop(i)``: the item, taken out of the list."""
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    index = t.env[node.inputsAt(1)] if len(inputs(node)) > 1 else -1
    return items.pop(_known_index(node, index))


def _delete(t: Translator, node):
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    del items[_known_index(node, t.env[node.inputsAt(1)])]
    return Outputs()


def _insert(t: Translator, node):
    items = _list_of(t, node)
    if items is None:
        return t.op(node)
    index, value = (t.env[v] for v in inputs(node)[1:])
    items.insert(_known_index(node, index), value)
    return Outputs()


def _copied(t: Translator, node):
    if is_sequence(t.env[node.inputsAt(0)]):  # (a sequence is a value: appending to either makes another)
        return t.env[node.inputsAt(0)]
    items = _list_of(t, node)
    return t.op(node) if items is None else list(items)


def _compared(t: Translator, node):
    """``a == b`` and ``a != b`` of lists of numbers (a tensor's sizes against those expected):
    decided from what the ShapeEnv knows of each pair, never by comparing FX nodes."""
    a, b = (t.env[v] for v in inputs(node))
    if node.inputsAt(0).type().kind() != "ListType" or not isinstance(a, list) or not isinstance(b, list):
        return t.op(node)
    equal: bool | None = len(a) == len(b)
    for x, y in zip(t.fake_of(a), t.fake_of(b)) if equal else ():
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            equal = None
            break
        same = t.shape_env._maybe_evaluate_static(sympy.Eq(_expr(x), _expr(y)))
        if same is None:
            equal = None
        elif not bool(same):
            equal = False
            break
    if equal is None:
        raise ConversionError(f"{node.kind()} of lists whose items the graph computes is not supported")
    return equal if node.kind() == "aten::eq" else not equal


def _expr(x):
    return x.node.expr if isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool) else sympy.sympify(x)


def _tolist(t: Translator, node):
    """``x.tolist()``: a list (nested per dimension) of the numbers of ``x``, whose sizes must be
    static; each number the example's when ``x`` is known, else read from the data."""
    x = t.env[node.inputsAt(0)]
    if node.inputsAt(0) in t.known:
        return t.known[node.inputsAt(0)].tolist()
    shape = t.fake_of(x).shape
    if not all(isinstance(s, int) for s in shape):
        raise ConversionError("tolist() of a tensor of a dynamic size is not supported")

    def items(tensor, sizes):
        if not sizes:
            return t.read_number(tensor)
        return [items(t.emit(aten.select.int, (tensor, 0, i)), sizes[1:]) for i in range(sizes[0])]

    return items(x, list(shape))


def _tensor(t: Translator, node):
    """``torch.tensor(data, dtype)`` of a number or a (nested) list of them: a constant when they
    are known, else the 0-d tensors of its numbers stacked."""
    data, dtype = (t.env[v] for v in inputs(node)[:2])
    if not holds_node(data):
        return t.constant_node(torch.tensor(data, dtype=None if dtype is None else dtype_of_scalar_type(dtype)))
    if dtype is None:  # as torch.tensor infers it: bool, else int64, else the default float
        kinds = set(_leaves(t, data))
        dtype_ = torch.bool if kinds <= {bool} else torch.int64 if kinds <= {bool, int} else torch.get_default_dtype()
    else:
        dtype_ = dtype_of_scalar_type(dtype)
    return _stacked(t, data, dtype_)


def _leaves(t: Translator, data) -> list:
    """The Python types of ``data``'s numbers (a symbolic one as its plain type)."""
    if isinstance(data, list | tuple):
        return [x for item in data for x in _leaves(t, item)]
    value = t.fake_of(data)
    if isinstance(value, torch.Tensor):
        return [bool if value.dtype == torch.bool else float if value.is_floating_point() else int]
    return [
        bool if isinstance(value, bool | torch.SymBool) else float if isinstance(value, float | torch.SymFloat) else int
    ]


def _stacked(t: Translator, data, dtype: torch.dtype):
    if isinstance(data, list | tuple):
        return t.emit(aten.stack.default, ([_stacked(t, x, dtype) for x in data],))
    if isinstance(data, torch.fx.Node) and isinstance(t.fake_of(data), torch.Tensor):
        return t.emit(aten._to_copy.default, (data,), {"dtype": dtype})
    return t.emit(aten.scalar_tensor.default, (data,), {"dtype": dtype})


HANDLERS: dict[str, Handler] = {
    "aten::append": _append,
    "aten::add_": _extend,
    "aten::extend": _extend,
    "aten::add": _concatenated,
    "aten::slice": _sliced,
    "aten::_set_item": _set_item,
    "aten::pop": _pop,
    "aten::Delete": _delete,
    "aten::insert": _insert,
    "aten::list": _copied,
    "aten::tensor": _tensor,
    "prim::tolist": _tolist,
    "aten::eq": _compared,
    "aten::ne": _compared,
}

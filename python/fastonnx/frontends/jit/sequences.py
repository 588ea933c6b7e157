"""Scripted lists whose length the graph computes, as ONNX sequences, as the TorchScript exporter
writes them. A list that a loop of a trip count the graph computes appends to (``for i in
range(x.size(0)): res.append(...)``, ``list(x)`` of a dynamic size) is carried through the Loop as a
sequence (loops.py), and an ``if`` whose branch gives one gives one (control_flow.py). A sequence is a
``fastonnx::sequence_*`` node marked by ``SEQUENCE`` in its FX node's meta, whose fake value stands
for an item: its type, and the shape of the item last appended. ``append``, ``len``, ``l[i]``,
``torch.stack`` and ``torch.cat`` read it and the graph may return it; any other op reading one is a
ConversionError naming the line. A list of a length known when exporting stays a Python list of
its items, as before."""

from __future__ import annotations

import torch

from ...errors import ConversionError
from .packed_rnn import _declared_schema
from .translator import Translator

# Set on an FX node whose value is an ONNX sequence.
SEQUENCE = "fastonnx_sequence"


@torch.library.custom_op("fastonnx::sequence_empty", mutates_args=(), schema=_declared_schema("sequence_empty"))
def sequence_empty(dtype: torch.dtype) -> torch.Tensor:
    """An empty sequence of items of element type ``dtype`` (its value: eager never runs it, the FX
    graph records it; the tensor stands for an item)."""
    return torch.empty(0, dtype=dtype)


@sequence_empty.register_fake
def _(dtype):
    return torch.empty(0, dtype=dtype)


@torch.library.custom_op("fastonnx::sequence_append", mutates_args=(), schema=_declared_schema("sequence_append"))
def sequence_append(seq: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``seq`` with ``x`` after its items (stands for ``x``, the item last appended)."""
    return x.clone()


@sequence_append.register_fake
def _(seq, x):
    return x.new_empty(x.shape)


@torch.library.custom_op("fastonnx::sequence_at", mutates_args=(), schema=_declared_schema("sequence_at"))
def sequence_at(seq: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The item of ``seq`` at ``position``."""
    return seq.clone()


@sequence_at.register_fake
def _(seq, position):
    return seq.new_empty(seq.shape)


@torch.library.custom_op("fastonnx::sequence_length", mutates_args=(), schema=_declared_schema("sequence_length"))
def sequence_length(seq: torch.Tensor) -> torch.Tensor:
    """The number of items of ``seq``, a 0-d int64 tensor."""
    return torch.zeros((), dtype=torch.int64)


@sequence_length.register_fake
def _(seq):
    return seq.new_empty((), dtype=torch.int64)


@torch.library.custom_op("fastonnx::sequence_stack", mutates_args=(), schema=_declared_schema("sequence_stack"))
def sequence_stack(seq: torch.Tensor, dim: int, new_axis: bool) -> torch.Tensor:
    """The items of ``seq`` stacked along a new ``dim`` (``new_axis``) or concatenated along ``dim``."""
    return seq.unsqueeze(dim).clone() if new_axis else seq.clone()


@sequence_stack.register_fake
def _(seq, dim, new_axis):
    sizes = list(seq.shape)
    count = torch.library.get_ctx().new_dynamic_size()
    if new_axis:
        sizes.insert(dim % (seq.dim() + 1), count)
    else:
        sizes[dim % seq.dim()] = count
    return seq.new_empty(sizes)


def is_sequence(value) -> bool:
    return isinstance(value, torch.fx.Node) and bool(value.meta.get(SEQUENCE))


def _marked(node: torch.fx.Node, item: torch.Tensor | None = None) -> torch.fx.Node:
    node.meta[SEQUENCE] = True
    if item is not None:
        node.meta["val"] = item
    return node


def empty(t: Translator, item: torch.Tensor) -> torch.fx.Node:
    """An empty sequence of items like ``item`` (a fake tensor)."""
    return _marked(t.emit(torch.ops.fastonnx.sequence_empty.default, (item.dtype,)), item)


def item_tensor(t: Translator, value) -> torch.fx.Node:
    """A list's item as the tensor a sequence holds: a tensor as it is, an int as a 0-d int64
    tensor (as the TorchScript exporter holds a ``List[int]``)."""
    if isinstance(value, torch.fx.Node) and isinstance(t.fake_of(value), torch.Tensor):
        return value
    if isinstance(t.fake_of(value), int | torch.SymInt) and not isinstance(t.fake_of(value), bool):
        return t.emit(torch.ops.aten.scalar_tensor.default, (value,), {"dtype": torch.int64})
    raise ConversionError(
        "a scripted list whose length the graph computes (an ONNX sequence) holds tensors or ints, "
        f"not {type(t.fake_of(value)).__name__}"
    )


def appended(t: Translator, seq: torch.fx.Node, value) -> torch.fx.Node:
    item = item_tensor(t, value)
    return _marked(t.emit(torch.ops.fastonnx.sequence_append.default, (seq, item)))


def as_sequence(t: Translator, items: list, item: torch.Tensor) -> torch.fx.Node:
    """A Python list (its items tensors or ints) as a sequence of items like ``item``."""
    seq = empty(t, item)
    for value in items:
        seq = appended(t, seq, value)
    return seq


def item_like(t: Translator, items: list, element_type) -> torch.Tensor | None:
    """A fake item of a sequence made of ``items``, a list of TorchScript element type
    ``element_type``: an int a 0-d int64 tensor, a tensor its first item (None when it has none)."""
    if element_type.kind() == "IntType":
        with t.mode:
            return torch.empty((), dtype=torch.int64)
    if element_type.kind() == "TensorType" and items:
        first = t.fake_of(item_tensor(t, items[0]) if not isinstance(items[0], torch.fx.Node) else items[0])
        return first if isinstance(first, torch.Tensor) else None
    return None


def length(t: Translator, seq: torch.fx.Node):
    return t.read_number(t.emit(torch.ops.fastonnx.sequence_length.default, (seq,)))


def at(t: Translator, seq: torch.fx.Node, index, element_type):
    """The item at ``index`` (negative from the end, as Python's), a number for a list of ints."""
    if isinstance(index, torch.fx.Node) and isinstance(t.fake_of(index), torch.Tensor):
        position = t.emit(torch.ops.aten._to_copy.default, (index,), {"dtype": torch.int64})
    else:
        position = t.emit(torch.ops.aten.scalar_tensor.default, (index,), {"dtype": torch.int64})
    item = t.emit(torch.ops.fastonnx.sequence_at.default, (seq, position))
    return t.read_number(item) if element_type.kind() == "IntType" else item


def stacked(t: Translator, seq: torch.fx.Node, dim: int, new_axis: bool) -> torch.fx.Node:
    if not isinstance(dim, int):
        raise ConversionError("stacking a scripted list whose length the graph computes along a computed dim")
    return t.emit(torch.ops.fastonnx.sequence_stack.default, (seq, dim, new_axis))


def refuse_sequence(what: str, values) -> None:
    """A ConversionError when one of ``values`` is a sequence: ``what`` reads it."""
    if any(is_sequence(v) or isinstance(v, list | tuple) and any(is_sequence(x) for x in v) for v in values):
        raise ConversionError(
            f"{what} reads a scripted list whose length the graph computes (an ONNX sequence), which "
            "fastonnx reads only by append, len, an index, torch.stack and torch.cat"
        )

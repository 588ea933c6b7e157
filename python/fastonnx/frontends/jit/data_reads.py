"""Whether a TorchScript graph reads values from data: without that (and without dynamic axes) the
trace's own types are the translated graph's (see ``typed_by_trace``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from .nodes import inputs, resolve
from .trace import JitGraph

aten = torch.ops.aten

# Ops whose result depends on the data beyond its type, whatever their arguments: control flow.
# Ops whose result size, or a number they return, depends on the data are those torch tags so
# (nonzero, masked_select, unique, item, index by a mask...; see _data_reading_kinds), and
# composites of them, which have no tag of their own.
_DATA_READS = {"prim::If", "prim::Loop"}
_DATA_TAGS = frozenset({torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output})
_COMPOSITE_DATA_READS = {
    aten.where.default,  # where(condition): nonzero's columns
    aten.nonzero_numpy.default,
    aten.argwhere.default,
    aten.repeat_interleave.self_Tensor,
    aten.tensor_split.tensor_indices_or_sections,
}
_NUMBER_READS = {"aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit", "prim::ImplicitTensorToNum"}


@functools.cache
def _data_reading_kinds() -> frozenset[str]:
    """The TorchScript kinds of the ATen ops with an overload torch tags as reading the data, and
    of the composites above."""
    kinds = {op._schema.name for op in _COMPOSITE_DATA_READS}
    for qualified in torch._C._dispatch_get_all_op_names():
        kind, _, overload = qualified.partition(".")
        if not kind.startswith("aten::") or kind in kinds:
            continue
        op = getattr(getattr(aten, kind[len("aten::") :], None), overload or "default", None)
        if isinstance(op, torch._ops.OpOverload) and _DATA_TAGS & set(op.tags):
            kinds.add(kind)
    return frozenset(kinds)


def typed_by_trace(jit: JitGraph, dynamic: Sequence[dict[int, str]]) -> bool:
    return not any(dynamic) and not _reads_data(jit.graph)


def _reads_data(graph) -> bool:
    """Whether the graph reads values from data (a number of a tensor that is not a size, an op
    whose result size depends on the data): the trace recorded the example's sizes for what
    follows, which only the fake mode's symbols keep apart from it. (torch's own search of the
    nodes of a kind, nested blocks included: a walk in Python costs more than the rest of a small
    model's translation.)"""
    if any(graph.findAllNodes(kind, True) for kind in _DATA_READS):
        return True
    if any(_reads_data_at(node) for kind in _data_reading_kinds() for node in graph.findAllNodes(kind, True)):
        return True
    return any(
        node.input().node().kind() != "prim::NumToTensor"
        for kind in _NUMBER_READS
        for node in graph.findAllNodes(kind, True)
    )


def _reads_data_at(node: torch._C.Node) -> bool:
    """Whether this node of a data-reading kind reads the data: its overload is tagged so (or a
    composite of one), and for indexing, an index is a mask that is not a constant; for one_hot,
    the class count is not given (-1)."""
    schema_text = node.schema()
    if schema_text == "(no schema)":
        return True
    _, _, op = resolve(schema_text)
    if op in _COMPOSITE_DATA_READS:
        return True
    if not _DATA_TAGS & set(op.tags):
        return False
    if op is aten.index.Tensor:
        indices = node.inputsAt(1).node()
        if indices.kind() != "prim::ListConstruct":  # (a constant list: constant indices)
            return indices.kind() != "prim::Constant"
        return any(_mask_from_data(v) for v in inputs(indices))
    if op is aten.one_hot.default:
        count = node.inputsAt(1)
        value = count.toIValue() if count.node().kind() == "prim::Constant" else None
        return not isinstance(value, int) or value < 0
    return True


def _mask_from_data(index: torch._C.Value) -> bool:
    """Whether an index the graph computes may be a boolean (or byte) mask: its count of true
    elements sizes the result. A constant index, or one the trace typed as integers, does not."""
    if index.node().kind() == "prim::Constant":
        return False
    t = index.type()
    if t.kind() == "OptionalType":
        t = t.getElementType()
    if t.kind() == "NoneType":
        return False
    return t.kind() != "TensorType" or t.scalarType() not in ("Long", "Int", "Short", "Char")

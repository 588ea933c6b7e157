"""The dynamo exporter's converters: onnxscript functions given in ``custom_translation_table``
(``{torch.ops.aten.add.Tensor: custom_aten_add}``), taking the op's arguments and calling
onnxscript ops (``op.Add(other, self)``). Each runs with an onnxscript evaluator that adds the
ops it calls to the graph being converted; an ``@onnxscript.script`` function it calls (or that
is the converter itself) becomes a local function of the model, as ``g.onnxscript_op`` makes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch

from ..errors import ArgumentError
from .registry import GraphContext, register_converter, registrations_kept


class _GraphEvaluator:
    """An onnxscript evaluator that writes each op it is asked to evaluate into the graph."""

    def __init__(self, g: GraphContext):
        self.g = g

    def eval_op(self, op, args: Sequence, kwargs: Mapping):
        from onnxscript._internal.evaluator import compute_num_outputs

        outputs = compute_num_outputs(op.op_schema, args, kwargs) if op.op_schema is not None else 1
        attributes = {k: v for k, v in kwargs.items() if v is not None}
        return self.g.op(op.name, *args, domain=op.opset.domain, outputs=outputs, **attributes)

    def eval_function(self, function, args: Sequence, kwargs: Mapping):
        return self.g.onnxscript_op(function, *args, **kwargs)


def _converter(fn: Callable) -> Callable:
    """``fn`` (an onnxscript-style converter, or an ``@onnxscript.script`` function) as a
    converter of fastonnx's ``fn(g, *args, **kwargs)``."""
    from onnxscript import values
    from onnxscript._internal.evaluator import default_as

    def convert(g: GraphContext, *args, **kwargs):
        if isinstance(fn, values.OnnxFunction):
            return g.onnxscript_op(fn, *args, **kwargs)
        with default_as(_GraphEvaluator(g)):
            return fn(*args, **kwargs)

    return convert


def _names(op) -> list[str]:
    if isinstance(op, torch._ops.OpOverload):
        schema = op._schema
        return [schema.name + (f".{schema.overload_name}" if schema.overload_name else "")]
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [op._qualified_op_name]
    raise ArgumentError(f"custom_translation_table: a key must be a torch op (torch.ops.aten.add.Tensor), got {op!r}")


@contextlib.contextmanager
def translation_table(table: Mapping | None) -> Iterator[None]:
    """The converters of ``table`` (op -> function, or a list of functions of which the first is
    taken), registered for one export; what was registered before is back afterwards."""
    if not table:
        yield
        return
    if not isinstance(table, Mapping):
        raise ArgumentError(f"custom_translation_table must be a dict of op -> function, got {type(table).__name__}")
    with registrations_kept():
        for op, fns in table.items():
            fn = fns[0] if isinstance(fns, (list, tuple)) else fns
            for name in _names(op):
                register_converter(name, _converter(fn))
        yield

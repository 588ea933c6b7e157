"""Unsupported ops: one error naming every op of a graph (and of its control-flow functions)
that has neither a converter nor a decomposition, with where each is first called and the YAML
line that would map it."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable

import torch

from ..errors import UnsupportedOp, UnsupportedOpsError
from .decompose import DECOMPOSED_FROM, UNTRACEABLE
from .graph import PreparedGraph, source_line
from .op_table import is_mapped, overload_key, qualified_name
from .values import static_number


def _converter_stub(op: torch._ops.OpOverload, untraceable: str) -> str:
    """A ready-to-paste Python converter for an op outside ATen (a torch.library op)."""
    schema = op._schema
    params = ", ".join(["g", *(a.name for a in schema.arguments)])
    tensors = ", ".join(a.name for a in schema.arguments if isinstance(a.type, torch.TensorType))
    name = schema.name.replace("::", "_")
    why = f"its Python implementation does not trace ({untraceable}); " if untraceable else ""
    return (
        f"{why}a Python converter (README, 'Custom converters'):\n"
        f"          def convert_{name}({params}):  # {schema}\n"
        f'              return g.op("...", {tensors})\n'
        f'          fastonnx.register_converter("{schema.name}", convert_{name})'
    )


def _yaml_hint(op, node: torch.fx.Node) -> str:
    if isinstance(op, torch._ops.OpOverload) and op.namespace != "aten":
        return _converter_stub(op, node.meta.get(UNTRACEABLE, ""))
    if isinstance(op, torch._ops.OpOverload):
        return f"{overload_key(op)}: {{onnx: ...}}   # schema: {op._schema}"
    return f"register a converter for {op}"


def check_supported(graphs: Iterable[PreparedGraph]) -> None:
    """Raise one error naming every op of ``graphs`` (the program's and the functions of its
    control flow, after decomposition) that has no converter: these have neither a converter nor
    a decomposition."""
    missing: Counter = Counter()
    first: dict = {}
    for prepared in graphs:
        for n in prepared.graph.nodes:
            if n.op != "call_function" or n.target is operator.getitem or n not in prepared.live:
                continue
            if is_mapped(n.target) or static_number(n.meta.get("val")) is not None:
                continue
            missing[n.target] += 1
            first.setdefault(n.target, n)
    if missing:
        raise UnsupportedOpsError(
            [
                UnsupportedOp(
                    overload=qualified_name(op),
                    count=count,
                    first_source=source_line(first[op]),
                    yaml_hint=_yaml_hint(op, first[op]),
                    decomposed_from=first[op].meta.get(DECOMPOSED_FROM, ""),
                )
                for op, count in missing.most_common()
            ]
        )

"""What the TorchScript translator reads of a TorchScript node: its inputs and outputs, the
model's source line that made it, and the ATen overload its matched schema names, with the
node's values as that overload's arguments."""

from __future__ import annotations

import functools
import linecache
import os
import re
from collections.abc import Sequence
from typing import Any

import torch

from ...core.dtypes import dtype_of_scalar_type

_TRACED_FRAME = re.compile(r"^(.+\.py)\((\d+)\): (\w+)$", re.MULTILINE)
_LIBRARIES = (f"{os.sep}torch{os.sep}", f"{os.sep}fastonnx{os.sep}")
# A frame of the stack outside the libraries (the line holds no library's directory).
_MODEL_FRAME = re.compile(
    "^(?!.*(?:" + "|".join(map(re.escape, _LIBRARIES)) + "))" + _TRACED_FRAME.pattern[1:], re.MULTILINE
)
_ENUM_ARGUMENTS = {
    "ScalarType": dtype_of_scalar_type,
    "Layout": lambda v: [torch.strided, torch.sparse_coo][v],
    "MemoryFormat": lambda v: [torch.contiguous_format, torch.preserve_format, torch.channels_last][v],
}


def inputs(node: torch._C.Node) -> list:
    """A TorchScript node's inputs. (By index: iterating ``node.inputs()`` costs some 20 µs a node
    in torch's bindings, whatever their count, more than translating most nodes does.)"""
    return [node.inputsAt(i) for i in range(node.inputsSize())]


def outputs(node: torch._C.Node) -> list:
    """A TorchScript node's outputs (by index, as ``inputs``)."""
    return [node.outputsAt(i) for i in range(node.outputsSize())]


def source_line(node: torch._C.Node) -> str:
    """The model's source line that made the node, as a Python traceback line (what
    ``_graph.source_line`` reads): a scripted node's range, or the innermost frame outside torch
    of the stack the tracer recorded."""
    text = str(node.sourceRange())
    first = text.split("\n", 1)[0].strip()
    if first.startswith("File "):  # scripted: '  File "m.py", line 17' and the code
        return first
    # (innermost first: one search of the text stops at the model's frame)
    frame = _MODEL_FRAME.search(text) or _TRACED_FRAME.search(text)
    return f'File "{frame.group(1)}", line {frame.group(2)}, in {frame.group(3)}' if frame else ""


def where(node: torch._C.Node) -> str:
    """``at file:line: code`` of the model's line that made the node, else the node."""
    found = re.match(r'File "(.+)", line (\d+)', source_line(node))
    if found is None:
        return f"at {str(node).strip()}"
    code = linecache.getline(found.group(1), int(found.group(2))).strip()
    return f"at {found.group(1)}:{found.group(2)}" + (f": {code}" if code else "")


@functools.cache
def resolve(schema_text: str) -> tuple[torch.FunctionSchema, Any, torch._ops.OpOverload]:
    """A TorchScript node's matched schema, its op's overload packet and the overload (parsed
    once per schema: every node of an op asks)."""
    schema = torch._C.parse_schema(schema_text)
    namespace, name = schema.name.split("::")
    packet = getattr(getattr(torch.ops, namespace), name)
    return schema, packet, getattr(packet, schema.overload_name or "default")


def bind(schema: torch.FunctionSchema, values: Sequence) -> tuple[list, dict[str, Any]]:
    """A node's input values as the overload's positional and keyword arguments, TorchScript's
    integer enums (ScalarType, Layout, MemoryFormat) as torch's objects."""
    args: list = []
    kwargs: dict[str, Any] = {}
    for a, value in zip(schema.arguments, values):
        type_name = str(a.real_type).removeprefix("Optional[").removesuffix("]")
        if value is not None and type_name in _ENUM_ARGUMENTS and isinstance(value, int):
            value = _ENUM_ARGUMENTS[type_name](value)
        if a.kwarg_only:
            # (an optional left at its default None is left out, as torch.export's graphs leave
            # it: PrimTorch's decompositions take some, ``layout``, only when absent)
            if value is not None or not a.has_default_value() or a.default_value is not None:
                kwargs[a.name] = value
        else:
            args.append(value)
    return args, kwargs


def functional_overload(packet, schema) -> torch._ops.OpOverload | None:
    """The functional overload of an out variant (``arange.out`` -> ``arange``,
    ``add.out`` -> ``add.Tensor``): same arguments but the ``out=`` ones."""
    wanted = [a.name for a in schema.arguments if not (a.kwarg_only and a.alias_info is not None)]
    for name in packet.overloads():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        rest = args[len(wanted) :]
        if (
            name != schema.overload_name
            and [a.name for a in args[: len(wanted)]] == wanted
            and all(a.has_default_value() or a.kwarg_only for a in rest)
            and not candidate._schema.is_mutable
        ):
            return candidate
    return None


def is_view(node: torch._C.Node) -> bool:
    """Whether the node's output is a view of its first input (aten::slice, select, view...)."""
    text = node.schema()
    if text == "(no schema)":
        return False
    schema = resolve(text)[0]
    return bool(schema.returns) and schema.returns[0].alias_info is not None and not schema.is_mutable

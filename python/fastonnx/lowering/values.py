"""What the ONNX graph makes of the value torch.export recorded for an FX node
(``node.meta["val"]``): a number known when exporting, or a tensor's element type and shape."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

import torch
from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_int

from ..core.dtypes import dtype_code


def tensor_meta(tensor: torch.Tensor, dim_name: Callable[[torch.SymInt], int | str]) -> tuple[int, list]:
    """(dtype code, shape) of a tensor; ``dim_name`` names a symbolic dimension."""
    return dtype_code(tensor.dtype), [dim_name(d) if isinstance(d, torch.SymInt) else int(d) for d in tensor.shape]


def graph_meta(value: object, dim_name: Callable[[torch.SymInt], int | str]) -> tuple[int, list] | None:
    """(dtype code, shape) of a node's value: a tensor's, or a 0-d tensor's for a Python number
    (a symbolic size is an int64 scalar in the ONNX graph, as torch computes it in int64)."""
    if isinstance(value, torch.Tensor):
        return tensor_meta(value, dim_name)
    if isinstance(value, (bool, torch.SymBool)):
        return dtype_code(torch.bool), []
    if isinstance(value, (int, torch.SymInt)):
        return dtype_code(torch.int64), []
    if isinstance(value, (float, torch.SymFloat)):
        return dtype_code(torch.float64), []
    return None


def static_number(value: object) -> bool | int | float | None:
    """A node value that is a plain Python number, or a symbolic one torch has pinned to a
    constant: the ONNX graph uses the number itself."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, torch.SymInt) and is_concrete_int(value):
        return int(value)
    if isinstance(value, torch.SymBool) and is_concrete_bool(value):
        return bool(value)
    return None


RESHAPES = frozenset({torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default})


def asked_shape_of(node: torch.fx.Node, val: torch.Tensor) -> torch.Tensor:
    """The value of a view or reshape ``node`` (one of RESHAPES) with the shape its sizes ask for.
    torch's fake view keeps its input's shape when that equals the one asked at the example's
    sizes: a view of ((s//2), 2) as (1, -1), traced at s = 2, is recorded as ((s//2), 2) under a
    guard s//2 == 1 that torch.export then drops (s stays dynamic), and the ONNX graph would
    declare a shape that holds at the example only. The sizes are compared as expressions, not
    under the shape environment's guards, which would take that one as a fact."""
    source, sizes = node.args[0], node.args[1]
    assert isinstance(source, torch.fx.Node) and isinstance(sizes, (list, tuple))
    numel = source.meta["val"].numel()
    asked: list = [s.meta["val"] if isinstance(s, torch.fx.Node) else s for s in sizes]  # (a size the graph computes)
    known = [s for s in asked if not (isinstance(s, int) and s == -1)]
    if len(known) < len(asked):
        asked[asked.index(-1)] = numel // functools.reduce(operator.mul, known, 1)
    if len(asked) == val.dim() and all(_same_size(a, d) for a, d in zip(asked, val.shape)):
        return val
    return val.new_empty(asked)


def _same_size(a: int | torch.SymInt, b: int | torch.SymInt) -> bool:
    expr = lambda s: s.node.expr if isinstance(s, torch.SymInt) else s  # noqa: E731
    return bool(expr(a) == expr(b))

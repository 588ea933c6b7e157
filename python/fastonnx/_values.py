"""What the ONNX graph makes of the value torch.export recorded for an FX node
(``node.meta["val"]``): a number known when exporting, or a tensor's element type and shape."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_int

from ._dtypes import dtype_code


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

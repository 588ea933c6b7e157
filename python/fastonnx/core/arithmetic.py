"""The one table of arithmetic on numbers (sizes, and numbers read from tensors), each operation
under every name it has in fastonnx.

A graph records arithmetic on symbolic numbers as the Python function that computes it
(``x.shape[0] // 2`` is an FX node of ``operator.floordiv``, in torch.export's graphs and in the
TorchScript translator's); the lowering converts that node as the ATen op that computes it on 0-d
tensors. TorchScript writes the same operation on numbers as an ``aten::`` op of its own
(``aten::floordiv.int``), and the tracer records it on sizes as a 0-d tensor op
(``x.size(0) // 2`` is ``aten::floor_divide``, or ``aten::div`` with ``rounding_mode="floor"``);
the translator follows both as the Python operation. Expressions of sizes (sympy's) are computed
back with it too.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

aten = torch.ops.aten


@dataclass(frozen=True)
class OnSizes:
    """A TorchScript op on 0-d tensors that the tracer records for the operation on sizes
    (``x.size(0) * 2`` is ``aten::mul``)."""

    name: str  # the aten:: op's name, of any of its overloads
    rounding_mode: str | None = None  # a division's ``rounding_mode`` argument that makes it this operation
    swapped: bool = False  # its operands are the operation's swapped (``rsub``: ``other - self``)


@dataclass(frozen=True)
class Arithmetic:
    """One operation on numbers."""

    python: Callable[..., Any]  # what an FX graph records for it on symbolic numbers
    aten: torch._ops.OpOverload  # the ATen overload that computes it on 0-d tensors (the lowering's)
    aten_kwargs: Mapping[str, Any] = field(default_factory=dict)  # the overload's arguments that make it this one
    torchscript: str | None = None  # the name of TorchScript's op of it on numbers (``aten::floordiv.int``)
    on_sizes: tuple[OnSizes, ...] = ()
    sympy: type | None = None  # the sympy expression of it over sizes
    # Python's result is an int where the ATen op's keeps its operand's type (``math.floor``).
    to_int: bool = False


TABLE: tuple[Arithmetic, ...] = (
    Arithmetic(operator.add, aten.add.Tensor, torchscript="add", on_sizes=(OnSizes("add"),), sympy=sympy.Add),
    Arithmetic(
        operator.sub, aten.sub.Tensor, torchscript="sub", on_sizes=(OnSizes("sub"), OnSizes("rsub", swapped=True))
    ),
    Arithmetic(operator.mul, aten.mul.Tensor, torchscript="mul", on_sizes=(OnSizes("mul"),), sympy=sympy.Mul),
    Arithmetic(operator.truediv, aten.div.Tensor, torchscript="div", on_sizes=(OnSizes("div"),)),
    Arithmetic(
        operator.floordiv,
        aten.div.Tensor_mode,
        {"rounding_mode": "floor"},
        torchscript="floordiv",
        # (a size is never negative: truncated, its quotient is the floored one)
        on_sizes=(OnSizes("floor_divide"), OnSizes("div", "floor"), OnSizes("div", "trunc")),
    ),
    Arithmetic(operator.mod, aten.remainder.Tensor, torchscript="remainder", on_sizes=(OnSizes("remainder"),)),
    Arithmetic(operator.pow, aten.pow.Tensor_Tensor, torchscript="pow"),
    Arithmetic(operator.neg, aten.neg.default, torchscript="neg"),
    Arithmetic(operator.eq, aten.eq.Tensor, torchscript="eq", on_sizes=(OnSizes("eq"),), sympy=sympy.Eq),
    Arithmetic(operator.ne, aten.ne.Tensor, torchscript="ne", on_sizes=(OnSizes("ne"),), sympy=sympy.Ne),
    Arithmetic(operator.lt, aten.lt.Tensor, torchscript="lt", on_sizes=(OnSizes("lt"),), sympy=sympy.StrictLessThan),
    Arithmetic(operator.le, aten.le.Tensor, torchscript="le", on_sizes=(OnSizes("le"),), sympy=sympy.LessThan),
    Arithmetic(operator.gt, aten.gt.Tensor, torchscript="gt", on_sizes=(OnSizes("gt"),), sympy=sympy.StrictGreaterThan),
    Arithmetic(operator.ge, aten.ge.Tensor, torchscript="ge", on_sizes=(OnSizes("ge"),), sympy=sympy.GreaterThan),
    Arithmetic(operator.and_, aten.bitwise_and.Tensor, torchscript="__and__", sympy=sympy.And),
    Arithmetic(operator.or_, aten.bitwise_or.Tensor, torchscript="__or__", sympy=sympy.Or),
    Arithmetic(torch.sym_not, aten.logical_not.default, torchscript="__not__", sympy=sympy.Not),
    Arithmetic(torch.sym_max, aten.maximum.default),
    Arithmetic(torch.sym_min, aten.minimum.default),
    Arithmetic(torch.sym_ite, aten.where.self),
    Arithmetic(torch.sym_float, aten._to_copy.default, {"dtype": torch.float64}),
    Arithmetic(torch.sym_int, aten._to_copy.default, {"dtype": torch.int64}),  # truncates, as int() does
    Arithmetic(math.floor, aten.floor.default, to_int=True),
    Arithmetic(math.ceil, aten.ceil.default, to_int=True),
    Arithmetic(math.trunc, aten.trunc.default, to_int=True),
)

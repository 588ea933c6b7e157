"""The names of the graph's dynamic sizes. torch's size symbols take the names requested for the
input axes that have them (dynamic_shapes' and dynamic_axes' names), else ``<input>_dim_<axis>``
after the first input axis that has them; a size is written as its expression over those names
(``2*batch``), or as a name of its own requested for an output's axis (an ExportedProgram's
dynamic_axes: ``total_sequence_length`` for ``past + query``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ..dynamic.request import StaticAxis
from ..errors import ArgumentError


@dataclass
class SizeNames:
    """The names given so far, and what the requests asked that could not be done, for the
    warning (or, for an ExportedProgram, the error) that lists it."""

    symbols: dict[sympy.Symbol, sympy.Symbol] = field(default_factory=dict)  # torch's symbols -> ONNX names
    expressions: dict[sympy.Expr, str] = field(default_factory=dict)  # over the names above -> a name of its own
    static_axes: list[StaticAxis] = field(default_factory=list)  # requested dynamic axes the trace fixed
    shared_names: list[tuple[str, str, str]] = field(default_factory=list)  # (kept, dropped, where) of one size
    ignored_axes: list[str] = field(default_factory=list)  # requested output axes that do not exist
    # Input axes whose size is an expression of a symbol that is no input's size (`2*s`, from a
    # `2 * Dim(...)` or an ExportedProgram's), as (what, axis, the expression's ONNX name): the
    # graph holds only for sizes of that form, which ONNX cannot declare nor onnxruntime check.
    constrained_axes: list[tuple[str, int, str]] = field(default_factory=list)
    # name()'s answers by torch's expression: a graph full of symbolic shapes asks for the same
    # expressions at every node, and renaming and printing a large one costs more than a node.
    answers: dict[sympy.Expr, str] = field(default_factory=dict)

    def name(self, expr: sympy.Expr) -> str:
        """The ONNX name of the symbolic size ``expr`` (torch's expression)."""
        answer = self.answers.get(expr)
        if answer is None:
            renamed = expr.xreplace(self.symbols)
            answer = self.answers[expr] = self.expressions.get(renamed, str(renamed))
        return answer

    def name_requested(
        self,
        shapes: list,
        names: list[str],
        requests: list[dict[int, str]],
        why_static,
        outputs: Sequence[tuple[str, Any, dict[int, str]]] = (),
    ) -> None:
        """Names the size symbols of the tensor inputs (``shapes``, called ``names``): the first
        name requested for a symbol wins (a later, different one goes to ``shared_names``), then
        ``<input>_dim_<axis>`` of its first dimension. A requested axis that is static goes to
        ``static_axes`` (``why_static(input index, axis, size)`` says why). ``outputs`` (name,
        what torch recorded of it, requested axes) name the sizes of outputs' axes after the
        inputs' requests: one symbol as an input's axis would, an expression over the symbols
        once they all have names."""
        for i, (shape, name, requested) in enumerate(zip(shapes, names, requests)):
            for axis, dim_name in requested.items():
                expr = shape[axis].node.expr if isinstance(shape[axis], torch.SymInt) else None
                if expr is None or expr.is_number:
                    size = int(shape[axis])
                    why = why_static(i, axis, size) if why_static is not None else ""
                    self.static_axes.append(StaticAxis(f"input `{name}`", axis, dim_name, size, why))
                elif expr.is_Symbol:
                    self._name_symbol(expr, dim_name, f"input `{name}` axis {axis}")
        expressions = []
        for name, val, requested in outputs:
            shape = list(val.shape) if isinstance(val, torch.Tensor) else []
            for axis, dim_name in self.output_axes(name, requested, len(shape)).items():
                axis %= len(shape)
                expr = shape[axis].node.expr if isinstance(shape[axis], torch.SymInt) else None
                if expr is None or expr.is_number:
                    self.static_axes.append(StaticAxis(f"output `{name}`", axis, dim_name, int(shape[axis])))
                elif expr.is_Symbol:
                    self._name_symbol(expr, dim_name, f"output `{name}` axis {axis}")
                else:
                    expressions.append((expr, dim_name, f"output `{name}` axis {axis}"))
        for shape, name in zip(shapes, names):
            for axis, size in enumerate(shape):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if expr is not None and expr.is_Symbol and expr not in self.symbols:
                    self.symbols[expr] = sympy.Symbol(f"{name}_dim_{axis}")
        for expr, dim_name, where in expressions:
            kept = self.expressions.setdefault(expr.xreplace(self.symbols), dim_name)
            if kept != dim_name:
                self.shared_names.append((kept, dim_name, where))
        self.answers.clear()  # (names given before these symbols had theirs)
        inputs = {size.node.expr for shape in shapes for size in shape if isinstance(size, torch.SymInt)}
        for shape, name in zip(shapes, names):
            for axis, size in enumerate(shape):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if expr is not None and not expr.is_number and not expr.is_Symbol and expr.free_symbols - inputs:
                    self.constrained_axes.append((f"input `{name}`", axis, self.name(expr)))

    def _name_symbol(self, symbol: sympy.Symbol, dim_name: str, where: str) -> None:
        """``symbol`` called ``dim_name``, unless a name was asked for it before (a different
        one goes to ``shared_names``)."""
        if symbol not in self.symbols:
            self.symbols[symbol] = sympy.Symbol(dim_name)
        elif str(self.symbols[symbol]) != dim_name:
            self.shared_names.append((str(self.symbols[symbol]), dim_name, where))

    def output_axes(self, name: str, requested: dict[int, str], rank: int) -> dict[int, str]:
        """The requested axes of output ``name`` (of rank ``rank``) that it has, as given (the
        others go to ``ignored_axes``); an axis that is not a number is an error."""
        bad = [a for a in requested if isinstance(a, bool) or not isinstance(a, int)]
        if bad:
            raise ArgumentError(f"dynamic_axes[{name!r}]: dimension {bad[0]!r} is not an axis number")
        # torch.onnx names the output's axes that exist and ignores the others
        missing = [a for a in requested if not -rank <= a < rank]
        self.ignored_axes += [
            f"dynamic_axes[{name!r}] axis {a} is ignored: output `{name}` has rank {rank}" for a in missing
        ]
        return {a: n for a, n in requested.items() if a not in missing}

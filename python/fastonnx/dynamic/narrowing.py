"""Dynamic sizes that the model's own code tests: the graph holds only for some of them.

A test of a size in the model's Python code (``if h % 2 == 0``, ``if h > 4``, ``torch._check``)
becomes a guard, and the trace keeps the branch the example took. Where the request lets torch
choose (``Dim.AUTO``, ``dynamic_axes``), torch.export accepts such a guard and leaves the size
dynamic: its ``ExportedProgram.module()`` checks the guard at every call. An ONNX graph has no such
check, so at a size the guard does not hold for, onnxruntime computes the other branch's result
with the example's code: a silently wrong model. Such an axis is traced again static, and the
``DynamicAxesWarning`` names the test and its line.

Only the model's own tests count (``Tests.by_model``): torch's guards (a view's strides, a
reshape's -1) decide how torch computes, and the ONNX operators decide that again at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import sympy
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter
from torch.utils._sympy.symbol import SymT, symbol_is_type
from torch.utils._sympy.value_ranges import ValueRanges

from ..core.stack import warn
from ..errors import DynamicAxesWarning
from .request import Request
from .small_sizes import Tests, constant_over

# torch's name of an input, L['x'], and of a size, L['x'].size()[2] (L['pair'][0].size()[1]),
# to write as the model's code reads them.
_SOURCE_NAME = re.compile(r"L\['([^']*)'\]")
_SOURCE = re.compile(r"L\['([^']*)'\]((?:\[\d+\])*)\.size\(\)\[(\d+)\]")


def narrowed(
    shape_env: ShapeEnv,
    tests: Tests,
    sizes: Mapping[tuple[int, int], object],
    domains: Mapping[sympy.Symbol, ValueRanges],
    inputs: frozenset[sympy.Symbol],
) -> tuple[dict[tuple[int, int], str], set[tuple[int, int]]]:
    """The requested axes (``sizes``: (tensor input, axis) -> the expression of its size in the
    trace) that the graph does not hold for over their whole domain, with why: a guard the model's
    code made is not one truth value over ``domains`` (2 and up where a symbol has none), or torch
    made the size an expression of a symbol that is no input's size (``inputs``): ``2*s``, a
    multiple, from a test of divisibility. (An expression of other inputs' sizes, a query length
    of ``mask - past``, is a relation between inputs, which the graph holds for.) Also those of
    them a test in scripted code narrowed (which a TorchScript graph keeps as an If)."""
    symbols = {e for e in sizes.values() if isinstance(e, sympy.Symbol)}
    ranges = {**shape_env.var_to_range, **{s: domains.get(s, ValueRanges(2, int_oo)) for s in symbols}}
    narrowing: dict[sympy.Symbol, str] = {}
    scripted: set[sympy.Symbol] = set()
    for guard in shape_env.guards:
        if guard.expr not in tests.by_model:
            continue
        g = shape_env.simplify(guard.expr)
        used = set(getattr(g, "free_symbols", ())) & symbols
        if used and not constant_over(g, ranges):
            why = _holds_only_where(g, shape_env, tests.where.get(guard.expr, ""))
            for s in sorted(used, key=str):
                narrowing.setdefault(s, why)
            if guard.expr in tests.scripted:
                scripted |= used
    found = {axis: narrowing[e] for axis, e in sizes.items() if e in narrowing}
    for axis, e in sizes.items():
        if isinstance(e, sympy.Expr) and not isinstance(e, sympy.Symbol) and e.free_symbols - inputs:
            found.setdefault(axis, f"(the trace holds only for sizes {_readable(e, shape_env)})")
    return found, {axis for axis, e in sizes.items() if e in scripted}


def tested_against_one(
    shape_env: ShapeEnv, tests: Tests, sizes: Mapping[tuple[int, int], object]
) -> dict[tuple[int, int], str]:
    """The dynamic axes (``sizes``: (tensor input, axis) -> the symbol of its size) traced at 2 or
    more that the user's own code tests in a way a size of 1 would answer otherwise
    (``if x.size(0) == 1``), with the test and its line. torch decides such a test for a size of 2
    and up without a guard (from the size's range, or size-obliviously), so the graph computes at
    1 what it computes for 2 and up."""
    symbols = {e: axis for axis, e in sizes.items() if isinstance(e, sympy.Symbol)}
    hints = shape_env.backed_var_to_val
    two_up = {s for s in symbols if s in hints and int(hints[s]) >= 2}
    ranges = {**shape_env.var_to_range, **{s: ValueRanges(2, int_oo) for s in two_up}}
    found: dict[tuple[int, int], str] = {}
    for expr, where in tests.evaluated_by_model.items():
        used = set(getattr(expr, "free_symbols", ())) & two_up
        if not used or not constant_over(expr, ranges):
            continue  # (not about these sizes, or a guard: see narrowed)
        for s in sorted(used, key=str):
            if symbols[s] not in found and not constant_over(expr, {**ranges, s: ValueRanges(1, int_oo)}):
                test, at = _readable(expr, shape_env), f", {where}" if where else ""
                found[symbols[s]] = f"(the model's code tests {test}, which a size of 1 answers otherwise{at})"
    return found


def warn_tested_against_one(found: Mapping[tuple[int, int], str], request: Request) -> None:
    """The warning for ``tested_against_one``'s axes: they stay dynamic (the graph holds for 2 and
    up, as torch.export's program does), and their size of 1 is not covered."""
    if not found:
        return
    lines = [
        f"{len(found)} dynamic axis/axes traced at 2 or more hold for sizes of 2 and up only: the model's code "
        "tests the size against 1, torch decided the test from the traced range alone, and the ONNX graph "
        "computes at a size of 1 what it computes for 2 and up, which may differ from eager there:"
    ]
    for (i, axis), why in sorted(found.items()):
        lines.append(f"  - input `{_input_name(request, i)}` axis {axis} {why}")
    lines.append(
        "Run the graph at sizes of 2 and up only; for a size of 1, export again with an example of that size "
        "(the axis is then static, at 1), or take the test out of the model's code (torch.cond for a branch)."
    )
    warn(DynamicAxesWarning("\n".join(lines)))


def narrowing_now(loose: frozenset[str]) -> Callable[[ShapeEnv, Any, str], dict[sympy.Symbol, str]]:
    """For ``Tests.narrows``: the sizes of ``loose`` (torch's names of the requested axes torch
    may narrow, ``L['x'].size()[2]``) traced at 2 or more that a guard the model's code just made
    narrows, with why (as ``narrowed``'s), so that the trace stops there rather than at its end.
    A later ``x + y`` may make two sizes one and the test then hold for every size
    (``x.size(0) <= y.size(0)``): the guard is read with the sizes of equal examples joined, so
    that what it still narrows, ``narrowed`` finds at the end too."""

    def narrows(shape_env: ShapeEnv, expr, where: str) -> dict[sympy.Symbol, str]:
        g = shape_env.simplify(expr)
        symbols: set[sympy.Symbol] = set(getattr(g, "free_symbols", ()))
        hints = shape_env.backed_var_to_val
        if not symbols or any(not symbol_is_type(s, SymT.SIZE) or s not in hints for s in symbols):
            return {}
        mine = {
            s
            for s in symbols
            if int(hints[s]) >= 2 and any(x.name in loose for x in shape_env.var_to_sources.get(s, ()))
        }
        if not mine:
            return {}
        joined: dict[int, sympy.Symbol] = {}
        for s in sorted(symbols, key=lambda s: (s not in mine, str(s))):
            joined.setdefault(int(hints[s]), s)
        ranges = {
            s: ValueRanges(2, int_oo) if s in mine else shape_env.var_to_range.get(s, ValueRanges(2, int_oo))
            for s in joined.values()
        }
        if constant_over(g.xreplace({s: joined[int(hints[s])] for s in symbols}), ranges):
            return {}
        why = _holds_only_where(g, shape_env, where)
        return dict.fromkeys(sorted(mine, key=str), why)

    return narrows


def _holds_only_where(guard, shape_env: ShapeEnv, where: str) -> str:
    """Why an axis a guard of the model's code narrows is static: the guard, and the model's line."""
    return f"(the traced code holds only where {_readable(guard, shape_env)}{', ' + where if where else ''})"


def _readable(expr, shape_env: ShapeEnv) -> str:
    """``expr`` in Python, its sizes named as the model's code reads them (``x.size(2)``)."""
    names = {}
    for s in expr.free_symbols:
        sources = shape_env.var_to_sources.get(s)
        if sources:
            name = _SOURCE.sub(lambda m: f"{m[1]}{m[2]}.size({m[3]})", sources[0].name)
            names[s] = sympy.Symbol(name)
    return PythonPrinter().doprint(expr.xreplace(names))


def warn_narrowed(found: Mapping[tuple[int, int], str], request: Request) -> None:
    """The warning for the ``dynamic_shapes`` axes (``Dim.AUTO``) made static by ``narrowed``:
    torch.export would have kept them dynamic. (dynamic_axes lists them with the other axes the
    model fixes, see request.warn_static.)"""
    if not found or request.relaxed:
        return
    lines = [
        f"dynamic_shapes: {len(found)} axis/axes given as Dim.AUTO are static in the ONNX graph, which "
        "takes only the traced size there: the model's code tests the size, and the trace holds only the "
        "branch the example took. torch.export keeps such an axis dynamic and checks the test at each call "
        "of its program; an ONNX graph cannot check it, and would compute that branch at every size:"
    ]
    for (i, axis), why in sorted(found.items()):
        size = request.shapes_of_inputs[i][axis] if i < len(request.shapes_of_inputs) else "?"
        lines.append(f"  - input `{_input_name(request, i)}` axis {axis}: fixed to {size} {why}")
    lines.append(
        "To keep such an axis dynamic, take the test out of the model's code (torch.cond for a branch), or give "
        "the axis a torch.export.Dim that declares the sizes it holds for (min=, max=, or a multiple: 2 * Dim(...), "
        "which the ONNX graph cannot check: feed it only multiples)."
    )
    warn(DynamicAxesWarning("\n".join(lines)))


def _input_name(request: Request, i: int) -> str:
    """Tensor input ``i`` as the model's code names it (``x`` for torch's ``L['x']``)."""
    return _SOURCE_NAME.sub(r"\1", request.sources[i]) if i < len(request.sources) else f"input {i}"

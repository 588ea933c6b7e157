"""Dynamic axes traced at size 0 or 1.

torch.export specializes a size of 0 or 1 (its symbols are sizes of 2 or more), so a batch of
one traced with a dynamic batch gives a graph for one item only. torch.onnx's dynamo exporter
traces under ``backed_size_oblivious``: such a size is a symbol, torch's own code takes the path of
the general case where it asks whether a size is 0 or 1 (a squeeze keeps the dimension, a
broadcast expects equal sizes), and the model's own Python code still sees the example's size.
That alone is not sound:

- a test of the model's code on the size (``if x.size(0) == 1``, ``int(n)``) is recorded as a
  guard, not a specialization: the graph holds the branch the example took, for every size;
- a size symbol is positive for sympy, so a test against 0 (``x.size(0) == 0``, ``numel() > 0``)
  is decided without a guard as if the size were 1 or more, which at a traced size of 0 is the
  wrong branch even for the example.

So a size traced at 0 is made a nonnegative symbol instead (its tests against 0 are then guards
too), and after tracing every guard on a size traced at 0 or 1 must hold over the sizes the axis
is dynamic for, its *domain*: from the traced size up (0 and up, 1 and up). An axis some guard
does not allow that is traced again static (``specialize``), with the model's line that tested it.
A size traced at 2 or more gets the domain from 1 up where its guards allow 1, else torch.export's
own (2 and up); the lowering then treats a size 1 at run time where the domain holds it (squeeze).
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import logging
import os
import sys
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx.experimental._config as fx_config
import torch.fx.experimental.symbolic_shapes as symbolic_shapes
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.symbol import SymT, symbol_is_type
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from ..core.stack import in_package
from ..errors import ConversionError
from .request import in_installed_package, in_scripted_code, is_library, user_frame

# Set while ShapeEnv.create_symbol makes the symbol of a size whose example is 0.
_MAKING_ZERO = contextvars.ContextVar("fastonnx_making_zero", default=False)
_NN = os.path.join(os.path.dirname(torch.__file__), "nn", "")
# torch's code between a test of a size and the guard it makes (made_by_model), and this file's.
_SYMBOLIC = (
    os.path.join(os.path.dirname(torch.__file__), "fx", "experimental", ""),
    os.path.join(os.path.dirname(torch.__file__), "__init__.py"),
    __file__,
)
# The domains of the programs traced with sizes of 0 or 1 dynamic, by their ShapeEnv (see retracing).
_DOMAINS: weakref.WeakKeyDictionary[ShapeEnv, dict[sympy.Symbol, ValueRanges]] = weakref.WeakKeyDictionary()


class DependsOnSmallSize(ConversionError):
    """Code traced after the program (a decomposition) depends on a size traced at 0 or 1 being
    that size (see ``retracing``)."""


class SmallSizeTested(Exception):
    """Stops a trace under ``dynamic_small_sizes`` at a guard that the sizes traced at 0 or 1 it
    reads do not allow to vary, whatever the domains of the other sizes: ``judge`` would find
    those sizes unsound after the whole trace, which they are traced static again for anyway.
    ``unsound`` and ``scripted`` as in ``Verdict``."""

    def __init__(
        self,
        shape_env: ShapeEnv,
        unsound: dict[sympy.Symbol, str],
        scripted: frozenset[sympy.Symbol],
        narrowed: bool = False,
    ):
        super().__init__(f"the traced code depends on the sizes {', '.join(map(str, unsound))} being 0 or 1")
        self.shape_env = shape_env
        self.unsound = unsound
        self.scripted = scripted
        # A test of the model's code narrowed requested sizes traced at 2 or more (``Tests.narrows``).
        self.narrowed = narrowed


@dataclass
class Tests:
    """What tracing under ``dynamic_small_sizes`` recorded: per guard, where it was made, and the
    guards made in scripted code (``_dynamic.in_scripted_code``). With ``stop_early``, the trace
    stops at the size test after the first guard ``judge`` will find unsound (``SmallSizeTested``;
    ``raised`` once it was raised: a trace that ends anyway went around it somewhere)."""

    where: dict[sympy.Basic, str] = field(default_factory=dict)
    scripted: set[sympy.Basic] = field(default_factory=set)
    # The guards the model's own code made (an ``if`` on a size, ``torch._check``), not torch's
    # (the strides of a view, a reshape's -1): see made_by_model.
    by_model: set[sympy.Basic] = field(default_factory=set)
    # The expressions of sizes the user's own files evaluated, with where: those torch decided
    # from a size's range alone make no guard (`x.size(0) == 1` is False for a size of 2 and up),
    # see dynamic.narrowing.tested_against_one. (Not an installed library's, such as transformers':
    # its tests are often of no consequence, `q_length > 1 and attention_mask is None`, and the user
    # can change none of them.)
    evaluated_by_model: dict[sympy.Basic, str] = field(default_factory=dict)
    stop_early: bool = False
    # With stop_early, for a guard the model's code made: the requested sizes it narrows, with why
    # (dynamic.narrowing.narrowing_now); the trace stops there too.
    narrows: Callable[[ShapeEnv, Any, str], dict[sympy.Symbol, str]] | None = None
    stopped: SmallSizeTested | None = None
    raised: bool = False


@contextlib.contextmanager
def dynamic_small_sizes(tests: Tests | None = None) -> Iterator[None]:
    """Sizes of 0 and 1 of the dynamic dimensions become symbols (torch's
    ``backed_size_oblivious``), a size of 0 a nonnegative one; ``tests`` records where each guard
    was made. Changes torch's ShapeEnv for the duration (one export runs at a time)."""
    create, make = ShapeEnv.create_symbol, symbolic_shapes.make_symbol

    def create_symbol(self, val, *args, **kwargs):
        token = _MAKING_ZERO.set(type(val) is int and val == 0)
        try:
            return create(self, val, *args, **kwargs)
        finally:
            _MAKING_ZERO.reset(token)

    def make_symbol(prefix, idx, **assumptions):
        if _MAKING_ZERO.get() and prefix is SymT.SIZE and assumptions.get("positive"):
            assumptions = {**assumptions, "positive": None, "nonnegative": True}
        return make(prefix, idx, **assumptions)

    ShapeEnv.create_symbol = create_symbol  # type: ignore[method-assign]  # for this trace only
    symbolic_shapes.make_symbol = make_symbol  # (create_symbol's global)
    try:
        with fx_config.patch(backed_size_oblivious=True), recording_size_tests(tests):  # type: ignore[attr-defined]
            yield
    finally:
        ShapeEnv.create_symbol = create  # type: ignore[method-assign]  # the methods as they were
        symbolic_shapes.make_symbol = make


@contextlib.contextmanager
def recording_size_tests(tests: Tests | None) -> Iterator[None]:
    """Records in ``tests`` where each guard of the trace was made, whether scripted code or the
    model's own code made it, and with ``tests.stop_early`` stops the trace at the size test after
    the first guard that makes a requested size static (see Tests). Changes torch's ShapeEnv for
    the duration (one export runs at a time)."""
    guard, evaluate = ShapeEnv._maybe_guard_rel, ShapeEnv.evaluate_expr
    if tests is None:
        yield
        return

    def maybe_guard_rel(self, expr):
        if expr not in tests.where:
            frame = _model_frame(sys._getframe(1))
            tests.where[expr] = _where(frame)
            if in_scripted_code(frame):
                tests.scripted.add(expr)
            if made_by_model(sys._getframe(1)):
                tests.by_model.add(expr)
        result = guard(self, expr)
        if tests.stop_early:
            small = _small_sizes_tested(self, expr)
            if small:
                # Raised at the next size test: a guard the example fails (torch._check) is followed
                # by torch's own error, which says better why the size cannot vary.
                why = {s: _because(int(self.backed_var_to_val[s]), tests.where.get(expr, "")) for s in small}
                tests.stopped = SmallSizeTested(self, why, frozenset(small) if expr in tests.scripted else frozenset())
            elif tests.narrows is not None and tests.stopped is None and expr in tests.by_model:
                narrowed = tests.narrows(self, expr, tests.where.get(expr, ""))
                if narrowed:
                    scripted = frozenset(narrowed) if expr in tests.scripted else frozenset()
                    tests.stopped = SmallSizeTested(self, narrowed, scripted, narrowed=True)
        return result

    def evaluate_expr(self, *args, **kwargs):
        if tests.stopped is not None:
            tests.raised = True
            raise tests.stopped
        # (per evaluation, torch's own mostly: the frame test before the expression's symbols,
        # which walk the whole expression)
        expr = args[0] if args else kwargs.get("orig_expr")
        caller = sys._getframe(1)
        if (
            expr not in tests.evaluated_by_model
            and made_by_model(caller)
            and getattr(expr, "free_symbols", None)
            and (frame := _model_frame(caller))
            and not in_installed_package(frame.filename)
        ):
            tests.evaluated_by_model[expr] = _where(frame)
        return evaluate(self, *args, **kwargs)

    # torch logs a warning for the exception stopping the trace early ("failed during
    # evaluate_expr"): no failure, not shown.
    quiet = _WhileStopping(tests)
    ShapeEnv._maybe_guard_rel = maybe_guard_rel  # type: ignore[method-assign, assignment]  # for this trace only
    ShapeEnv.evaluate_expr = evaluate_expr  # type: ignore[method-assign]
    symbolic_shapes.log.addFilter(quiet)
    try:
        yield
    finally:
        ShapeEnv._maybe_guard_rel = guard  # type: ignore[method-assign]  # the methods as they were
        ShapeEnv.evaluate_expr = evaluate  # type: ignore[method-assign]
        symbolic_shapes.log.removeFilter(quiet)


def made_by_model(frame) -> bool:
    """Whether the guard being made under ``frame`` comes from a test in the model's own code
    (``if h % 2 == 0``, ``torch._check(...)``, in the model's files or a library it uses, such as
    transformers): the first frame out of torch's symbolic machinery (SymBool.__bool__,
    torch._check, the ShapeEnv) is outside torch, fastonnx and the standard library. torch's own
    guards (a view's strides, a reshape's -1, broadcasting) decide how torch computes, which the
    ONNX operators decide again at run time."""
    while frame is not None and frame.f_code.co_filename.startswith(_SYMBOLIC):
        frame = frame.f_back
    return frame is not None and not is_library(frame.f_code.co_filename)


class _WhileStopping(logging.Filter):
    """Drops the records logged once the trace recording ``tests`` is stopped."""

    def __init__(self, tests: Tests | None):
        super().__init__()
        self.tests = tests

    def filter(self, record: logging.LogRecord) -> bool:
        return self.tests is None or not self.tests.raised


def _model_frame(frame) -> traceback.FrameSummary | None:
    """The model's frame a guard comes from: of the frames inside the trace, the innermost one
    outside torch, fastonnx and the standard library, else the innermost one of torch.nn (a module
    of torch's that tests the size)."""
    stack = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)  # innermost first
    # (past fastonnx's call of torch.export: export()'s caller, no part of the model)
    traced = next((i for i, f in enumerate(stack) if in_package(f.filename) and f.filename != __file__), None)
    frames = list(stack)[:traced]
    return user_frame(frames[::-1]) or next((f for f in frames if f.filename.startswith(_NN)), None)


def _where(chosen: traceback.FrameSummary | None) -> str:
    """``at file:line: code`` of a frame (see _model_frame)."""
    if chosen is None:
        return ""
    line = linecache.getline(chosen.filename, chosen.lineno or 0).strip()
    return f"at {chosen.filename}:{chosen.lineno}" + (f": {line}" if line else "")


@dataclass(frozen=True)
class Verdict:
    """After a trace under ``dynamic_small_sizes``: each size symbol's domain (the sizes the graph
    holds for), and the symbols traced at 0 or 1 that a guard does not allow to vary, with why
    (``scripted``: those whose guard was made in scripted code)."""

    domains: dict[sympy.Symbol, ValueRanges]
    unsound: dict[sympy.Symbol, str]
    scripted: frozenset[sympy.Symbol] = frozenset()


def judge(shape_env: ShapeEnv, tests: Tests, numbers: Sequence[tuple[Any, frozenset, str]] = ()) -> Verdict:
    """The domains the guards of the trace allow (see the module's docstring). ``numbers`` are the
    numbers the model's Python code took from sizes where no guard records it (the TorchScript
    front end's ``JitProgram.size_reads``: an expression, or None when only the symbols it reads
    are known, and the model's line): each must be one number over the domains."""
    hints = {s: int(h) for s, h in shape_env.backed_var_to_val.items() if symbol_is_type(s, SymT.SIZE)}
    domains = {s: ValueRanges(0 if h == 0 else 1, int_oo) for s, h in hints.items()}
    guards = [g.expr for g in shape_env.guards]
    guards += [a.expr for asserts in shape_env.deferred_runtime_asserts.values() for a in asserts]
    # Each guard in the symbols that stand for its sizes in the end (Eq(s0, s1) made before s1
    # replaced s0 holds), with why it matters.
    checked: list[tuple[Any, frozenset, str, bool]] = []
    for made in guards:
        g = shape_env.simplify(made)
        checked.append((g, frozenset(g.free_symbols), tests.where.get(made, ""), made in tests.scripted))
    for expr, used, line in _numbers_read(shape_env, numbers):
        checked.append((expr, used, f"at {line}" if line else "", False))
    checked = [c for c in checked if c[1] & domains.keys()]
    ranges = {**shape_env.var_to_range, **domains}
    changed = True
    while changed:  # a size traced at 2 or more that some guard needs so: torch.export's domain, 2 and up
        changed = False
        for expr, symbols, _, _ in checked:
            widened = [s for s in symbols if s in domains and hints[s] >= 2 and domains[s].lower < 2]
            if widened and not constant_over(expr, ranges):
                domains.update((s, ValueRanges(2, int_oo)) for s in widened)
                ranges.update((s, domains[s]) for s in widened)
                changed = True
    unsound: dict[sympy.Symbol, str] = {}
    scripted = set()
    for expr, symbols, where, in_script in checked:
        if not constant_over(expr, ranges):
            for s in symbols:
                if s in hints and hints[s] < 2 and s not in unsound:
                    unsound[s] = _because(hints[s], where)
                    if in_script:
                        scripted.add(s)
    return Verdict(domains, unsound, frozenset(scripted))


def fixed_by_numbers(
    shape_env: ShapeEnv, numbers: Sequence[tuple[Any, frozenset, str]], domains: Mapping | None = None
) -> dict[sympy.Symbol, str]:
    """The size symbols on which a number the model's Python code took from sizes (see ``judge``)
    is not one value over their ranges (torch's, or ``domains``), with why: the trace kept the
    example's."""
    ranges = {**shape_env.var_to_range, **(domains or {})}
    fixed: dict[sympy.Symbol, str] = {}
    for expr, used, line in _numbers_read(shape_env, numbers):
        if not constant_over(expr, ranges):
            for s in used:
                fixed.setdefault(s, f"(the traced code depends on the size{', at ' + line if line else ''})")
    return fixed


def _numbers_read(
    shape_env: ShapeEnv, numbers: Sequence[tuple[Any, frozenset, str]]
) -> list[tuple[Any, frozenset, str]]:
    """``numbers`` (see judge) in the symbols that stand for their sizes in the end: (the
    expression or None, the size symbols it reads, the model's line)."""
    read = []
    for expr, symbols, line in numbers:
        if expr is not None:
            expr = shape_env.simplify(expr)
            used = frozenset(expr.free_symbols)
        else:
            used = frozenset(x for s in symbols for x in getattr(shape_env.simplify(s), "free_symbols", ()))
        read.append((expr, used, line))
    return read


def _small_sizes_tested(shape_env: ShapeEnv, made) -> list[sympy.Symbol]:
    """The sizes traced at 0 or 1 that a guard just made (its replacements done) does not let
    vary over the narrowest domains ``judge`` can give (2 and up for the sizes traced at 2 or
    more): range analysis over wider domains cannot find it constant either. Empty for a guard
    on other symbols (numbers read from data, whose ranges may narrow later).

    ``judge`` reads the guard in the symbols that stand for its sizes at the end of the trace: a
    later Eq between two sizes (``x + y``) replaces one by the other, and ``x.size(0) <=
    y.size(0)`` then holds for every size. Such a replacement joins symbols of equal examples, so
    the guard is read with those joined already: what it still does not let vary, judge would
    not either."""
    g = shape_env.simplify(made)
    hints = shape_env.backed_var_to_val
    symbols: set[sympy.Symbol] = getattr(g, "free_symbols", set())
    small = [s for s in symbols if s in hints and hints[s] < 2]
    if not small or any(not symbol_is_type(s, SymT.SIZE) or s not in hints for s in symbols):
        return []
    joined: dict[int, sympy.Symbol] = {}
    for s in sorted(symbols, key=str):
        joined.setdefault(int(hints[s]), s)
    g = g.xreplace({s: joined[int(hints[s])] for s in symbols})
    ranges = {s: ValueRanges(min(h, 2), int_oo) for h, s in joined.items()}
    return [] if constant_over(g, ranges) else small


def constant_over(expr, ranges: Mapping) -> bool:
    """Whether ``expr`` (a guard, which holds for the example, or a number) is one value over the
    ranges of its symbols; not when range analysis cannot tell, or ``expr`` is None (unknown)."""
    if expr is None:
        return False
    try:
        return bool(bound_sympy(expr, dict(ranges)).is_singleton())
    except Exception:  # noqa: BLE001 - an expression range analysis cannot bound: not known to be one
        return False


def _because(size: int, where: str) -> str:
    return f"(the traced code depends on the size being {size}{', ' + where if where else ''})"


def settle(shape_env: ShapeEnv, range_constraints: dict, domains: dict[sympy.Symbol, ValueRanges]) -> None:
    """The program's symbol ranges, in place, from the domains (sizes traced under
    ``dynamic_small_sizes`` are all [0, oo] for torch), kept for the later traces of code under
    the program's fake mode (``retracing``)."""
    for symbol, domain in domains.items():
        if symbol in range_constraints:
            current = range_constraints[symbol]
            range_constraints[symbol] = ValueRanges(max(current.lower, domain.lower), current.upper)
    _DOMAINS[shape_env] = domains


def domains_of(shape_env: ShapeEnv) -> dict[sympy.Symbol, ValueRanges] | None:
    """The domains ``settle`` kept for a program's ShapeEnv; None for a program traced without
    sizes of 0 or 1 dynamic."""
    return _DOMAINS.get(shape_env)


@contextlib.contextmanager
def retracing(shape_env: ShapeEnv | None, what: str) -> Iterator[None]:
    """Traces more code under the fake mode of a program whose sizes of 0 or 1 are dynamic (a
    decomposition, functionalization) as the program was traced, and fails with a
    ``ConversionError`` when that code made a guard the sizes' domains do not hold (export()
    then traces those axes static)."""
    domains = _DOMAINS.get(shape_env) if shape_env is not None else None
    if shape_env is None or domains is None:
        yield
        return
    before = len(shape_env.guards)
    with dynamic_small_sizes():
        yield
    ranges = {**shape_env.var_to_range, **domains}
    for guard in shape_env.guards[before:]:
        g = shape_env.simplify(guard.expr)
        if set(g.free_symbols) & domains.keys() and not constant_over(g, ranges):
            raise DependsOnSmallSize(f"{what} tests a dynamic size ({guard.expr}) for sizes it does not hold for")

"""Turns the op table into test cases.

For each row and dtype: generate the samples (seeded, so every run sees the same values), drop
the ones outside the row's scope, spread the row's cap over the rest, and drop (recording why)
samples that eager PyTorch or torch.export cannot run, since those are not fastonnx's to fix.
Which overloads each kept sample's exported graph calls is recorded for the coverage test.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import SampleInput
from torch.utils._pytree import tree_flatten, tree_unflatten

from fastonnx.lowering.op_table import overload_key

from row import PARITY_DTYPES, Row


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def overload_name(target) -> str | None:
    """A call target's name in the op table: ``add.Tensor``, ``relu``, ``fastonnx::padded_rnn``."""
    if isinstance(target, torch._ops.OpOverload):
        return overload_key(target)
    return None


class OpModule(torch.nn.Module):
    """Calls ``fn`` on one sample: its tensors (wherever they sit in input, args and kwargs) are
    ``forward``'s inputs, everything else is baked in as a constant."""

    def __init__(self, fn, sample: SampleInput):
        super().__init__()
        leaves, self._spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self._tensor_slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self._constants = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        self._fn = fn

    def forward(self, *tensors: torch.Tensor):
        leaves = list(self._constants)
        for slot, tensor in zip(self._tensor_slots, tensors, strict=True):
            leaves[slot] = tensor
        input, args, kwargs = tree_unflatten(leaves, self._spec)
        return self._fn(input, *args, **kwargs)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{dtype_name(value.dtype)}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_describe(v)}" for k, v in value.items())
    return repr(value)


@dataclass(frozen=True)
class Case:
    row: Row
    dtype: torch.dtype
    index: int  # the sample's position in the row's full sample list, so ids survive filter changes
    sample: SampleInput
    # The program torch.export made of the sample at collection (to learn its overloads), kept so
    # the test does not trace it again.
    program: torch.export.ExportedProgram | None = field(default=None, compare=False, repr=False)
    opset: int = 18  # the target opset the sample is exported at

    @property
    def id(self) -> str:
        return f"{self.row.id}-{dtype_name(self.dtype)}-{self.index}-opset{self.opset}"

    def module(self) -> OpModule:
        return OpModule(call_target(self.row), self.sample).eval()

    def inputs(self) -> tuple[torch.Tensor, ...]:
        leaves, _ = tree_flatten((self.sample.input, self.sample.args, self.sample.kwargs))
        return tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))

    def describe(self) -> str:
        parts = [_describe(self.sample.input)]
        parts += [_describe(a) for a in self.sample.args]
        if self.sample.kwargs:
            parts.append(_describe(self.sample.kwargs))
        return f"{self.row.id}({', '.join(parts)})"

    @property
    def xfail_reason(self) -> str | None:
        return next((x.reason for x in self.row.xfails if x.applies(self.sample, self.dtype, self.opset)), None)


@dataclass(frozen=True)
class Filtered:
    row_id: str
    dtype: torch.dtype
    index: int
    reason: str


# Filled while cases are built (at collection); read by the coverage test and the run summary.
FILTERED: list[Filtered] = []
OVER_CAP: dict[str, int] = defaultdict(int)  # row id -> in-scope samples beyond the cap, not run
SEEN_OVERLOADS: dict[str, set[str]] = defaultdict(set)  # row id -> overloads its graphs call


@functools.cache
def _opinfos() -> dict[tuple[str, str], object]:
    return {(o.name, o.variant_test_name): o for o in op_db}


def opinfo_of(row: Row):
    try:
        return _opinfos()[(row.opinfo, row.variant)]
    except KeyError:
        raise KeyError(f"row {row.id}: no OpInfo {row.opinfo!r} (variant {row.variant!r}) in op_db") from None


def call_target(row: Row):
    return opinfo_of(row).op if row.opinfo is not None else row.fn


def _all_samples(row: Row, dtype: torch.dtype) -> list[SampleInput]:
    torch.manual_seed(0)
    if row.opinfo is not None:
        return list(opinfo_of(row).sample_inputs("cpu", dtype, requires_grad=False))
    return list(row.samples(dtype))


def _spread(items: list, cap: int) -> list:
    """``cap`` items evenly spaced over ``items``, first included: OpInfo enumerates its argument
    grid in nested loops, so a prefix would vary only the innermost argument."""
    if len(items) <= cap:
        return items
    return [items[i * len(items) // cap] for i in range(cap)]


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(error).__name__}: {text[:120]}"


def _trace(case: Case) -> torch.export.ExportedProgram | str:
    """The sample traced by torch.export, or why eager or export cannot run it."""
    module, inputs = case.module(), case.inputs()
    try:
        with torch.no_grad():
            module(*(t.clone() for t in inputs))
    except Exception as e:  # noqa: BLE001 - any eager failure puts the sample out of reach
        return f"eager call fails: {_first_line(e)}"
    dynamic = None
    if case.row.dynamic:
        # OpModule.forward takes *tensors: one entry holding the spec of each.
        dynamic = (tuple({d: torch.export.Dim.DYNAMIC for d in range(t.dim())} for t in inputs),)
    try:
        with torch.no_grad():
            ep = torch.export.export(module, inputs, dynamic_shapes=dynamic, strict=False)
    except Exception as e:  # noqa: BLE001 - any trace failure puts the sample out of reach
        return f"torch.export fails: {_first_line(e)}"
    if case.row.edit is not None:
        case.row.edit(ep)
    return ep


def _overloads(ep: torch.export.ExportedProgram) -> set[str]:
    names = (overload_name(n.target) for n in ep.graph.nodes if n.op == "call_function")
    return {n for n in names if n is not None}


def row_dtypes(row: Row) -> tuple[torch.dtype, ...]:
    if row.dtypes is not None:
        return row.dtypes
    if row.opinfo is None:
        return (torch.float32,)
    supported = opinfo_of(row).supported_dtypes("cpu")
    return tuple(d for d in PARITY_DTYPES if d in supported)


def _row_cases(row: Row, dtype: torch.dtype) -> list[Case]:
    in_scope = []
    for index, sample in enumerate(_all_samples(row, dtype)):
        if row.sample_filter is not None and row.sample_filter.applies(sample, dtype):
            FILTERED.append(Filtered(row.id, dtype, index, f"out of scope: {row.sample_filter.reason}"))
        else:
            in_scope.append(Case(row, dtype, index, sample))
    chosen = _spread(in_scope, row.cap(dtype))
    OVER_CAP[row.id] += len(in_scope) - len(chosen)
    kept = []
    for case in chosen:
        outcome = _trace(case)
        if isinstance(outcome, str):
            FILTERED.append(Filtered(row.id, dtype, case.index, outcome))
        else:
            SEEN_OVERLOADS[row.id] |= _overloads(outcome)
            kept.append(replace(case, program=outcome))
    return kept


def build_cases(rows: tuple[Row, ...], opsets: tuple[int, ...], progress: Callable[[str], None]) -> list[Case]:
    """Each row's samples at each target opset (traced once, exported at every opset);
    ``progress`` is told how far it got before each row."""
    ids = [r.id for r in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate row ids in the op table: {duplicates}")
    cases = []
    for done, row in enumerate(rows):
        progress(f"collecting: the samples of {done}/{len(rows)} op table rows traced")
        cases += [replace(case, opset=opset) for dtype in row_dtypes(row) for case in _row_cases(row, dtype)
                  for opset in opsets]
    return cases

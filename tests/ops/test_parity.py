"""Per-op parity: every sample of every row of the op table, exported with fastonnx and run in
onnxruntime, matches eager PyTorch."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import fastonnx
from row import PARITY_OPSETS
from rows import ALL_ROWS
from parity_cases import SEEN_OVERLOADS, Case, build_cases
from support import check, flat_tensors, onnx_layout, run_ort

# FASTONNX_PARITY_ROWS=relu,conv2d (row ids) or =activation,nn (rows modules) narrows the run
# while working on a family; unset, every row runs.
_ONLY = {x for x in os.environ.get("FASTONNX_PARITY_ROWS", "").split(",") if x}
SELECTED_ROWS = tuple(r for r in ALL_ROWS if not _ONLY or r.id in _ONLY or r.family in _ONLY)
CASES = build_cases(SELECTED_ROWS, PARITY_OPSETS)


def _param(case: Case):
    reason = case.xfail_reason
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


def _compare(case: Case) -> None:
    module, inputs = case.module(), case.inputs()
    with torch.no_grad():
        expected = [onnx_layout(t) for t in flat_tensors(module(*(t.clone() for t in inputs)))]
    proto = fastonnx.export(case.program, inputs, opset_version=case.opset).model_proto
    check(proto)
    assert len(proto.graph.input) == len(inputs), f"{len(proto.graph.input)} graph inputs for {len(inputs)} tensors"
    actual = run_ort(proto, list(inputs))
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    rtol, atol = case.row.tolerance.get(case.dtype, (None, None))
    for i, (got, want) in enumerate(zip(actual, expected)):
        got = torch.from_numpy(np.array(got))
        if case.row.compare is None:
            # NaN where torch gives NaN is parity (and NaN anywhere else is not).
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}")
            continue
        assert (got.dtype, got.shape) == (want.dtype, want.shape), (
            f"output {i}: {got.dtype}{list(got.shape)}, torch has {want.dtype}{list(want.shape)}"
        )
        case.row.compare(got, want, case.sample)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_parity(case: Case):
    try:
        _compare(case)
    except Exception as e:
        e.add_note(f"sample: {case.describe()}")
        raise


@pytest.mark.parametrize("row", SELECTED_ROWS, ids=lambda r: r.id)
def test_row_exercises_its_overloads(row):
    seen = SEEN_OVERLOADS[row.id]
    missing = sorted(set(row.overloads) - seen)
    assert not missing, f"no kept sample of row {row.id} calls {missing}; its graphs call {sorted(seen)}"


def _derived_inplace(name: str, supported: set[str]) -> bool:
    """An in-place overload codegen maps to its functional twin's converter (``relu_``)."""
    base, dot, overload = name.partition(".")
    return base.endswith("_") and not base.startswith("__") and base[:-1] + dot + overload in supported


def test_every_supported_op_has_a_row():
    covered = {name for row in ALL_ROWS for name in row.overloads}
    supported = set(fastonnx.supported_ops())
    missing = sorted(n for n in supported - covered if not _derived_inplace(n, supported))
    assert not missing, f"supported ops with no row in tests/ops/rows/*.py: {missing}"

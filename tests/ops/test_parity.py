"""Per-op parity: every sample of every row of the op table, exported with fastonnx and run in
onnxruntime, matches eager PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fastonnx
from fastonnx.converters.registry import registered_names
from row import PARITY_OPSETS, Row
from rows import ALL_ROWS
from parity_cases import SEEN_OVERLOADS, Case, build_cases
from progress_log import progress_note
from support import check, flat_tensors, onnx_layout, run_ort


def _selected_rows(config: pytest.Config) -> tuple[Row, ...]:
    """The rows ``--op`` names (every row without it), chosen before any case is built: building
    a case traces its sample, which for the whole table takes minutes."""
    names = {name for option in config.getoption("op") for name in option.split(",") if name}
    if not names:
        return ALL_ROWS
    keys = {r.id: {r.id, r.family, *r.overloads, *(o.split(".")[0] for o in r.overloads)} for r in ALL_ROWS}
    unknown = sorted(names - set().union(*keys.values()))
    if unknown:
        raise pytest.UsageError(f"--op {', '.join(unknown)}: no row of tests/ops/rows/ covers it (README, 'Add an op')")
    return tuple(r for r in ALL_ROWS if names & keys[r.id])


_BUILT: dict[tuple[str, ...], list[Case]] = {}  # row ids -> their cases (rows are not hashable)


def _cases(rows: tuple[Row, ...], config: pytest.Config) -> list[Case]:
    key = tuple(r.id for r in rows)
    if key not in _BUILT:
        _BUILT[key] = build_cases(rows, PARITY_OPSETS, progress_note(config))
    return _BUILT[key]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", [_param(c) for c in _cases(_selected_rows(metafunc.config), metafunc.config)])
    elif "row" in metafunc.fixturenames:
        rows = _selected_rows(metafunc.config)
        _cases(rows, metafunc.config)  # test_row_exercises_its_overloads reads what building them saw
        metafunc.parametrize("row", rows, ids=lambda r: r.id)


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
        if got is None:  # an empty optional: the row's own check says whether that is parity
            assert case.row.compare is not None, f"output {i}: onnxruntime gives None, torch a tensor"
            case.row.compare(got, want, case.sample)
            continue
        got = torch.from_numpy(np.array(got))
        if case.row.compare is None:
            # NaN where torch gives NaN is parity (and NaN anywhere else is not).
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}")
            continue
        assert (got.dtype, got.shape) == (want.dtype, want.shape), (
            f"output {i}: {got.dtype}{list(got.shape)}, torch has {want.dtype}{list(want.shape)}"
        )
        case.row.compare(got, want, case.sample)


def test_parity(case: Case):
    try:
        _compare(case)
    except Exception as e:
        e.add_note(f"sample: {case.describe()}")
        raise


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
    # The native converters; Python converters (``torchvision::nms``) are tested with their models.
    supported = set(fastonnx.supported_ops()) - set(registered_names())
    missing = sorted(n for n in supported - covered if not _derived_inplace(n, supported))
    assert not missing, f"supported ops with no row in tests/ops/rows/*.py: {missing}"

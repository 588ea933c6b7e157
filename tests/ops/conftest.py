"""The op parity summary printed after the run: samples passed/run per target opset and dtype,
xfails by reason, and the samples filtered out at collection by reason."""

from __future__ import annotations

from collections import Counter, defaultdict

import parity_cases

_DTYPE_KEY = "parity_dtype"
_outcomes: dict[str, Counter] = defaultdict(Counter)  # "opset N, dtype" -> outcome -> count
_xfail_reasons: Counter = Counter()
_failed_rows: Counter = Counter()


def pytest_collection_modifyitems(items):
    for item in items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if isinstance(case, parity_cases.Case):
            key = f"opset {case.opset:2d}, {parity_cases.dtype_name(case.dtype)}"
            item.user_properties += [(_DTYPE_KEY, key), ("parity_row", case.row.id)]


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    dtype = props.get(_DTYPE_KEY)
    if dtype is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return
    if hasattr(report, "wasxfail"):
        _outcomes[dtype]["xfailed"] += 1
        _xfail_reasons[report.wasxfail] += 1
    else:
        _outcomes[dtype][report.outcome] += 1
        if report.failed:
            _failed_rows[props["parity_row"]] += 1


def _filtered_by_reason() -> dict[str, list[parity_cases.Filtered]]:
    groups: dict[str, list[parity_cases.Filtered]] = defaultdict(list)
    for f in parity_cases.FILTERED:
        groups[f.reason].append(f)
    return groups


def pytest_terminal_summary(terminalreporter):
    groups = _filtered_by_reason()
    if not _outcomes and not groups:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fastonnx op parity")
    for dtype, counts in sorted(_outcomes.items()):
        run = sum(counts.values())
        detail = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()) if outcome != "passed")
        write(f"{dtype}: {counts['passed']}/{run} samples passed" + (f" ({detail})" if detail else ""))
    if _failed_rows:
        write("failing rows: " + ", ".join(f"{row} ({n})" for row, n in sorted(_failed_rows.items())))
    if _xfail_reasons:
        write("xfailed, by reason:")
        for reason, n in _xfail_reasons.most_common():
            write(f"  {n:4d}  {reason}")
    if groups:
        write(f"filtered at collection ({len(parity_cases.FILTERED)} samples), by reason:")
        for reason, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            rows = ", ".join(sorted({f.row_id for f in items}))
            write(f"  {len(items):4d}  {reason}  [{rows}]")
    over_cap = {row: n for row, n in parity_cases.OVER_CAP.items() if n}
    if over_cap:
        total = sum(over_cap.values())
        write(f"not run, beyond the per-row sample cap: {total} (" + ", ".join(f"{r} {n}" for r, n in sorted(over_cap.items())) + ")")

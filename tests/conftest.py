import sys
from pathlib import Path

import pytest

# The repository root (for `codegen`) and tests/ (for `support`) are importable in tests.
ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists
def pytest_configure(config):
    from progress_log import register

    register(config)


# The reason of every expected failure, written to a file instead of the terminal: pytest's
# `-ra` put about 700 XFAIL lines before the run's closing summary (pyproject.toml asks `-rfE`:
# failures and errors only). One line of the summary names the file.
XFAIL_REPORT = ROOT / "build" / "test-report" / "xfailed.txt"
_xfailed: list[str] = []


def pytest_runtest_logreport(report):
    if hasattr(report, "wasxfail") and (report.when == "call" or report.skipped):
        _xfailed.append(f"{report.nodeid}: {report.wasxfail}")


def pytest_terminal_summary(terminalreporter):
    if not _xfailed:
        return
    XFAIL_REPORT.parent.mkdir(parents=True, exist_ok=True)
    XFAIL_REPORT.write_text("\n".join(sorted(_xfailed)) + "\n")
    terminalreporter.write_line(f"{len(_xfailed)} expected failures, each with its reason: {XFAIL_REPORT}")


def pytest_addoption(parser):
    parser.addoption(
        "--op", action="append", default=[], metavar="NAME",
        help="run the op-parity tests (tests/ops) of these rows only: an ATen overload (atan2.out) or its name "
             "(atan2), a row id or a rows module (arithmetic); repeat it or separate names with commas",
    )


@pytest.fixture(autouse=True)
def every_export_is_checked(monkeypatch):
    """Every model a test exports must pass the full checker (strict shape inference with type
    checks), whether or not the test looks at it. Tests that never import fastonnx (codegen) are
    left alone."""
    if "fastonnx" not in sys.modules:
        yield
        return
    import fastonnx
    from support import check

    export = fastonnx.export

    def checked_export(*args, **kwargs):
        result = export(*args, **kwargs)
        check(result.model_proto)
        return result

    monkeypatch.setattr(fastonnx, "export", checked_export)
    yield

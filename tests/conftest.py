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

"""fastonnx's version, as pyproject.toml gives it to the installed package's metadata, and the torch
releases it supports."""

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# pyproject.toml's requirement on torch, torch>=2.12,<2.16, as (major, minor) of the oldest release
# and of the first one past the range (a test checks that the two agree).
TORCH_RANGE = ((2, 12), (2, 16))


def _source_tree_version() -> str:
    """The version pyproject.toml states, read from the source tree this module is in."""
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    found = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.MULTILINE) if pyproject.is_file() else None
    return found.group(1) if found else "0+unknown"


try:
    __version__ = version("fastonnx")
except PackageNotFoundError:
    # Running from a source tree that was never installed (README's in-place build puts python/
    # on PYTHONPATH; so does the dev build's site directory) there is no package metadata, but
    # pyproject.toml is three directories up.
    __version__ = _source_tree_version()


def supported_torch() -> str:
    (oldest_major, oldest_minor), (past_major, past_minor) = TORCH_RANGE
    return f"torch>={oldest_major}.{oldest_minor},<{past_major}.{past_minor}"


def torch_release() -> tuple[int, int]:
    """The installed torch's (major, minor)."""
    import torch

    found = re.match(r"(\d+)\.(\d+)", str(torch.__version__))
    return (int(found[1]), int(found[2])) if found else TORCH_RANGE[0]


def check_torch() -> None:
    """An ImportError naming the installed torch and the supported range when that torch is older
    than the range: the API relies on torch's tracing internals, and on an older release it would
    fail later, deep in an export. (A newer one is left to the package's requirement.)"""
    import torch

    if torch_release() < TORCH_RANGE[0]:
        raise ImportError(
            f"fastonnx {__version__} needs {supported_torch()}; the installed torch is {torch.__version__} "
            f"({Path(torch.__file__).parent})"
        )

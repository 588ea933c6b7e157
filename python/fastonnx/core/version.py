"""fastonnx's version, as pyproject.toml gives it to the installed package's metadata."""

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


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

"""The environment of the processes a benchmark measures in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` (and ``extra``) with PYTHONPATH: this checkout's root (the benchmarks
    package), then the caller's PYTHONPATH, then this checkout's ``python/``. The caller's comes
    before this checkout's package so that the fastonnx measured is the one it names (another
    checkout's, to measure before a change)."""
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = [str(ROOT), *given, str(ROOT / "python"), *sys.path]
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(path)}

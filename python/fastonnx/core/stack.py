"""Warnings that point at the user's line: the stack is walked when the warning is raised, to the
innermost frame outside fastonnx (and outside torch and contextlib, which calls pass through), so
that how deep in the package a warning is raised never decides where it points. (Python 3.12's
``warnings.warn(skip_file_prefixes=...)`` does the same; the package supports 3.10.)"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterable

import torch

# The package's directory (python/fastonnx/): a frame whose file is under it runs fastonnx.
PACKAGE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "")
_PASSED_THROUGH = (PACKAGE, os.path.join(os.path.dirname(torch.__file__), ""), contextlib.__file__)


def in_package(filename: str) -> bool:
    """Whether ``filename`` is one of fastonnx's own files."""
    return filename.startswith(PACKAGE)


def user_stacklevel(through: Iterable[str] = ()) -> int:
    """``warnings.warn``'s stacklevel, counted from the function calling this one, of the
    innermost frame outside fastonnx, torch, contextlib and the directories ``through`` (a library
    that calls fastonnx on the user's behalf); the outermost frame when every frame is inside."""
    passed = _PASSED_THROUGH + tuple(os.path.join(d, "") for d in through)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(passed):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str | Warning, category: type[Warning] | None = None, through: Iterable[str] = ()) -> None:
    """``warnings.warn`` at the user's line (see user_stacklevel)."""
    warnings.warn(message, category, stacklevel=user_stacklevel(through))

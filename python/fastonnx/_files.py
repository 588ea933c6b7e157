"""Writing files so that a failed or interrupted export never leaves a half-written model."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable


def check_writable(path: str | os.PathLike) -> str:
    """Fail before any work when the model could not be written at ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise PermissionError(f"cannot write {path}: directory {directory} is not writable")
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path}: it is a directory")
    return path


def write_atomically(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """``write(tmp)`` writes the file under a temporary name in the same directory, which then
    replaces ``path`` in one rename; on any error (or Ctrl-C) the temporary file is removed and
    an existing file at ``path`` is left as it was."""
    path = check_writable(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

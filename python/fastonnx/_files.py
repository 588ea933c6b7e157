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
    write_files_atomically([path], lambda tmps: write(tmps[0]))


def write_files_atomically(paths: list, write: Callable[[list[str]], None]) -> None:
    """Several files that belong together (a model and its external data): ``write(tmps)``
    writes them all under temporary names; only when every one is complete are they renamed, the
    last path (the model, which names the others) last."""
    paths = [check_writable(p) for p in paths]
    tmps = []
    try:
        for path in paths:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(os.path.abspath(path))
            )
            os.close(fd)
            tmps.append(tmp)
        write(tmps)
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    except BaseException:
        for tmp in tmps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise

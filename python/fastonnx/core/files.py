"""Writing files so that a failed or interrupted export never leaves a half-written model.

Every file is written under a temporary name in its own directory and renamed into place only
once all of them are complete. An error or Ctrl-C before the renames removes the temporary files
and leaves earlier files at the paths as they were.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Mapping

from ..errors import ArgumentError, WriteError

# Room left in a file name for the temporary name's prefix and suffix (NAME_MAX is 255).
_MAX_STEM = 200


def _target(path: object) -> str:
    """The file a plain ``open(path, "wb")`` would write: symbolic links are followed."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(
            f"f must be a path (str or os.PathLike) or None, got {type(path).__name__}; "
            f"to get the model as bytes, export with f=None and call result.to_bytes()"
        )
    return os.path.realpath(os.fspath(path))


def _create_temp(target: str) -> str:
    """Creates an empty temporary file beside ``target``, with the permissions a plain write
    would give it: those of the file it replaces, else the default (0o666 less the umask)."""
    directory, name = os.path.split(target)
    while True:
        tmp = os.path.join(directory, f".{name[:_MAX_STEM]}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        if os.path.exists(target):
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
    finally:
        os.close(fd)
    return tmp


def _cannot_write(path: str | os.PathLike, reason: str) -> WriteError:
    return WriteError(f"cannot write {os.fspath(path)}: {reason}")


def _checked_target(path: str | os.PathLike) -> str:
    """The file ``path`` names, after the checks that give the clearest reasons."""
    target = _target(path)
    directory = os.path.dirname(target)
    if os.path.isdir(target):
        raise _cannot_write(path, "it is a directory; give a file name")
    if not os.path.exists(directory):
        raise _cannot_write(path, f"directory {directory} does not exist; create it first")
    if not os.path.isdir(directory):
        raise _cannot_write(path, f"{directory} is not a directory")
    return target


def check_writable(path: str | os.PathLike) -> str:
    """Fails before any work when a file could not be written at ``path`` (by creating and
    removing a temporary file there: the one test that holds on every file system and for
    root too). Returns the file that will be written."""
    target = _checked_target(path)
    try:
        os.unlink(_create_temp(target))
    except OSError as e:
        raise _cannot_write(path, e.strerror or str(e)) from e
    return target


def write_atomically(files: Mapping[str | os.PathLike, Callable[[str], object]]) -> None:
    """Writes several files as one: ``write(tmp)`` writes each under a temporary name beside
    its path, and only when every one is complete are they renamed into place, in the order
    given. List the file that refers to the others (the model, after its external data) last:
    whoever opens it then finds the files it refers to complete.

    On any error or Ctrl-C before the renames, the temporary files are removed and earlier files
    at the paths are left as they were. An ``OSError`` is raised as ``WriteError`` naming the
    path."""
    # (Each temporary file created below is the test check_writable makes.)
    targets = [(path, _checked_target(path), write) for path, write in files.items()]
    temps: list[str] = []
    current: str | os.PathLike = ""
    try:
        for path, target, write in targets:
            current = path
            temps.append(_create_temp(target))
            write(temps[-1])
        for tmp, (path, target, _) in zip(temps, targets):
            current = path
            os.replace(tmp, target)
    except OSError as e:
        _remove(temps)
        raise _cannot_write(current, e.strerror or str(e)) from e
    except BaseException:
        _remove(temps)
        raise


def _remove(paths: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):  # already renamed into place
            os.unlink(p)

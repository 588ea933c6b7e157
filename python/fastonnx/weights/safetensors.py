"""safetensors checkpoints, memory-mapped: each tensor a zero-copy view of the file.

The header is parsed here rather than with the ``safetensors`` package: it is 8 bytes (the
header's length, little-endian) and a JSON object, and fastonnx needs each tensor's file offset
(for ``weights_mode="reference"``), which the package does not expose. The bytes stay in the
mapping; the native writer reads them from there and, the mapping being registered with it as
read-only (``_C.ReadOnlyMapping``), returns the pages it has read, so reading a checkpoint adds
little to the process's resident memory, and evicts from the page cache those it has written.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import warnings
from dataclasses import dataclass

import torch

from .. import _C
from ..errors import ArgumentError

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "U16": torch.uint16,
    "U32": torch.uint32,
    "U64": torch.uint64,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}

# A header larger than this is not a safetensors file (the format's own limit is 100 MB).
_MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint file: where its bytes are."""

    file: SafetensorsFile
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # from the start of the file
    nbytes: int

    def tensor(self) -> torch.Tensor:
        return self.file.tensor(self)


class SafetensorsFile:
    """One ``.safetensors`` file: its entries by name, and the file mapped read-only."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.path.realpath(os.fspath(path))
        with open(self.path, "rb") as f:
            header_size, header = _read_header(f, self.path)
            self.size = os.fstat(f.fileno()).st_size
            # An empty file cannot be mapped; a checkpoint with no tensors needs no mapping.
            self.mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        start = 8 + header_size
        self.entries: dict[str, Entry] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            entry = _entry(self, name, info, start)
            if entry.offset + entry.nbytes > self.size:
                raise ArgumentError(f"weights: {self.path}: tensor `{name}` ends past the end of the file")
            self.entries[name] = entry
        self._view: torch.Tensor | None = None
        self._registration: _C.ReadOnlyMapping | None = None

    def tensor(self, entry: Entry) -> torch.Tensor:
        """The entry's bytes as a tensor (no copy: a view of the mapping)."""
        if entry.nbytes == 0:
            return torch.empty(entry.shape, dtype=entry.dtype)
        if self._view is None:
            with warnings.catch_warnings():  # the mapping is read-only; fastonnx never writes to it
                warnings.simplefilter("ignore", UserWarning)
                self._view = torch.frombuffer(self.mapping, dtype=torch.uint8)
            self._registration = _C.ReadOnlyMapping(self._view.data_ptr(), self.size, self.mapping, self.path)
        raw = self._view[entry.offset : entry.offset + entry.nbytes]
        return raw.view(entry.dtype).view(entry.shape)

    @property
    def address(self) -> int:
        """Where the mapping starts in memory (0 for an empty file)."""
        return self._view.data_ptr() if self._view is not None else 0


def _read_header(f, path: str) -> tuple[int, dict]:
    prefix = f.read(8)
    if len(prefix) < 8:
        raise ArgumentError(f"weights: {path} is not a safetensors file (shorter than 8 bytes)")
    (size,) = struct.unpack("<Q", prefix)
    if size > _MAX_HEADER:
        raise ArgumentError(f"weights: {path} is not a safetensors file (header of {size} bytes)")
    try:
        header = json.loads(f.read(size))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArgumentError(f"weights: {path} is not a safetensors file (header: {e})") from None
    if not isinstance(header, dict):
        raise ArgumentError(f"weights: {path} is not a safetensors file (header is not an object)")
    return size, header


def _entry(file: SafetensorsFile, name: str, info: object, start: int) -> Entry:
    try:
        assert isinstance(info, dict)
        dtype = DTYPES[info["dtype"]]
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
    except (AssertionError, KeyError, TypeError, ValueError):
        raise ArgumentError(
            f"weights: {file.path}: tensor `{name}` has an entry fastonnx cannot read: {info!r}"
        ) from None
    count = 1
    for d in shape:
        count *= d
    if end - begin != count * dtype.itemsize:
        raise ArgumentError(f"weights: {file.path}: tensor `{name}` has {end - begin} bytes for shape {list(shape)}")
    return Entry(file, dtype, shape, start + begin, end - begin)

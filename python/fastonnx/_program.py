"""The result of an export."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import _C
from ._files import write_atomically


@dataclass
class ExportResult:
    """What ``fastonnx.export`` returns. The serialized model stays in native memory (weights
    borrowed from the torch tensors) until it is saved or ``model_proto`` is asked for."""

    native: _C.Model
    opset_version: int
    input_names: list[str]
    output_names: list[str]
    exported_program: object = None
    timings: dict[str, float] = field(default_factory=dict)
    _proto: object = field(default=None, repr=False)

    @property
    def model_proto(self):
        """The model as an ``onnx.ModelProto`` (parsed on first use)."""
        if self._proto is None:
            import onnx

            self._proto = onnx.load_from_string(self.native.to_bytes())
        return self._proto

    def to_bytes(self) -> bytes:
        return self.native.to_bytes()

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to ``path`` (atomically: a temporary file renamed when complete)."""
        write_atomically({path: self.native.write})

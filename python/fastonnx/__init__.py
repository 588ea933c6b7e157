"""fastonnx: a fast PyTorch -> ONNX exporter (torch.export and TorchScript front ends, native C++ core)."""

from ._custom import register_converter, unregister_converter
from ._export import export
from ._op_table import supported_ops
from ._program import ExportResult
from ._version import __version__
from .errors import (
    ArgumentError,
    ConversionError,
    DynamicAxesWarning,
    ExportError,
    InternalError,
    TraceError,
    TracerFallbackWarning,
    UnsupportedOp,
    UnsupportedOpsError,
    VerificationError,
    WriteError,
)

__all__ = [
    "export",
    "register_converter",
    "unregister_converter",
    "supported_ops",
    "ExportResult",
    "ExportError",
    "ArgumentError",
    "TraceError",
    "UnsupportedOpsError",
    "UnsupportedOp",
    "ConversionError",
    "WriteError",
    "InternalError",
    "VerificationError",
    "DynamicAxesWarning",
    "TracerFallbackWarning",
    "__version__",
]

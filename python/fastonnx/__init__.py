"""fastonnx: a fast PyTorch -> ONNX exporter (torch.export and TorchScript front ends, native C++ core)."""

from .converters import builtin as _builtin
from .converters.registry import register_converter, unregister_converter
from .converters.symbolic import parse_args, register_custom_op_symbolic, unregister_custom_op_symbolic
from .core.version import __version__
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
from .lowering.op_table import supported_ops
from .pipeline.export import export
from .pipeline.result import ExportResult

_builtin.register()

__all__ = [
    "export",
    "register_converter",
    "unregister_converter",
    "register_custom_op_symbolic",
    "unregister_custom_op_symbolic",
    "parse_args",
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

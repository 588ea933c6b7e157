"""fastonnx: a fast PyTorch -> ONNX exporter (torch.export and TorchScript front ends, native C++ core)."""

from ._custom import register_converter, unregister_converter
from ._export import export
from ._op_table import supported_ops
from ._program import ExportResult
from ._symbolic import parse_args, register_custom_op_symbolic, register_torch_onnx_ops, unregister_custom_op_symbolic
from ._transformers_ops import register as _register_transformers_ops
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

_register_transformers_ops()
register_torch_onnx_ops()

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

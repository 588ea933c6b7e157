"""fastonnx: a fast PyTorch -> ONNX exporter (torch.export and TorchScript front ends, native C++ core).

The API is imported when it is first used (PEP 562's module ``__getattr__``): ``import fastonnx``
alone imports no torch, so that ``python -m fastonnx inspect`` and ``verify`` start at once. That
first use checks the installed torch (``core.version.check_torch``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .core.version import __version__
from .core.version import check_torch as _check_torch

_ERRORS = (
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
)
# Each public name and the module that defines it.
_API = {
    "export": ".pipeline.export",
    "register_converter": ".converters.registry",
    "unregister_converter": ".converters.registry",
    "register_custom_op_symbolic": ".converters.symbolic",
    "unregister_custom_op_symbolic": ".converters.symbolic",
    "parse_args": ".converters.symbolic",
    "supported_ops": ".lowering.op_table",
    "ExportResult": ".pipeline.result",
    "Quantization": ".pipeline.rewrites",
    **dict.fromkeys(_ERRORS, ".errors"),
}
__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'fastonnx' has no attribute {name!r}")
    _check_torch()
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


if TYPE_CHECKING:
    from .converters.registry import (
        register_converter as register_converter,
    )
    from .converters.registry import (
        unregister_converter as unregister_converter,
    )
    from .converters.symbolic import (
        parse_args as parse_args,
    )
    from .converters.symbolic import (
        register_custom_op_symbolic as register_custom_op_symbolic,
    )
    from .converters.symbolic import (
        unregister_custom_op_symbolic as unregister_custom_op_symbolic,
    )
    from .errors import (
        ArgumentError as ArgumentError,
    )
    from .errors import (
        ConversionError as ConversionError,
    )
    from .errors import (
        DynamicAxesWarning as DynamicAxesWarning,
    )
    from .errors import (
        ExportError as ExportError,
    )
    from .errors import (
        InternalError as InternalError,
    )
    from .errors import (
        TraceError as TraceError,
    )
    from .errors import (
        TracerFallbackWarning as TracerFallbackWarning,
    )
    from .errors import (
        UnsupportedOp as UnsupportedOp,
    )
    from .errors import (
        UnsupportedOpsError as UnsupportedOpsError,
    )
    from .errors import (
        VerificationError as VerificationError,
    )
    from .errors import (
        WriteError as WriteError,
    )
    from .lowering.op_table import supported_ops as supported_ops
    from .pipeline.export import export as export
    from .pipeline.result import ExportResult as ExportResult
    from .pipeline.rewrites import Quantization as Quantization

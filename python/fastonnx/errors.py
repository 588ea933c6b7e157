"""The exceptions fastonnx raises. Everything an export can fail with is an ``ExportError``."""

from __future__ import annotations

from dataclasses import dataclass

from torch.onnx.errors import OnnxExporterError


class ExportError(OnnxExporterError):
    """Base class of every error raised by ``fastonnx.export``. It is torch.onnx's
    ``OnnxExporterError`` (a ``RuntimeError``), so code written against ``torch.onnx.export``
    that catches a failed export catches fastonnx's too."""


class ArgumentError(ExportError, TypeError, ValueError):
    """An argument of ``fastonnx.export`` cannot be used: the message names it and says what is
    accepted. It is a ``TypeError`` and a ``ValueError`` too, the errors Python raises for a
    wrong argument."""


class TraceError(ExportError):
    """The model could not be traced (by ``torch.export``, or by ``torch.jit`` with ``tracer="jit"``).
    The message names the innermost cause PyTorch gives (a data-dependent guard under a
    ``SystemError``, say) with the model's source line, and keeps PyTorch's message; the exception
    itself is the ``__cause__``."""


class ConversionError(ExportError):
    """A value or an op's arguments have no ONNX form (the message names the input, weight or
    FX node)."""


class WriteError(ExportError, OSError):
    """The model could not be written at the path given; an earlier file there is left as it
    was. The ``OSError`` that caused it is the ``__cause__``."""


class InternalError(ExportError):
    """An unexpected failure inside fastonnx (a bug, not a problem with the model): please
    report it with the message."""


@dataclass(frozen=True)
class UnsupportedOp:
    overload: str  # e.g. "aten::erfinv" or "mylib::my_op"
    count: int
    first_source: str  # the first user source line that emitted it, or ""
    yaml_hint: str  # the mapping entry to start from
    decomposed_from: str = ""  # the op whose PyTorch decomposition produced it, if any


class UnsupportedOpsError(ExportError):
    """Ops without a converter, all of them at once."""

    def __init__(self, ops: list[UnsupportedOp]):
        self.ops = ops
        lines = [f"{len(ops)} op(s) have no ONNX converter and no decomposition into ops that have one:"]
        for op in ops:
            origin = f", from the decomposition of {op.decomposed_from}" if op.decomposed_from else ""
            where = f"\n      first at {op.first_source}" if op.first_source else ""
            lines.append(f"  - {op.overload} (x{op.count}{origin}){where}\n      start from: {op.yaml_hint}")
        aten = [op for op in ops if op.overload.startswith("aten::")]
        if len(aten) == len(ops):
            lines.append(
                "Add a mapping in codegen/mappings/*.yaml (see README, 'Add an op'), or register a Python "
                "converter with fastonnx.register_converter."
            )
        elif not aten:
            lines.append("Register a Python converter with fastonnx.register_converter (README, 'Custom converters').")
        else:
            lines.append(
                "For the aten:: ops add a mapping in codegen/mappings/*.yaml (README, 'Add an op'); for the others "
                "register a Python converter with fastonnx.register_converter (README, 'Custom converters')."
            )
        super().__init__("\n".join(lines))


class DynamicAxesWarning(UserWarning):
    """``dynamic_axes`` asked for a dynamic axis that the traced model fixes (it stays static in
    the ONNX graph), or named one size twice: the message lists every such axis and why."""


class TracerFallbackWarning(UserWarning):
    """``tracer="auto"``: torch.export refused to trace the model, or fixed a requested dynamic
    axis at a test of its size in scripted code (which the TorchScript graph keeps as an If or
    Loop), so the TorchScript front end traced it. The message says why torch.export refused and
    lists what the TorchScript trace fixed to the example's values, or names the axes and the
    scripted lines."""


class VerificationError(ExportError):
    """``verify=True``: onnxruntime's outputs differ from eager PyTorch's beyond the tolerance."""

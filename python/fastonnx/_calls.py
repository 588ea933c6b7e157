"""How export() is called: the call checked against its signature, one export at a time, and
weights that have no data."""

from __future__ import annotations

import difflib
import functools
import inspect
import threading

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from .errors import ArgumentError

_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def _plain_signature(sig: inspect.Signature) -> str:
    return str(sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                           return_annotation=sig.empty))


# torch.onnx.export's arguments that fastonnx.export does not take, and what to do instead (the
# README's table of differences says the same). An error, not an ignored keyword: each changes
# what torch.onnx would write, so silently dropping it would hand back another model.
TORCH_ONNX_ONLY = {
    "dynamo": "fastonnx always traces with torch.export (torch.onnx's dynamo=True front end); drop it",
    "optimize": "fastonnx always folds constants and removes dead, duplicate and identity nodes; drop it",
    "do_constant_folding": "fastonnx always folds constants; drop it",
    "custom_translation_table": "register a converter per op with fastonnx.register_converter(op, fn)",
    "operator_export_type": "fastonnx writes standard ONNX ops (and custom domains of registered converters); "
                            "an op without a converter raises UnsupportedOpsError",
    "profile": "the result's `timings` and report=True give the time of each phase",
    "dump_exported_program": "the result's `exported_program` is the traced program",
    "artifacts_dir": "report= takes the path of the report",
    "fallback": "there is no TorchScript fallback; UnsupportedOpsError lists what is missing",
    "autograd_inlining": "TorchScript only; torch.export always inlines",
}


def checked_call(fn):
    """Makes a call that does not fit ``fn``'s signature (an unknown keyword, too many
    positional arguments) an ``ArgumentError`` that names what fits."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(_explain(fn.__name__, sig, kwargs, e)) from None
        return fn(*args, **kwargs)

    return wrapper


# torch.export, functionalization and decomposition use PyTorch's process-wide tracing state
# (two traces at once fail or corrupt each other), and the conversion holds the GIL anyway.
# Re-entrant: an export started from inside another (a forward that exports) must not deadlock.
_EXPORT_LOCK = threading.RLock()


def one_at_a_time(fn):
    """Runs calls of ``fn`` one after the other: a call from another thread waits."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _EXPORT_LOCK:
            return fn(*args, **kwargs)

    return wrapper


def _explain(name: str, sig: inspect.Signature, kwargs: dict, error: TypeError) -> str:
    keywords = [p.name for p in sig.parameters.values() if p.kind != p.POSITIONAL_ONLY]
    unknown = [k for k in kwargs if k not in sig.parameters]
    if not unknown:
        return f"{error}; the signature is {name}{_plain_signature(sig)}"
    lines = []
    for k in unknown:
        if k in TORCH_ONNX_ONLY:
            lines.append(f"`{k}` is a torch.onnx.export argument fastonnx does not take: {TORCH_ONNX_ONLY[k]}")
            continue
        close = [p for p in keywords if p.startswith(k)] or difflib.get_close_matches(k, keywords, n=1)
        lines.append(f"`{k}` is not an argument of fastonnx.{name}" + (f"; did you mean `{close[0]}`?" if close else ""))
    lines.append(f"it accepts: {', '.join(keywords)} (a subset of torch.onnx.export's)")
    return "\n".join(lines)


def check_weights_have_data(ep: ExportedProgram) -> None:
    """The ONNX file stores every weight: a parameter, buffer or constant on the meta device
    has nothing to store."""
    state, constants = ep.state_dict, ep.constants
    empty = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind in _WEIGHT_KINDS:
            tensor = state[spec.target] if spec.target in state else constants.get(spec.target)
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                empty.append(spec.target)
    if empty:
        shown = ", ".join(f"`{n}`" for n in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        raise ArgumentError(
            f"model: {len(empty)} weight(s) are on the meta device and have no data to store in the ONNX file: "
            f"{shown}. Load the weights first, e.g. model.to_empty(device='cpu') then model.load_state_dict(...)"
        )

"""export()'s arguments, checked in one place: the call against the signature, the model and its
example inputs, the options (into one frozen ``ExportOptions``), and, once traced, the model's
weights. Each check raises an ``ArgumentError`` naming the argument."""

from __future__ import annotations

import difflib
import functools
import inspect
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.onnx import TrainingMode

from .. import _C
from ..core.files import check_writable
from ..errors import ArgumentError
from ..lowering.functions import MIN_FUNCTIONS_OPSET, type_name
from .rewrites import Quantization, check_max_positions, check_optimize_for

_WEIGHT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def _plain_signature(sig: inspect.Signature) -> str:
    return str(
        sig.replace(
            parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()], return_annotation=sig.empty
        )
    )


# torch.onnx.export's arguments that fastonnx.export does not take, and what to do instead (the
# README's table of differences says the same). An error, not an ignored keyword: each changes
# what torch.onnx would write, so silently dropping it would hand back another model.
TORCH_ONNX_ONLY = {
    "dynamo": "fastonnx chooses its front end with tracer=: 'export' (torch.export, as dynamo=True), 'jit' "
    "(torch.jit.trace, as dynamo=False) or 'auto' (the default: torch.export, then torch.jit.trace when it refuses)",
    "optimize": "fastonnx always folds constants and removes dead, duplicate and identity nodes; drop it",
    "do_constant_folding": "fastonnx always folds constants; drop it",
    "operator_export_type": "fastonnx writes standard ONNX ops (and custom domains of registered converters); "
    "an op without a converter raises UnsupportedOpsError",
    "profile": "the result's `timings` and report=True give the time of each phase",
    "dump_exported_program": "the result's `exported_program` is the traced program",
    "artifacts_dir": "report= takes the path of the report",
    "fallback": "tracer='auto' (the default) falls back to the TorchScript front end when torch.export refuses to "
    "trace; an op without a converter raises UnsupportedOpsError listing what is missing",
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
        lines.append(
            f"`{k}` is not an argument of fastonnx.{name}" + (f"; did you mean `{close[0]}`?" if close else "")
        )
    lines.append(f"it accepts: {', '.join(keywords)} (a subset of torch.onnx.export's)")
    return "\n".join(lines)


@dataclass(frozen=True)
class ExportOptions:
    """How to export, checked and in normal form (``from_arguments``)."""

    f: str | os.PathLike | None  # where to write the model; None: nowhere
    input_names: tuple[str, ...] | None
    output_names: tuple[str, ...] | None
    opset: int
    training: TrainingMode
    export_params: bool
    keep_initializers_as_inputs: bool
    custom_opsets: Mapping[str, int]  # custom domain -> version
    # export_modules_as_functions: False, True, or the qualified names of the classes selected.
    functions: bool | frozenset[str]
    external_data: bool | None
    verify: bool
    report_path: Path | None
    verbose: bool | None
    optimize_for: str | None = None  # "onnxruntime": its fused ops (rewrites.py)
    quantization: Quantization | None = None
    max_positions: int | None = None  # rotary tables' length, for optimize_for (rewrites.py)

    @classmethod
    def from_arguments(
        cls,
        *,
        f: str | os.PathLike | None,
        input_names: Sequence[str] | None,
        output_names: Sequence[str] | None,
        opset_version: int | None,
        export_params: bool,
        keep_initializers_as_inputs: bool,
        training: TrainingMode | bool,
        custom_opsets: dict[str, int] | None,
        external_data: bool | None,
        verify: bool,
        report: bool | str | os.PathLike | None,
        verbose: bool | None,
        export_modules_as_functions: bool | Collection[type[torch.nn.Module]],
        optimize_for: str | None = None,
        quantize: object = None,
        max_positions: object = None,
    ) -> ExportOptions:
        inputs = _names("input_names", input_names)
        outputs = _names("output_names", output_names)
        shared = sorted(set(inputs or ()) & set(outputs or ()))
        if shared:
            raise ArgumentError(
                f"input_names and output_names share {shared}; each graph input and output needs its own name"
            )
        opset = _opset(opset_version)
        functions = _function_selection(export_modules_as_functions, opset)
        target, quantization = check_optimize_for(optimize_for), Quantization.parse(quantize)
        positions = check_max_positions(max_positions, target)
        if quantization is not None:
            quantization.check_opset(opset)
        if functions and (target or quantization):
            raise ArgumentError(
                "export_modules_as_functions keeps each module's nodes in a local function, where onnxruntime's "
                "fused ops and quantized weights are not made: drop one of them"
            )
        mode = _training(training)
        if custom_opsets is not None and not (
            isinstance(custom_opsets, dict)
            and all(isinstance(k, str) and k and isinstance(v, int) for k, v in custom_opsets.items())
        ):
            raise ArgumentError(
                f"custom_opsets maps domain names to versions, e.g. {{'mylib': 1}}; got {custom_opsets!r}"
            )
        if f is not None:
            check_writable(f)
        report_path = _report_path(f, report)
        if report_path is not None:
            check_writable(report_path)
        return cls(
            f=f,
            input_names=inputs,
            output_names=outputs,
            opset=opset,
            training=mode,
            export_params=export_params,
            keep_initializers_as_inputs=keep_initializers_as_inputs,
            custom_opsets=dict(custom_opsets or {}),
            functions=functions,
            external_data=external_data,
            verify=verify,
            report_path=report_path,
            verbose=verbose,
            optimize_for=target,
            quantization=quantization,
            max_positions=positions,
        )


def check_model_inputs(model: object, args: object, kwargs: object) -> tuple[tuple, dict | None]:
    """``model`` and its example inputs; a lone tensor ``args`` as a one-tuple."""
    if not isinstance(model, (torch.nn.Module, ExportedProgram)):
        raise ArgumentError(
            f"model must be a torch.nn.Module or a torch.export.ExportedProgram, got {type(model).__name__}"
        )
    if isinstance(args, torch.Tensor):
        args = (args,)
    if not isinstance(args, tuple):
        raise ArgumentError(f"args must be a tuple of example inputs (or one tensor), got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ArgumentError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    leaves = torch.utils._pytree.tree_leaves_with_path((args, kwargs or {}))
    for path, leaf in leaves:
        if type(leaf).__module__ == "numpy":
            where = ("args" if getattr(path[0], "idx", None) == 0 else "kwargs") + torch.utils._pytree.keystr(path[1:])
            raise ArgumentError(
                f"{where} is a {type(leaf).__module__}.{type(leaf).__name__}: example inputs are torch tensors; "
                "pass torch.from_numpy(...) of it"
            )
    return args, kwargs


def check_verifiable(model: object) -> None:
    """``verify=True`` runs the model in PyTorch: said before any work when it cannot run."""
    if isinstance(model, ExportedProgram):
        raise ArgumentError("verify=True needs the nn.Module to run eagerly; call result.verify() on the module")
    assert isinstance(model, torch.nn.Module)  # (check_model_inputs)
    # (a model with weights of its own and weights= runs eagerly with its own: verify compares)
    if any(t.device.type == "meta" for t in (*model.parameters(), *model.buffers())):
        raise ArgumentError(
            "verify=True runs the model in PyTorch, and a model on the meta device has no weights to run with: "
            "export without verify=True and check the file with `python -m fastonnx verify FILE`, or verify a "
            "model whose weights are loaded (from_pretrained, or load_state_dict(..., assign=True))"
        )


def _names(kind: str, names: Sequence[str] | None) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise ArgumentError(f"{kind} must be a list of non-empty strings, got {names!r}")
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        raise ArgumentError(f"{kind} has duplicate names: {dupes}; each graph input and output needs its own")
    return tuple(names)


def _opset(opset_version: int | None) -> int:
    if opset_version is None:
        return _C.DEFAULT_OPSET
    if type(opset_version) is not int or not _C.MIN_OPSET <= opset_version <= _C.MAX_OPSET:
        raise ArgumentError(
            f"opset_version={opset_version!r} is not supported; fastonnx produces opsets "
            f"{_C.MIN_OPSET} to {_C.MAX_OPSET} (default {_C.DEFAULT_OPSET})"
        )
    return opset_version


def _training(training: object) -> TrainingMode:
    if isinstance(training, TrainingMode):
        return training
    if isinstance(training, bool):  # torch.onnx's older spelling
        return TrainingMode.TRAINING if training else TrainingMode.EVAL
    raise ArgumentError(f"training must be a torch.onnx.TrainingMode (EVAL, PRESERVE, TRAINING), got {training!r}")


def _function_selection(value: object, opset: int) -> bool | frozenset[str]:
    """``export_modules_as_functions``: False, True, or the module classes whose calls become
    functions (as the qualified names torch.export records)."""
    selection: bool | frozenset[str]
    if isinstance(value, bool):
        selection = value
    elif isinstance(value, Collection) and not isinstance(value, (str, bytes, dict)):
        wrong = [v for v in value if not (isinstance(v, type) and issubclass(v, torch.nn.Module))]
        if wrong:
            raise ArgumentError(
                f"export_modules_as_functions holds {', '.join(repr(w) for w in wrong)}, which "
                f"{'is' if len(wrong) == 1 else 'are'} not a torch.nn.Module subclass; give True, False "
                f"or a set of module classes, e.g. {{torch.nn.Linear}}"
            )
        selection = frozenset(type_name(v) for v in value) or False
    else:
        raise ArgumentError(
            f"export_modules_as_functions must be True, False or a set of torch.nn.Module subclasses, got {value!r}"
        )
    if selection and opset < MIN_FUNCTIONS_OPSET:
        raise ArgumentError(
            f"export_modules_as_functions needs opset_version {MIN_FUNCTIONS_OPSET} or later (ONNX "
            f"local functions); got {opset}"
        )
    return selection


def _report_path(f: str | os.PathLike | None, report: bool | str | os.PathLike | None) -> Path | None:
    if report is False or report is None:
        return None
    if report is True:
        return Path(os.fspath(f) + ".report.md") if f is not None else Path("fastonnx_report.md")
    return Path(os.fspath(report))


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
        raise _weights_on_meta(empty)


def check_module_weights_on_inputs_device(model, args: tuple, kwargs: dict | None) -> None:
    """Weights on the meta device with real inputs: torch's trace would stop first, on the mix
    of devices; the error says what is wrong with the model instead."""
    if not isinstance(model, torch.nn.Module):
        return
    inputs = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not inputs or all(t.is_meta for t in inputs):
        return
    weights = [*model.named_parameters(), *model.named_buffers()]
    empty = [name for name, t in weights if t.is_meta]
    if empty:
        raise _weights_on_meta(empty)


def _weights_on_meta(empty: list[str]) -> ArgumentError:
    shown = ", ".join(f"`{n}`" for n in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
    return ArgumentError(
        f"model: {len(empty)} weight(s) are on the meta device and have no data to store in the ONNX file: "
        f"{shown}. Load the weights first, e.g. model.to_empty(device='cpu') then model.load_state_dict(...)"
    )

"""fastonnx.export: trace, decompose what has no converter, lower and convert, write."""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path

import torch
from torch.export import ExportedProgram
from torch.onnx import TrainingMode

from . import _C, _report
from ._calls import check_weights_have_data, checked_call, one_at_a_time
from ._control_flow import Body, collect_bodies
from ._decompose import Decomposer, copy_graph
from ._dynamic import Request, StaticAxis, warn_static, why_static
from ._dynamic import resolve as resolve_dynamic
from ._files import check_writable, write_atomically
from ._functions import ModuleScopes, check_selection
from ._lower import Lowering, aten_histogram, check_supported, decomposition_for, live_nodes
from ._program import ExportResult
from ._progress import Progress
from ._trace import functionalize, program_needs_functionalization, trace
from .errors import (ArgumentError, ConversionError, ExportError, InternalError, UnsupportedOpsError,
                     VerificationError)

__version__ = "0.1.0"


def _check_names(kind: str, names: Sequence[str] | None) -> list[str] | None:
    if names is None:
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise ArgumentError(f"{kind} must be a list of non-empty strings, got {names!r}")
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        raise ArgumentError(f"{kind} has duplicate names: {dupes}; each graph input and output needs its own")
    return list(names)


def _check_opset(opset_version: int | None) -> int:
    if opset_version is None:
        return _C.DEFAULT_OPSET
    if type(opset_version) is not int or not _C.MIN_OPSET <= opset_version <= _C.MAX_OPSET:
        raise ArgumentError(
            f"opset_version={opset_version!r} is not supported; fastonnx produces opsets "
            f"{_C.MIN_OPSET} to {_C.MAX_OPSET} (default {_C.DEFAULT_OPSET})"
        )
    return opset_version


def _check_training(training) -> TrainingMode:
    if isinstance(training, TrainingMode):
        return training
    if isinstance(training, bool):  # torch.onnx's older spelling
        return TrainingMode.TRAINING if training else TrainingMode.EVAL
    raise ArgumentError(f"training must be a torch.onnx.TrainingMode (EVAL, PRESERVE, TRAINING), got {training!r}")


def _needs_decomposition(node) -> bool:
    if node.op != "call_function":
        return False
    return Decomposer.inlines(node) or decomposition_for(node) is not None


def _report_path(f, report) -> Path | None:
    if report is False or report is None:
        return None
    if report is True:
        return Path(os.fspath(f) + ".report.md") if f is not None else Path("fastonnx_report.md")
    return Path(os.fspath(report))


@checked_call
@one_at_a_time
def export(
    model: torch.nn.Module | ExportedProgram,
    args: tuple | torch.Tensor = (),
    f: str | os.PathLike | None = None,
    *,
    kwargs: dict | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_shapes=None,
    dynamic_axes: dict | None = None,
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    training: TrainingMode = TrainingMode.EVAL,
    custom_opsets: dict[str, int] | None = None,
    external_data: bool | None = None,
    verify: bool = False,
    report: bool | str | os.PathLike = False,
    verbose: bool | None = None,
    export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
) -> ExportResult:
    """Export ``model`` (a ``torch.nn.Module`` or a ``torch.export.ExportedProgram``) to ONNX.

    Arguments follow ``torch.onnx.export``: ``args`` are the example positional inputs (a lone
    tensor is wrapped in a tuple), ``kwargs`` the keyword inputs, ``f`` where to write the model
    (atomically; nothing is written when ``f`` is None), ``input_names``/``output_names`` name
    the graph's inputs and outputs in order (a shorter list names the first ones),
    ``opset_version`` the ONNX opset (13 to 28, default 18).

    ``dynamic_shapes`` gives the dynamic dimensions in torch.export's form and strictness
    (``Dim``, ``Dim.AUTO``/``Dim.DYNAMIC``, or a name per dimension, which torch.export rejects and
    fastonnx reads as torch.onnx does: ``Dim.DYNAMIC`` under that name). ``dynamic_axes`` gives
    them in torch.onnx's form (``{"x": {0: "batch"}}`` or ``{"x": [0]}``), keyed by the names of
    the flattened tensor inputs (``input_names``, else ``pair_0``, ``d_a``...), by a top-level
    argument that is one tensor, or by output names; each axis is traced with ``Dim.AUTO``, and
    one the model fixes stays static, listed with why in one ``DynamicAxesWarning``. Dynamic
    dimensions keep their names in the ONNX inputs and outputs. A Python number ``forward``
    returns is a 0-d output (int64, the default float dtype, bool); ``None`` is no output.
    ``export_params=False`` makes the weights graph inputs instead of
    initializers; ``keep_initializers_as_inputs`` lists the initializers among the inputs too (so
    a runtime may override them). ``training``: ``TrainingMode.EVAL`` (the default) traces in
    eval mode, ``PRESERVE`` in the module's own mode, ``TRAINING`` in training mode (dropout and
    batch statistics). ``custom_opsets`` gives the version of each custom domain the nodes of
    Python converters use (``{"mylib": 2}``; default 1). ``external_data`` writes the weights to ``<f>.data`` beside the model (by
    default only above protobuf's 2 GB). ``verify`` runs the model in onnxruntime on the example
    inputs, prints the largest differences per output and raises ``VerificationError`` on a
    mismatch. ``report`` writes a Markdown report (``<f>.report.md`` for True, or the path
    given), also when the export fails. ``verbose=True`` prints the ONNX graph; ``False`` turns
    off the progress bars long exports show on a terminal.
    ``export_modules_as_functions``: ``True`` or a set of module classes (matched exactly, not
    subclasses) whose calls become ONNX local functions (opset 15 or later): each call of such a
    submodule is a node calling a FunctionProto of domain ``"fastonnx.functions"`` named after the
    class's qualified name (``torch.nn.modules.linear.Linear``). Calls whose bodies are equal
    (same ops, attributes, input types and constants) share one function; one whose body differs
    gets a function of its own, suffixed ``_1``, ``_2``... (so does each call of a module whose
    body holds control flow). Weights become function inputs. A selected module inside another is
    a function that the outer function calls; inside a control-flow branch or loop body, modules
    stay inlined in the subgraph. ``False`` (the default) inlines everything.
    Safe to call from several threads: exports run one at a time. Errors are
    ``fastonnx.ExportError`` subclasses (README, "Errors").
    """
    if not isinstance(model, (torch.nn.Module, ExportedProgram)):
        raise ArgumentError(f"model must be a torch.nn.Module or a torch.export.ExportedProgram, got {type(model).__name__}")
    if isinstance(args, torch.Tensor):
        args = (args,)
    if not isinstance(args, tuple):
        raise ArgumentError(f"args must be a tuple of example inputs (or one tensor), got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ArgumentError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    input_names = _check_names("input_names", input_names)
    output_names = _check_names("output_names", output_names)
    shared = sorted(set(input_names or ()) & set(output_names or ()))
    if shared:
        raise ArgumentError(f"input_names and output_names share {shared}; each graph input and output needs its own name")
    opset = _check_opset(opset_version)
    functions = check_selection(export_modules_as_functions, opset)
    training = _check_training(training)
    if custom_opsets is not None and not (isinstance(custom_opsets, dict) and all(
            isinstance(k, str) and k and isinstance(v, int) for k, v in custom_opsets.items())):
        raise ArgumentError(f"custom_opsets maps domain names to versions, e.g. {{'mylib': 1}}; got {custom_opsets!r}")
    if f is not None:
        check_writable(f)
    report_path = _report_path(f, report)
    request = resolve_dynamic(model, args, kwargs, dynamic_shapes, dynamic_axes, input_names)
    exporter = _Exporter(opset, Progress(verbose))
    try:
        result = exporter.run(model, args, kwargs, request, input_names, output_names, training,
                              export_params, keep_initializers_as_inputs, custom_opsets or {}, functions)
    except (UnsupportedOpsError, ConversionError) as e:
        if report_path is not None:
            exporter.write_report(model, report_path, error=e)
        raise
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001 - a failure no phase turned into an ExportError is a bug
        raise InternalError(f"exporting {type(model).__name__} failed unexpectedly: {type(e).__name__}: {e}") from e
    # torch.onnx ignores a key that names neither an input nor an output, with a warning: so does
    # fastonnx (in the one DynamicAxesWarning), naming what the keys may be.
    for key in sorted(set(request.output_axes) - set(result.output_names)):
        request.ignored[key] = (f"names neither an input ({', '.join(result.input_names)}) nor an output "
                                f"({', '.join(result.output_names)})")
    # warn_static <- export <- one_at_a_time <- checked_call <- the caller
    warn_static(exporter.static_axes, exporter.shared_names, request, stacklevel=5)
    if verbose:
        import onnx

        print(onnx.printer.to_text(result.model_proto.graph))
    if verify:
        if isinstance(model, ExportedProgram):
            raise ArgumentError("verify=True needs the nn.Module to run eagerly; call result.verify() on the module")
        diffs = result.verify(*args, **(kwargs or {}))
        if not all(d.ok for d in diffs):
            raise VerificationError("onnxruntime's outputs differ from PyTorch's:\n" + _format(diffs))
    if f is not None:
        t0 = time.perf_counter()
        with exporter.progress.stage("writing", total=result.native.weights_nbytes, unit="B", scale=True) as advance:
            result.save(f, external_data=external_data, progress=advance)
        result.timings["write"] = time.perf_counter() - t0
    if report_path is not None:
        exporter.write_report(model, report_path, result=result)
    return result


def _format(diffs) -> str:
    from ._verify import format_diffs

    return format_diffs(diffs)


class _Exporter:
    """The phases of one export, with what the report needs from each."""

    def __init__(self, opset: int, progress: Progress):
        self.opset = opset
        self.progress = progress
        self.timings: dict[str, float] = {}
        self.aten_ops: Counter = Counter()
        self.decomposed: Counter = Counter()
        self.static_axes: list[StaticAxis] = []
        self.shared_names: list[tuple[str, str, str]] = []

    def run(self, model, args, kwargs, request: Request, input_names, output_names, training,
            export_params, keep_initializers_as_inputs, custom_opsets, functions=False) -> ExportResult:
        timings = self.timings
        t0 = time.perf_counter()
        fixed = {} if request.relaxed else None
        ep = trace(model, args, kwargs, request.shapes, training, fixed)
        timings["trace"] = time.perf_counter() - t0
        check_weights_have_data(ep)

        t0 = time.perf_counter()
        if program_needs_functionalization(ep):
            ep = functionalize(ep)
        timings["functionalize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        main = self._prepare(ep.graph, ep.graph_module)
        graph, attribute, live = main.graph, main.attribute, main.live
        # The functions of control-flow ops (cond branches, loop bodies), prepared the same way.
        bodies = collect_bodies(graph, live, main.attribute, lambda module: self._prepare(module.graph, module))
        timings["decompose"] = time.perf_counter() - t0

        self.aten_ops = aten_histogram(graph, live)
        for body in bodies.values():
            self.aten_ops += aten_histogram(body.graph, body.live)
        check_supported(graph, live, bodies.values())
        session = _C.Session(self.opset, keep_initializers_as_inputs)
        for domain, version in custom_opsets.items():
            session.set_domain_version(domain, version)
        scopes = ModuleScopes(session, functions) if functions else None
        lowering = Lowering(ep, session, graph, live, attribute, self.opset, bodies, scopes)
        t0 = time.perf_counter()
        lowering.add_placeholders(input_names, request.dim_names, export_params,
                                  self._why_static(ep, request, fixed) if fixed is not None else None)
        if input_names is not None and len(input_names) > len(lowering.input_names):
            raise ArgumentError(
                f"input_names has {len(input_names)} names but the model has {len(lowering.input_names)} tensor inputs; "
                f"give at most {len(lowering.input_names)}"
            )
        with self.progress.stage("converting", total=len(live), unit="node") as advance:
            lowering.convert_nodes(advance)
        outputs = lowering.set_outputs(output_names, request.output_axes)
        self.static_axes, self.shared_names = lowering.static_axes, lowering.shared_names
        if output_names is not None and len(output_names) > len(outputs):
            raise ArgumentError(f"output_names has {len(output_names)} names but the model has {len(outputs)} tensor "
                                f"outputs; give at most {len(outputs)}")
        # One Python->C++ call per node: its native side is the conversion proper, the rest is
        # lowering (walking the FX graph, encoding arguments).
        timings["convert"] = session.convert_seconds
        timings["lower"] = time.perf_counter() - t0 - session.convert_seconds

        t0 = time.perf_counter()
        native = session.finish(__version__)
        timings["passes"] = time.perf_counter() - t0
        return ExportResult(native, self.opset, lowering.input_names, outputs, ep, timings,
                            model=model if isinstance(model, torch.nn.Module) else None)

    @staticmethod
    def _why_static(ep: ExportedProgram, request: Request, fixed: dict):
        """why_static(input, axis, size) for Lowering.add_placeholders: from the trace's ShapeEnv
        and the replacements recorded while tracing."""
        vals = [n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"]
        mode = next((v.fake_mode for v in vals if hasattr(v, "fake_mode")), None)
        shape_env = getattr(mode, "shape_env", None)
        return lambda i, axis, size: why_static(shape_env, request.sources[i], axis, size, fixed)

    def _prepare(self, graph: torch.fx.Graph, module: torch.fx.GraphModule) -> Body:
        """``graph`` (of ``module``: the program's, or a control-flow function's) with the ops that
        have no converter decomposed (in a copy, when any has), and its live nodes."""
        attribute = functools.partial(getattr, module)
        if any(_needs_decomposition(n) for n in graph.nodes):
            decomposer = Decomposer(copy_graph(graph), decomposition_for)
            decomposer.run()
            graph, attribute = decomposer.graph, decomposer.attribute
            self.decomposed += Counter({str(op): n for op, n in decomposer.decomposed.items()})
        return Body(graph, attribute, live_nodes(graph))

    def write_report(self, model, path: Path, result: ExportResult | None = None, error: Exception | None = None):
        text = _report.render(
            model_name=type(model).__name__, opset=self.opset, timings=self.timings, aten_ops=self.aten_ops,
            decomposed=self.decomposed, proto=result.model_proto if result is not None and
            result.native.weights_nbytes < (1 << 30) else None,
            pass_stats=result.native.pass_stats if result is not None else None, error=error)
        write_atomically({path: lambda tmp: Path(tmp).write_text(text)})


__all__ = ["export", "ExportError"]

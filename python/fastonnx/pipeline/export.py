"""fastonnx.export: check the options, trace, decompose what has no converter, lower and convert,
write."""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.onnx import TrainingMode

from .. import _C
from ..converters.onnxscript import translation_table
from ..converters.transformers import cache_hint, traceable_experts
from ..core.files import write_atomically
from ..core.progress import Progress
from ..core.stack import warn
from ..core.torch_logs import held_torch_logs
from ..core.version import __version__
from ..dynamic.request import (
    Attempt,
    Request,
    StaticAxis,
    refuse_static_in_program,
    warn_constrained,
    warn_static,
    why_static,
)
from ..dynamic.request import resolve as resolve_dynamic
from ..errors import (
    ArgumentError,
    ConversionError,
    ExportError,
    InternalError,
    TraceError,
    TracerFallbackWarning,
    UnsupportedOpsError,
    VerificationError,
    WriteError,
)
from ..frontends.choice import STRATEGIES, Call, Capture, check_tracer
from ..frontends.export.trace import (
    describe_failure,
    ep_shape_env,
    functional_graph,
    functionalize,
    program_needs_functionalization,
    traced_in_mode,
)
from ..frontends.jit.translate import JitProgram, functionalized
from ..lowering.control_flow import collect_bodies
from ..lowering.decompose import Decomposer, copy_graph
from ..lowering.functions import ModuleScopes
from ..lowering.graph import PreparedGraph, check_running_statistics_unread
from ..lowering.lower import Lowering
from ..lowering.op_table import decomposition_for, live_nodes
from ..lowering.unsupported import check_supported
from ..weights.source import Streamed, bind, check_weights_mode, open_source, prepare, started_reading
from . import report as _report
from .options import (
    ExportOptions,
    check_model_inputs,
    check_module_weights_on_inputs_device,
    check_verifiable,
    check_weights_have_data,
    checked_call,
)
from .result import ExportResult
from .rewrites import Quantization, finish_arguments

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
    custom_translation_table: dict | None = None,
    external_data: bool | None = None,
    verify: bool = False,
    report: bool | str | os.PathLike = False,
    verbose: bool | None = None,
    export_modules_as_functions: bool | Collection[type[torch.nn.Module]] = False,
    tracer: str = "auto",
    weights: object = None,
    weights_mode: str = "copy",
    dtype: torch.dtype | None = None,
    optimize_for: str | None = None,
    quantize: str | Quantization | None = None,
    max_positions: int | None = None,
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
    one the model fixes stays static, listed with why in one ``DynamicAxesWarning``. An axis
    traced at size 0 or 1 is dynamic too unless the traced code depends on that size (README,
    "Sizes traced at 0 or 1"), in either form. Dynamic
    dimensions keep their names in the ONNX inputs and outputs. An ExportedProgram is traced
    already: ``dynamic_axes`` names the axes it has dynamic (an output's axis names that size
    wherever the graph has it, an expression over the inputs' sizes too; axes given one name are
    taken as one size), an axis it has static is an ``ArgumentError``, and ``dynamic_shapes`` is
    refused. A Python number ``forward``
    returns is a 0-d output (int64, the default float dtype, bool); ``None`` is no output.
    ``export_params=False`` makes the weights graph inputs instead of initializers;
    ``keep_initializers_as_inputs`` lists the initializers among the inputs too (so a runtime may
    override them). ``training``: ``TrainingMode.EVAL`` (the default) traces in eval mode,
    ``PRESERVE`` in the module's own mode, ``TRAINING`` in training mode (dropout and batch
    statistics). ``custom_opsets`` gives the version of each custom domain the nodes of Python
    converters use (``{"mylib": 2}``; default 1). ``custom_translation_table`` takes the dynamo
    exporter's converters, onnxscript functions by op, for this export (README, "Custom
    converters"). ``external_data`` writes the weights to
    ``<f>.data`` beside the model (by default only above protobuf's 2 GB). ``verify`` runs the
    model in onnxruntime on the example inputs, prints the largest differences per output and
    raises ``VerificationError`` on a mismatch. ``report`` writes a Markdown report
    (``<f>.report.md`` for True, or the path given), also when the export fails. ``verbose=True``
    prints the ONNX graph; ``False`` turns off the progress bars long exports show on a terminal.
    ``export_modules_as_functions``: ``True`` or a set of module classes (matched exactly, not
    subclasses) whose calls become ONNX local functions (opset 15 or later): each call of such a
    submodule is a node calling a FunctionProto of domain ``"fastonnx.functions"`` named after the
    class's qualified name (``torch.nn.modules.linear.Linear``). Calls whose bodies are equal
    (same ops, attributes, input types and constants) share one function; one whose body differs
    gets a function of its own, suffixed ``_1``, ``_2``... (so does each call of a module whose
    body holds control flow). Weights become function inputs. A selected module inside another is
    a function that the outer function calls; inside a control-flow branch or loop body, modules
    stay inlined in the subgraph. ``False`` (the default) inlines everything.
    ``tracer``: ``"auto"`` (the default) traces with torch.export and, when torch.export refuses
    (a data-dependent guard, Python that fake tensors cannot run) or fixes a requested dynamic axis
    at a test of its size in scripted code that the TorchScript graph keeps dynamic, with
    torch.jit.trace instead, saying why in one ``TracerFallbackWarning``; ``"export"`` and
    ``"jit"`` choose one front end. A
    ScriptModule always goes through the TorchScript front end. ``result.tracer`` says which ran.
    ``weights``: where the weights of a model on the meta device come from (README, "Models
    larger than memory"): a ``.safetensors`` file, a directory holding ``model.safetensors`` or
    ``model.safetensors.index.json``, or a mapping from names to tensors. They are streamed from
    the memory-mapped checkpoint to the file with bounded memory; ``weights_mode="reference"``
    makes the model point into the checkpoint's files instead of copying the weights it can;
    ``dtype`` (float16, bfloat16 or float32) converts the floating weights while streaming.
    ``optimize_for="onnxruntime"`` writes onnxruntime's fused ops (com.microsoft) where the graph
    matches them exactly, plain ONNX elsewhere (README, "Files for onnxruntime"); ``quantize``
    (``"int4"``, ``"int8"`` or a ``fastonnx.Quantization``) writes the MatMul weights
    quantized, computed from the weights as they are written: as onnxruntime's MatMulNBits, or
    (``Quantization(form="DequantizeLinear")``, opset 21 or more) as standard ONNX's blocked
    DequantizeLinear. The default is plain, standard ONNX.
    ``max_positions`` (with ``optimize_for``): the rotary position embeddings of fused attention
    become onnxruntime's RotaryEmbedding, reading cos/sin tables of that many positions computed
    from the model's own (a position at or past it is an error in onnxruntime); None leaves
    rotary as the graph computes it.
    Safe to call from several threads: exports run one at a time. Errors are
    ``fastonnx.ExportError`` subclasses (README, "Errors").
    """
    args, kwargs = check_model_inputs(model, args, kwargs)
    tracer = check_tracer(tracer, model)
    options = ExportOptions.from_arguments(
        f=f,
        input_names=input_names,
        output_names=output_names,
        opset_version=opset_version,
        export_params=export_params,
        keep_initializers_as_inputs=keep_initializers_as_inputs,
        training=training,
        custom_opsets=custom_opsets,
        external_data=external_data,
        verify=verify,
        report=report,
        verbose=verbose,
        export_modules_as_functions=export_modules_as_functions,
        optimize_for=optimize_for,
        quantize=quantize,
        max_positions=max_positions,
    )
    if tracer == "jit" and options.functions:
        raise ArgumentError("export_modules_as_functions needs torch.export's module scopes: pass tracer='export'")
    check_weights_mode(weights, weights_mode, dtype)
    if options.verify:
        check_verifiable(model)
    streamed = Streamed(open_source(weights), weights_mode, dtype) if weights is not None else None
    if streamed is not None and streamed.mode == "reference" and options.f is not None:
        streamed.check_referable(options.f)  # (said before any work)
    if streamed is not None:
        model, args, kwargs = prepare(model, args, kwargs, dtype)
    request = resolve_dynamic(model, args, kwargs, dynamic_shapes, dynamic_axes, options.input_names)
    exporter = _Exporter(options, tracer, streamed)
    # Weights copied from a checkpoint into the file written here: read while tracing.
    copied = streamed is not None and streamed.mode == "copy" and options.f is not None
    reading = started_reading(model, streamed.checkpoint) if copied else None  # type: ignore[union-attr]
    try:
        with translation_table(custom_translation_table):
            result = exporter.run(model, args, kwargs, request)
    finally:
        if reading is not None:
            reading.stop()
    converted = exporter.last
    assert converted is not None  # (the try that converted the result)
    ignored_keys = request.ignored_keys(result.input_names, result.output_names)
    warn_static(converted.static_axes, converted.shared_names, ignored_keys, converted.ignored_axes, request)
    warn_constrained(converted.constrained_axes)
    if options.verbose:
        print(_report.graph_text(result.model_proto))
    if options.verify:
        _verify(model, result, args, kwargs)
    if options.f is not None:
        exporter.write(result, options.f)
    if options.report_path is not None:
        exporter.write_report(model, result=result)
    return result


def _verify(model, result: ExportResult, args: tuple, kwargs: dict | None) -> None:
    diffs = result.verify(*args, **(kwargs or {}))
    # A dynamic axis the trace quietly fixed computes a wrong model at other sizes: check there too.
    diffs += result.verify_other_sizes(*args, **(kwargs or {}))
    if not all(d.ok for d in diffs):
        from .verify import format_diffs

        raise VerificationError("onnxruntime's outputs differ from PyTorch's:\n" + format_diffs(diffs))


def _eager_failure(model, args: tuple, kwargs: dict | None, training: TrainingMode) -> Exception | None:
    """The error eager PyTorch raises on the example inputs, if it raises one. Asked once an
    export has failed, never before: a forward pass would add its time to every export."""
    if not isinstance(model, torch.nn.Module):
        return None
    tensors = [t for t in (*model.parameters(), *model.buffers()) if t.device.type == "meta"]
    leaves = torch.utils._pytree.tree_leaves((args, kwargs or {}))
    if tensors or any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in leaves):
        return None  # nothing to run: the weights or inputs have no data
    try:
        with torch.no_grad(), traced_in_mode(model, training):
            model(*args, **(kwargs or {}))
    except Exception as e:  # noqa: BLE001 - whatever eager raises is the answer
        return e
    return None


@dataclass
class _Try:
    """One try at the export: a strategy capturing the model, or a captured program converted.
    A new one each time, so that what the report, the warnings and the next try read is this
    one's: ``attempt``, the attempt at the dynamic-shapes request it traced under."""

    attempt: Attempt
    front_end: str | None = None
    declined: list[str] = field(default_factory=list)  # why strategies before it declined
    timings: dict[str, float] = field(default_factory=dict)
    aten_ops: Counter = field(default_factory=Counter)
    decomposed: Counter = field(default_factory=Counter)
    # Requested dynamic axes the lowering found static, names of one size, output axes ignored.
    static_axes: list[StaticAxis] = field(default_factory=list)
    shared_names: list[tuple[str, str, str]] = field(default_factory=list)
    ignored_axes: list[str] = field(default_factory=list)
    constrained_axes: list[tuple[str, int, str]] = field(default_factory=list)  # see SizeNames


class _Exporter:
    """The phases of one export, with what the report needs from each."""

    def __init__(self, options: ExportOptions, tracer: str = "export", streamed: Streamed | None = None):
        self.options = options
        self.strategies = STRATEGIES[tracer]
        self.streamed = streamed
        self.progress = Progress(options.verbose)
        self.last: _Try | None = None  # the try under way, or the last one made

    def run(self, model, args: tuple, kwargs: dict | None, request: Request) -> ExportResult:
        """The converted model; on a failure to convert, the report (when asked for) says why."""
        try:
            return self._convert_small_sizes_dynamic(model, args, kwargs, Attempt(request))
        except (ArgumentError, WriteError):
            raise
        except (UnsupportedOpsError, ConversionError, TraceError) as e:
            failure: ExportError = e
        except ExportError:
            raise
        except Exception as e:  # a failure no phase turned into an ExportError is a bug
            raise InternalError(f"exporting {type(model).__name__} failed unexpectedly: {type(e).__name__}: {e}") from e
        # A graph that does not trace or convert from inputs eager PyTorch itself refuses: eager's
        # error names the cause (an int64 tensor into a Linear, an input of the wrong shape), the
        # tracer's or converter's a symptom. Not for a kernel eager lacks (an op with a fake
        # implementation and a converter needs none). Asked outside the handler, so that eager's
        # error is its own.
        eager = (
            _eager_failure(model, args, kwargs, self.options.training)
            if isinstance(failure, (ConversionError, TraceError))
            else None
        )
        if eager is not None and not isinstance(eager, NotImplementedError):
            refused = ArgumentError(
                "the example inputs do not run in the model itself: eager PyTorch fails on them too, so no "
                "exporter can trace it; give inputs the model takes (their dtypes and shapes) or fix the "
                # (its first paragraph: torch's dispatch errors go on with every backend's kernel)
                "model:\n" + describe_failure(eager).split("\n\n")[0]
            )
            refused.torch_log = getattr(failure, "torch_log", [])  # type: ignore[attr-defined]
            raise refused from eager
        if self.options.report_path is not None and not isinstance(failure, TraceError):
            self.write_report(model, error=failure)
        raise failure

    def _convert_small_sizes_dynamic(self, model, args: tuple, kwargs: dict | None, start: Attempt) -> ExportResult:
        """The converted model, the requested axes traced at size 0 or 1 dynamic (_small_sizes).
        When the export of such a model fails past the trace (a decomposition tests such a size,
        a converter needs a rank a squeeze at run time leaves open), it is exported again with
        them static, as torch.export makes them, and the warning says why: the next try starts
        from the failed one's attempt, with those of them it left dynamic made static."""
        if not start.small_axes():
            return self._convert(model, args, kwargs, start, dynamic_small=False)
        try:
            # (the warnings of a try that fails are not the export's)
            with warnings.catch_warnings(record=True) as caught:
                result = self._convert(model, args, kwargs, start, dynamic_small=True)
        except (ArgumentError, WriteError):
            raise
        except Exception as e:  # any failure: then the export as torch.export traces it decides
            assert self.last is not None  # (set by the try that failed)
            failed = self.last.attempt
            small = failed.small_axes()
            if not small:  # the trace made them static already: a failure of its own
                raise
            first = (str(e).splitlines() or [""])[0]
            detail = first if isinstance(e, ExportError) else f"{type(e).__name__}: {first}"
            retry = failed.again()
            for i, axis in small:
                retry.make_static(i, axis, f"(exporting it as a dynamic size failed: {detail})")
        else:
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            return result
        return self._convert(model, args, kwargs, retry, dynamic_small=False)

    def _convert(self, model, args: tuple, kwargs: dict | None, start: Attempt, dynamic_small: bool) -> ExportResult:
        """The program of the front end chosen (see frontends/choice.py), converted. Where the
        TorchScript front end's program was taken over torch.export's (for tests in scripted code)
        and fails to convert, torch.export's is converted, as without it."""
        check_module_weights_on_inputs_device(model, args, kwargs)
        call = Call(model, args, kwargs, self.options.training, self.options.input_names, dynamic_small)
        t0 = time.perf_counter()
        with cache_hint(), traceable_experts(model), self.progress.phase("tracing"), held_torch_logs() as torch_logs:
            captures = self._capture(call, start)
        seconds = time.perf_counter() - t0
        taken = next((c for c in reversed(captures) if c.program is not None), None)
        if taken is None:  # torch.export refused, and tracer="export" tries nothing else
            refusal = next(c.error for c in captures if c.error is not None)
            refusal.torch_log = torch_logs.lines()  # type: ignore[attr-defined]
            raise refusal
        torch_logs.show_warnings()
        declined = [c.declined for c in captures if c.declined]
        try:
            result = self._convert_traced(model, taken, seconds, declined)
        except (ArgumentError, WriteError):
            raise
        except Exception:  # any failure of the program taken instead: torch.export's decides
            if taken.replaces is None:
                raise
            return self._convert_traced(model, taken.replaces, seconds, declined)
        if taken.replaces is not None:
            warn(taken.warning, TracerFallbackWarning)
        return result

    def _capture(self, call: Call, start: Attempt) -> list[Capture]:
        """What the strategies of the tracer captured, in order, each under a new attempt from
        ``start``."""
        captures: list[Capture] = []
        for strategy in self.strategies:
            attempt = start.again()
            self.last = _Try(attempt)
            capture = strategy(call, attempt, captures)
            if capture is not None:
                captures.append(capture)
        return captures

    def _convert_traced(self, model, capture: Capture, trace_seconds: float, declined: list[str]) -> ExportResult:
        options, attempt = self.options, capture.attempt
        ep: Any = capture.program  # an ExportedProgram, or the JitProgram that stands in for one
        assert ep is not None  # (a capture with a program)
        request = attempt.request
        front_end = ep.front_end if isinstance(ep, JitProgram) else "torch.export"
        self.last = tried = _Try(attempt, front_end, declined, {"trace": trace_seconds})
        timings = tried.timings
        if self.streamed is not None:
            bind(ep, model, self.streamed.checkpoint, self.streamed.dtype)
        else:
            check_weights_have_data(ep)

        t0 = time.perf_counter()
        graph = None  # the program's graph, or a copy with its mutated tensors functional
        with self.progress.phase("functionalizing"):
            if isinstance(ep, JitProgram):
                ep = functionalized(ep)
            elif program_needs_functionalization(ep):
                graph = functional_graph(ep)
                if graph is None:
                    ep = functionalize(ep)
        timings["functionalize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        decomposed = tried.decomposed
        with self.progress.phase("decomposing"):
            main = self._prepare(graph if graph is not None else ep.graph, ep.graph_module, decomposed)
            # The functions of control-flow ops (cond branches, loop bodies), prepared the same way.
            bodies = collect_bodies(main, lambda module: self._prepare(module.graph, module, decomposed))
        timings["decompose"] = time.perf_counter() - t0

        tried.aten_ops = _report.aten_histogram([main, *bodies.values()])
        check_supported([main, *bodies.values()])
        check_running_statistics_unread([main, *bodies.values()])
        session = _C.Session(options.opset, options.keep_initializers_as_inputs)
        for domain, version in options.custom_opsets.items():
            session.set_domain_version(domain, version)
        if self.streamed is not None and self.streamed.mode == "reference":
            session.pin_weights()  # folded (transposed) weights would be copies: the Transposes stay
        scopes = ModuleScopes(session, options.functions) if options.functions else None
        lowering = Lowering(ep, session, main, options.opset, bodies, scopes)
        t0 = time.perf_counter()
        # An ExportedProgram's dynamic_axes name its outputs' sizes before anything is converted.
        program_outputs = request.output_axes if request.names_program else None
        lowering.add_placeholders(
            options.input_names,
            attempt.dim_names,
            options.export_params,
            self._why_static(ep, attempt) if attempt.fixed is not None or isinstance(ep, JitProgram) else None,
            options.output_names,
            program_outputs,
        )
        if isinstance(ep, JitProgram) and not request.relaxed and lowering.sizes.static_axes:
            axis = lowering.sizes.static_axes[0]
            raise TraceError(f"dynamic_shapes: {axis.what} axis {axis.axis} is fixed to {axis.size} {axis.why}")
        if request.names_program and lowering.sizes.static_axes:
            refuse_static_in_program(lowering.sizes.static_axes)
        input_names, inputs, weights = options.input_names, len(lowering.input_names), lowering.weight_count
        if input_names is not None and lowering.unused_input_names:
            raise ArgumentError(
                f"input_names has {len(input_names)} names but the model has {inputs} tensor inputs and "
                f"{weights} parameters and buffers (which the names after the inputs name); give at most "
                f"{inputs + weights}"
            )
        with self.progress.stage("converting", total=len(main.live), unit="node") as bar:
            lowering.convert_nodes(bar.advance)
        outputs = lowering.set_outputs(options.output_names, None if request.names_program else request.output_axes)
        tried.static_axes, tried.shared_names, tried.ignored_axes, tried.constrained_axes = (
            lowering.sizes.static_axes,
            lowering.sizes.shared_names,
            lowering.sizes.ignored_axes,
            lowering.sizes.constrained_axes,
        )
        output_names = options.output_names
        if output_names is not None and len(output_names) > len(outputs):
            raise ArgumentError(
                f"output_names has {len(output_names)} names but the model has {len(outputs)} tensor "
                f"outputs; give at most {len(outputs)}"
            )
        # One Python->C++ call per node: its native side is the conversion proper, the rest is
        # lowering (walking the FX graph, encoding arguments).
        timings["convert"] = session.convert_seconds
        timings["lower"] = time.perf_counter() - t0 - session.convert_seconds

        t0 = time.perf_counter()
        native = session.finish(
            __version__, **finish_arguments(options.optimize_for, options.quantization, options.max_positions)
        )
        timings["passes"] = time.perf_counter() - t0
        return ExportResult(
            native,
            options.opset,
            lowering.input_names,
            outputs,
            ep,
            timings,
            model=model if isinstance(model, torch.nn.Module) else None,
            tracer=ep.front_end if isinstance(ep, JitProgram) else "torch.export",
            streamed=self.streamed,
            sizes_may_be_one=frozenset(lowering.may_be_one),
        )

    @staticmethod
    def _why_static(ep, attempt: Attempt):
        """why_static(input, axis, size) for Lowering.add_placeholders: from the trace's ShapeEnv
        and the replacements recorded while tracing (the TorchScript front end records its own)."""
        if isinstance(ep, JitProgram):
            return lambda i, axis, size: attempt.why.get(
                (i, axis), ep.fixed.get((i, axis), "(the TorchScript graph gives it that size)")
            )
        shape_env = ep_shape_env(ep)
        return lambda i, axis, size: attempt.why.get(
            (i, axis), why_static(shape_env, attempt.request.sources[i], axis, size, attempt.fixed or {})
        )

    @staticmethod
    def _prepare(graph: torch.fx.Graph, module: torch.fx.GraphModule, decomposed: Counter) -> PreparedGraph:
        """``graph`` (of ``module``: the program's, or a control-flow function's) with the ops that
        have no converter decomposed (in a copy, when any has, counted in ``decomposed``), and its
        live nodes."""
        attribute: Callable[[str], object] = functools.partial(getattr, module)
        if any(_needs_decomposition(n) for n in graph.nodes):
            decomposer = Decomposer(copy_graph(graph), decomposition_for)
            decomposer.run()
            graph, attribute = decomposer.graph, decomposer.attribute
            decomposed.update({str(op): n for op, n in decomposer.decomposed.items()})
        return PreparedGraph(graph, attribute, live_nodes(graph))

    def write(self, result: ExportResult, f: str | os.PathLike) -> None:
        t0 = time.perf_counter()
        with self.progress.stage("writing", total=None, unit="B", scale=True) as bar:
            result.save(f, external_data=self.options.external_data, progress=bar.advance, progress_total=bar.set_total)
        result.timings["write"] = time.perf_counter() - t0

    def write_report(self, model, result: ExportResult | None = None, error: Exception | None = None) -> None:
        assert self.options.report_path is not None and self.last is not None
        last = self.last
        text = _report.render(
            model_name=type(model).__name__,
            opset=self.options.opset,
            timings=last.timings,
            aten_ops=last.aten_ops,
            decomposed=last.decomposed,
            proto=result.model_proto if result is not None and result.native.weights_nbytes < (1 << 30) else None,
            pass_stats=result.native.pass_stats if result is not None else None,
            error=error,
            front_end=result.tracer if result is not None else last.front_end,
            declined=last.declined,
        )
        write_atomically({self.options.report_path: lambda tmp: Path(tmp).write_text(text)})


def _needs_decomposition(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    return Decomposer.inlines(node) or decomposition_for(node) is not None


__all__ = ["export", "ExportError"]

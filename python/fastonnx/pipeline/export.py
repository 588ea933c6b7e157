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
from pathlib import Path

import torch
from torch.export import ExportedProgram
from torch.onnx import TrainingMode

from .. import _C
from ..converters.autograd import functions_as_ops
from ..converters.onnxscript import translation_table
from ..converters.transformers import cache_hint, returns_cache
from ..core.files import write_atomically
from ..core.progress import Progress
from ..core.version import __version__
from ..dynamic.request import Request, StaticAxis, fixing_frame, in_scripted_code, warn_static, why_static
from ..dynamic.request import resolve as resolve_dynamic
from ..errors import (
    ArgumentError,
    ConversionError,
    ExportError,
    InternalError,
    TraceError,
    UnsupportedOpsError,
    VerificationError,
    WriteError,
)
from ..frontends.choice import check_tracer, choose_scripted, fall_back, input_names, trace_jit
from ..frontends.export.trace import (
    ep_shape_env,
    functionalize,
    input_symbols,
    program_needs_functionalization,
    trace_requested,
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
from ..weights.source import Streamed, bind, check_weights_mode, open_source, prepare, read_while_tracing
from . import report as _report
from .options import (
    ExportOptions,
    check_model_inputs,
    check_module_weights_on_inputs_device,
    check_weights_have_data,
    checked_call,
)
from .result import ExportResult

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
    dimensions keep their names in the ONNX inputs and outputs. A Python number ``forward``
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
    )
    if tracer == "jit" and options.functions:
        raise ArgumentError("export_modules_as_functions needs torch.export's module scopes: pass tracer='export'")
    check_weights_mode(weights, weights_mode, dtype)
    streamed = Streamed(open_source(weights), weights_mode, dtype) if weights is not None else None
    if streamed is not None:
        model, args, kwargs = prepare(model, args, kwargs, dtype)
    request = resolve_dynamic(model, args, kwargs, dynamic_shapes, dynamic_axes, options.input_names)
    exporter = _Exporter(options, tracer, streamed)
    # Weights copied from a checkpoint into the file written here: read while tracing.
    copied = streamed is not None and streamed.mode == "copy" and options.f is not None
    reading = read_while_tracing(model, streamed.checkpoint) if copied else None  # type: ignore[union-attr]
    try:
        with translation_table(custom_translation_table):
            result = exporter.run(model, args, kwargs, request)
    finally:
        if reading is not None:
            reading.stop()
    request.ignore_unmatched_outputs(result.input_names, result.output_names)
    # warn_static <- export <- one_at_a_time <- checked_call <- the caller
    warn_static(exporter.static_axes, exporter.shared_names, exporter.ignored_axes, request, stacklevel=5)
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
    if isinstance(model, ExportedProgram):
        raise ArgumentError("verify=True needs the nn.Module to run eagerly; call result.verify() on the module")
    diffs = result.verify(*args, **(kwargs or {}))
    # A dynamic axis the trace quietly fixed computes a wrong model at other sizes: check there too.
    diffs += result.verify_other_sizes(*args, **(kwargs or {}))
    if not all(d.ok for d in diffs):
        from .verify import format_diffs

        raise VerificationError("onnxruntime's outputs differ from PyTorch's:\n" + format_diffs(diffs))


class _Exporter:
    """The phases of one export, with what the report needs from each."""

    def __init__(self, options: ExportOptions, tracer: str = "export", streamed: Streamed | None = None):
        self.options = options
        self.tracer = tracer
        self.front_end: str | None = None  # the one that traced, once one has
        self.streamed = streamed
        self.progress = Progress(options.verbose)
        self.timings: dict[str, float] = {}
        self.aten_ops: Counter = Counter()
        self.decomposed: Counter = Counter()
        self.static_axes: list[StaticAxis] = []
        self.shared_names: list[tuple[str, str, str]] = []
        self.ignored_axes: list[str] = []
        # The TorchScript front end taken over torch.export's trace (see _scripted_instead): the
        # request before torch.export's trace, and the warning's arguments; None when it is not.
        self.scripted: tuple | None = None
        self.scripted_refused = False  # its program failed to convert: torch.export's stays

    def run(self, model, args: tuple, kwargs: dict | None, request: Request) -> ExportResult:
        """The converted model; on a failure to convert, the report (when asked for) says why."""
        try:
            return self._convert_small_sizes_dynamic(model, args, kwargs, request)
        except (UnsupportedOpsError, ConversionError) as e:
            if self.options.report_path is not None:
                self.write_report(model, error=e)
            raise
        except ExportError:
            raise
        except Exception as e:  # a failure no phase turned into an ExportError is a bug
            raise InternalError(f"exporting {type(model).__name__} failed unexpectedly: {type(e).__name__}: {e}") from e

    def _convert_small_sizes_dynamic(self, model, args: tuple, kwargs: dict | None, request: Request) -> ExportResult:
        """The converted model, the requested axes traced at size 0 or 1 dynamic (_small_sizes).
        When the export of such a model fails past the trace (a decomposition tests such a size,
        a converter needs a rank a squeeze at run time leaves open), it is exported again with
        them static, as torch.export makes them, and the warning says why."""
        if not request.small_axes():
            return self._convert(model, args, kwargs, request, dynamic_small=False)
        try:
            # (the warnings of an attempt that fails are not the export's)
            with warnings.catch_warnings(record=True) as caught:
                result = self._convert(model, args, kwargs, request, dynamic_small=True)
        except (ArgumentError, WriteError):
            raise
        except Exception as e:  # any failure: then the export as torch.export traces it decides
            small = request.small_axes()
            if not small:  # the trace made them static already: a failure of its own
                raise
            first = (str(e).splitlines() or [""])[0]
            detail = first if isinstance(e, ExportError) else f"{type(e).__name__}: {first}"
            for i, axis in small:
                request.make_static(i, axis, f"(exporting it as a dynamic size failed: {detail})")
        else:
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            return result
        self.aten_ops, self.decomposed = Counter(), Counter()
        return self._convert(model, args, kwargs, request, dynamic_small=False)

    def _convert(self, model, args: tuple, kwargs: dict | None, request: Request, dynamic_small: bool) -> ExportResult:
        """The converted model. Where the TorchScript front end was taken over torch.export's trace
        for tests in scripted code (see _scripted_instead) and its program fails to convert, the
        export is torch.export's, as without it."""
        self.scripted = None
        try:
            result = self._convert_traced(model, args, kwargs, request, dynamic_small)
        except (ArgumentError, WriteError):
            raise
        except Exception:  # any failure of the program taken instead: torch.export's decides
            if self.scripted is None:
                raise
            request.restore(self.scripted[0])
            self.scripted, self.scripted_refused = None, True
            self.aten_ops, self.decomposed = Counter(), Counter()
            return self._convert_traced(model, args, kwargs, request, dynamic_small)
        if self.scripted is not None:
            # choose_scripted <- _convert <- run <- export <- one_at_a_time <- checked_call <- the caller
            choose_scripted(*self.scripted[1], stacklevel=7)
        return result

    def _convert_traced(
        self, model, args: tuple, kwargs: dict | None, request: Request, dynamic_small: bool
    ) -> ExportResult:
        options, timings = self.options, self.timings
        t0 = time.perf_counter()
        fixed: dict | None = {} if request.relaxed else None
        check_module_weights_on_inputs_device(model, args, kwargs)
        with cache_hint():
            ep = self._trace(model, args, kwargs, request, fixed, dynamic_small)
        self.front_end = ep.front_end if isinstance(ep, JitProgram) else "torch.export"
        timings["trace"] = time.perf_counter() - t0
        if self.streamed is not None:
            bind(ep, model, self.streamed.checkpoint, self.streamed.dtype)
        else:
            check_weights_have_data(ep)

        t0 = time.perf_counter()
        if isinstance(ep, JitProgram):
            ep = functionalized(ep)
        elif program_needs_functionalization(ep):
            ep = functionalize(ep)
        timings["functionalize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        main = self._prepare(ep.graph, ep.graph_module)
        # The functions of control-flow ops (cond branches, loop bodies), prepared the same way.
        bodies = collect_bodies(main, lambda module: self._prepare(module.graph, module))
        timings["decompose"] = time.perf_counter() - t0

        self.aten_ops = _report.aten_histogram([main, *bodies.values()])
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
        lowering.add_placeholders(
            options.input_names,
            request.dim_names,
            options.export_params,
            self._why_static(ep, request, fixed) if fixed is not None or isinstance(ep, JitProgram) else None,
        )
        if isinstance(ep, JitProgram) and not request.relaxed and lowering.static_axes:
            axis = lowering.static_axes[0]
            raise TraceError(f"dynamic_shapes: {axis.what} axis {axis.axis} is fixed to {axis.size} {axis.why}")
        input_names, inputs, weights = options.input_names, len(lowering.input_names), lowering.weight_count
        if input_names is not None and lowering.unused_input_names:
            raise ArgumentError(
                f"input_names has {len(input_names)} names but the model has {inputs} tensor inputs and "
                f"{weights} parameters and buffers (which the names after the inputs name); give at most "
                f"{inputs + weights}"
            )
        with self.progress.stage("converting", total=len(main.live), unit="node") as bar:
            lowering.convert_nodes(bar.advance)
        outputs = lowering.set_outputs(options.output_names, request.output_axes)
        self.static_axes, self.shared_names, self.ignored_axes = (
            lowering.static_axes,
            lowering.shared_names,
            lowering.ignored_axes,
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
        native = session.finish(__version__)
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

    def _trace(
        self, model, args: tuple, kwargs: dict | None, request: Request, fixed: dict | None, dynamic_small: bool
    ):
        """The program of the front end chosen (see _front_end)."""
        options = self.options
        if self.tracer == "jit":
            with traced_in_mode(model, options.training):
                return trace_jit(model, args, kwargs, request, options.input_names, dynamic_small)
        requested = request.snapshot()
        try:
            # (torch.jit's tracer records an autograd.Function itself: only torch.export needs
            # Functions with a symbolic made ops, see _autograd)
            with functions_as_ops():
                ep = trace_requested(model, args, kwargs, request, options.training, fixed, dynamic_small)
        except TraceError as refused:
            # A dynamic_shapes request torch.export finds the model violates stays refused: the
            # TorchScript front end would not make the axis any more dynamic. So does a KV cache
            # among the outputs (cache_hint says what to do), which no front end can return.
            if (
                self.tracer == "export"
                or isinstance(model, ExportedProgram)
                or _violates_constraints(refused)
                or returns_cache(refused)
            ):
                raise
            try:
                with traced_in_mode(model, options.training):
                    program = trace_jit(model, args, kwargs, request, options.input_names, dynamic_small)
            except ExportError as e:
                raise TraceError(f"{refused}\nThe TorchScript front end failed too: {e}") from refused
            # fall_back <- _trace <- _convert <- run <- export <- one_at_a_time <- checked_call <- the caller
            fall_back(model, refused, program, stacklevel=8)
            return program
        if (
            self.tracer == "auto"
            and not self.scripted_refused
            and not isinstance(model, ExportedProgram)
            and fixed is not None
        ):
            scripted = self._fixed_in_scripted_code(ep, request, requested, fixed)
            if scripted:
                instead = self._scripted_instead(model, args, kwargs, request, requested, scripted, dynamic_small)
                if instead is not None:
                    return instead
        return ep

    @staticmethod
    def _fixed_in_scripted_code(
        ep: ExportedProgram, request: Request, requested: tuple, fixed: dict
    ) -> dict[tuple[int, int], tuple[bool, str]]:
        """The requested axes torch.export's trace ``ep`` made static ((tensor input, axis) -> whether
        a test in scripted code did it, and why), when a test in scripted code made one
        (``requested``: the request's snapshot before the trace)."""
        symbols = input_symbols(ep)
        shape_env = ep_shape_env(ep)
        static: dict[tuple[int, int], tuple[bool, str]] = {}
        for i, axes in enumerate(requested[0]):
            for axis in axes:
                if axis not in request.axes[i]:  # (a size of 0 or 1 the trace's tests made static)
                    static[(i, axis)] = ((i, axis) in request.scripted, request.why.get((i, axis), ""))
                elif (i, axis) not in symbols or getattr(symbols[(i, axis)], "is_number", False):
                    source, size = request.sources[i], request.shapes_of_inputs[i][axis]
                    frame = fixing_frame(shape_env, source, axis, fixed)
                    static[(i, axis)] = (in_scripted_code(frame), why_static(shape_env, source, axis, size, fixed))
        return static if any(scripted for scripted, _ in static.values()) else {}

    def _scripted_instead(
        self,
        model,
        args: tuple,
        kwargs: dict | None,
        request: Request,
        requested: tuple,
        export_static: dict[tuple[int, int], tuple[bool, str]],
        dynamic_small: bool,
    ) -> JitProgram | None:
        """The TorchScript front end's program where torch.export fixed a requested axis at a test
        in scripted code (``export_static``), which the TorchScript graph keeps as an If or a Loop
        (see choose_scripted for the rule); else None, and the request as torch.export's trace left
        it."""
        traced = request.snapshot()
        request.restore(requested)
        try:
            with traced_in_mode(model, self.options.training):
                program: JitProgram | None = trace_jit(
                    model, args, kwargs, request, self.options.input_names, dynamic_small, every_size=True
                )
        except (ArgumentError, WriteError):
            raise
        except Exception:  # noqa: BLE001 - any failure of the TorchScript front end: torch.export's trace stays
            program = None
        if program is not None:
            symbols = program.input_symbols
            jit_static = {
                (i, axis)
                for i, axes in enumerate(requested[0])
                for axis in axes
                if axis not in request.axes[i]
                or (i, axis) not in symbols
                or program.shape_env.simplify(symbols[(i, axis)]).is_number
            }
            if not program.tracer_warnings and jit_static < export_static.keys():
                fixed = [axis for axis in export_static if axis not in jit_static]
                names = self.options.input_names or input_names(model, args, kwargs)
                # (said once the program converts, see _convert)
                self.scripted = (requested, (model, fixed, export_static, names))
                return program
        request.restore(traced)
        return None

    @staticmethod
    def _why_static(ep, request: Request, fixed: dict | None):
        """why_static(input, axis, size) for Lowering.add_placeholders: from the trace's ShapeEnv
        and the replacements recorded while tracing (the TorchScript front end records its own)."""
        if isinstance(ep, JitProgram):
            return lambda i, axis, size: request.why.get(
                (i, axis), ep.fixed.get((i, axis), "(the TorchScript graph gives it that size)")
            )
        vals = [n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"]
        mode = next((v.fake_mode for v in vals if hasattr(v, "fake_mode")), None)
        shape_env = getattr(mode, "shape_env", None)
        return lambda i, axis, size: request.why.get(
            (i, axis), why_static(shape_env, request.sources[i], axis, size, fixed or {})
        )

    def _prepare(self, graph: torch.fx.Graph, module: torch.fx.GraphModule) -> PreparedGraph:
        """``graph`` (of ``module``: the program's, or a control-flow function's) with the ops that
        have no converter decomposed (in a copy, when any has), and its live nodes."""
        attribute: Callable[[str], object] = functools.partial(getattr, module)
        if any(_needs_decomposition(n) for n in graph.nodes):
            decomposer = Decomposer(copy_graph(graph), decomposition_for)
            decomposer.run()
            graph, attribute = decomposer.graph, decomposer.attribute
            self.decomposed += Counter({str(op): n for op, n in decomposer.decomposed.items()})
        return PreparedGraph(graph, attribute, live_nodes(graph))

    def write(self, result: ExportResult, f: str | os.PathLike) -> None:
        t0 = time.perf_counter()
        with self.progress.stage("writing", total=None, unit="B", scale=True) as bar:
            result.save(f, external_data=self.options.external_data, progress=bar.advance, progress_total=bar.set_total)
        result.timings["write"] = time.perf_counter() - t0

    def write_report(self, model, result: ExportResult | None = None, error: Exception | None = None) -> None:
        assert self.options.report_path is not None
        text = _report.render(
            model_name=type(model).__name__,
            opset=self.options.opset,
            timings=self.timings,
            aten_ops=self.aten_ops,
            decomposed=self.decomposed,
            proto=result.model_proto if result is not None and result.native.weights_nbytes < (1 << 30) else None,
            pass_stats=result.native.pass_stats if result is not None else None,
            error=error,
            front_end=result.tracer if result is not None else self.front_end,
        )
        write_atomically({self.options.report_path: lambda tmp: Path(tmp).write_text(text)})


def _violates_constraints(error: BaseException) -> bool:
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConstraintViolationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _needs_decomposition(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    return Decomposer.inlines(node) or decomposition_for(node) is not None


__all__ = ["export", "ExportError"]

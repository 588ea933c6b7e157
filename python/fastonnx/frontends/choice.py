"""Choosing the front end: torch.export, or TorchScript (torch.jit.trace, or a ScriptModule's
scripted graph) for what torch.export refuses. Both give a program the one lowering takes.

The choice is an ordered tuple of capture strategies per ``tracer`` (``STRATEGIES``), which the
pipeline tries in turn, each under a new ``Attempt`` at the dynamic-shapes request: a strategy
traces one way and returns a ``Capture`` (its program, or why it declined), or None when an
earlier strategy's program stands. The program converted is the last one captured.

``tracer="auto"`` tries torch.export first and, when it refuses to trace (a ``TraceError``: a
data-dependent guard, Python code fake tensors cannot run), traces with torch.jit instead and
says so in one ``TracerFallbackWarning``: why torch.export refused, and what the TorchScript
trace fixed (the tracer's own warnings). So it does when torch.export fixed a requested dynamic
axis at a test in scripted code and the TorchScript front end keeps it dynamic (see
torch_jit_for_scripted_code). An op without a converter is not a trace failure and never falls
back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import Dim, ExportedProgram
from torch.onnx import TrainingMode

from ..converters.autograd import functions_as_ops
from ..converters.transformers import returns_cache
from ..core.stack import warn
from ..dynamic.request import Attempt, fixing_frame, in_scripted_code, tensor_input_names, why_static
from ..dynamic.small_sizes import Tests, fixed_by_numbers, judge, settle
from ..errors import ArgumentError, ExportError, TraceError, TracerFallbackWarning, WriteError
from .export.trace import ep_shape_env, input_symbols, op_without_kernel, trace_requested, traced_in_mode
from .jit.trace import trace_graph
from .jit.translate import JitProgram, flat_tensors, translate

TRACERS = ("auto", "export", "jit")


def check_tracer(tracer: object, model: object) -> str:
    if tracer not in TRACERS:
        raise ArgumentError(f"tracer must be one of {', '.join(map(repr, TRACERS))}, got {tracer!r}")
    if isinstance(model, ExportedProgram) and tracer == "jit":
        raise ArgumentError("tracer='jit' traces an nn.Module; an ExportedProgram is already traced by torch.export")
    if isinstance(model, torch.jit.ScriptModule) and tracer == "export":
        raise ArgumentError(
            "a ScriptModule goes through the TorchScript front end; pass tracer='auto' or 'jit', or the "
            "original nn.Module to trace with torch.export"
        )
    return "jit" if isinstance(model, torch.jit.ScriptModule) else str(tracer)


def input_names(model, args: tuple, kwargs: dict | None) -> list[str]:
    """The default names of the flattened tensor inputs, as torch.export names its placeholders
    (``x``, ``pair_0``, ``d_a``), a ScriptModule's too (from its compiled schema's argument names)."""
    return tensor_input_names(model, args, kwargs or {})


def jit_dynamic_axes(attempt: Attempt, n_inputs: int) -> list[dict[int, str]]:
    """Each tensor input's dynamic axes (axis -> name), without those the attempt made static.
    torch.export's unnamed ``Dim.AUTO`` and ``Dim.DYNAMIC`` have no place here: the TorchScript
    front end needs names."""
    request = attempt.request
    if request.shapes is not None and not request.relaxed:
        named = sum(len(d) for d in request.dim_names)
        unnamed = [
            s
            for s in torch.utils._pytree.tree_leaves(attempt.shapes, is_leaf=lambda x: isinstance(x, dict))
            if isinstance(s, dict)
            for d in s.values()
            if d is not None and not isinstance(d, Dim) and d != Dim.STATIC
        ]
        if unnamed and named < len(unnamed):
            raise ArgumentError(
                "the TorchScript front end takes dynamic dimensions by name: give dynamic_axes "
                "({'x': {0: 'batch'}}) or named dims in dynamic_shapes ({'x': {0: 'batch'}})"
            )
    axes = [request.dim_names[i] if i < len(request.dim_names) else {} for i in range(n_inputs)]
    dynamic = attempt.axes
    return [
        {a: name for a, name in named.items() if i >= len(dynamic) or a in dynamic[i]} for i, named in enumerate(axes)
    ]


def trace_jit(
    model,
    args: tuple,
    kwargs: dict | None,
    attempt: Attempt,
    names: Sequence[str] | None,
    dynamic_small: bool = True,
    every_size: bool = False,
) -> JitProgram:
    """The TorchScript front end's program. ``names`` are the user's input_names (the defaults
    fill the rest). With ``dynamic_small``, the dynamic axes whose example size is 0 or 1 are
    dynamic too (see _small_sizes): the numbers the model's Python code took from sizes are traced
    beside (the trace keeps only the example's), and an axis one of them or a guard of the
    translation does not let vary is made static (``Attempt.make_static`` says why). With
    ``every_size``, so are the numbers the model's own code takes from any dynamic size (those
    torch's code takes decide how torch computes, which the ONNX ops decide again at run time)."""
    tensors = flat_tensors(args, kwargs)
    default = input_names(model, args, kwargs)
    chosen = [names[i] if names and i < len(names) else default[i] for i in range(len(tensors))]
    small = _small_axes(tensors, jit_dynamic_axes(attempt, len(tensors))) if dynamic_small else []
    graph = trace_graph(model, args, kwargs, read_sizes=bool(small) or every_size, library_reads=bool(small))
    while True:
        dynamic = jit_dynamic_axes(attempt, len(tensors))
        small = _small_axes(tensors, dynamic) if dynamic_small else []
        program = translate(graph, tensors, chosen, dynamic, small_sizes=bool(small))
        symbols = program.input_symbols
        unsound: dict[tuple[int, int], str] = {}
        verdict = None
        if small:
            verdict = judge(program.shape_env, Tests(program.guard_lines), program.size_reads)
            unsound = {
                (i, axis): verdict.unsound[symbols[(i, axis)]]
                for i, axis in small
                if symbols.get((i, axis)) in verdict.unsound
            }
        if every_size and not unsound:
            fixed = fixed_by_numbers(program.shape_env, program.size_reads, verdict.domains if verdict else None)
            unsound = {axis: fixed[symbol] for axis, symbol in symbols.items() if symbol in fixed}
        if not unsound:
            if verdict is not None:
                settle(program.shape_env, program.range_constraints, verdict.domains)
            break
        for (i, axis), why in unsound.items():
            attempt.make_static(i, axis, why)
    if any(t.is_quantized for t in tensors):
        # A quantized input is three graph inputs (integers, scale, zero point); the lowering
        # reads the dynamic axes per graph input.
        attempt.dim_names = [
            d for t, axes in zip(tensors, dynamic) for d in ([axes, {}, {}] if t.is_quantized else [axes])
        ]
    program.front_end = "torch.jit.script" if isinstance(model, torch.jit.ScriptModule) else "torch.jit.trace"
    return program


def _small_axes(tensors: Sequence[torch.Tensor], dynamic: Sequence[dict[int, str]]) -> list[tuple[int, int]]:
    """The dynamic axes whose example size is 0 or 1, (tensor input, axis)."""
    return [(i, axis) for i, (t, axes) in enumerate(zip(tensors, dynamic)) for axis in axes if t.shape[axis] in (0, 1)]


@dataclass(frozen=True)
class Call:
    """What every strategy traces: the model and its example inputs, the mode to trace in, the
    user's input names, and whether requested axes traced at size 0 or 1 are tried dynamic."""

    model: Any  # an nn.Module (a ScriptModule too) or an ExportedProgram
    args: tuple
    kwargs: dict | None
    training: TrainingMode
    input_names: Sequence[str] | None
    dynamic_small: bool


@dataclass(frozen=True)
class Capture:
    """What a strategy made of the model: the program it traced under ``attempt`` (the axes it made
    static, and why), or, without one, why it declined (``error``: torch.export's refusal, which
    the TorchScript front end quotes and ``tracer="export"`` raises)."""

    attempt: Attempt
    program: ExportedProgram | JitProgram | None = None
    declined: str = ""
    error: TraceError | None = None
    # The earlier capture whose program this one's is taken over: converted instead when this one
    # fails to convert. ``warning``, the TracerFallbackWarning that says so once this one converts.
    replaces: Capture | None = None
    warning: str = ""


# A strategy: the capture of the call under a new attempt, given the earlier strategies' captures;
# None when it has nothing to try (an earlier one's program stands).
Strategy = Callable[[Call, Attempt, Sequence[Capture]], Capture | None]


def torch_export(call: Call, attempt: Attempt, earlier: Sequence[Capture]) -> Capture:
    """torch.export's program (an ExportedProgram given is its own), or its refusal. A refusal no
    other front end gets past is raised: a dynamic_shapes request the model violates (the
    TorchScript front end would not make the axis any more dynamic), a KV cache among the outputs
    (cache_hint says what to do), which no front end can return, an op with no kernel and no fake
    implementation, which torch.jit.trace cannot run either."""
    try:
        # (torch.jit's tracer records an autograd.Function itself: only torch.export needs
        # Functions with a symbolic made ops, see converters/autograd)
        with functions_as_ops():
            program = trace_requested(call.model, call.args, call.kwargs, attempt, call.training, call.dynamic_small)
    except TraceError as refused:
        if _violates_constraints(refused) or returns_cache(refused) or op_without_kernel(refused) is not None:
            raise
        return Capture(attempt, declined=(str(refused).splitlines() or [""])[0], error=refused)
    return Capture(attempt, program)


def torch_jit(call: Call, attempt: Attempt, earlier: Sequence[Capture]) -> Capture | None:
    """The TorchScript front end's program: torch.jit.trace, or a ScriptModule's scripted graph.
    After torch.export refused (an earlier capture's ``error``), the one TracerFallbackWarning
    says why, and what the trace fixed; a failure then is a TraceError giving both causes."""
    if any(c.program is not None for c in earlier):
        return None
    refused = next((c.error for c in earlier if c.error is not None), None)
    try:
        with traced_in_mode(call.model, call.training):
            # (every_size: torch.jit.trace keeps only the branch the example took of a test of a
            # size in the model's code, `if h % 2 == 0`, so the numbers the code takes from sizes
            # are traced beside, and an axis one of them varies over is made static)
            program = trace_jit(
                call.model, call.args, call.kwargs, attempt, call.input_names, call.dynamic_small, every_size=True
            )
    except ExportError as e:
        if refused is None:
            raise
        raise TraceError(f"{refused}\nThe TorchScript front end failed too: {e}") from refused
    if refused is not None:
        warn(_fallback_warning(call.model, refused, program), TracerFallbackWarning)
    return Capture(attempt, program)


def torch_jit_for_scripted_code(call: Call, attempt: Attempt, earlier: Sequence[Capture]) -> Capture | None:
    """The TorchScript front end's program taken over torch.export's trace of a module when that
    trace fixed requested axes (of ``dynamic_axes``) at tests in scripted code.

    torch.export runs a ``torch.jit.script`` function's Python, so its test of a size
    (``if x.size(0) == 2``, ``for i in range(x.size(0))``) is a guard that fixes the axis, where the
    TorchScript graph keeps a ``prim::If`` or ``prim::Loop`` on the size. The TorchScript front end
    is taken when it fixes no value of the example (no TracerWarning), no number the model's traced
    Python code takes from a size depends on it (``trace_jit(every_size=True)``), and it keeps
    dynamic every requested axis torch.export kept, and more; a test in the model's own Python code
    fixes the axis there too, so that torch.export's trace stays (the capture declines)."""
    exported = next((c for c in earlier if isinstance(c.program, ExportedProgram)), None)
    if exported is None or isinstance(call.model, ExportedProgram) or exported.attempt.fixed is None:
        return None
    requested = attempt.axes
    export_static = _fixed_in_scripted_code(exported, requested)
    if not export_static:
        return None
    try:
        with traced_in_mode(call.model, call.training):
            program = trace_jit(
                call.model, call.args, call.kwargs, attempt, call.input_names, call.dynamic_small, every_size=True
            )
    except (ArgumentError, WriteError):
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the TorchScript front end: torch.export's trace stays
        first = (str(e).splitlines() or [""])[0]
        return Capture(attempt, declined=f"{_FOR_SCRIPTED_CODE} failed: {type(e).__name__}: {first}")
    if program.tracer_warnings:
        return Capture(attempt, declined=f"{_FOR_SCRIPTED_CODE} fixed values of the example")
    symbols, dynamic = program.input_symbols, attempt.axes
    jit_static = {
        (i, axis)
        for i, axes in enumerate(requested)
        for axis in axes
        if axis not in dynamic[i]
        or (i, axis) not in symbols
        or program.shape_env.simplify(symbols[(i, axis)]).is_number
    }
    if not jit_static < export_static.keys():
        return Capture(attempt, declined=f"{_FOR_SCRIPTED_CODE} kept no more requested axes dynamic")
    fixed = [axis for axis in export_static if axis not in jit_static]
    names = call.input_names or input_names(call.model, call.args, call.kwargs)
    warning = _scripted_warning(call.model, fixed, export_static, names)
    return Capture(attempt, program, replaces=exported, warning=warning)


_FOR_SCRIPTED_CODE = "the TorchScript front end, for the axes torch.export fixed in scripted code,"

# The strategies of each ``tracer``, in the order they are tried.
STRATEGIES: dict[str, tuple[Strategy, ...]] = {
    "auto": (torch_export, torch_jit, torch_jit_for_scripted_code),
    "export": (torch_export,),
    "jit": (torch_jit,),
}


def _fixed_in_scripted_code(
    exported: Capture, requested: list[dict[int, object]]
) -> dict[tuple[int, int], tuple[bool, str]]:
    """The requested axes torch.export's trace (``exported``) made static ((tensor input, axis) ->
    whether a test in scripted code did it, and why), when a test in scripted code made one
    (``requested``: the axes dynamic before the trace)."""
    assert isinstance(exported.program, ExportedProgram) and exported.attempt.fixed is not None
    traced, fixed = exported.attempt, exported.attempt.fixed
    symbols = input_symbols(exported.program)
    shape_env = ep_shape_env(exported.program)
    dynamic = traced.axes
    static: dict[tuple[int, int], tuple[bool, str]] = {}
    for i, axes in enumerate(requested):
        for axis in axes:
            if axis not in dynamic[i]:  # (a size of 0 or 1 the trace's tests made static)
                static[(i, axis)] = ((i, axis) in traced.scripted, traced.why.get((i, axis), ""))
            elif (i, axis) not in symbols or getattr(symbols[(i, axis)], "is_number", False):
                source, size = traced.request.sources[i], traced.request.shapes_of_inputs[i][axis]
                frame = fixing_frame(shape_env, source, axis, fixed)
                static[(i, axis)] = (in_scripted_code(frame), why_static(shape_env, source, axis, size, fixed))
    return static if any(scripted for scripted, _ in static.values()) else {}


def _violates_constraints(error: BaseException) -> bool:
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConstraintViolationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _fallback_warning(model, export_error: TraceError, program: JitProgram) -> str:
    """The one warning of a fallback to the TorchScript front end."""
    first, *rest = str(export_error).splitlines()
    where = [line.strip() for line in rest[:2] if line.strip().startswith(("at ", "File "))]
    lines = [
        f"torch.export could not trace {type(model).__name__}, so it was traced with torch.jit.trace "
        f"(pass tracer='jit' to choose that front end, tracer='export' to fail instead).",
        "torch.export refused: " + first.split(": ", 1)[-1] + (f" ({where[0]})" if where else ""),
    ]
    if program.tracer_warnings:
        lines.append(
            "The TorchScript trace fixed these values to the example's (the model is exact only where they hold):"
        )
        lines += [f"  - {w}" for w in program.tracer_warnings]
    else:
        lines.append(
            "The TorchScript trace records one path through the model's Python control flow; "
            "verify=True checks the file at other sizes of the dynamic axes."
        )
    return "\n".join(lines)


def _scripted_warning(
    model,
    fixed: list[tuple[int, int]],
    export_static: dict[tuple[int, int], tuple[bool, str]],
    names: Sequence[str],
) -> str:
    """The one warning of ``tracer="auto"`` taking the TorchScript front end's program over a
    torch.export trace that fixed requested axes at tests in scripted code: ``fixed``, the axes
    (tensor input, axis) the TorchScript front end keeps dynamic; ``export_static``, why each
    requested axis was static in torch.export's trace; ``names``, the tensor inputs' names."""
    lines = [
        f"torch.export fixed requested dynamic axes of {type(model).__name__} at tests of their sizes in scripted "
        "code (torch.jit.script), which the TorchScript graph keeps as If and Loop nodes on the sizes, so it was "
        "traced with torch.jit.trace, where these axes stay dynamic (pass tracer='export' for torch.export's "
        "graph, static there):"
    ]
    for i, axis in fixed:
        name = names[i] if i < len(names) else f"input {i}"
        lines.append(f"  - input `{name}` axis {axis}: {export_static[(i, axis)][1].strip('()')}")
    return "\n".join(lines)

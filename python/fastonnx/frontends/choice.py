"""Choosing the front end: torch.export, or TorchScript (torch.jit.trace, or a ScriptModule's
scripted graph) for what torch.export refuses. Both give a program the one lowering takes.

``tracer="auto"`` tries torch.export first and, when it refuses to trace (a ``TraceError``: a
data-dependent guard, Python code fake tensors cannot run), traces with torch.jit instead and
says so in one ``TracerFallbackWarning``: why torch.export refused, and what the TorchScript
trace fixed (the tracer's own warnings). So it does when torch.export fixed a requested dynamic
axis at a test in scripted code and the TorchScript front end keeps it dynamic (see
choose_scripted). An op without a converter is not a trace failure and never falls back.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence

import torch
from torch.export import Dim, ExportedProgram

from ..dynamic.request import Request, tensor_input_names
from ..dynamic.small_sizes import Tests, fixed_by_numbers, judge, settle
from ..errors import ArgumentError, TraceError, TracerFallbackWarning
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
    (``x``, ``pair_0``, ``d_a``); a ScriptModule's from its graph's argument names."""
    if isinstance(model, torch.jit.ScriptModule):
        params = [p for p in inspect.signature(model.forward).parameters if p != "self"]
        tensors = flat_tensors(args, kwargs)
        return [
            params[i] if i < len(params) and len(tensors) == len(args) else f"input_{i}" for i in range(len(tensors))
        ]
    return tensor_input_names(model, args, kwargs or {})


def jit_dynamic_axes(request: Request, n_inputs: int) -> list[dict[int, str]]:
    """Each tensor input's dynamic axes (axis -> name). torch.export's unnamed ``Dim.AUTO`` and
    ``Dim.DYNAMIC`` have no place here: the TorchScript front end needs names."""
    if request.shapes is not None and not request.relaxed:
        named = sum(len(d) for d in request.dim_names)
        unnamed = [
            s
            for s in torch.utils._pytree.tree_leaves(request.shapes, is_leaf=lambda x: isinstance(x, dict))
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
    # (without those Request.make_static made static)
    return [
        {a: name for a, name in named.items() if i >= len(request.axes) or a in request.axes[i]}
        for i, named in enumerate(axes)
    ]


def trace_jit(
    model,
    args: tuple,
    kwargs: dict | None,
    request: Request,
    names: Sequence[str] | None,
    dynamic_small: bool = True,
    every_size: bool = False,
) -> JitProgram:
    """The TorchScript front end's program. ``names`` are the user's input_names (the defaults
    fill the rest). With ``dynamic_small``, the dynamic axes whose example size is 0 or 1 are
    dynamic too (see _small_sizes): the numbers the model's Python code took from sizes are traced
    beside (the trace keeps only the example's), and an axis one of them or a guard of the
    translation does not let vary is made static (``Request.make_static`` says why). With
    ``every_size``, so are the numbers taken from any dynamic size (a front end chosen over a
    torch.export trace, which kept such tests as guards: see choose_scripted)."""
    tensors = flat_tensors(args, kwargs)
    default = input_names(model, args, kwargs)
    chosen = [names[i] if names and i < len(names) else default[i] for i in range(len(tensors))]
    small = _small_axes(tensors, jit_dynamic_axes(request, len(tensors))) if dynamic_small else []
    graph = trace_graph(model, args, kwargs, read_sizes=bool(small) or every_size)
    while True:
        dynamic = jit_dynamic_axes(request, len(tensors))
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
            request.make_static(i, axis, why)
    if any(t.is_quantized for t in tensors):
        # A quantized input is three graph inputs (integers, scale, zero point); the lowering
        # reads the dynamic axes per graph input.
        request.dim_names = [
            d for t, axes in zip(tensors, dynamic) for d in ([axes, {}, {}] if t.is_quantized else [axes])
        ]
    program.front_end = "torch.jit.script" if isinstance(model, torch.jit.ScriptModule) else "torch.jit.trace"
    return program


def _small_axes(tensors: Sequence[torch.Tensor], dynamic: Sequence[dict[int, str]]) -> list[tuple[int, int]]:
    """The dynamic axes whose example size is 0 or 1, (tensor input, axis)."""
    return [(i, axis) for i, (t, axes) in enumerate(zip(tensors, dynamic)) for axis in axes if t.shape[axis] in (0, 1)]


def fall_back(model, export_error: TraceError, program: JitProgram, stacklevel: int) -> None:
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
    warnings.warn("\n".join(lines), TracerFallbackWarning, stacklevel=stacklevel)


def choose_scripted(
    model,
    fixed: list[tuple[int, int]],
    export_static: dict[tuple[int, int], tuple[bool, str]],
    names: Sequence[str],
    stacklevel: int,
) -> None:
    """The one warning of ``tracer="auto"`` taking the TorchScript front end's program over a
    torch.export trace that fixed requested axes at tests in scripted code: ``fixed``, the axes
    (tensor input, axis) the TorchScript front end keeps dynamic; ``export_static``, why each
    requested axis was static in torch.export's trace; ``names``, the tensor inputs' names.

    torch.export runs a ``torch.jit.script`` function's Python, so its test of a size
    (``if x.size(0) == 2``, ``for i in range(x.size(0))``) is a guard that fixes the axis, where the
    TorchScript graph keeps a ``prim::If`` or ``prim::Loop`` on the size. The TorchScript front end
    is taken when it fixes no value of the example (no TracerWarning), no number the model's traced
    Python code takes from a size depends on it (``trace_jit(every_size=True)``), and it keeps
    dynamic every requested axis torch.export kept, and more; a test in the model's own Python code
    fixes the axis there too, so that torch.export's trace stays."""
    lines = [
        f"torch.export fixed requested dynamic axes of {type(model).__name__} at tests of their sizes in scripted "
        "code (torch.jit.script), which the TorchScript graph keeps as If and Loop nodes on the sizes, so it was "
        "traced with torch.jit.trace, where these axes stay dynamic (pass tracer='export' for torch.export's "
        "graph, static there):"
    ]
    for i, axis in fixed:
        name = names[i] if i < len(names) else f"input {i}"
        lines.append(f"  - input `{name}` axis {axis}: {export_static[(i, axis)][1].strip('()')}")
    warnings.warn("\n".join(lines), TracerFallbackWarning, stacklevel=stacklevel)

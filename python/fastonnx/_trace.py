"""Tracing: nn.Module -> torch.export.ExportedProgram, functionalized only when it must be."""

from __future__ import annotations

import contextlib

import torch
from torch.export import ExportedProgram
from torch.onnx import TrainingMode

from .errors import TraceError


@contextlib.contextmanager
def _mode(model: torch.nn.Module, training: TrainingMode):
    """Trace in the mode asked for (eval by default, as torch.onnx does) and restore the
    module's own afterwards."""
    modes = {m: m.training for m in model.modules()}
    if training == TrainingMode.EVAL:
        model.eval()
    elif training == TrainingMode.TRAINING:
        model.train()
    try:
        yield
    finally:
        for m, mode in modes.items():
            m.train(mode)


def trace(model, args: tuple, kwargs: dict | None, dynamic_shapes=None,
          training: TrainingMode = TrainingMode.EVAL) -> ExportedProgram:
    if isinstance(model, ExportedProgram):
        return model
    try:
        with _mode(model, training), torch.no_grad():
            return torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:  # noqa: BLE001 - any tracing failure is reported as one
        raise TraceError(
            f"torch.export.export failed to trace {type(model).__name__}: {type(e).__name__}: {e}"
        ) from e


def _mutated_arg(node: torch.fx.Node) -> torch.fx.Node | None:
    schema = node.target._schema  # type: ignore[union-attr]
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            return value if isinstance(value, torch.fx.Node) else None
    return None


def _returns_alias(node: torch.fx.Node) -> bool:
    schema = node.target._schema  # type: ignore[union-attr]
    return bool(schema.returns) and schema.returns[0].alias_info is not None


def needs_functionalization(graph: torch.fx.Graph) -> bool:
    """In-place ops are converted as their functional twins, which is exact unless something
    reads the mutated tensor (or a view of it) after the mutation through another name."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    root: dict[torch.fx.Node, torch.fx.Node] = {}
    members: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        r = n
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and _returns_alias(n):
            src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
            if src is not None:
                r = root.get(src, src)
        root[n] = r
        members.setdefault(r, []).append(n)
    for n in graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        mutated = _mutated_arg(n)
        if mutated is None:
            continue
        for alias in members[root[mutated]]:
            if order[alias] >= order[n]:
                continue
            if any(order[u] > order[n] for u in alias.users if u is not n):
                return True
    return False


def program_needs_functionalization(ep: ExportedProgram) -> bool:
    """needs_functionalization of the program's graph or of a function of its control flow (the
    submodules cond, while_loop and scan call); functionalize() rewrites those too."""
    return any(needs_functionalization(m.graph) for m in ep.graph_module.modules()
               if isinstance(m, torch.fx.GraphModule))


def functionalize(ep: ExportedProgram) -> ExportedProgram:
    # An empty decomposition table: functionalize, decompose nothing.
    return ep.run_decompositions({})

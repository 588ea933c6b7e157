"""fastonnx.export: trace, lower, convert, write."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import torch
from torch.export import ExportedProgram

from . import _C
from ._calls import check_weights_have_data, checked_call, one_at_a_time
from ._files import check_writable
from ._decompose import Decomposer, copy_graph, decomposition_of
from ._lower import Lowering, check_supported, is_mapped, live_nodes
from ._program import ExportResult
from ._trace import functionalize, needs_functionalization, trace
from .errors import ArgumentError, ExportError

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


def _needs_decomposition(node) -> bool:
    if node.op != "call_function":
        return False
    return Decomposer.inlines(node) or (not is_mapped(node.target) and decomposition_of(node.target) is not None)


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
) -> ExportResult:
    """Export ``model`` to ONNX.

    Arguments follow ``torch.onnx.export``: ``args`` are the example positional inputs (a lone
    tensor is wrapped in a tuple), ``kwargs`` the keyword inputs, ``f`` where to write the model
    (written atomically; nothing is written when ``f`` is None), ``input_names`` and
    ``output_names`` name the graph's inputs and outputs in order (a shorter list names the
    first ones), ``opset_version`` the ONNX opset (default 18). ``model`` may also be an
    ``ExportedProgram``. The model is traced in eval mode. Safe to call from several threads:
    exports run one at a time. Errors are ``fastonnx.ExportError`` subclasses (README, "Errors").
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
    if f is not None:
        check_writable(f)

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    ep = trace(model, args, kwargs)
    timings["trace"] = time.perf_counter() - t0
    check_weights_have_data(ep)

    t0 = time.perf_counter()
    if needs_functionalization(ep.graph):
        ep = functionalize(ep)
    timings["functionalize"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    graph, attribute = ep.graph, None
    if any(_needs_decomposition(n) for n in graph.nodes):
        decomposer = Decomposer(copy_graph(graph), is_mapped)
        decomposer.run()
        graph, attribute = decomposer.graph, decomposer.attribute
    timings["decompose"] = time.perf_counter() - t0

    live = live_nodes(graph)
    check_supported(graph, live)
    session = _C.Session(opset)
    lowering = Lowering(ep, session, graph, live, attribute)
    t0 = time.perf_counter()
    lowering.add_placeholders(input_names)
    if input_names is not None and len(input_names) > len(lowering.input_names):
        raise ArgumentError(
            f"input_names has {len(input_names)} names but the model has {len(lowering.input_names)} tensor inputs; "
            f"give at most {len(lowering.input_names)}"
        )
    lowering.convert_nodes()
    outputs = lowering.set_outputs(output_names)
    if output_names is not None and len(output_names) > len(outputs):
        raise ArgumentError(
            f"output_names has {len(output_names)} names but the model has {len(outputs)} tensor outputs; "
            f"give at most {len(outputs)}"
        )
    timings["convert"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    native = session.finish(__version__)
    timings["serialize"] = time.perf_counter() - t0

    result = ExportResult(native, opset, lowering.input_names, outputs, ep, timings)
    if f is not None:
        t0 = time.perf_counter()
        result.save(f)
        timings["write"] = time.perf_counter() - t0
    return result


__all__ = ["export", "ExportError"]

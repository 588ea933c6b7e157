"""FX graphs as the lowering takes them: a graph prepared to lower (the program's own or a
control-flow function's), and what the phases read off its nodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConversionError


@dataclass
class PreparedGraph:
    """An FX graph ready to lower: the program's or a control-flow function's (decomposed where
    an op has no converter), what its get_attr nodes read, and the nodes its outputs depend on."""

    graph: torch.fx.Graph
    attribute: Callable[[str], object]
    live: set[torch.fx.Node]

    @property
    def placeholders(self) -> list[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"]

    @property
    def results(self) -> Any:
        """What the graph returns: its output node's argument (a node, or a tuple of nodes and
        constants)."""
        return output_node(self.graph).args[0]


def output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def source_line(node: torch.fx.Node) -> str:
    """The model's source line that made ``node`` (``File "m.py", line 3, in forward``), or ""."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return lines[-1] if lines else ""


# Batch norms whose training mode updates the running statistics (arguments 3 and 4) in place;
# argument 5 is `training`.
_UPDATING_NORMS = (torch.ops.aten.batch_norm.default, torch.ops.aten._native_batch_norm_legit.default)


def _updating(node: torch.fx.Node) -> bool:
    return node.target in _UPDATING_NORMS and len(node.args) >= 6 and node.args[5] is True


def _only_updates(user: torch.fx.Node, stat: torch.fx.Node) -> bool:
    """``user`` takes ``stat`` only as running statistics to update (a module applied twice in
    training mode): its result does not depend on their values."""
    return _updating(user) and stat not in (*user.args[:3], *user.args[5:], *user.kwargs.values())


def check_running_statistics_unread(graphs: Iterable[PreparedGraph]) -> None:
    """A batch norm in training mode updates its running statistics in place; the ONNX graph
    drops the update (it has no buffers to write). A graph that reads them after the update
    would silently read the old values: a ConversionError instead."""
    for prepared in graphs:
        order = {n: i for i, n in enumerate(prepared.graph.nodes)}
        for node in prepared.graph.nodes:
            if not _updating(node):
                continue
            for stat in node.args[3:5]:
                if isinstance(stat, torch.fx.Node) and any(
                    order[u] > order[node] and not _only_updates(u, stat) for u in stat.users
                ):
                    where = source_line(node)
                    raise ConversionError(
                        f"{node.target._schema.name} (FX node `{node.name}`) updates its running statistics in "
                        f"training mode, and the model reads `{stat.name}` afterwards: ONNX has no buffers to "
                        "update, so that read would give the old values; export in eval mode, or read the "
                        "statistics before the batch norm" + (f"\n  from {where}" if where else "")
                    )

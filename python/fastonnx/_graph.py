"""FX graphs as the lowering takes them: a graph prepared to lower (the program's own or a
control-flow function's), and what the phases read off its nodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


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

"""The export report (Markdown): what went in, what came out, where the time went, which ops were
converted, decomposed or could not be."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from ..core.version import __version__
from ..errors import UnsupportedOpsError
from ..lowering.graph import PreparedGraph
from ..lowering.op_table import qualified_name


def aten_histogram(graphs: Iterable[PreparedGraph]) -> Counter:
    """How many times each op is called among the live nodes of ``graphs`` (``aten::linear``: 12)."""
    return Counter(
        qualified_name(n.target)
        for g in graphs
        for n in g.graph.nodes
        if n in g.live and n.op == "call_function" and n.target is not operator.getitem
    )


def _table(header: tuple[str, ...], rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _histogram(title: str, counts: Counter) -> list[str]:
    if not counts:
        return []
    return [f"\n## {title}\n", *_table(("op", "count"), counts.most_common())]


def _nodes(graph) -> list:
    """The nodes of a GraphProto and of the subgraphs in their attributes (If, Loop, Scan)."""
    out = []
    for node in graph.node:
        out.append(node)
        for a in node.attribute:
            if a.HasField("g"):
                out += _nodes(a.g)
    return out


def render(
    *,
    model_name: str,
    opset: int,
    timings: dict[str, float],
    aten_ops: Counter,
    decomposed: Counter,
    proto=None,
    pass_stats: dict | None = None,
    error: Exception | None = None,
    front_end: str | None = None,
    declined: Sequence[str] = (),
) -> str:
    lines = [
        "# fastonnx export report\n",
        f"- model: `{model_name}`; opset {opset}; torch {torch.__version__}; fastonnx {__version__}",
    ]
    if front_end is not None:
        lines.append(f"- front end: {front_end}")
    lines += [f"- front end declined: {why}" for why in declined]
    if proto is not None:

        def describe(values):
            out = []
            for v in values:
                t = v.type.tensor_type
                dims = [d.dim_param or str(d.dim_value) for d in t.shape.dim]
                out.append(f"`{v.name}` {_dtype_name(t.elem_type)}[{', '.join(dims)}]")
            return ", ".join(out)

        weights = sum(len(t.raw_data) for t in proto.graph.initializer)
        nodes = _nodes(proto.graph)
        lines += [
            f"- inputs: {describe(proto.graph.input)}",
            f"- outputs: {describe(proto.graph.output)}",
            f"- {len(nodes)} ONNX nodes, {len(proto.graph.initializer)} initializers ({weights / 2**20:.1f} MiB)",
        ]
    if pass_stats:
        lines.append("- passes: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in pass_stats.items()))
    if error is not None:
        lines.append(f"\n## Export failed\n\n{type(error).__name__}:\n\n```\n{error}\n```")
        if isinstance(error, UnsupportedOpsError):
            lines += [
                "\n## Unsupported ops\n",
                *_table(
                    ("op", "count", "from the decomposition of", "first at"),
                    [(op.overload, op.count, op.decomposed_from or "", op.first_source) for op in error.ops],
                ),
            ]
    if timings:
        lines += ["\n## Phases (seconds)\n", *_table(tuple(timings), [tuple(f"{v:.3f}" for v in timings.values())])]
    lines += _histogram("ATen ops converted", aten_ops)
    lines += _histogram(
        "Decomposed (no converter of their own): PyTorch's decompositions, or the Python implementation of "
        "a torch.library op traced into ATen ops",
        decomposed,
    )
    if proto is not None:
        lines += _histogram("ONNX ops written", Counter(n.op_type for n in nodes))
    return "\n".join(lines) + "\n"


def _dtype_name(code: int) -> str:
    import onnx

    return onnx.TensorProto.DataType.Name(code).lower()


def graph_text(proto) -> str:
    """What ``verbose=True`` prints: the graph as onnx.printer writes it, each initializer by
    name, type and shape only (their values would be the whole model again, as text)."""
    import onnx

    graph = onnx.GraphProto(
        name=proto.graph.name,
        node=proto.graph.node,
        input=proto.graph.input,
        output=proto.graph.output,
        value_info=proto.graph.value_info,
    )
    weights = [
        f"  {init.name}: {onnx.TensorProto.DataType.Name(init.data_type).lower()}{list(init.dims)}"
        for init in proto.graph.initializer
    ]
    header = ["initializers:", *weights] if weights else []
    return "\n".join([*header, *map(_one_per_line, onnx.printer.to_text(graph).splitlines())])


def _one_per_line(line: str) -> str:
    """onnx.printer writes the shapes of all intermediate values as one ``<...>`` line (thousands
    of characters for a small LLM): one value per line instead."""
    stripped = line.strip()
    if not (stripped.startswith("<") and stripped.endswith(">")):
        return line
    indent = line[: len(line) - len(line.lstrip())]
    items, depth, start = [], 0, 1
    for i, c in enumerate(stripped):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(stripped[start:i].strip())
            start = i + 1
    items.append(stripped[start:-1].strip())
    lines = [f"{indent}  {item}," for item in items[:-1]] + [f"{indent}  {items[-1]}"]
    return "\n".join([indent + "<", *lines, indent + ">"])

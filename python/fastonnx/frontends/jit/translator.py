"""The TorchScript translator's core: what it knows of the TorchScript values translated so far,
and the walk of a block's nodes, each given to the handler of its kind (``Handlers``). The
handlers live by concern beside this module (``prim_nodes``, ``control_flow``,
``packed_sequences``, ``aten_nodes``, ``quantized``), each a function of the translator and the
node; ``translate`` puts them together."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import ConversionError
from .fake_values import FakeValues, SizesFromData
from .nodes import bind, inputs, outputs, resolve, source_line, where

Handler = Callable[["Translator", torch._C.Node], Any]


@dataclass(frozen=True)
class Handlers:
    """How each TorchScript node is translated: by the handler of its kind, else a ``quantized::``
    op by ``quantized`` and any other op by ``op`` (a ``prim::`` node without a handler is an
    error)."""

    of_kind: Mapping[str, Handler]
    quantized: Handler
    op: Handler


class Outputs(list):
    """What a handler returns for a node's outputs, one per output (any other return value is
    the value of the node's only output, a list included)."""


class Opaque:
    """A value of the translation that no op runs on as it is (a quantized tensor kept as its
    integers and parameters, packed weights, a packed sequence): a node reading one is not
    folded (see ``Translator.fold``)."""


class Translator(FakeValues):
    """A TorchScript graph (or a control-flow function of one) being translated into an FX graph."""

    def __init__(self, handlers: Handlers, typed: bool):
        super().__init__(typed)
        self.handlers = handlers
        self.inputs: list[torch.fx.Node] = []  # a control-flow function's placeholders (see control_flow.sub)
        self.env: dict[torch._C.Value, Any] = {}  # TorchScript value -> FX node or Python value
        self.sizes: dict[torch._C.Value, Any] = {}  # a 0-d tensor computed from sizes -> the size (node or number)
        self.symbols: dict[Any, tuple[int, int]] = {}  # input symbol -> (input index, axis)
        self.fixed: dict[tuple[int, int], str] = {}
        self.functions: list[str] = []  # the control-flow functions, submodules of ``root``
        self.shape_tensors: dict = {}  # a `_shape_as_tensor` result -> its sizes
        self.known: dict = {}  # a small tensor computed from constants and static sizes -> its value
        self.guard_lines: dict = {}  # guard on sizes -> where: the TorchScript node that made it
        # A branch's own symbols of its operands' sizes -> the enclosing translator's (see control_flow.sub).
        self.renamed: dict = {}
        self.script_module: torch._C.ScriptModule | None = None  # what prim::CreateObject makes
        # A list -> a fake of the first item appended to its sequence (what a loop's item type
        # is, see control_flow._sequences_appended); shared with the control-flow functions'.
        self.appended: dict[torch._C.Value, Any] = {}

    def block(self, block) -> None:
        for node in block.nodes():
            self.node = node
            before = dict(self.shape_env.replacements)
            guards = len(self.shape_env.guards)
            try:
                self.translate_node(node)
            except SizesFromData:
                raise
            except ConversionError as e:
                if getattr(e, "node_told", False):
                    raise
                # A handler's own refusal: said of the innermost node that made it, once.
                told = ConversionError(f"{e}{_node_context(node)}")
                told.node_told = True  # type: ignore[attr-defined]
                raise told from e
            except Exception as e:  # a node torch cannot run on fake tensors, or an unknown kind
                told = ConversionError(
                    f"TorchScript node {node.kind()} failed to translate: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}{_node_context(node)}"
                )
                told.node_told = True  # type: ignore[attr-defined]
                raise told from e
            if len(self.shape_env.replacements) != len(before):
                self.record_fixed(node, before)
            for guard in self.shape_env.guards[guards:]:
                self.guard_lines.setdefault(guard.expr, where(node))

    def inline(self, block, values: list | tuple = ()) -> list:
        """Translates ``block`` into this graph, its inputs bound to ``values``; its results."""
        for v, x in zip(block.inputs(), values):
            self.env[v] = x
        node = self.node
        self.block(block)
        self.node = node
        return [self.env[v] for v in block.outputs()]

    def record_fixed(self, node: torch._C.Node, before: dict) -> None:
        """A requested dynamic axis whose symbol this node replaced by a number: where it was fixed."""
        for sym, tgt in self.shape_env.replacements.items():
            if sym in before or sym not in self.symbols:
                continue
            at = source_line(node) or str(node).strip()
            self.fixed[self.symbols[sym]] = f"{node.kind()} made it {tgt} ({at})"

    def translate_node(self, node: torch._C.Node) -> None:
        kind = node.kind()
        outs = outputs(node)
        handler = self.handlers.of_kind.get(kind)
        if handler is not None:
            results = handler(self, node)
        elif kind.startswith("prim::"):
            raise ConversionError(f"the TorchScript front end does not convert {kind}")
        elif kind.startswith("quantized::"):
            results = self.handlers.quantized(self, node)
        else:
            results = self.op(node)
        if not isinstance(results, Outputs):
            results = Outputs([results])
        for v, r in zip(outs, results, strict=True):
            self.env[v] = r
        if kind.startswith("aten::") and len(outs) == 1 and outs[0] not in self.known:
            self.fold(node)

    def op(self, node: torch._C.Node):
        """The node as the ATen (or other) op its schema names (``aten_nodes.op``)."""
        return self.handlers.op(self, node)

    def fold(self, node) -> None:
        """Records the value of a small tensor computed only from constants and static sizes (a
        detection model's image size, taken as a tensor), so that a number read from it is that
        number, as the TorchScript exporter's constant folding makes it, not a value of the data."""
        schema_text = node.schema()
        if schema_text == "(no schema)":
            return
        real = []
        for v in inputs(node):
            value = self.env[v]
            if v in self.known:
                real.append(self.known[v])
            elif holds_node(value) or isinstance(value, Opaque):
                return
            else:
                real.append(value)
        schema, _, op = resolve(schema_text)
        args, kwargs = bind(schema, real)
        if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            return
        if torch.Tag.nondeterministic_seeded in op.tags:  # a random value is not a constant
            return
        try:
            result = op(*args, **kwargs)
        except Exception:  # noqa: BLE001 - an op that does not run on these values is not folded
            return
        if isinstance(result, torch.Tensor) and result.numel() <= 64 and not result.is_quantized:
            self.known[node.output()] = result


def _node_context(node: torch._C.Node) -> str:
    """The lines an error about ``node`` ends with: the node (its own line, not its blocks'),
    and the model's line that made it."""
    line = source_line(node)
    return f"\n  node: {str(node).strip().splitlines()[0]}" + (f"\n  from {line}" if line else "")


def holds_node(x) -> bool:
    if isinstance(x, torch.fx.Node):
        return True
    return isinstance(x, list | tuple) and any(holds_node(y) for y in x)

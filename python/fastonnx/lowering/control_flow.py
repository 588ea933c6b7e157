"""Control flow: torch.cond, while_loop, scan and map as ONNX If, Loop and Scan.

torch.export records each as a higher-order op whose functions are submodules of the program
(``get_attr`` nodes among the op's arguments). Each submodule's FX graph is prepared like the
program's own (decomposed where an op has no converter, checked for unsupported ops) and lowered
into an ONNX subgraph of the node. Values the functions close over (operands of a cond,
additional inputs of a loop, weights) are read from the enclosing graph by name, as ONNX allows,
instead of becoming subgraph inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import torch

from .. import _C
from ..core.dtypes import dtype_code
from ..errors import ConversionError
from .graph import PreparedGraph


class Lowering(Protocol):
    """What a control-flow lowering asks of the lowering that calls it (lower.py's ``Lowering``),
    spelled here so that this module needs nothing from the one that imports it."""

    session: _C.Session

    @property
    def frame(self) -> Any: ...  # the GraphFrame being lowered: its ``prepared`` graph

    def body(self, module: torch.fx.GraphModule) -> PreparedGraph: ...

    def lower_body(self, body: PreparedGraph, bindings: list) -> list: ...

    def encode(self, a: Any) -> Any: ...

    def meta(self, value: Any) -> tuple[int, list] | None: ...

    def new_initializer(self, name: str, tensor: torch.Tensor) -> Any: ...


hop = torch.ops.higher_order

# The higher-order ops fastonnx converts, and the positions of their function arguments.
CONTROL_FLOW: dict[object, tuple[int, ...]] = {
    hop.cond: (1, 2),  # cond(pred, true_fn, false_fn, operands)
    hop.while_loop: (0, 1),  # while_loop(cond_fn, body_fn, carried_inputs, additional_inputs)
    hop.scan: (0,),  # scan(combine_fn, init, xs, additional_inputs)
    hop.map_impl: (0,),  # map_impl(body_fn, xs, additional_inputs): torch._higher_order_ops.map
}


def is_control_flow(target) -> bool:
    try:
        return target in CONTROL_FLOW
    except TypeError:  # an unhashable target
        return False


def _args(node: torch.fx.Node) -> tuple[Any, ...]:
    """A control-flow node's arguments, laid out as CONTROL_FLOW's comments show (torch.fx types
    each as any FX argument)."""
    return node.args


def _label(node: torch.fx.Node) -> str:
    """How an error names a control-flow node: ``cond (FX node `cond_1`)``."""
    return f"{getattr(node.target, '__name__', node.target)} (FX node `{node.name}`)"


def function_modules(node: torch.fx.Node, attribute: Callable[[str], object]) -> list[torch.fx.GraphModule]:
    """The submodules a control-flow node calls (in argument order)."""
    modules = []
    for i in CONTROL_FLOW[node.target]:
        arg = _args(node)[i]
        module = attribute(cast(str, arg.target)) if isinstance(arg, torch.fx.Node) and arg.op == "get_attr" else None
        if not isinstance(module, torch.fx.GraphModule):
            raise ConversionError(
                f"{_label(node)}: argument {i} is {arg!r}, not a traced function (a get_attr of a GraphModule)"
            )
        modules.append(module)
    return modules


def collect_bodies(
    main: PreparedGraph, prepare: Callable[[torch.fx.GraphModule], PreparedGraph]
) -> dict[torch.fx.GraphModule, PreparedGraph]:
    """Every function the live control-flow nodes of ``main`` call, and those their functions
    call in turn, each prepared once by ``prepare``."""
    bodies: dict[torch.fx.GraphModule, PreparedGraph] = {}
    pending = [main]
    while pending:
        prepared = pending.pop()
        for node in prepared.graph.nodes:
            if node not in prepared.live or node.op != "call_function" or not is_control_flow(node.target):
                continue
            for module in function_modules(node, prepared.attribute):
                if module not in bodies:
                    bodies[module] = body = prepare(module)
                    pending.append(body)
    return bodies


def _bodies(lowering: Lowering, node: torch.fx.Node) -> list[PreparedGraph]:
    """The prepared functions a control-flow node calls (in argument order)."""
    return [lowering.body(m) for m in function_modules(node, lowering.frame.prepared.attribute)]


def _tensor_ref(lowering: Lowering, arg, what: str, node: torch.fx.Node):
    ref = lowering.encode(arg)
    if not isinstance(ref, _C.ValueRef):
        raise ConversionError(f"{_label(node)}: {what} is {ref!r}; fastonnx converts only tensors there")
    return ref


def _constant_if_number(lowering: Lowering, value, name: str):
    """A Python number (a counter ``0`` a loop carries, which torch traces as a symbolic int; a
    condition torch pinned) as a 0-d constant of the type symbolic numbers have in the graph;
    anything else as it is."""
    if isinstance(value, (bool, int, float)):
        dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.float64
        return lowering.new_initializer(name, torch.tensor(value, dtype=dtype))
    return value


def _state_ref(lowering: Lowering, arg, what: str, node: torch.fx.Node, index: int):
    """A loop's or scan's initial value as a graph value (a number as a constant)."""
    value = _constant_if_number(lowering, lowering.encode(arg), f"{node.name}_initial_{index}")
    return value if isinstance(value, _C.ValueRef) else _tensor_ref(lowering, arg, what, node)


def _end_subgraph(lowering: Lowering, node: torch.fx.Node, outputs: list) -> int:
    for out in outputs:
        if not isinstance(out, _C.ValueRef):
            raise ConversionError(
                f"{_label(node)}: a function returns {out!r}; fastonnx converts functions that return tensors"
            )
    return lowering.session.end_subgraph(outputs)


def _subgraph_inputs(
    lowering: Lowering, node: torch.fx.Node, placeholders: list[torch.fx.Node], initial: list | None = None
) -> list:
    """Formal inputs of the subgraph being built, typed as torch recorded the placeholders; with
    ``initial`` (a Loop's), each an optional or a sequence where its initial value is one."""
    refs = []
    for k, p in enumerate(placeholders):
        meta = lowering.meta(p.meta.get("val"))
        if meta is None:
            raise ConversionError(
                f"{_label(node)}: input `{p.name}` of its function "
                f"is {p.meta.get('val')!r}; fastonnx converts only tensors and numbers there"
            )
        like = initial[k] if initial is not None else None
        refs.append(lowering.session.add_subgraph_input(f"{node.name}_{p.name}", meta[0], meta[1], like))
    return refs


def _control_node(
    lowering: Lowering, node: torch.fx.Node, op_type: str, inputs: list, attrs: list, metas: list
) -> list:
    try:
        return lowering.session.control_flow(op_type, inputs, attrs, metas, node.name)
    except _C.ConvertError as e:
        raise ConversionError(str(e)) from None


def lower_cond(lowering: Lowering, node: torch.fx.Node, metas: list) -> list:
    """``cond(pred, true_fn, false_fn, operands)`` -> ``If``. ONNX branches take no inputs: the
    placeholders of each branch are the operands themselves, read from the enclosing graph."""
    pred, _, _, operands = _args(node)
    true_body, false_body = _bodies(lowering, node)
    outer = [lowering.encode(o) for o in operands]
    chosen = lowering.encode(pred)
    if isinstance(chosen, bool):  # a predicate torch.export pinned to a constant
        return lowering.lower_body(true_body if chosen else false_body, outer)
    branches = []
    for body in (true_body, false_body):
        lowering.session.begin_subgraph()
        branches.append(_end_subgraph(lowering, node, lowering.lower_body(body, outer)))
    pred_ref = _tensor_ref(lowering, pred, "the predicate", node)
    attrs = [("then_branch", "g", branches[0]), ("else_branch", "g", branches[1])]
    return _control_node(lowering, node, "If", [pred_ref], attrs, metas)


def lower_while_loop(lowering: Lowering, node: torch.fx.Node, metas: list) -> list:
    """``while_loop(cond_fn, body_fn, carried, additional)`` -> ``Loop`` without a trip count:
    the condition is computed once before the loop on the initial values and again at the end of
    each iteration on the new ones. Additional inputs are read from the enclosing graph."""
    _, _, carried, additional = _args(node)[:4]
    cond_body, loop_body = _bodies(lowering, node)
    carried_refs = [_state_ref(lowering, c, "a carried value", node, i) for i, c in enumerate(carried)]
    extra = [lowering.encode(a) for a in additional]
    first = _constant_if_number(lowering, lowering.lower_body(cond_body, carried_refs + extra)[0], f"{node.name}_first")
    session = lowering.session
    session.begin_subgraph()
    session.add_subgraph_input(f"{node.name}_iteration", dtype_code(torch.int64), [])
    session.add_subgraph_input(f"{node.name}_condition", dtype_code(torch.bool), [])
    state = _subgraph_inputs(lowering, node, loop_body.placeholders[: len(carried)], carried_refs)
    updated = lowering.lower_body(loop_body, state + extra)
    again = _constant_if_number(lowering, lowering.lower_body(cond_body, updated + extra)[0], f"{node.name}_again")
    body_id = _end_subgraph(lowering, node, [again, *updated])
    return _control_node(lowering, node, "Loop", [None, first, *carried_refs], [("body", "g", body_id)], metas)


def lower_scan(lowering: Lowering, node: torch.fx.Node, metas: list) -> list:
    """``scan(combine_fn, init, xs, additional)`` -> ``Scan`` over the first dimension (torch.export
    moves another ``dim`` there): the state is the carry, each x a slice, and the outputs are the
    final carry followed by the stacked ys, as in torch. Additional inputs are read from the
    enclosing graph."""
    _, init, xs, additional = _args(node)[:4]
    (combine,) = _bodies(lowering, node)
    init_refs = [_state_ref(lowering, t, "an initial carry", node, i) for i, t in enumerate(init)]
    xs_refs = [_tensor_ref(lowering, t, "a scanned input", node) for t in xs]
    extra = [lowering.encode(a) for a in additional]
    session = lowering.session
    session.begin_subgraph()
    formal = _subgraph_inputs(lowering, node, combine.placeholders[: len(init) + len(xs)])
    body_id = _end_subgraph(lowering, node, lowering.lower_body(combine, formal + extra))
    attrs = [("body", "g", body_id), ("num_scan_inputs", "i", len(xs_refs))]
    return _control_node(lowering, node, "Scan", [*init_refs, *xs_refs], attrs, metas)


def lower_map(lowering: Lowering, node: torch.fx.Node, metas: list) -> list:
    """``map_impl(body_fn, xs, additional)`` (``torch._higher_order_ops.map``) -> a ``Scan``
    without state: the body sees one slice of each x, its outputs are stacked."""
    _, xs, additional = _args(node)[:3]
    (body,) = _bodies(lowering, node)
    xs_refs = [_tensor_ref(lowering, t, "a mapped input", node) for t in xs]
    extra = [lowering.encode(a) for a in additional]
    session = lowering.session
    session.begin_subgraph()
    formal = _subgraph_inputs(lowering, node, body.placeholders[: len(xs)])
    body_id = _end_subgraph(lowering, node, lowering.lower_body(body, formal + extra))
    attrs = [("body", "g", body_id), ("num_scan_inputs", "i", len(xs_refs))]
    return _control_node(lowering, node, "Scan", xs_refs, attrs, metas)


LOWERINGS = {hop.cond: lower_cond, hop.while_loop: lower_while_loop, hop.scan: lower_scan, hop.map_impl: lower_map}

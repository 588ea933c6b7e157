"""The op table: which FX call targets the lowering converts, and how.

An ATen overload converts through the native converter of the same name (``_C.op_table()``), its
FX arguments matched to the converter's by name (a ``Plan``). Python arithmetic on symbolic
sizes converts as the ATen op that computes it; torch.export's checks are dropped; control flow
and ops with a registered Python converter have lowerings of their own. An op the table lacks is
decomposed (``decomposition_for``) or reported as unsupported.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal

import torch

from .. import _C
from ..converters.registry import is_registered, registered_names
from ..core import arithmetic
from .control_flow import is_control_flow
from .decompose import decomposition_for_numbers_from_data, decomposition_of
from .graph import output_node
from .values import static_number


def qualified_name(op) -> str:
    """``aten::add.Tensor``, ``mylib::my_op``; a Python callable's own name."""
    if isinstance(op, torch._ops.OpOverload):
        schema = op._schema
        return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    return getattr(op, "__name__", str(op))


def overload_key(op: torch._ops.OpOverload) -> str:
    """An overload's name in the op table: an ATen one's as native_functions.yaml writes it
    (``add.Tensor``, ``relu``), another namespace's qualified (``fastonnx::padded_rnn``)."""
    return qualified_name(op).removeprefix("aten::")


@dataclass(frozen=True)
class Plan:
    """How one OpOverload's FX arguments map onto its converter's arguments."""

    op_id: int
    n_args: int
    position: tuple[int | None, ...]  # runtime schema index -> converter index (None: unknown)
    names: tuple[str, ...]  # runtime schema argument names
    defaults: tuple[object, ...]  # runtime defaults (a sentinel when required)
    multi_output: bool
    # Runtime schema indices of the arguments the converter needs as numbers known when
    # exporting (the spec's `static:`).
    static: tuple[int, ...] = ()


REQUIRED = object()
_PLANS: dict[torch._ops.OpOverload, Plan | None] = {}


@functools.cache
def _registry() -> dict[str, tuple[int, list[str], int]]:
    """Overload name -> (converter id, the converter's argument names, the bit set of those it
    needs as numbers known when exporting)."""
    return {name: (i, args, static) for i, (name, args, static) in enumerate(_C.op_table())}


def plan_for(op) -> Plan | None:
    if op in _PLANS:
        return _PLANS[op]
    entry = None
    if isinstance(op, torch._ops.OpOverload):
        entry = _registry().get(overload_key(op))
    plan = None
    if entry is not None:
        op_id, gen_names, static_mask = entry
        schema = op._schema
        index = {n: i for i, n in enumerate(gen_names)}
        static_names = {n for i, n in enumerate(gen_names) if static_mask >> i & 1}
        plan = Plan(
            op_id=op_id,
            n_args=len(gen_names),
            position=tuple(index.get(a.name) for a in schema.arguments),
            names=tuple(a.name for a in schema.arguments),
            defaults=tuple(a.default_value if a.has_default_value() else REQUIRED for a in schema.arguments),
            multi_output=len(schema.returns) != 1 or isinstance(schema.returns[0].type, torch.ListType),
            static=tuple(i for i, a in enumerate(schema.arguments) if a.name in static_names),
        )
    _PLANS[op] = plan
    return plan


aten = torch.ops.aten

# Checks torch.export inserts (on shapes, scalars and metadata); they compute nothing an ONNX
# graph needs, so their nodes are dropped.
DROPPED = frozenset(
    {
        aten._assert_scalar.default,
        aten._assert_async.msg,
    }
)

# Python arithmetic on symbolic sizes (`x.shape[0] * 2` with a dynamic batch) records the Python
# operator itself; each converts as the ATen op that computes it on 0-d tensors, with these
# extra keyword arguments (core/arithmetic.py).
_SYMBOLIC_OPS: dict[object, tuple[torch._ops.OpOverload, dict]] = {
    **{row.python: (row.aten, dict(row.aten_kwargs)) for row in arithmetic.TABLE},
    # `x.size(d)` as a TorchScript op, which decompositions of C++ composites (`_dim_arange`) call.
    aten.size.int: (aten.sym_size.int, {}),
}
# Python's floor, ceil and trunc of a float are ints, where the ATen op keeps a float: its result
# is cast to int64.
ROUNDING_TO_INT = frozenset(row.python for row in arithmetic.TABLE if row.to_int)


def symbolic_op(target) -> tuple[torch._ops.OpOverload, dict] | None:
    try:
        return _SYMBOLIC_OPS.get(target)
    except TypeError:  # an unhashable target
        return None


@dataclass(frozen=True)
class Route:
    """How the lowering converts the nodes of one FX target, tried in this order: dropped
    (torch.export's checks), control flow (lowerings of their own), a registered Python
    converter, Python arithmetic on symbolic sizes (as the ATen op ``target`` with ``kwargs``),
    or the native converter of the ATen op itself."""

    kind: Literal["dropped", "control_flow", "python", "symbolic", "native"]
    target: object = None  # "symbolic" and "native": the ATen op converted
    kwargs: dict = field(default_factory=dict)  # "symbolic": extra keyword arguments
    rounds_to_int: bool = False  # "symbolic": Python's floor/ceil/trunc of a float are ints


_DROPPED_ROUTE = Route("dropped")
_CONTROL_FLOW_ROUTE = Route("control_flow")
_PYTHON_ROUTE = Route("python")


def route(target) -> Route | None:
    """The one routing of FX targets, which both the support check (``is_mapped``) and the
    lowering follow; None when the target has no converter (it is decomposed, or unsupported).
    A Python converter routes the target at any opset: the lowering asks the registry for the
    one of its opset."""
    if target in DROPPED:
        return _DROPPED_ROUTE
    if is_control_flow(target):
        return _CONTROL_FLOW_ROUTE
    if is_registered(target):
        return _PYTHON_ROUTE
    sym = symbolic_op(target)
    if sym is not None:
        if plan_for(sym[0]) is None:
            return None
        return Route("symbolic", sym[0], sym[1], target in ROUNDING_TO_INT)
    return Route("native", target) if plan_for(target) is not None else None


def is_mapped(target) -> bool:
    """Whether the lowering converts nodes of this target (without decomposing them)."""
    return route(target) is not None


def _computed(value) -> bool:
    """Whether an FX argument is (or holds) a number the graph computes: a symbolic size,
    arithmetic on one, `.item()`."""
    if isinstance(value, torch.fx.Node):
        return static_number(value.meta.get("val")) is None
    if isinstance(value, (list, tuple)):
        return any(_computed(v) for v in value)
    return False


def converts(node: torch.fx.Node) -> bool:
    """Whether the lowering converts ``node`` as it is: its op is mapped, and every argument
    its converter needs as a number known when exporting (an ONNX attribute) is one."""
    if not is_mapped(node.target):
        return False
    plan = plan_for(node.target)
    if plan is None or not plan.static:
        return True
    for i in plan.static:
        value = node.args[i] if i < len(node.args) else node.kwargs.get(plan.names[i])
        if _computed(value):
            return False
    return True


_ARANGES = frozenset({torch.ops.aten.arange.default, torch.ops.aten.arange.start, torch.ops.aten.arange.start_step})


def _integer_range_of_computed_floats(node: torch.fx.Node) -> bool:
    """An integer arange whose length the graph computes from a floating bound or step. torch
    counts its elements from the numbers truncated to integers up to 2.13 and from the numbers
    as they are from 2.14 (arange(0, 8.5, 1, dtype=int64) has 8 elements, then 9): torch's own
    decomposition of it follows the torch installed. A length torch.export recorded as a number
    is taken as it is by the converter."""
    val = node.meta.get("val")
    if node.target not in _ARANGES or not isinstance(val, torch.Tensor) or val.dtype.is_floating_point:
        return False
    if isinstance(val.shape[0], int):
        return False
    numbers = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in node.args]
    return any(isinstance(v, (float, torch.SymFloat)) for v in numbers)


def decomposition_for(node: torch.fx.Node):
    """The decomposition the lowering applies to ``node`` instead of converting it, if any: for
    an op without a converter, PyTorch's, a core op's too (the functional batch norm a
    functionalized training graph holds); for one whose converter needs as a constant a number
    the graph computes, or whose result depends on the torch installed
    (``_integer_range_of_computed_floats``), also the decompositions of core ops."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    if not is_mapped(node.target):
        return decomposition_for_numbers_from_data(node) or decomposition_of(node.target, core=True)
    if not converts(node) or _integer_range_of_computed_floats(node):
        return decomposition_of(node.target, core=True)
    return None


def supported_ops() -> list[str]:
    """The ops fastonnx converts: the overloads of its native converters (ATen's, named as in
    native_functions.yaml: ``add.Tensor``, and its own: ``fastonnx::padded_rnn``), then the ops
    with a Python converter, built-in or registered (``torchvision::nms``)."""
    return sorted(set(_registry()) | {overload_key(op) for op in DROPPED}) + registered_names()


def live_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes the graph's outputs depend on. The rest (shape arithmetic that only fed a
    dropped check, values nothing reads) is neither converted nor required to be convertible."""
    live: set[torch.fx.Node] = set()
    stack = [output_node(graph)]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        if node.op == "call_function" and node.target in DROPPED:
            continue
        stack.extend(node.all_input_nodes)
    return live

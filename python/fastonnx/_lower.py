"""Lowering: walk the FX graph once and hand each node to the native core, one call per node.

Arguments are matched to the converter's signature by name, not position, so a torch whose
schema gained an argument still converts: an argument the generated code does not know is
dropped when it holds the schema's default and rejected otherwise.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import Counter
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument
from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_int

from . import _C
from ._decompose import DECOMPOSED_FROM
from ._dtypes import dtype_code
from .errors import ConversionError, UnsupportedOp, UnsupportedOpsError

_IGNORED_TYPES = (torch.device, torch.layout, torch.memory_format)


def qualified_name(op) -> str:
    """``aten::add.Tensor``, ``mylib::my_op``; a Python callable's own name."""
    if isinstance(op, torch._ops.OpOverload):
        schema = op._schema
        return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    return getattr(op, "__name__", str(op))


def overload_key(op: torch._ops.OpOverload) -> str:
    """An ATen overload's name as native_functions.yaml writes it: ``add.Tensor``, ``relu``."""
    return qualified_name(op).removeprefix("aten::")


@dataclass(frozen=True)
class _Plan:
    """How one OpOverload's FX arguments map onto its converter's arguments."""

    op_id: int
    n_args: int
    position: tuple[int | None, ...]  # runtime schema index -> converter index (None: unknown)
    names: tuple[str, ...]  # runtime schema argument names
    defaults: tuple[object, ...]  # runtime defaults (a sentinel when required)
    multi_output: bool


_REQUIRED = object()
_PLANS: dict[torch._ops.OpOverload, _Plan | None] = {}


@functools.cache
def _registry() -> dict[str, tuple[int, list[str]]]:
    """Overload name -> (converter id, the converter's argument names)."""
    return {name: (i, args) for i, (name, args) in enumerate(_C.op_table())}


def plan_for(op) -> _Plan | None:
    if op in _PLANS:
        return _PLANS[op]
    entry = None
    if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
        entry = _registry().get(overload_key(op))
    plan = None
    if entry is not None:
        op_id, gen_names = entry
        schema = op._schema
        index = {n: i for i, n in enumerate(gen_names)}
        plan = _Plan(
            op_id=op_id,
            n_args=len(gen_names),
            position=tuple(index.get(a.name) for a in schema.arguments),
            names=tuple(a.name for a in schema.arguments),
            defaults=tuple(a.default_value if a.has_default_value() else _REQUIRED for a in schema.arguments),
            multi_output=len(schema.returns) != 1 or str(schema.returns[0].type).endswith("[]"),
        )
    _PLANS[op] = plan
    return plan


aten = torch.ops.aten

# Checks torch.export inserts (on shapes, scalars and metadata); they compute nothing an ONNX
# graph needs, so their nodes are dropped.
_DROPPED = frozenset(
    {
        aten._assert_scalar.default,
        aten._assert_async.msg,
    }
)

# Python arithmetic on symbolic sizes (`x.shape[0] * 2` with a dynamic batch) records the Python
# operator itself; each converts as the ATen op that computes it on 0-d tensors, with these
# extra keyword arguments.
_SYMBOLIC_OPS: dict[object, tuple[torch._ops.OpOverload, dict]] = {
    operator.add: (aten.add.Tensor, {}),
    operator.sub: (aten.sub.Tensor, {}),
    operator.mul: (aten.mul.Tensor, {}),
    operator.truediv: (aten.div.Tensor, {}),
    operator.floordiv: (aten.div.Tensor_mode, {"rounding_mode": "floor"}),
    operator.mod: (aten.remainder.Tensor, {}),
    operator.pow: (aten.pow.Tensor_Tensor, {}),
    operator.neg: (aten.neg.default, {}),
    operator.eq: (aten.eq.Tensor, {}),
    operator.ne: (aten.ne.Tensor, {}),
    operator.lt: (aten.lt.Tensor, {}),
    operator.le: (aten.le.Tensor, {}),
    operator.gt: (aten.gt.Tensor, {}),
    operator.ge: (aten.ge.Tensor, {}),
    operator.and_: (aten.bitwise_and.Tensor, {}),
    operator.or_: (aten.bitwise_or.Tensor, {}),
    torch.sym_not: (aten.logical_not.default, {}),
    torch.sym_max: (aten.maximum.default, {}),
    torch.sym_min: (aten.minimum.default, {}),
    torch.sym_ite: (aten.where.self, {}),
    torch.sym_float: (aten._to_copy.default, {"dtype": torch.float64}),
    torch.sym_int: (aten._to_copy.default, {"dtype": torch.int64}),  # truncates, as int() does
    math.floor: (aten.floor.default, {}),
    math.ceil: (aten.ceil.default, {}),
    math.trunc: (aten.trunc.default, {}),
}


def symbolic_op(target) -> tuple[torch._ops.OpOverload, dict] | None:
    try:
        return _SYMBOLIC_OPS.get(target)
    except TypeError:  # an unhashable target
        return None


def is_mapped(target) -> bool:
    """Whether the lowering converts nodes of this target (without decomposing them)."""
    if target in _DROPPED:
        return True
    sym = symbolic_op(target)
    if sym is not None:
        return plan_for(sym[0]) is not None
    return plan_for(target) is not None


def supported_ops() -> list[str]:
    """The ATen overloads fastonnx converts (names as in native_functions.yaml)."""
    return sorted(set(_registry()) | {overload_key(op) for op in _DROPPED})


def _meta(value) -> tuple[int, list] | None:
    """(dtype code, shape) of a node's value: a tensor's, or a 0-d tensor's for a Python number
    (a symbolic size is an int64 scalar in the ONNX graph, as torch computes it in int64)."""
    if isinstance(value, torch.Tensor):
        shape = [int(d) if isinstance(d, int) or not isinstance(d, torch.SymInt) else str(d) for d in value.shape]
        return dtype_code(value.dtype), shape
    if isinstance(value, (bool, torch.SymBool)):
        return dtype_code(torch.bool), []
    if isinstance(value, (int, torch.SymInt)):
        return dtype_code(torch.int64), []
    if isinstance(value, (float, torch.SymFloat)):
        return dtype_code(torch.float64), []
    return None


def _static_number(value):
    """A node value that is a plain Python number, or a symbolic one torch has pinned to a
    constant: the ONNX graph uses the number itself."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, torch.SymInt) and is_concrete_int(value):
        return int(value)
    if isinstance(value, torch.SymBool) and is_concrete_bool(value):
        return bool(value)
    return None


def _first_source_line(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return lines[-1] if lines else ""


def _yaml_hint(op) -> str:
    if isinstance(op, torch._ops.OpOverload):
        return f"{overload_key(op)}: {{onnx: ...}}   # schema: {op._schema}"
    return f"register a converter for {op}"


def live_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes the graph's outputs depend on. The rest (shape arithmetic that only fed a
    dropped check, values nothing reads) is neither converted nor required to be convertible."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    live: set[torch.fx.Node] = set()
    stack = [output]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        if node.op == "call_function" and node.target in _DROPPED:
            continue
        stack.extend(node.all_input_nodes)
    return live


def check_supported(graph: torch.fx.Graph, live: set[torch.fx.Node]) -> None:
    """Raise one error naming every op of the graph that has no converter (after decomposition:
    these have neither a converter nor a decomposition)."""
    missing: Counter = Counter()
    first: dict = {}
    for n in graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem or n not in live:
            continue
        if is_mapped(n.target) or _static_number(n.meta.get("val")) is not None:
            continue
        missing[n.target] += 1
        first.setdefault(n.target, n)
    if missing:
        raise UnsupportedOpsError(
            [
                UnsupportedOp(
                    overload=qualified_name(op),
                    count=count,
                    first_source=_first_source_line(first[op]),
                    yaml_hint=_yaml_hint(op),
                    decomposed_from=first[op].meta.get(DECOMPOSED_FROM, ""),
                )
                for op, count in missing.most_common()
            ]
        )


class Lowering:
    """Converts ``graph`` (the program's own, or a decomposed copy whose get_attr nodes
    ``attribute`` resolves) into the session's ONNX graph."""

    def __init__(self, ep: ExportedProgram, session: _C.Session, graph: torch.fx.Graph, live: set[torch.fx.Node],
                 attribute=None):
        self.ep = ep
        self.session = session
        self.graph = graph
        self.live = live
        self.attribute = attribute or (lambda target: getattr(ep.graph_module, target))
        self.env: dict[torch.fx.Node, object] = {}
        self.input_names: list[str] = []

    def _encode(self, a):
        if isinstance(a, torch.fx.Node):
            v = self.env[a]
            if isinstance(v, list):
                raise ConversionError(f"FX node `{a.name}` has several outputs and is used whole")
            return v
        if isinstance(a, (list, tuple)):
            return [self._encode(x) for x in a]
        if isinstance(a, torch.dtype):
            return dtype_code(a)
        if isinstance(a, _IGNORED_TYPES):
            return None
        return a

    def _args(self, node: torch.fx.Node, target, plan: _Plan, args: tuple, kwargs: dict) -> list:
        label = lambda: f"{qualified_name(target)} (FX node `{node.name}`)"  # noqa: E731 - for errors only
        if len(args) > len(plan.names) or any(k not in plan.names for k in kwargs):
            raise ConversionError(
                f"{label()}: {len(args)} positional argument(s) and keyword(s) {list(kwargs)} do not fit the "
                f"schema's arguments ({', '.join(plan.names)})"
            )
        out: list = [...] * plan.n_args
        items = list(enumerate(args)) + [(plan.names.index(k), v) for k, v in kwargs.items()]
        for j, value in items:
            pos = plan.position[j]
            if pos is not None:
                out[pos] = self._encode(value)
            elif plan.defaults[j] is _REQUIRED or value != plan.defaults[j]:
                raise ConversionError(
                    f"{label()}: argument `{plan.names[j]}`={value!r} is new in this torch and fastonnx's "
                    f"converter predates it; only its default ({plan.defaults[j]!r}) is supported"
                )
        while out and out[-1] is ...:
            out.pop()
        return out

    def add_placeholders(self, input_names: list[str] | None) -> None:
        sig = self.ep.graph_signature
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        state = self.ep.state_dict
        constants = self.ep.constants
        user_names = list(input_names or [])
        for spec, node in zip(sig.input_specs, placeholders):
            if spec.kind == InputKind.USER_INPUT:
                if not isinstance(spec.arg, TensorArgument):
                    self.env[node] = node.meta.get("val")  # a Python constant torch.export specialized
                    continue
                name = user_names.pop(0) if user_names else node.name
                meta = _meta(node.meta["val"])
                self.env[node] = self.session.add_input(name, meta[0], meta[1])
                self.input_names.append(name)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                tensor = state[spec.target] if spec.target in state else constants[spec.target]
                self.env[node] = self._initializer(spec.target, tensor)
            else:
                raise ConversionError(f"input `{node.name}` of kind {spec.kind.name} is not supported")

    def _initializer(self, name: str, tensor: torch.Tensor):
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if not t.is_contiguous():
            t = t.contiguous()
        nbytes = t.numel() * t.element_size()
        return self.session.add_initializer(name, dtype_code(t.dtype), list(t.shape), t.data_ptr(), nbytes, t)

    def convert_nodes(self) -> None:
        for node in self.graph.nodes:
            if node not in self.live:
                continue
            if node.op == "get_attr":
                value = self.attribute(node.target)
                if isinstance(value, torch.Tensor):
                    self.env[node] = self._initializer(node.target, value)
                continue
            if node.op != "call_function":
                continue
            if node.target is operator.getitem:
                self.env[node] = self.env[node.args[0]][node.args[1]]
                continue
            if node.target in _DROPPED:
                continue
            val = node.meta.get("val")
            number = _static_number(val)
            if number is not None:
                self.env[node] = number
                continue
            metas = [_meta(v) for v in val] if isinstance(val, (list, tuple)) else [_meta(val)]
            sym = symbolic_op(node.target)
            target, args, kwargs = (sym[0], node.args, sym[1]) if sym else (node.target, node.args, node.kwargs)
            self.env[node] = self._convert(node, target, args, kwargs, metas)

    def _convert(self, node: torch.fx.Node, target, args: tuple, kwargs: dict, metas: list):
        plan = plan_for(target)
        try:
            refs = self.session.convert(plan.op_id, self._args(node, target, plan, args, kwargs), metas, node.name)
        except _C.ConvertError as e:
            source = _first_source_line(node)
            raise ConversionError(str(e) + (f"\n  from {source}" if source else "")) from None
        return refs if plan.multi_output else refs[0]

    def set_outputs(self, output_names: list[str] | None) -> list[str]:
        sig = self.ep.graph_signature
        output_node = next(n for n in self.graph.nodes if n.op == "output")
        user_names = list(output_names or [])
        outputs, names = [], []
        for spec, value in zip(sig.output_specs, output_node.args[0]):
            if spec.kind != OutputKind.USER_OUTPUT:
                continue  # mutations of buffers and inputs have no place in an ONNX graph
            if not isinstance(value, torch.fx.Node):
                raise ConversionError(f"output {value!r} is not a tensor; ONNX outputs are tensors")
            name = user_names.pop(0) if user_names else value.name
            outputs.append((self.env[value], name))
            names.append(name)
        self.session.set_outputs(outputs)
        return names

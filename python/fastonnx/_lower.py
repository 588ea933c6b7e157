"""Lowering: walk the FX graph once and hand each node to the native core, one call per node.

Arguments are matched to the converter's signature by name, not position, so a torch whose
schema gained an argument still converts: an argument the generated code does not know is
dropped when it holds the schema's default and rejected otherwise.
"""

from __future__ import annotations

import functools
import operator
from collections import Counter
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

from . import _C
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
            multi_output=len(schema.returns) != 1 or isinstance(schema.returns[0].type, torch.ListType),
        )
    _PLANS[op] = plan
    return plan


def supported_ops() -> list[str]:
    return sorted(_registry())


def _meta(value) -> tuple[int, list] | None:
    if not isinstance(value, torch.Tensor):
        return None
    shape = [int(d) if isinstance(d, int) or not isinstance(d, torch.SymInt) else str(d) for d in value.shape]
    return dtype_code(value.dtype), shape


def _first_source_line(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return lines[-1] if lines else ""


def _yaml_hint(op) -> str:
    if isinstance(op, torch._ops.OpOverload):
        return f"{overload_key(op)}: {{onnx: ...}}   # schema: {op._schema}"
    return f"register a converter for {op}"


def check_supported(graph: torch.fx.Graph) -> None:
    """Raise one error naming every op of the graph that has no converter."""
    missing: Counter = Counter()
    first: dict = {}
    for n in graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        if plan_for(n.target) is not None:
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
                )
                for op, count in missing.most_common()
            ]
        )


class Lowering:
    def __init__(self, ep: ExportedProgram, session: _C.Session):
        self.ep = ep
        self.session = session
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

    def _args(self, node: torch.fx.Node, plan: _Plan) -> list:
        out: list = [...] * plan.n_args
        items = list(enumerate(node.args)) + [(plan.names.index(k), v) for k, v in node.kwargs.items()]
        for j, value in items:
            pos = plan.position[j]
            if pos is not None:
                out[pos] = self._encode(value)
            elif plan.defaults[j] is _REQUIRED or value != plan.defaults[j]:
                raise ConversionError(
                    f"{node.target}: argument `{plan.names[j]}`={value!r} is new in this torch and fastonnx's "
                    f"converter predates it; only its default ({plan.defaults[j]!r}) is supported"
                )
        while out and out[-1] is ...:
            out.pop()
        return out

    def add_placeholders(self, input_names: list[str] | None) -> None:
        sig = self.ep.graph_signature
        placeholders = [n for n in self.ep.graph.nodes if n.op == "placeholder"]
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
        convert = self.session.convert
        for node in self.ep.graph.nodes:
            if node.op != "call_function":
                continue
            if node.target is operator.getitem:
                self.env[node] = self.env[node.args[0]][node.args[1]]
                continue
            plan = plan_for(node.target)
            val = node.meta.get("val")
            metas = [_meta(v) for v in val] if isinstance(val, (list, tuple)) else [_meta(val)]
            try:
                refs = convert(plan.op_id, self._args(node, plan), metas, node.name)
            except _C.ConvertError as e:
                source = _first_source_line(node)
                raise ConversionError(str(e) + (f"\n  from {source}" if source else "")) from None
            self.env[node] = refs if plan.multi_output else refs[0]

    def set_outputs(self, output_names: list[str] | None) -> list[str]:
        sig = self.ep.graph_signature
        output_node = next(n for n in self.ep.graph.nodes if n.op == "output")
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

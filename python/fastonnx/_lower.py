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

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument
from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_int
from torch.utils._sympy.value_ranges import bound_sympy

from . import _C
from ._control_flow import LOWERINGS, Body, is_control_flow
from ._custom import GraphContext, Value, converter_for, is_registered
from ._decompose import DECOMPOSED_FROM, decomposition_of
from ._dtypes import dtype_code
from ._dynamic import StaticAxis
from ._functions import ModuleScopes
from .errors import ArgumentError, ConversionError, UnsupportedOp, UnsupportedOpsError

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
    # Runtime schema indices of the arguments the converter needs as numbers known when
    # exporting (the spec's `static:`).
    static: tuple[int, ...] = ()


_REQUIRED = object()
_PLANS: dict[torch._ops.OpOverload, _Plan | None] = {}


@functools.cache
def _registry() -> dict[str, tuple[int, list[str], int]]:
    """Overload name -> (converter id, the converter's argument names, the bit set of those it
    needs as numbers known when exporting)."""
    return {name: (i, args, static) for i, (name, args, static) in enumerate(_C.op_table())}


def plan_for(op) -> _Plan | None:
    if op in _PLANS:
        return _PLANS[op]
    entry = None
    if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten":
        entry = _registry().get(overload_key(op))
    plan = None
    if entry is not None:
        op_id, gen_names, static_mask = entry
        schema = op._schema
        index = {n: i for i, n in enumerate(gen_names)}
        static_names = {n for i, n in enumerate(gen_names) if static_mask >> i & 1}
        plan = _Plan(
            op_id=op_id,
            n_args=len(gen_names),
            position=tuple(index.get(a.name) for a in schema.arguments),
            names=tuple(a.name for a in schema.arguments),
            defaults=tuple(a.default_value if a.has_default_value() else _REQUIRED for a in schema.arguments),
            multi_output=len(schema.returns) != 1 or isinstance(schema.returns[0].type, torch.ListType),
            static=tuple(i for i, a in enumerate(schema.arguments) if a.name in static_names),
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
    # `x.size(d)` as a TorchScript op, which decompositions of C++ composites (`_dim_arange`) call.
    aten.size.int: (aten.sym_size.int, {}),
}
# Python's floor, ceil and trunc of a float are ints, where the ATen op keeps a float: its result
# is cast to int64.
_ROUNDING_TO_INT = frozenset({math.floor, math.ceil, math.trunc})


def symbolic_op(target) -> tuple[torch._ops.OpOverload, dict] | None:
    try:
        return _SYMBOLIC_OPS.get(target)
    except TypeError:  # an unhashable target
        return None


def is_mapped(target) -> bool:
    """Whether the lowering converts nodes of this target (without decomposing them)."""
    if target in _DROPPED or is_registered(target) or is_control_flow(target):
        return True
    sym = symbolic_op(target)
    if sym is not None:
        return plan_for(sym[0]) is not None
    return plan_for(target) is not None


def _computed(value) -> bool:
    """Whether an FX argument is (or holds) a number the graph computes: a symbolic size,
    arithmetic on one, `.item()`."""
    if isinstance(value, torch.fx.Node):
        return _static_number(value.meta.get("val")) is None
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


def decomposition_for(node: torch.fx.Node):
    """The decomposition the lowering applies to ``node`` instead of converting it, if any: for
    an op without a converter, PyTorch's; for one whose converter needs as a constant a number
    the graph computes, also the decompositions of core ops."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    if not is_mapped(node.target):
        return decomposition_of(node.target)
    if not converts(node):
        return decomposition_of(node.target, core=True)
    return None


def supported_ops() -> list[str]:
    """The ATen overloads fastonnx converts (names as in native_functions.yaml)."""
    return sorted(set(_registry()) | {overload_key(op) for op in _DROPPED})


def _meta(value, dim_name) -> tuple[int, list] | None:
    """(dtype code, shape) of a node's value: a tensor's, or a 0-d tensor's for a Python number
    (a symbolic size is an int64 scalar in the ONNX graph, as torch computes it in int64).
    ``dim_name`` names a symbolic dimension."""
    if isinstance(value, torch.Tensor):
        return dtype_code(value.dtype), [dim_name(d) if isinstance(d, torch.SymInt) else int(d) for d in value.shape]
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


def aten_histogram(graph: torch.fx.Graph, live: set[torch.fx.Node]) -> Counter:
    """How many times each op is called among the live nodes (``aten::linear``: 12)."""
    return Counter(
        qualified_name(n.target) for n in graph.nodes
        if n in live and n.op == "call_function" and n.target is not operator.getitem
    )


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


def check_supported(graph: torch.fx.Graph, live: set[torch.fx.Node], bodies=()) -> None:
    """Raise one error naming every op of the graph, and of the functions of its control flow
    (``Body``s), that has no converter (after decomposition: these have neither a converter nor
    a decomposition)."""
    missing: Counter = Counter()
    first: dict = {}
    for g, alive in [(graph, live), *((b.graph, b.live) for b in bodies)]:
        for n in g.nodes:
            if n.op != "call_function" or n.target is operator.getitem or n not in alive:
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
    ``attribute`` resolves) into the session's ONNX graph. ``bodies`` are the prepared functions
    of its control-flow ops (by submodule); one missing is lowered as traced."""

    def __init__(self, ep: ExportedProgram, session: _C.Session, graph: torch.fx.Graph, live: set[torch.fx.Node],
                 attribute=None, opset: int = _C.DEFAULT_OPSET, bodies: dict | None = None,
                 scopes: ModuleScopes | None = None):
        self.ep = ep
        # export_modules_as_functions: the module call of each node of the model's own graph (the
        # nodes of a control-flow function stay in the scope of the op that owns them).
        self.scopes, self.model_graph, self.scope = scopes, graph, 0
        self.opset = opset
        self.keep_alive: list = []  # tensors Python converters made constants of
        self.session = session
        self.graph = graph
        self.live = live
        self.attribute = attribute or (lambda target: getattr(ep.graph_module, target))
        self.env: dict[torch.fx.Node, object] = {}
        self.input_names: list[str] = []
        self.shared: dict[tuple, object] = {}  # storage, layout -> initializer
        self.symbol_names: dict[sympy.Symbol, sympy.Symbol] = {}  # torch's size symbols -> ONNX names
        # Requested dynamic axes the trace fixed, and requested names of one size: for the warning.
        self.static_axes: list[StaticAxis] = []
        self.shared_names: list[tuple[str, str, str]] = []
        self.named_sizes: set[str] = set()  # the dynamic sizes dim_name has named
        self.bodies: dict = dict(bodies or {})

    def body(self, module: torch.fx.GraphModule) -> Body:
        if module not in self.bodies:
            self.bodies[module] = Body(module.graph, functools.partial(getattr, module), live_nodes(module.graph))
        return self.bodies[module]

    def lower_body(self, body: Body, bindings: list) -> list:
        """Converts the nodes of a control-flow function into the graph being built (the session's
        innermost open subgraph), its placeholders bound to ``bindings`` in order; returns what it
        returns."""
        placeholders = body.placeholders
        if len(placeholders) != len(bindings):
            raise ConversionError(f"a function of a control-flow op takes {len(placeholders)} inputs; it was given "
                                  f"{len(bindings)}")
        saved = self.graph, self.live, self.attribute, self.env
        self.graph, self.live, self.attribute = body.graph, body.live, body.attribute
        self.env = dict(zip(placeholders, bindings))
        try:
            self.convert_nodes()
            output = next(n for n in reversed(body.graph.nodes) if n.op == "output")
            results = output.args[0]
            return [self._encode(r) for r in (results if isinstance(results, (list, tuple)) else [results])]
        finally:
            self.graph, self.live, self.attribute, self.env = saved

    def meta(self, value) -> tuple[int, list] | None:
        """(dtype code, shape) of a node's value, as the session takes it."""
        return _meta(value, self.dim_name)

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

    def _args(self, fx_name: str, target, plan: _Plan, args: tuple, kwargs: dict) -> list:
        label = lambda: f"{qualified_name(target)} (FX node `{fx_name}`)"  # noqa: E731 - for errors only
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

    def dim_name(self, size: torch.SymInt) -> int | str:
        """A symbolic dimension's name in the ONNX graph: its expression over the input
        dimensions' names (``batch``, ``2*seq``), or the number torch pinned it to."""
        expr = size.node.expr
        if expr.is_number:
            return int(expr)
        name = str(expr.xreplace(self.symbol_names))
        if name not in self.named_sizes:
            self.named_sizes.add(name)
            # torch traces ops that treat a size of 1 apart (squeeze) as if it were not 1, even
            # where the program accepts 1 (a size read with .item(), a Dim with min=1).
            if 1 in bound_sympy(expr, self.ep.range_constraints):
                self.session.mark_may_be_one(name)
        return name

    def add_placeholders(self, input_names: list[str] | None, dim_names: list[dict[int, str]] = (),
                         export_params: bool = True, why_static=None) -> None:
        """Graph inputs and initializers. A dynamic input dimension takes the name asked for in
        ``dim_names`` (per tensor input, by dimension), else ``<input>_dim_<i>``; a requested one
        the trace fixed is listed in ``static_axes`` (``why_static(input index, axis, size)``
        says why). Without ``export_params`` the weights are graph inputs named as in the state
        dict, after the model's own inputs."""
        sig = self.ep.graph_signature
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        user_names = list(input_names or [])
        inputs = [(spec, node) for spec, node in zip(sig.input_specs, placeholders)
                  if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument)]
        names = [user_names.pop(0) if user_names else node.name for _, node in inputs]
        requests = [dim_names[i] if i < len(dim_names) else {} for i in range(len(inputs))]
        self._name_symbols([node.meta["val"].shape for _, node in inputs], names, requests, why_static)
        tensor_inputs = dict(zip((node for _, node in inputs), names))
        state = self.ep.state_dict
        constants = self.ep.constants
        weights_as_inputs = []
        for spec, node in zip(sig.input_specs, placeholders):
            if spec.kind == InputKind.USER_INPUT:
                if node not in tensor_inputs:
                    self.env[node] = node.meta.get("val")  # a Python constant torch.export specialized
                    continue
                meta = _meta(node.meta["val"], self.dim_name)
                self.env[node] = self.session.add_input(tensor_inputs[node], meta[0], meta[1])
                self.input_names.append(tensor_inputs[node])
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and not export_params:
                weights_as_inputs.append((spec.target, node))
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                tensor = state[spec.target] if spec.target in state else constants[spec.target]
                self.env[node] = self._initializer(spec.target, tensor)
            else:
                raise ConversionError(f"input `{node.name}` of kind {spec.kind.name} is not supported")
        for name, node in weights_as_inputs:
            meta = _meta(node.meta["val"], self.dim_name)
            self.env[node] = self.session.add_input(name, meta[0], meta[1])

    def _name_symbols(self, shapes: list, names: list[str], requests: list[dict[int, str]], why_static) -> None:
        """Names the size symbols of the tensor inputs: the first name requested for a symbol
        wins (a later, different one goes to ``shared_names``), then ``<input>_dim_<axis>`` of its
        first dimension. A requested axis that is static goes to ``static_axes``."""
        for i, (shape, name, requested) in enumerate(zip(shapes, names, requests)):
            for axis, dim_name in requested.items():
                expr = shape[axis].node.expr if isinstance(shape[axis], torch.SymInt) else None
                if expr is None or expr.is_number:
                    size = int(shape[axis])
                    why = why_static(i, axis, size) if why_static is not None else ""
                    self.static_axes.append(StaticAxis(f"input `{name}`", axis, dim_name, size, why))
                elif expr.is_Symbol and expr not in self.symbol_names:
                    self.symbol_names[expr] = sympy.Symbol(dim_name)
                elif expr.is_Symbol and str(self.symbol_names[expr]) != dim_name:
                    self.shared_names.append((str(self.symbol_names[expr]), dim_name, f"input `{name}` axis {axis}"))
        for shape, name in zip(shapes, names):
            for axis, size in enumerate(shape):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if expr is not None and expr.is_Symbol and expr not in self.symbol_names:
                    self.symbol_names[expr] = sympy.Symbol(f"{name}_dim_{axis}")

    def _initializer(self, name: str, tensor: torch.Tensor):
        # A tensor two parameters share (tied embeddings) is one initializer, written once.
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.dtype, tuple(tensor.shape),
               tuple(tensor.stride()))
        if key in self.shared and tensor.numel():
            return self.shared[key]
        self.shared[key] = ref = self._new_initializer(name, tensor)
        return ref

    def _new_initializer(self, name: str, tensor: torch.Tensor):
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if not t.is_contiguous():
            t = t.contiguous()
        nbytes = t.numel() * t.element_size()
        return self.session.add_initializer(name, dtype_code(t.dtype), list(t.shape), t.data_ptr(), nbytes, t)

    def convert_nodes(self, advance=None) -> None:
        """Converts every live node; ``advance(n)`` is told every few hundred nodes."""
        done = 0
        for node in self.graph.nodes:
            if node not in self.live:
                continue
            done += 1
            if advance is not None and done % 256 == 0:
                advance(256)
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
            metas = [_meta(v, self.dim_name) for v in val] if isinstance(val, (list, tuple)) else [_meta(val, self.dim_name)]
            if self.scopes is not None and self.graph is self.model_graph:
                self._enter_scope(self.scopes.scope_of(node))
            if is_control_flow(node.target):
                self.env[node] = LOWERINGS[node.target](self, node, metas)
                continue
            python_converter = converter_for(node.target, self.opset)
            if python_converter is not None:
                self.env[node] = self._convert_in_python(node, python_converter, metas)
                continue
            sym = symbolic_op(node.target)
            target, args, kwargs = (sym[0], node.args, sym[1]) if sym else (node.target, node.args, node.kwargs)
            if sym and node.target in _ROUNDING_TO_INT:
                rounded = self._convert(node, target, args, kwargs, [None])
                target, args, kwargs = aten._to_copy.default, (rounded,), {"dtype": torch.int64}
            self.env[node] = self._convert(node, target, args, kwargs, metas)
        if self.graph is self.model_graph:
            self._enter_scope(0)

    def _enter_scope(self, scope: int) -> None:
        if scope != self.scope:
            self.scope = scope
            self.session.set_scope(scope)

    def _convert_in_python(self, node: torch.fx.Node, fn, metas: list):
        """A node whose op has a registered Python converter: ``fn(g, *args, **kwargs)`` with the
        graph values as ``Value``s; the results take torch.export's recorded types and shapes."""

        def value(a):
            if not isinstance(a, torch.fx.Node):
                return a
            ref, val = self.env[a], a.meta.get("val")
            if isinstance(val, torch.Tensor):
                return Value(ref, val.dtype, tuple(int(d) if isinstance(d, int) else str(d) for d in val.shape))
            return Value(ref)

        args, kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), value)
        try:
            out = fn(GraphContext(self.session, self.opset, self.keep_alive), *args, **kwargs)
        except (_C.ConvertError, TypeError, ValueError) as e:
            raise ConversionError(f"the Python converter of {qualified_name(node.target)} (FX node `{node.name}`) "
                                  f"failed: {e}") from e
        results = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(results) != len(metas) or not all(isinstance(r, Value) for r in results):
            raise ConversionError(f"the Python converter of {qualified_name(node.target)} returned {out!r}; it must "
                                  f"return {len(metas)} value(s) made with g.op")
        for i, (r, meta) in enumerate(zip(results, metas)):
            if meta is not None:
                try:
                    self.session.set_meta(r.ref, meta[0], meta[1])
                except _C.ConvertError as e:
                    raise ConversionError(f"the Python converter of {qualified_name(node.target)} (FX node "
                                          f"`{node.name}`) returned a wrong result {i}: {e}") from None
        refs = [r.ref for r in results]
        return refs if isinstance(out, (list, tuple)) else refs[0]

    def _convert(self, node: torch.fx.Node, target, args: tuple, kwargs: dict, metas: list):
        plan = plan_for(target)
        if plan is None:  # only a Python converter registered for later opsets
            raise ConversionError(f"{qualified_name(target)} (FX node `{node.name}`): its Python converter does not "
                                  f"apply at opset {self.opset} (see the opset= of register_converter)")
        try:
            refs = self.session.convert(plan.op_id, self._args(node.name, target, plan, args, kwargs), metas, node.name)
        except _C.ConvertError as e:
            source = _first_source_line(node)
            raise ConversionError(str(e) + (f"\n  from {source}" if source else "")) from None
        return refs if plan.multi_output else refs[0]

    def set_outputs(self, output_names: list[str] | None,
                    output_axes: dict[str, dict[int, str]] | None = None) -> list[str]:
        """Graph outputs, named by ``output_names`` in order, the rest by where they sit in what
        ``forward`` returns (see ``output_paths``). A returned Python number is a 0-d tensor
        (int64, the default float dtype or bool, as torch.onnx makes it); a returned None is
        dropped, as torch.onnx drops it. ``output_axes`` (dynamic_axes of outputs, by name): an
        axis that is one symbol is named as asked; one that is static goes to ``static_axes``."""
        sig = self.ep.graph_signature
        output_node = next(n for n in self.graph.nodes if n.op == "output")
        user_names = list(output_names or [])
        values = [v for spec, v in zip(sig.output_specs, output_node.args[0]) if spec.kind == OutputKind.USER_OUTPUT]
        # (mutations of buffers and inputs, the other outputs, have no place in an ONNX graph)
        paths = output_paths(self.ep.call_spec.out_spec, len(values))
        outputs, vals = [], []
        for value, path in zip(values, paths):
            if value is None:
                continue
            ref, val = self._output_value(value, path)
            # A returned dict's key may be an input's name too (`state`): the output then is
            # `output_state`, and the input keeps its name.
            name = user_names.pop(0) if user_names else (f"output_{path}" if path in self.input_names else path)
            outputs.append((ref, name))
            vals.append(val)
        # Renaming dimensions is for a value that is one output's alone: an input's, a weight's or
        # one returned twice would be renamed there too.
        leaves = {v.id for n, v in self.env.items()
                  if n.op in ("placeholder", "get_attr") and isinstance(v, _C.ValueRef)}
        returned = Counter(ref.id for ref, _ in outputs)
        for (ref, name), val in zip(outputs, vals):
            if (output_axes or {}).get(name):
                own = ref.id not in leaves and returned[ref.id] == 1
                self._name_output_dims(ref, val, name, output_axes[name], own)
        self.session.set_outputs(outputs)
        return [name for _, name in outputs]

    def _output_value(self, value, path: str):
        """The graph value of one returned value, and what torch recorded of it."""
        if isinstance(value, torch.fx.Node):
            val, ref = value.meta.get("val"), self.env[value]
            if isinstance(val, torch.Tensor):
                return ref, val
            if isinstance(val, (int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):
                return self._scalar_output(ref, val, path), val
        elif isinstance(value, (int, float)):
            return self._scalar_output(value, value, path), value
        raise ConversionError(f"output {path} is {value!r}, not a tensor or a number; ONNX outputs are tensors")

    def _scalar_output(self, ref, val, path: str):
        """A returned Python number ``val`` as a 0-d tensor of the type torch.onnx gives it:
        int64, bool, or the default float dtype. ``ref`` is its graph value (an int64, float64
        or bool 0-d tensor) or, when torch knows it, the number itself."""
        dtype = (torch.bool if isinstance(val, (bool, torch.SymBool)) else
                 torch.int64 if isinstance(val, (int, torch.SymInt)) else torch.get_default_dtype())
        if isinstance(ref, (int, float)):
            op, kwargs = aten.scalar_tensor.default, {"s": ref, "dtype": dtype}
        elif isinstance(val, torch.SymFloat) and dtype != torch.float64:  # computed in float64
            op, kwargs = aten._to_copy.default, {"self": ref, "dtype": dtype}
        else:
            return ref
        plan, fx_name = plan_for(op), f"output_{path}"
        try:
            return self.session.convert(plan.op_id, self._args(fx_name, op, plan, (), kwargs),
                                        [(dtype_code(dtype), [])], fx_name)[0]
        except _C.ConvertError as e:
            raise ConversionError(f"output {path}: {e}") from None

    def _name_output_dims(self, ref, val, name: str, requested: dict[int, str], own: bool) -> None:
        """Checks the requested axes of an output; names the ones that are one symbol as asked
        (when ``own``: the value is this output's alone) and lists the static ones."""
        rank = val.dim() if isinstance(val, torch.Tensor) else 0
        bad = [a for a in requested if isinstance(a, bool) or not isinstance(a, int) or not -rank <= a < rank]
        if bad:
            raise ArgumentError(f"dynamic_axes[{name!r}]: dimension {bad[0]!r} does not exist in output `{name}`, "
                                f"of rank {rank}")
        shape = list(val.shape)
        dims = _meta(val, self.dim_name)[1]
        renamed = False
        for axis, dim_name in requested.items():
            axis %= rank
            expr = shape[axis].node.expr if isinstance(shape[axis], torch.SymInt) else None
            if expr is None or expr.is_number:
                self.static_axes.append(StaticAxis(f"output `{name}`", axis, dim_name, int(shape[axis]),
                                                   "(its size depends on no dynamic input axis)"))
            elif expr.is_Symbol and own and dims[axis] != dim_name:
                dims[axis], renamed = dim_name, True
        if renamed:
            self.session.set_meta(ref, dtype_code(val.dtype), dims)


def output_paths(out_spec, count: int) -> list[str]:
    """Names for the tensors ``forward`` returns, from where each sits in the returned
    structure: ``output`` for a lone tensor; ``output_0``, ``output_1``... for a tuple; a dict's
    or a ModelOutput's keys (``logits``, ``last_hidden_state``); nested parts joined with ``_``
    (``output_1_h``). A name that an input has is prefixed with ``output_`` (Lowering.set_outputs)."""
    if out_spec is None or out_spec.num_leaves != count:
        return [f"output_{i}" for i in range(count)]
    # Distinct placeholder leaves (not None: a ModelOutput drops the fields that are None).
    markers = [_Leaf() for _ in range(count)]
    names = []
    structure = pytree.tree_unflatten(markers, out_spec)
    for path, _ in pytree.tree_flatten_with_path(structure, is_leaf=lambda x: isinstance(x, _Leaf))[0]:
        parts = []
        for key in path:
            if isinstance(key, pytree.SequenceKey):
                parts.append(str(key.idx))
            elif isinstance(key, pytree.MappingKey):
                parts.append(str(key.key))
            else:
                parts.append(str(getattr(key, "name", key)))
        if not parts or isinstance(path[0], pytree.SequenceKey):
            parts.insert(0, "output")
        names.append("_".join(parts))
    if len(names) != count:  # a container type whose flattening does not round-trip
        return [f"output_{i}" for i in range(count)]
    return names


class _Leaf:
    """Stands in for an output tensor while its place in the returned structure is read."""

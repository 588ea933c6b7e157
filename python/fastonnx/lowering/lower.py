"""Lowering: walk the FX graph once and hand each node to the native core, one call per node.

Arguments are matched to the converter's signature by name, not position, so a torch whose
schema gained an argument still converts: an argument the generated code does not know is
dropped when it holds the schema's default and rejected otherwise.

Each FX graph being lowered has a ``GraphFrame`` of its own: the program's graph, and each
function of its control flow (_control_flow.py), which ``Lowering.lower_body`` lowers in a new
frame into the ONNX subgraph the session has open.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, TensorArgument
from torch.utils._sympy.value_ranges import bound_sympy

from .. import _C
from ..converters.registry import GraphContext, Value, converter_for
from ..core.dtypes import dtype_code
from ..dynamic.request import StaticAxis
from ..errors import ConversionError
from ..weights.source import STREAM_DTYPE
from .control_flow import LOWERINGS
from .functions import ModuleScopes
from .graph import PreparedGraph, source_line
from .op_table import REQUIRED, Plan, Route, aten, live_nodes, plan_for, qualified_name, route
from .outputs import set_outputs
from .values import RESHAPES, asked_shape_of, graph_meta, static_number, tensor_meta

_IGNORED_TYPES = (torch.device, torch.layout, torch.memory_format)


@dataclass
class GraphFrame:
    """What one FX graph being lowered owns: the prepared graph, and the graph value (a
    ``_C.ValueRef``, a list of them, a number...) of each of its nodes lowered so far. The
    model's own graph places its nodes in module scopes (export_modules_as_functions); the
    nodes of a control-flow function stay in the scope of the op that owns them."""

    prepared: PreparedGraph
    env: dict[torch.fx.Node, Any] = field(default_factory=dict)
    scopes: ModuleScopes | None = None


class Lowering:
    """Converts the model's prepared graph ``main`` into the session's ONNX graph. ``bodies``
    are the prepared functions of its control-flow ops (by submodule); one missing is lowered as
    traced. ``frame`` is the graph being lowered: ``main``'s, or a control-flow function's."""

    def __init__(
        self,
        ep: ExportedProgram,
        session: _C.Session,
        main: PreparedGraph,
        opset: int = _C.DEFAULT_OPSET,
        bodies: dict | None = None,
        scopes: ModuleScopes | None = None,
    ):
        self.ep = ep
        self.opset = opset
        self.session = session
        self.model_frame = self.frame = GraphFrame(main, scopes=scopes)
        self.scope = 0  # the session's current module scope
        self.keep_alive: list = []  # tensors Python converters made constants of
        self.input_names: list[str] = []
        self.unused_input_names: list[str] = []  # input_names past the inputs and the weights
        self.weight_count = 0
        self.shared: dict[tuple, object] = {}  # storage, layout -> initializer
        self.symbol_names: dict[sympy.Symbol, sympy.Symbol] = {}  # torch's size symbols -> ONNX names
        # Requested dynamic axes the trace fixed, and requested names of one size: for the warning.
        self.static_axes: list[StaticAxis] = []
        self.shared_names: list[tuple[str, str, str]] = []
        self.ignored_axes: list[str] = []  # requested output axes that do not exist, for the warning
        self.named_sizes: set[str] = set()  # the dynamic sizes dim_name has named
        self.may_be_one: set[str] = set()  # those of them whose range holds 1
        # dim_name's answers by expression: a graph full of symbolic shapes asks for the same
        # expressions at every node, and renaming and printing a large one costs more than a node.
        self.dim_names: dict[sympy.Expr, str] = {}
        self.bodies: dict[torch.fx.GraphModule, PreparedGraph] = dict(bodies or {})

    def body(self, module: torch.fx.GraphModule) -> PreparedGraph:
        if module not in self.bodies:
            self.bodies[module] = PreparedGraph(
                module.graph, functools.partial(getattr, module), live_nodes(module.graph)
            )
        return self.bodies[module]

    @contextlib.contextmanager
    def entering(self, frame: GraphFrame) -> Iterator[GraphFrame]:
        """Lowers into ``frame`` inside the block, and into the enclosing graph's frame again after."""
        outer, self.frame = self.frame, frame
        try:
            yield frame
        finally:
            self.frame = outer

    def lower_body(self, body: PreparedGraph, bindings: list) -> list:
        """Converts the nodes of a control-flow function into the graph being built (the session's
        innermost open subgraph), its placeholders bound to ``bindings`` in order; returns what it
        returns."""
        placeholders = body.placeholders
        if len(placeholders) != len(bindings):
            raise ConversionError(
                f"a function of a control-flow op takes {len(placeholders)} inputs; it was given {len(bindings)}"
            )
        with self.entering(GraphFrame(body, dict(zip(placeholders, bindings)))):
            self.convert_nodes()
            results = body.results
            return [self.encode(r) for r in (results if isinstance(results, (list, tuple)) else [results])]

    def tensor_meta(self, tensor: torch.Tensor) -> tuple[int, list]:
        """(dtype code, shape) of a tensor value, as the session takes it."""
        return tensor_meta(tensor, self.dim_name)

    def meta(self, value) -> tuple[int, list] | None:
        """(dtype code, shape) of a node's value, as the session takes it."""
        return graph_meta(value, self.dim_name)

    def encode(self, a):
        """An FX argument as the session takes it: a node as its graph value, a dtype as its code."""
        if isinstance(a, torch.fx.Node):
            v = self.frame.env[a]
            if isinstance(v, list):
                raise ConversionError(f"FX node `{a.name}` has several outputs and is used whole")
            return v
        if isinstance(a, (list, tuple)):
            return [self.encode(x) for x in a]
        if isinstance(a, torch.dtype):
            return dtype_code(a)
        if isinstance(a, _IGNORED_TYPES):
            return None
        return a

    def _args(self, fx_name: str, target, plan: Plan, args: tuple, kwargs: dict) -> list:
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
                out[pos] = self.encode(value)
            elif plan.defaults[j] is REQUIRED or value != plan.defaults[j]:
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
        name = self.dim_names.get(expr)
        if name is not None:
            return name
        name = self.dim_names[expr] = str(expr.xreplace(self.symbol_names))
        if name not in self.named_sizes:
            self.named_sizes.add(name)
            # torch traces ops that treat a size of 1 apart (squeeze) as if it were not 1, even
            # where the program accepts 1 (a size read with .item(), a Dim with min=1, an axis
            # traced at size 0 or 1).
            if 1 in bound_sympy(expr, self.ep.range_constraints):
                self.session.mark_may_be_one(name)
                self.may_be_one.add(name)
        return name

    def add_placeholders(
        self,
        input_names: Sequence[str] | None,
        dim_names: Sequence[dict[int, str]] = (),
        export_params: bool = True,
        why_static=None,
    ) -> None:
        """Graph inputs and initializers. A dynamic input dimension takes the name asked for in
        ``dim_names`` (per tensor input, by dimension), else ``<input>_dim_<i>``; a requested one
        the trace fixed is listed in ``static_axes`` (``why_static(input index, axis, size)``
        says why). Without ``export_params`` the weights are graph inputs named as in the state
        dict, after the model's own inputs. Names of ``input_names`` past the tensor inputs name
        the parameters, then the buffers; those left over are ``unused_input_names``."""
        sig = self.ep.graph_signature
        env = self.model_frame.env
        placeholders = self.model_frame.prepared.placeholders
        user_names = list(input_names or [])
        inputs = [
            (spec, node)
            for spec, node in zip(sig.input_specs, placeholders)
            if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument)
        ]
        names = [user_names.pop(0) if user_names else node.name for _, node in inputs]
        requests = [dim_names[i] if i < len(dim_names) else {} for i in range(len(inputs))]
        self._name_symbols([node.meta["val"].shape for _, node in inputs], names, requests, why_static)
        tensor_inputs = dict(zip((node for _, node in inputs), names))
        # Names past the inputs name the weights, parameters then buffers (TorchScript's order).
        weight_names = dict(zip([*sig.parameters, *sig.buffers], user_names))
        self.unused_input_names = user_names[len(weight_names) :]
        self.weight_count = len(sig.parameters) + len(sig.buffers)
        state = self.ep.state_dict
        constants = self.ep.constants
        weights_as_inputs = []
        for spec, node in zip(sig.input_specs, placeholders):
            if spec.kind == InputKind.USER_INPUT:
                if node not in tensor_inputs:
                    env[node] = node.meta.get("val")  # a Python constant torch.export specialized
                    continue
                meta = self.tensor_meta(node.meta["val"])
                env[node] = self.session.add_input(tensor_inputs[node], meta[0], meta[1])
                self.input_names.append(tensor_inputs[node])
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and not export_params:
                weights_as_inputs.append((spec.target, node))
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                tensor = state[spec.target] if spec.target in state else constants[spec.target]
                env[node] = self._initializer(weight_names.get(spec.target, spec.target), tensor)
            else:
                raise ConversionError(f"input `{node.name}` of kind {spec.kind.name} is not supported")
        for name, node in weights_as_inputs:
            meta = self.tensor_meta(node.meta["val"])
            env[node] = self.session.add_input(weight_names.get(name, name), meta[0], meta[1])

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
        self.dim_names.clear()  # (names given before these symbols had theirs)

    def _initializer(self, name: str, tensor: torch.Tensor):
        # A tensor two parameters share (tied embeddings) is one initializer, written once.
        key = (
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tensor.dtype,
            tuple(tensor.shape),
            tuple(tensor.stride()),
        )
        if key in self.shared and tensor.numel():
            return self.shared[key]
        self.shared[key] = ref = self.new_initializer(name, tensor)
        return ref

    def new_initializer(self, name: str, tensor: torch.Tensor):
        """``tensor`` as an initializer of its own (a copy only when it is not contiguous CPU memory)."""
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if not t.is_contiguous():
            t = t.contiguous()
        # A checkpoint's weight that export(dtype=...) converts while it is written (_weights.py).
        wanted = getattr(tensor, STREAM_DTYPE, t.dtype)
        if wanted != t.dtype:
            code, stored = dtype_code(wanted), dtype_code(t.dtype)
            return self.session.add_cast_initializer(name, code, list(t.shape), t.data_ptr(), stored, t)
        nbytes = t.numel() * t.element_size()
        return self.session.add_initializer(name, dtype_code(t.dtype), list(t.shape), t.data_ptr(), nbytes, t)

    def convert_nodes(self, advance=None) -> None:
        """Converts every live node of the frame's graph; ``advance(n)`` is told every few hundred
        nodes."""
        frame = self.frame
        env, scopes = frame.env, frame.scopes
        done = 0
        for node in frame.prepared.graph.nodes:
            if node not in frame.prepared.live:
                continue
            done += 1
            if advance is not None and done % 256 == 0:
                advance(256)
            if node.op == "get_attr":
                value = frame.prepared.attribute(node.target)
                if isinstance(value, torch.Tensor):
                    env[node] = self._initializer(node.target, value)
                continue
            if node.op != "call_function":
                continue
            if node.target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
                continue
            how = route(node.target)
            if how is not None and how.kind == "dropped":
                continue
            val = node.meta.get("val")
            number = static_number(val)
            if number is not None:
                env[node] = number
                continue
            metas = [self.meta(v) for v in val] if isinstance(val, (list, tuple)) else [self.meta(val)]
            if node.target in RESHAPES:
                metas = [self.tensor_meta(asked_shape_of(node, val))]
            if scopes is not None:
                self._enter_scope(scopes.scope_of(node))
            env[node] = self._convert_routed(node, how, metas)
        if scopes is not None:
            self._enter_scope(0)

    def _convert_routed(self, node: torch.fx.Node, how: Route | None, metas: list):
        """Converts a node the way ``route`` says; a node without a route reaches the converter
        of its own target, which says why it cannot convert."""
        if how is not None and how.kind == "control_flow":
            return LOWERINGS[node.target](self, node, metas)
        if how is not None and how.kind == "python":
            python_converter = converter_for(node.target, self.opset)
            if python_converter is not None:
                return self._convert_in_python(node, python_converter, metas)
        if how is not None and how.kind == "symbolic":
            if how.rounds_to_int:
                rounded = self._convert(node, how.target, node.args, how.kwargs, [None])
                return self._convert(node, aten._to_copy.default, (rounded,), {"dtype": torch.int64}, metas)
            return self._convert(node, how.target, node.args, how.kwargs, metas)
        return self._convert(node, node.target, node.args, node.kwargs, metas)

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
            ref, val = self.frame.env[a], a.meta.get("val")
            if isinstance(val, torch.Tensor):
                return Value(ref, val.dtype, tuple(int(d) if isinstance(d, int) else str(d) for d in val.shape))
            return Value(ref)

        args, kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), value)
        try:
            out = fn(GraphContext(self.session, self.opset, self.keep_alive, node.name), *args, **kwargs)
        except ConversionError:
            raise
        except Exception as e:  # the user's code: its failure is the converter's, not fastonnx's
            kind = "" if isinstance(e, (_C.ConvertError, TypeError, ValueError)) else f"{type(e).__name__}: "
            raise ConversionError(
                f"the Python converter of {qualified_name(node.target)} (FX node `{node.name}`) failed: {kind}{e}"
            ) from e
        results = list(out) if isinstance(out, (list, tuple)) else [out]
        computed = all(isinstance(r, Value) or (r is None and i) for i, r in enumerate(results))
        if len(results) != len(metas) or not computed:
            raise ConversionError(
                f"the Python converter of {qualified_name(node.target)} returned {out!r}; it must "
                f"return {len(metas)} value(s) made with g.op (None for an output after the first that ONNX "
                "cannot compute)"
            )
        # An output the converter cannot compute (None, as torch.onnx's symbolic functions return
        # it) is refused where the model reads it, never left to compute something else.
        for user in node.users:
            index = user.args[1] if user.target is operator.getitem else None
            if isinstance(index, int) and results[index] is None and user.users:
                raise ConversionError(
                    f"the Python converter of {qualified_name(node.target)} (FX node `{node.name}`) gives no ONNX "
                    f"value for its output {index}, which the model reads"
                    + (f"\n  from {source_line(user)}" if source_line(user) else "")
                )
        for i, (r, meta) in enumerate(zip(results, metas)):
            if r is not None and meta is not None:
                try:
                    self.session.set_meta(r.ref, meta[0], meta[1])
                except _C.ConvertError as e:
                    raise ConversionError(
                        f"the Python converter of {qualified_name(node.target)} (FX node "
                        f"`{node.name}`) returned a wrong result {i}: {e}"
                    ) from None
        refs = [r.ref if r is not None else None for r in results]
        return refs if isinstance(node.meta.get("val"), (list, tuple)) else refs[0]

    def _convert(self, node: torch.fx.Node, target, args: tuple, kwargs: dict, metas: list):
        plan = plan_for(target)
        if plan is None:  # only a Python converter registered for later opsets
            raise ConversionError(
                f"{qualified_name(target)} (FX node `{node.name}`): its Python converter does not "
                f"apply at opset {self.opset} (see the opset= of register_converter)"
            )
        try:
            refs = self.session.convert(plan.op_id, self._args(node.name, target, plan, args, kwargs), metas, node.name)
        except _C.ConvertError as e:
            source = source_line(node)
            raise ConversionError(str(e) + (f"\n  from {source}" if source else "")) from None
        return refs if plan.multi_output else refs[0]

    def set_outputs(
        self, output_names: Sequence[str] | None, output_axes: dict[str, dict[int, str]] | None = None
    ) -> list[str]:
        """The graph's outputs (``outputs.set_outputs``); returns their names."""
        return set_outputs(self, output_names, output_axes)

    def convert_call(self, fx_name: str, op, kwargs: dict, metas: list) -> list:
        """Converts ``op`` called with ``kwargs`` alone (a node the lowering makes itself, named
        ``fx_name``), its results of ``metas``; the op must have a native converter."""
        plan = plan_for(op)
        assert plan is not None, qualified_name(op)
        return self.session.convert(plan.op_id, self._args(fx_name, op, plan, (), kwargs), metas, fx_name)

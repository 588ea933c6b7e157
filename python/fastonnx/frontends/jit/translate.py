"""The TorchScript front end's second half: a TorchScript graph as an FX graph of ATen overloads,
the form the lowering takes from torch.export, so both front ends share one lowering, one
converter table and one writer.

A ``Translator`` (translator.py) walks the graph's nodes, each given to the handler of its kind:
``prim::`` nodes (prim_nodes.py) become Python values and arithmetic on sizes (so a size the
tracer recorded stays a size of the graph), ``prim::If``/``prim::Loop`` (control_flow.py)
torch.cond / while_loop, which the lowering writes as ONNX If / Loop; each ``aten::`` node
(aten_nodes.py) becomes the overload its schema names; quantized tensors (quantized.py) and packed
sequences (packed_sequences.py) are kept as what ONNX takes of them.

Every FX node gets ``meta["val"]`` the way torch.export records it (fake_values.py). A symbol the
ShapeEnv replaces by a number is a dynamic axis the graph fixes; ``JitProgram.fixed`` says which
node fixed it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import sympy
import torch
import torch._functorch.config as functorch_config
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ...dynamic.small_sizes import dynamic_small_sizes, retracing
from ...errors import ConversionError, ExportError
from ..export.trace import needs_functionalization
from . import aten_nodes, control_flow, lists, loops, packed_sequences, prim_nodes, quantized
from .data_reads import typed_by_trace
from .fake_values import SizesFromData
from .optionals import none_of
from .quantized import PackedWeights, QTensor, quantized_input, quantized_output
from .retrace import Retrace
from .sequences import empty, is_sequence
from .trace import JitGraph
from .translator import Handlers, Translator

# Every handler, by the kind of node it translates.
_HANDLERS = Handlers(
    of_kind={
        **prim_nodes.HANDLERS,
        **control_flow.HANDLERS,
        **loops.HANDLERS,
        **packed_sequences.HANDLERS,
        **aten_nodes.HANDLERS,
        **lists.HANDLERS,
        **quantized.HANDLERS,
    },
    quantized=quantized.quantized_like_float,
    op=aten_nodes.op,
)


@dataclass
class JitProgram:
    """A TorchScript graph translated to FX, with the surface of ``torch.export.ExportedProgram``
    the lowering reads (graph, signature, weights, symbol ranges, output structure)."""

    graph_module: torch.fx.GraphModule
    graph_signature: ExportGraphSignature
    state_dict: dict[str, torch.Tensor]
    constants: dict[str, torch.Tensor]
    range_constraints: dict
    call_spec: SimpleNamespace
    shape_env: ShapeEnv
    fake_mode: FakeTensorMode
    # (input index, axis) -> what replaced the axis's symbol, and the TorchScript node that did it.
    fixed: dict[tuple[int, int], str] = field(default_factory=dict)
    tracer_warnings: list[str] = field(default_factory=list)
    front_end: str = "torch.jit.trace"
    # (input index, axis) -> the symbol of a dynamic input size.
    input_symbols: dict[tuple[int, int], Any] = field(default_factory=dict)
    # The numbers the model's Python code took from sizes (JitGraph.size_reads), each as computed
    # over the symbols (None where the translation lost how), the symbols it reads, and its line.
    size_reads: list[tuple[Any, frozenset, str]] = field(default_factory=list)
    guard_lines: dict = field(default_factory=dict)  # guard the translation made -> the model's line

    @property
    def graph(self) -> torch.fx.Graph:
        return self.graph_module.graph


def translate(
    jit: JitGraph,
    user_tensors: Sequence[torch.Tensor],
    input_names: Sequence[str],
    dynamic: Sequence[dict[int, str]],
    small_sizes: bool = False,
) -> JitProgram:
    """The FX program of ``jit``, traced at ``user_tensors``; ``dynamic`` gives each input's
    dynamic axes (axis -> name). With ``small_sizes``, dynamic axes of size 0 or 1 are symbols too
    (see _small_sizes; the guards made are in ``guard_lines``)."""
    typed = typed_by_trace(jit, dynamic)
    try:
        try:
            program = _translated(jit, user_tensors, dynamic, input_names, typed, small_sizes)
        except SizesFromData:  # an op data_reads does not know (a composite returning a list)
            program = _translated(jit, user_tensors, dynamic, input_names, False, small_sizes)
    except ExportError:
        raise
    except Exception as e:  # outside a node's translation (which names the node), an ExportError too
        first = str(e).splitlines()[0] if str(e) else ""
        raise ConversionError(f"translating the TorchScript graph failed: {type(e).__name__}: {first}") from e
    # The example's values served the translation only. What retraces the program under its fake
    # mode afterwards (functionalization, decompositions) runs on its symbols alone, as on
    # torch.export's: with real values beside, torch checks each view's offset against the real
    # one, a guard on a size of the data (a select at an index read from data) that fails.
    program.fake_mode.propagate_real_tensors = False
    return program


def _translated(jit: JitGraph, user_tensors, dynamic, input_names, typed: bool, small_sizes: bool) -> JitProgram:
    small = dynamic_small_sizes() if small_sizes else contextlib.nullcontext()
    # The fake mode reads the setting when it is made.
    with functorch_config.patch(fake_tensor_propagate_real_tensors=not typed), small:
        return _program(Translator(_HANDLERS, typed), jit, user_tensors, input_names, dynamic)


def flat_tensors(args: tuple, kwargs: dict | None) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves((tuple(args), dict(kwargs or {}))) if isinstance(x, torch.Tensor)]


def _program(
    t: Translator,
    jit: JitGraph,
    user_tensors: Sequence[torch.Tensor],
    input_names: Sequence[str],
    dynamic: Sequence[dict[int, str]],
) -> JitProgram:
    """The translation of ``jit``'s graph, its inputs the example's ``user_tensors`` and the weights."""
    inputs = list(jit.graph.inputs())
    input_specs: list[InputSpec] = []
    t.script_module = jit.module
    flat = iter(range(len(user_tensors)))

    def user_input(tensor: torch.Tensor):
        """The FX value of the next of the flattened tensor inputs."""
        i = next(flat)
        axes = dynamic[i] if i < len(dynamic) else {}
        if tensor.is_quantized:
            return quantized_input(t, tensor, input_names[i], axes, input_specs)
        node = t.graph.placeholder(input_names[i])
        node.meta["val"] = t.fake(tensor, f"L['{input_names[i]}']", axes)
        for axis, size in enumerate(node.meta["val"].shape):
            if isinstance(size, torch.SymInt):
                t.symbols[size.node.expr] = (i, axis)
        input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
        t.examples[node] = tensor
        return node

    arguments = jit.arguments if jit.arguments is not None else list(user_tensors)
    for v, argument in zip(inputs, arguments):
        # (a ScriptModule's list or tuple of tensors: a list of inputs; a number, None: itself)
        t.env[v] = _as_typed(t, pytree.tree_map_only(torch.Tensor, user_input, argument), v.type())
    for v, (wname, tensor) in zip(inputs[jit.n_user :], jit.weights):
        if not isinstance(tensor, torch.Tensor):  # packed quantized weights
            t.env[v] = PackedWeights(tensor)
            continue
        node = t.graph.placeholder("p_" + re.sub(r"\W", "_", wname))
        node.meta["val"] = t.fake(tensor)
        kind = InputKind.PARAMETER if isinstance(tensor, torch.nn.Parameter) else InputKind.BUFFER
        input_specs.append(InputSpec(kind, TensorArgument(node.name), wname, True))
        t.env[v] = node
        t.examples[node] = tensor
    t.block(jit.graph)
    outputs = list(jit.graph.outputs())
    returned = len(outputs) - len(jit.size_reads)
    # (a scripted graph returns a list or tuple as one value; eager's result is flattened, a None
    # kept as an empty optional of the default dtype, as the TorchScript exporter returns it)
    scripted = jit.arguments is not None
    values: Any = [t.env[v] for v in outputs[:returned]]
    example_outputs, out_spec = jit.example_outputs, jit.out_spec
    if scripted:
        values, example_outputs, out_spec = _returned_sequences(t, values, example_outputs, out_spec)
    results = pytree.tree_leaves(values, is_leaf=lambda x: scripted and x is None)
    results = [none_of(t, torch.get_default_dtype(), []) if x is None else x for x in results]
    size_reads = [(*_size_read(t, v), line) for v, line in zip(outputs[returned:], jit.size_reads)]
    if len(results) + len(jit.constant_outputs) != len(example_outputs):
        raise ConversionError(
            f"the TorchScript graph returns {len(results)} value(s) where forward's result holds "
            f"{len(example_outputs) - len(jit.constant_outputs)}"
        )
    leaves, it = [], iter(results)
    for i in range(len(example_outputs)):
        leaves.append(jit.constant_outputs[i] if i in jit.constant_outputs else next(it))
    if any(isinstance(x, QTensor) for x in leaves):
        leaves, out_spec = pytree.tree_flatten(
            pytree.tree_unflatten([quantized_output(t, x) if isinstance(x, QTensor) else x for x in leaves], out_spec)
        )
    t.graph.output(tuple(leaves))  # type: ignore[arg-type]  # (nodes and Python constants)
    output_specs = [
        OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(x.name if isinstance(x, torch.fx.Node) else str(i)), None)
        for i, x in enumerate(leaves)
    ]
    # (its Python code is generated when it is first called or read, which no export does)
    module = _LazyGraphModule(t.root, t.graph)
    return JitProgram(
        module,
        ExportGraphSignature(input_specs, output_specs),
        dict(jit.weights),
        t.constants,
        dict(t.shape_env.var_to_range),
        SimpleNamespace(out_spec=out_spec),
        t.shape_env,
        t.mode,
        t.fixed,
        jit.tracer_warnings,
        input_symbols={axis: symbol for symbol, axis in t.symbols.items()},
        size_reads=size_reads,
        guard_lines=t.guard_lines,
    )


def _as_typed(t: Translator, value, jit_type):
    """An argument's value as the forward's TorchScript type takes it: a 0-d tensor given for a
    number (``List[int]`` of ``torch.tensor(2)``s, which a scripted call converts) is the number
    the graph reads from that input."""
    kind = jit_type.kind()
    if kind in ("IntType", "FloatType", "BoolType", "NumberType"):
        if isinstance(value, torch.fx.Node) and isinstance(t.fake_of(value), torch.Tensor):
            return t.read_number(value)
        return value
    if kind == "OptionalType":
        return _as_typed(t, value, jit_type.getElementType())
    if kind == "ListType" and isinstance(value, list):
        return [_as_typed(t, x, jit_type.getElementType()) for x in value]
    if kind == "TupleType" and isinstance(value, tuple):
        return tuple(_as_typed(t, x, item) for x, item in zip(value, jit_type.elements()))
    return value


class _Sequence:
    """In eager's result, the place of a list the graph returns as one sequence."""


def _returned_sequences(t: Translator, values: list, leaves: list, spec: pytree.TreeSpec) -> tuple:
    """A scripted graph's returned values, and eager's result's leaves and structure, with each list
    the graph returns as a sequence one leaf of the result. When the result holds no tensor or
    number, each list empty in the example is an empty sequence of the default dtype (ONNX needs an
    output; the TorchScript exporter returns each list as a sequence), fastonnx flattening lists of
    a known length into their items otherwise."""
    ts = values[0] if len(values) == 1 else tuple(values)
    eager = pytree.tree_unflatten(leaves, spec)
    empty_ones = not pytree.tree_leaves(values, is_leaf=lambda x: x is None)

    def walk(a, b):
        if is_sequence(a):
            return a, _Sequence()
        if empty_ones and isinstance(a, list) and not a and isinstance(b, list) and not b:
            with t.mode:
                item = torch.empty((), dtype=torch.get_default_dtype())
            return empty(t, item), _Sequence()
        if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
            pairs = [walk(x, y) for x, y in zip(a, b)]
            return type(a)(x for x, _ in pairs), type(b)(y for _, y in pairs)
        return a, b

    new_ts, new_eager = walk(ts, eager)
    new_leaves, new_spec = pytree.tree_flatten(new_eager, is_leaf=lambda x: x is None)
    return [new_ts] if len(values) == 1 else list(new_ts), new_leaves, new_spec


def _size_read(t: Translator, v) -> tuple[Any, frozenset]:
    """A number the model's Python code took from sizes, over the symbols (a sympy expression),
    and the symbols it reads; where the translation computed it as a tensor rather than a size
    (an op on sizes it does not follow), None and the symbols of the sizes it is made from."""
    number = t.sizes.get(v, t.env[v])
    if not isinstance(number, torch.fx.Node):
        return sympy.sympify(number), frozenset()
    val = number.meta.get("val")
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        return val.node.expr, frozenset(val.node.expr.free_symbols)
    symbols: set = set()
    seen, todo = set(), [number]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        inner = n.meta.get("val")
        if isinstance(inner, torch.SymInt | torch.SymFloat | torch.SymBool):
            symbols |= inner.node.expr.free_symbols
        else:
            todo.extend(n.all_input_nodes)
    return None, frozenset(symbols)


def functionalized(program: JitProgram) -> JitProgram:
    """The program with its in-place ops on views rewritten functionally, when it has any: an
    in-place op converts as its functional twin, exact only when nothing reads the written tensor
    through another name afterwards (torch's JIT passes remove the other mutations). The graph is
    retraced with torch.func.functionalize under the program's fake mode."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if not needs_functionalization(program.graph):
        return program
    old = program.graph_module
    placeholders = [n for n in old.graph.nodes if n.op == "placeholder"]
    retrace = Retrace(old)
    run = torch.func.functionalize(retrace.run, remove="mutations")
    try:
        with program.fake_mode, retracing(program.shape_env, "rewriting the graph without in-place ops"):
            new = make_fx(run, tracing_mode="real")(*[p.meta["val"] for p in placeholders])
    except Exception as e:  # torch's retrace of the graph
        retrace.forget()
        raise ConversionError(
            f"the TorchScript graph writes into views of tensors, and rewriting it without in-place ops failed: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ) from e
    for fresh, original in zip((n for n in new.graph.nodes if n.op == "placeholder"), placeholders):
        fresh._rename(original.name)
    retrace.restore(new)
    program.graph_module = new
    return program

"""The TorchScript front end's first half: a module (traced with ``torch.jit.trace``) or a
ScriptModule (its scripted ``forward``) as a TorchScript graph, with torch's own JIT passes
applied (inlining, tuple lowering, removing mutation), and what the trace fixed.

Tracing goes through a wrapper whose inputs are the call's flattened tensors (pytree order, the
order torch.export gives its placeholders) and whose output is the flattened result, so the
graph's inputs and outputs are plain tensors whatever the call's structure.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import sys
import traceback
import warnings
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

from ...dynamic.request import is_library, user_frame
from ...errors import TraceError
from .nodes import where


@dataclass
class JitGraph:
    """A TorchScript graph whose inputs are the call's tensors (``n_user`` of them, flattened) then
    the weights, in ``weights`` order."""

    graph: torch._C.Graph
    n_user: int
    weights: list[tuple[str, torch.Tensor]]
    out_spec: pytree.TreeSpec
    # Output leaves that are not tensors (a number, None), by position; the graph returns the others.
    constant_outputs: dict[int, object]
    example_outputs: list  # the eager outputs' leaves
    tracer_warnings: list[str] = field(default_factory=list)
    # The graph's last outputs: the numbers the model's Python code took from sizes (a size
    # compared with 1, converted to an int), each with its line (see _recording_size_reads).
    size_reads: list[str] = field(default_factory=list)
    # A ScriptModule's arguments, one per user input of its graph (a tensor, a list or tuple of
    # them, None, a number), when they are not the ``n_user`` tensors themselves.
    arguments: list | None = None
    # The frozen module whose attributes the forward sets (``prim::CreateObject`` makes it).
    module: torch._C.ScriptModule | None = None


class _Flat(torch.nn.Module):
    """``model`` called with its arguments rebuilt from the flattened tensors, its result flattened.
    With ``size_reads``, the sizes the model's Python code reads are returned after it (see
    _recording_size_reads)."""

    def __init__(
        self,
        model: torch.nn.Module,
        spec: pytree.TreeSpec,
        leaves: list,
        positions: list[int],
        size_reads: list[tuple[torch.Tensor, str]] | None = None,
        library_reads: bool = True,
    ):
        super().__init__()
        self.model = model
        self._spec, self._leaves, self._positions = spec, leaves, positions
        self.out_spec: pytree.TreeSpec | None = None
        self.out_leaves: list = []
        self.size_reads = size_reads
        self.library_reads = library_reads

    def forward(self, *tensors):
        leaves = list(self._leaves)
        for pos, t in zip(self._positions, tensors):
            leaves[pos] = t
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        reads = self.size_reads
        if reads is not None:
            reads.clear()
        recording = _recording_size_reads(reads, self.library_reads) if reads is not None else contextlib.nullcontext()
        with recording:
            result = self.model(*args, **kwargs)
        out_leaves, self.out_spec = pytree.tree_flatten(plain_containers(result))
        self.out_leaves = out_leaves
        outputs = tuple(t for t in out_leaves if isinstance(t, torch.Tensor))
        return outputs + tuple(t for t, _ in reads or ())


# The ways Python code takes a number out of a 0-d tensor; torch.jit's tracer gives sizes as 0-d
# tensors (len() goes through __index__).
_CONVERSIONS = ("__bool__", "__int__", "__index__", "__float__", "item")


@contextlib.contextmanager
def _recording_size_reads(into: list[tuple[torch.Tensor, str]], library_reads: bool = True):
    """Records each 0-d tensor computed from a size that Python code converts to a number while
    torch.jit traces, with the model's line: the trace keeps the number the example gives (the
    branch of an ``if x.size(0) == 1`` taken, an ``int(n)`` as a constant) and nothing of how it
    was computed. Returned as outputs of the trace, the translation computes each one over the
    dynamic sizes, and an axis it does not stay the same for is made static (frontends/choice.py).
    Without ``library_reads``, only those the model's own code converts (a test in torch's code,
    such as a recurrent layer reading a packed sequence's batch sizes, decides how torch computes,
    which the translated ops decide again at run time)."""
    originals = {name: getattr(torch.Tensor, name) for name in _CONVERSIONS}

    def recording(original):
        @functools.wraps(original)
        def converted(self, *args):
            if (
                self.dim() == 0
                and torch._C._get_tracing_state() is not None
                and (library_reads or not is_library(sys._getframe(1).f_code.co_filename))
                and _reads_a_size(self)
            ):
                frame = user_frame(traceback.extract_stack(sys._getframe(1), limit=64))
                into.append((self, f"{frame.filename}:{frame.lineno}: {frame.line}" if frame else ""))
            return original(self, *args)

        return converted

    for name, original in originals.items():
        setattr(torch.Tensor, name, recording(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def _reads_a_size(t: torch.Tensor) -> bool:
    """Whether the traced value of ``t`` is computed from a size (``aten::size``, ``aten::numel``)."""
    try:
        start = torch._C._get_value_trace(t)  # type: ignore[attr-defined]
    except RuntimeError:  # not a value of the trace (a constant made in Python)
        return False
    seen: set = set()
    todo = [start.node()]
    while todo and len(seen) < 256:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.kind() in ("aten::size", "aten::numel", "aten::sym_size"):
            return True
        todo.extend(v.node() for v in node.inputs())
    return False


def plain_containers(value):
    """``value`` with the dicts, lists and tuples of classes pytree does not know (a model's
    ``OrderedDict`` subclass for its outputs) made plain ones: the TorchScript tracer flattens
    any dict, list or tuple, and pytree would keep such an instance whole, as one output."""
    return pytree.tree_map(_plain_leaf, value)


def _plain_leaf(leaf):
    if isinstance(leaf, dict):
        return plain_containers(dict(leaf))
    if isinstance(leaf, list):
        return plain_containers(list(leaf))
    if isinstance(leaf, tuple):
        return plain_containers(tuple(leaf))
    return leaf


def _weights_for_attributes(graph: torch._C.Graph, weights: dict[str, torch._C.Value]) -> None:
    """Freezing makes the weights graph inputs but leaves the attribute reads inside loops and
    branches (``prim::GetAttr`` chains from the module object): each read of a weight becomes
    that input."""

    def path(value: torch._C.Value) -> str | None:
        node = value.node()
        if node.kind() == "prim::CreateObject":
            return ""
        if node.kind() != "prim::GetAttr":
            return None
        parent = path(node.input())
        return None if parent is None else (f"{parent}.{node.s('name')}" if parent else node.s("name"))

    def walk(block) -> None:
        for node in block.nodes():
            for inner in node.blocks():
                walk(inner)
            if node.kind() == "prim::GetAttr":
                name = path(node.output())
                if name in weights:
                    node.output().replaceAllUsesWith(weights[name])

    walk(graph)


def _passes(graph: torch._C.Graph) -> None:
    """torch's own passes, as its TorchScript exporter runs them: calls inlined, tuples lowered,
    mutation turned into functional ops where torch can prove it safe, ``print`` and ``warnings.warn``
    removed (ONNX has neither; the strings they format are then dead), constants folded. (The
    exporter's own pass for in-place ops on views writes ONNX-only nodes; the FX graph is
    functionalized instead: translate.functionalized.)"""
    torch._C._jit_pass_inline(graph)
    torch._C._jit_pass_inline_fork_wait(graph)
    torch._C._jit_pass_lower_all_tuples(graph)
    torch._C._jit_pass_remove_mutation(graph)
    torch._C._jit_pass_onnx_remove_print(graph)
    torch._C._jit_pass_constant_propagation(graph)
    torch._C._jit_pass_dce(graph)


@contextlib.contextmanager
def _recorded_tracer_warnings(into: list[str]):
    """Keeps the tracer's warnings (a value it fixed) instead of printing them: the front end
    reports them once, in the warning that says the model was traced with torch.jit."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        yield
    for w in caught:
        if issubclass(w.category, torch.jit.TracerWarning):
            first = str(w.message).splitlines()[0]
            line = f"{first} (at {w.filename}:{w.lineno})"
            if line not in into:
                into.append(line)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def trace_graph(
    model, args: tuple, kwargs: dict | None, read_sizes: bool = False, library_reads: bool = True
) -> JitGraph:
    """The TorchScript graph of ``model`` called on ``args``/``kwargs``; with ``read_sizes``, the
    numbers the model's Python code took from sizes are its last outputs (``JitGraph.size_reads``;
    ``library_reads``: those torch's code took too, see _recording_size_reads)."""
    if isinstance(model, torch.jit.ScriptModule):
        arguments = _script_arguments(model, tuple(args), dict(kwargs or {}))
        # (on copies: a forward that writes into its inputs, x.set_(y), would change the example,
        # and one that writes into its module's state, the weights written)
        copies, kwarg_copies = pytree.tree_map_only(torch.Tensor, torch.clone, (tuple(args), dict(kwargs or {})))
        eager = copy.deepcopy(model) if _writes_state(model) else model
        try:
            with torch.no_grad():
                # (None a leaf: a scripted graph returns it, as an empty ONNX optional)
                out_leaves, out_spec = pytree.tree_flatten(eager(*copies, **kwarg_copies), is_leaf=_is_none)
        except Exception as e:  # the model's own failure, whatever it raises
            from ..export.trace import describe_failure, no_kernel_message, op_without_kernel

            if (op := op_without_kernel(e)) is not None:
                raise TraceError(no_kernel_message(op, model, e)) from e
            raise TraceError(f"{type(model).__name__} failed on the example inputs: {describe_failure(e)}") from e
        graph, weights, module = _frozen_graph(model, arguments)
        # (None and numbers are constants of the graph; torch's pass lowering tuples made a tuple
        # argument's items inputs of their own)
        arguments = _without_tuples([a for a in arguments if _holds_tensors(a)])
        # A scripted graph returns its numbers too: no output is a constant.
        return JitGraph(graph, len(arguments), weights, out_spec, {}, out_leaves, arguments=arguments, module=module)
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    positions = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    reads: list[tuple[torch.Tensor, str]] | None = [] if read_sizes else None
    flat = _Flat(model, spec, leaves, positions, reads, library_reads)
    tensors = tuple(leaves[i] for i in positions)
    found: list[str] = []
    # Modules whose state holds other than tensors (eager-mode quantized modules hold packed
    # weights, TorchScript objects) cannot take their state as trace inputs: they are traced as a
    # module and frozen, like a scripted one.
    whole = any(not isinstance(v, torch.Tensor) or v.is_quantized for v in model.state_dict(keep_vars=True).values())
    try:
        with _recorded_tracer_warnings(found):
            if not whole:
                try:
                    graph, _ = torch.jit._get_trace_graph(flat, tensors, strict=False, _force_outplace=False)
                except RuntimeError as e:
                    # (quantized modules keep packed weights outside their state dict)
                    if "is not part of the active trace" not in str(e):
                        raise
                    whole = True
            if whole:
                traced = torch.jit.trace(flat, tensors, strict=False, check_trace=False)
    except Exception as e:  # any failure of torch.jit's tracer
        from ..export.trace import describe_failure, no_kernel_message, op_without_kernel

        if (op := op_without_kernel(e)) is not None:
            raise TraceError(no_kernel_message(op, model, e)) from e
        raise TraceError(f"torch.jit.trace failed to trace {type(model).__name__}: {describe_failure(e)}") from e
    assert flat.out_spec is not None  # the trace ran forward
    frozen: torch._C.ScriptModule | None = None
    if whole:
        graph, weights, frozen = _frozen_graph(traced, list(tensors))
        weights = [(name.removeprefix("model."), w) for name, w in weights]
    else:
        state = torch.jit._unique_state_dict(flat, keep_vars=True)
        weights = [(name.removeprefix("model."), t) for name, t in state.items()]
        _passes(graph)
    constants = {i: x for i, x in enumerate(flat.out_leaves) if not isinstance(x, torch.Tensor)}
    lines = [line for _, line in reads or ()]
    out_leaves = flat.out_leaves
    return JitGraph(graph, len(tensors), weights, flat.out_spec, constants, out_leaves, found, lines, module=frozen)


def _is_none(x) -> bool:
    return x is None


def _writes_state(model: torch.jit.ScriptModule) -> bool:
    """Whether the scripted forward sets an attribute or writes into one in place (an in-place op,
    named with a trailing ``_``, of a ``prim::GetAttr``)."""
    graph = model.inlined_graph
    if graph.findAllNodes("prim::SetAttr", True):  # type: ignore[attr-defined]  # (not in torch's stubs)
        return True
    reads = graph.findAllNodes("prim::GetAttr", True)  # type: ignore[attr-defined]
    return any(use.user.kind().endswith("_") for node in reads for use in node.output().uses())


class _Default:
    """A parameter's default value, the call giving none: a constant of the file, tensors too
    (as eager takes it whatever the file's inputs are)."""

    def __init__(self, value):
        self.value = value


def _script_arguments(model: torch.jit.ScriptModule, args: tuple, kwargs: dict) -> list:
    """A ScriptModule's arguments, one per parameter of its compiled forward: ``args``, then
    ``kwargs`` by name, the defaults of the others as ``_Default``. Its tensors are the file's
    inputs, those of a list or tuple each one (the list's length is the example's); a number or
    None is a constant of the file, as torch.export takes a number."""
    name = type(model).__name__
    parameters = model._c._get_method("forward").schema.arguments[1:]
    if len(args) > len(parameters):
        raise TraceError(f"{name}.forward takes {len(parameters)} arguments, got {len(args)}")
    names = [p.name for p in parameters]
    unknown = [k for k in kwargs if k not in names[len(args) :]]
    if unknown:
        raise TraceError(
            f"{name}.forward takes no keyword argument `{unknown[0]}` (its parameters: {', '.join(names)})"
        )
    # (the file's inputs are the tensors of args, then of kwargs in the order given: that order
    # must be the parameters')
    if list(kwargs) != [n for n in names if n in kwargs]:
        raise TraceError(f"pass {name}.forward's keyword inputs in the order of its parameters ({', '.join(names)})")
    arguments = list(args)
    for p in parameters[len(args) :]:
        if p.name in kwargs:
            arguments.append(kwargs[p.name])
        elif not p.has_default_value():
            raise TraceError(f"{name}.forward's argument `{p.name}` is not given")
        else:
            arguments.append(_Default(p.default_value))
    for p, value in zip(parameters, arguments):
        if isinstance(value, _Default):
            continue
        leaves = pytree.tree_leaves(value)
        taken = all(x is None or isinstance(x, torch.Tensor | int | float | bool) for x in leaves)
        if not taken or isinstance(value, dict):
            raise TraceError(
                f"{type(model).__name__}.forward's argument `{p.name}` ({p.type}) is a {type(value).__name__}: "
                "a ScriptModule's inputs are tensors, lists and tuples of them, None, numbers and bools"
            )
    return arguments


def _frozen_graph(module: torch.jit.ScriptModule, inputs: list) -> tuple[torch._C.Graph, list, torch._C.ScriptModule]:
    """A scripted or traced module's forward, frozen (attributes folded, weights kept as graph
    inputs after ``inputs``), its inputs typed with the example's shapes, as torch's TorchScript
    exporter prepares a ScriptModule; an argument without tensors (None, a number) a constant of
    the graph. Weights that are TorchScript objects (packed quantized weights) are the module's
    own objects. Also the frozen module, whose attributes the forward still sets are not folded."""
    try:
        frozen = torch._C._freeze_module(module._c, preserveParameters=True)
        lifted, params = torch._C._jit_onnx_list_model_parameters(frozen)
        method_graph = lifted._get_method("forward").graph
        inputs = _constant_arguments(method_graph, inputs)
        # Packed weights are passed as the tensors of their state, an argument as its tensors (a
        # number is none), counted per input.
        counts = [
            len(torch.jit._flatten(p)[0]) if "PackedParams" in str(v.type()) else len(_tensors(p))
            for v, p in zip(method_graph.inputs(), [*inputs, *params])
        ]
        flat = [x for p in [*inputs, *params] for x in _tensors(p)]
        graph = torch._C._propagate_and_assign_input_shapes(method_graph, tuple(flat), counts, False, False)
    except Exception as e:  # torch's freezing of the module
        raise TraceError(f"preparing the module's TorchScript graph failed: {type(e).__name__}: {e}") from e
    graph_inputs = list(graph.inputs())
    names = [v.debugName() for v in graph_inputs[len(inputs) :]]
    if graph.findAllNodes("prim::SetAttr", True):  # type: ignore[attr-defined]
        # Attributes the forward sets, in loops and branches too, made values of the graph (an
        # attribute set in a loop a loop-carried value) by torch's TorchScript exporter's pass;
        # what is left of the object is read and set by the translation (prim_nodes.ScriptObject).
        torch._C._jit_pass_inline(graph)
        torch._C._jit_pass_onnx_remove_inplace_ops_for_onnx(graph, lifted)
        _as_aten_ops(graph)
    _weights_for_attributes(graph, dict(zip(names, graph_inputs[len(inputs) :])))
    try:
        _passes(graph)
    except Exception as e:  # torch's passes, which assert on a node without an operator
        raise TraceError(f"torch's passes over the module's TorchScript graph failed: {_blamed(graph, e)}") from e
    weights: list[tuple[str, object]] = []
    for name, param in zip(names, params):
        if isinstance(param, torch.Tensor):
            weights.append((name, param.detach()))
        else:  # the object itself, not its state
            weights.append((name, functools.reduce(getattr, name.split("."), module)))
    return graph, weights, lifted


def _as_aten_ops(graph: torch._C.Graph) -> None:
    """What torch's pass for set attributes leaves that is no ATen op, as ATen ops (torch's other
    passes assert on a node without an operator): the copy it makes of each value set, an
    ``aten::clone`` of numbers and lists too, is the number itself or ``aten::list``; an
    ``onnx::Placeholder`` of a write through views (its block: the views, then ``index_put_``
    into the last, on the placeholder's input) a clone of the input written through the same views,
    the clone its result, as torch's TorchScript exporter converts it."""
    for node in graph.findAllNodes("aten::clone", True):  # type: ignore[attr-defined]  # (not in torch's stubs)
        value = node.inputsAt(0)
        if value.type().kind() == "TensorType":
            continue
        if value.type().kind() == "ListType":
            with graph.insert_point_guard(node):
                value = graph.insertNode(graph.create("aten::list", [value], 1)).output()
            value.setType(node.output().type())
        node.output().replaceAllUsesWith(value)
        node.destroy()
    for node in graph.findAllNodes("onnx::Placeholder", True):  # type: ignore[attr-defined]
        (block,) = node.blocks()
        writes = list(block.nodes())
        if node.s("name") not in ("index_put", "index_put_") or not writes:
            raise TraceError(f"torch's pass for set attributes left {node.kind()} {node.s('name')} ({where(node)})")
        with graph.insert_point_guard(node):
            none = graph.insertConstant(None)  # type: ignore[attr-defined]
            copy_ = graph.insertNode(graph.create("aten::clone", [node.input(), none], 1)).output()
            copy_.setType(node.output().type())
            env = {writes[0].inputsAt(0): copy_}
            for inner in writes:
                clone = _write(graph, inner, [env.get(v, v) for v in inner.inputs()])
                if clone is None:
                    clone = graph.createClone(inner, lambda v, env=env: env.get(v, v))  # type: ignore[attr-defined]
                graph.insertNode(clone)
                clone.copyMetadata(inner)
                for old, new in zip(inner.outputs(), clone.outputs()):
                    new.setType(old.type())
                    env[old] = new
        node.output().replaceAllUsesWith(copy_)
        node.destroy()


def _write(graph: torch._C.Graph, node: torch._C.Node, args: list) -> torch._C.Node | None:
    """The in-place write ``index_put`` of a placeholder's block makes into its copy; without
    indices (a whole tensor's ``copy_``), ``copy_`` or ``add_``, ops that broadcast the values as it
    does. None for the block's other nodes (its views)."""
    if node.kind() not in ("aten::index_put", "aten::index_put_"):
        return None
    target, indices, values, accumulate = args
    if indices.node().kind() != "prim::ListConstruct" or indices.node().inputsSize() or accumulate.toIValue() is None:
        return graph.create("aten::index_put_", args, 1)
    # (the constants at the insertion point, before the placeholder)
    if accumulate.toIValue():
        return graph.create("aten::add_", [target, values, graph.insertConstant(1)], 1)  # type: ignore[attr-defined]
    return graph.create("aten::copy_", [target, values, graph.insertConstant(False)], 1)  # type: ignore[attr-defined]


def _blamed(graph: torch._C.Graph, error: Exception) -> str:
    """A pass's failure, with the first node of the graph that no operator takes, where it is one."""
    message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"

    def unmatched(block):
        for node in block.nodes():
            for inner in node.blocks():
                found = unmatched(inner)
                if found is not None:
                    return found
            if not node.kind().startswith("prim::") and node.schema() == "(no schema)":
                return node
        return None

    node = unmatched(graph)
    return message if node is None else f"{message}\n  node {node.kind()} has no operator ({where(node)})"


def _constant_arguments(graph: torch._C.Graph, inputs: list) -> list:
    """The arguments that hold tensors; the inputs of ``graph`` of the others (None, numbers, lists
    and tuples of them, defaults the call does not give) become constants of their values
    (torch's propagation of the inputs' types takes none of them)."""
    for i in reversed(range(len(inputs))):
        if not _holds_tensors(inputs[i]):
            value = inputs[i].value if isinstance(inputs[i], _Default) else inputs[i]
            list(graph.inputs())[i].replaceAllUsesWith(_constant(graph, value))
            graph.eraseInput(i)
        elif _partly_constant(inputs[i]):
            _tuple_spread(graph, i, inputs[i])
    return [y for x in inputs if _holds_tensors(x) for y in (_items_with_tensors(x) if _partly_constant(x) else [x])]


def _constant(graph: torch._C.Graph, value) -> torch._C.Value:
    constant = graph.insertConstant(value)  # type: ignore[attr-defined]  # (not in torch's stubs)
    constant.node().moveAfter(graph.param_node())
    return constant


def _partly_constant(value) -> bool:
    """Whether ``value`` is a tuple of which some items hold tensors and some not (``(3, x)``,
    ``(None, y)``): torch's propagation of the inputs' types takes a tuple of tensors only."""
    return isinstance(value, tuple) and _holds_tensors(value) and not all(_holds_tensors(x) for x in value)


def _items_with_tensors(value: tuple) -> list:
    return [x for x in value if _holds_tensors(x)]


def _tuple_spread(graph: torch._C.Graph, i: int, value: tuple) -> None:
    """Input ``i`` of ``graph``, a tuple, made a tuple of new inputs (its items that hold
    tensors, in its place) and constants (the others)."""
    old = list(graph.inputs())[i]
    first = next(iter(graph.nodes()), graph.return_node())
    items, added = [], []
    for item, item_type in zip(value, old.type().elements()):  # type: ignore[attr-defined]  # (not in torch's stubs)
        if _holds_tensors(item):
            new = graph.addInput()
            new.setType(item_type)
            added.append(new)
            items.append(new)
        else:
            items.append(_constant(graph, item))
    tuple_node = graph.create("prim::TupleConstruct", items, 1)
    tuple_node.output().setType(old.type())
    tuple_node.insertBefore(first)
    old.replaceAllUsesWith(tuple_node.output())
    graph.eraseInput(i)
    count = len(list(graph.inputs()))
    kept = list(range(count - len(added)))
    order = kept[:i] + list(range(count - len(added), count)) + kept[i:]
    graph.permuteInputs(order)  # type: ignore[attr-defined]  # (not in torch's stubs)


def _holds_tensors(value) -> bool:
    return any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(value))


def _tensors(value) -> list:
    """The tensors of an argument of a scripted forward (packed weights: their state's)."""
    if isinstance(value, torch.Tensor | list | tuple) or value is None:
        return [x for x in pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]
    return torch.jit._flatten(value)[0]


def _without_tuples(arguments: list) -> list:
    return [x for a in arguments for x in (_without_tuples(_items_with_tensors(a)) if isinstance(a, tuple) else [a])]

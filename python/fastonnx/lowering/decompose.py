"""Decomposing only the ops that have no converter, node by node.

``ExportedProgram.run_decompositions`` re-traces the whole graph even when one op in a thousand
needs it. Here each node without a converter is traced on its own (its recorded fake values as
inputs, under the program's fake mode, so symbolic sizes keep their symbols) through PyTorch's
decomposition for it, and the resulting nodes are spliced into a copy of the graph in its place.
New nodes without a converter are decomposed in turn; whatever has no decomposition is left for
the unsupported-ops error.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import torch
import torch._decomp
from torch._guards import detect_fake_mode
from torch._subclasses.functional_tensor import dispatch_functionalize
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..dynamic.small_sizes import DependsOnSmallSize, retracing
from ..errors import ConversionError
from .graph import source_line

# A decomposition that keeps producing the op it decomposes (directly or through others)
# would not terminate; past this many rounds the op counts as unsupported.
_MAX_ROUNDS = 8
# Kept from the decomposed node on every node that replaces it, for error messages and reports.
_INHERITED_META = ("stack_trace", "nn_module_stack", "source_fn_stack")
# Set on the nodes a decomposition produced: the op (qualified name) they came from.
DECOMPOSED_FROM = "fastonnx_decomposed_from"
# Set on a node whose op's Python implementation could not be traced: why.
UNTRACEABLE = "fastonnx_untraceable"


@functools.cache
def _table() -> dict:
    return dict(torch.export.default_decompositions().items())


def _one_hot(self: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """one_hot with the class count chosen in the graph: PyTorch's decomposition asks whether a
    count read from data is -1 (count the classes present), which no export can answer."""
    count = torch.scalar_tensor(num_classes, dtype=torch.int64)
    depth = torch.where(count < 0, self.max() + 1, count).item()
    torch._check_is_size(depth)
    return (self.unsqueeze(-1) == torch.arange(depth, device=self.device)).to(torch.int64)


def _linspace(start, end, steps: int, *, dtype=None, layout=None, device=None, pin_memory=None) -> torch.Tensor:
    """linspace of a count read from data, as PyTorch's kernel computes it (the first half from
    start, the second back from end, in the result's type): its decomposition asks whether the
    count is 0 or 1, which no export can answer."""
    dtype = dtype or torch.get_default_dtype()
    if not dtype.is_floating_point:
        raise ConversionError("linspace of an integer type with a count read from data has no decomposition here")
    torch._check_is_size(steps)
    first, last = (torch.as_tensor(v, dtype=dtype, device=device) for v in (start, end))
    i = torch.arange(steps, dtype=torch.int64, device=device)
    step = (last - first) / torch.clamp(torch.scalar_tensor(steps, dtype=torch.int64) - 1, min=1).to(dtype)
    from_start = (i < steps // 2) | (i == 0)
    return torch.where(from_start, first + step * i.to(dtype), last - step * (steps - 1 - i).to(dtype))


# Decompositions of ops whose PyTorch one guards on a number that may be read from data, used
# when that number is one (an unbacked symbol).
_aten = torch.ops.aten
_FOR_NUMBERS_FROM_DATA: dict = {
    _aten.one_hot.default: _one_hot,
    _aten.linspace.default: _linspace,
    _aten.linspace.Tensor_Tensor: _linspace,
    _aten.linspace.Tensor_Scalar: _linspace,
    _aten.linspace.Scalar_Tensor: _linspace,
}


def decomposition_for_numbers_from_data(node: torch.fx.Node) -> Callable | None:
    """The decomposition of ``node`` that takes the numbers read from data it is given."""
    decomposition = _FOR_NUMBERS_FROM_DATA.get(node.target)
    if decomposition is None:
        return None
    values = [
        a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in tree_flatten((node.args, node.kwargs))[0]
    ]
    return decomposition if any(isinstance(v, torch.SymInt) and free_unbacked_symbols(v) for v in values) else None


def decomposition_of(op, *, core: bool = False) -> Callable | None:
    """PyTorch's decomposition of ``op``: the export decomposition table, else the op's own
    CompositeImplicitAutograd kernel (the ops torch.export's training IR keeps whole), else for
    an op outside ATen its Python kernel (``python_kernel``). With
    ``core``, else torch._decomp's full table, which decomposes core ops too (leaky_relu): for an
    op that has a converter, but one that cannot take what the graph gives it."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    table = _table()
    if op in table:
        return table[op]
    try:
        composite = op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
    except RuntimeError:  # an op only TorchScript knows (aten::size), which the dispatcher does not
        composite = False
    if composite:
        return op.decompose
    if op.namespace != "aten":
        return python_kernel(op)
    return torch._decomp.decomposition_table.get(op) if core else None


def python_kernel(op: torch._ops.OpOverload) -> Callable | None:
    """The Python function an op without a converter runs on CPU, traced on the recorded fake
    values into the op's ATen graph: a ``torch.library.custom_op``'s implementation (for every
    device, or its ``register_kernel("cpu")``), or a function given to ``Library.impl`` for CPU
    or CompositeExplicitAutograd, which is reached by redispatching to the CPU key (calling the
    op itself under the tracer would record the op again). A C++ kernel would not trace on fake
    values: None for those."""
    opdef = torch._library.custom_ops.OPDEFS.get(op._schema.name)
    if opdef is not None and opdef._opoverload is op:
        return opdef._backend_fns.get("cpu") or opdef._backend_fns.get(None)
    if _registered_in_python(op, ("CPU", "CompositeExplicitAutograd[alias]")):
        return functools.partial(op.redispatch, torch._C.DispatchKeySet(torch._C.DispatchKey.CPU))
    return None


def _registered_in_python(op: torch._ops.OpOverload, keys: tuple[str, ...]) -> bool:
    """Whether one of the dispatch keys' kernels of ``op`` was registered from a Python file (the
    dispatcher records where each kernel was registered; torch's own are C++ files)."""
    for line in torch._C._dispatch_dump(op.name()).splitlines():
        key, _, where = line.partition(": registered at ")
        if key in keys and where.split(" :: ")[0].split(":")[0].endswith(".py"):
            return True
    return False


def _inlined_body(node: torch.fx.Node) -> int | None:
    """For a higher-order op that only wraps a subgraph in a mode that does not change what an
    inference graph computes (grad mode; autocast when disabled, as rotary embeddings do), the
    position of the subgraph argument; its inputs follow it."""
    if node.op != "call_function":
        return None
    hop = torch.ops.higher_order
    if node.target is hop.wrap_with_set_grad_enabled:
        return 1
    if node.target is hop.wrap_with_autocast and node.args[2] is False:
        return 4
    return None


def _mutates(graph: torch.fx.Graph) -> bool:
    return any(
        n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
        for n in graph.nodes
    )


def _fake_mode_of(graph: torch.fx.Graph):
    """The fake mode of the values torch.export recorded in ``graph`` (None when it holds no
    fake tensor)."""
    for node in graph.nodes:
        mode = detect_fake_mode([v for v in tree_flatten(node.meta.get("val"))[0] if isinstance(v, torch.Tensor)])
        if mode is not None:
            return mode
    return None


def copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy whose nodes can be replaced without touching the caller's program."""
    new = torch.fx.Graph(owning_module=graph.owning_module)
    out = new.graph_copy(graph, {})
    new.output(out)
    return new


def _check_nothing_fixed(node: torch.fx.Node, shape_env, symbols: set, fixed_before: set) -> None:
    """Fails when tracing ``node``'s decomposition pinned one of the program's size ``symbols``
    (to a number or to another symbol): every node that reads that size would silently take it,
    and the model would lose a dynamic dimension."""
    fixed = {s: e for s, e in shape_env.replacements.items() if s in symbols and s not in fixed_before}
    if fixed:
        pinned = ", ".join(f"{s} = {e}" for s, e in fixed.items())
        raise ConversionError(
            f"PyTorch's decomposition of {node.target} (FX node `{node.name}`) fixes the dynamic "
            f"size(s) {pinned}; fastonnx has no converter for {node.target} that keeps them dynamic"
        )


class Decomposer:
    """Decomposes, in a graph, the nodes ``decomposition`` gives a decomposition for, and inlines
    the bodies of mode-only wrappers. ``decomposed`` counts the ops it expanded; ``constants``
    holds what the get_attr nodes it spliced in read (tensors decompositions created, nested
    bodies)."""

    def __init__(self, graph: torch.fx.Graph, decomposition: Callable[[torch.fx.Node], Callable | None]):
        self.graph = graph
        self.decomposition = decomposition
        self.fake_mode = _fake_mode_of(graph)
        self.decomposed: Counter = Counter()
        self.constants: dict[str, torch.Tensor] = {}

    def _wants(self, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and self.decomposition(node) is not None

    def run(self) -> None:
        wrappers = self._wrappers()
        while wrappers:  # a wrapped body may wrap another
            for node, index in wrappers:
                self._inline(node, index)
            wrappers = self._wrappers()
        pending = [n for n in self.graph.nodes if self._wants(n)]
        for _ in range(_MAX_ROUNDS):
            if not pending:
                break
            produced: list[torch.fx.Node] = []
            for node in pending:
                produced += self._expand(node)
            pending = [n for n in produced if n.graph is self.graph and self._wants(n)]
        self.graph.lint()

    def _wrappers(self) -> list[tuple[torch.fx.Node, int]]:
        """The mode-only wrappers of the graph, with the position of their body."""
        return [(n, index) for n in self.graph.nodes if (index := _inlined_body(n)) is not None]

    @staticmethod
    def inlines(node: torch.fx.Node) -> bool:
        return _inlined_body(node) is not None

    def attribute(self, target: str):
        """What a get_attr node of the graph reads: a spliced attribute or one of the program's."""
        if target in self.constants:
            return self.constants[target]
        return getattr(self.graph.owning_module, target)

    def _trace(self, node: torch.fx.Node) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]]:
        """The decomposition of one node as a graph whose placeholders are the node's FX inputs."""
        leaves, spec = tree_flatten((node.args, node.kwargs))
        inputs = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node)]
        values = [leaves[i].meta["val"] for i in inputs]
        decomp = self.decomposition(node)

        def call(*traced):
            filled = list(leaves)
            for i, v in zip(inputs, traced):
                filled[i] = v
            args, kwargs = tree_unflatten(filled, spec)
            result = decomp(*args, **kwargs)
            # A decomposition wrapped by torch's `out_wrapper` returns a named tuple (nll_loss's
            # `return_types`), which the tracer would record as a call of its class.
            return tuple(result) if isinstance(result, tuple) else result

        shape_env = self.fake_mode.shape_env if self.fake_mode is not None else None
        before = (set(shape_env.var_to_range), set(shape_env.replacements)) if shape_env is not None else None
        # "real" tracing of fake values: the values carry the program's own symbols. Under the
        # program's fake mode even when the node has no tensor input (hann_window, eye(n, m)):
        # a tensor the decomposition creates is then fake in that mode too, not in a new one of
        # its own, which a later decomposition taking both would reject; and an op called with a
        # symbolic size does not run for real, pinning the size to its example value.
        with (
            self.fake_mode if self.fake_mode is not None else contextlib.nullcontext(),
            retracing(shape_env, f"PyTorch's decomposition of {node.target} (FX node `{node.name}`)"),
        ):
            sub = make_fx(call, tracing_mode="real")(*values)
            if _mutates(sub.graph):
                # A C++ composite kernel may mutate what it made (stft's `out.transpose_(1, 2)`):
                # traced again through functionalization, that becomes the functional op.
                sub = make_fx(dispatch_functionalize(call), tracing_mode="real")(*values)
        if before is not None:
            _check_nothing_fixed(node, shape_env, *before)
        return sub, [leaves[i] for i in inputs]

    def _expand(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        op = cast(torch._ops.OpOverload, node.target)  # what `decomposition` decomposes
        try:
            sub, inputs = self._trace(node)
        except DependsOnSmallSize:  # (export() then makes those axes static)
            raise
        except Exception as e:  # PyTorch's decomposition, traced on recorded values
            if op.namespace != "aten":
                # A library's Python kernel that does not trace (it reads the data): the op stays,
                # for the unsupported-ops error to list with the others and say why.
                node.meta[UNTRACEABLE] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                return []
            source = source_line(node)
            where = f"\n  from {source}" if source else ""
            raise ConversionError(
                f"PyTorch's decomposition of {op._schema.name} (FX node `{node.name}`) "
                f"failed: {type(e).__name__}: {e}{where}"
            ) from e
        self.decomposed[op] += 1
        new_nodes = self._splice(node, sub, inputs)
        origin = node.meta.get(DECOMPOSED_FROM) or str(op._schema.name)
        for n in new_nodes:
            n.meta[DECOMPOSED_FROM] = origin
        return new_nodes

    def _inline(self, node: torch.fx.Node, index: int) -> None:
        body = cast(torch.fx.Node, node.args[index])
        self._splice(node, self.attribute(cast(str, body.target)), list(node.args[index + 1 :]))
        if not body.users:
            self.graph.erase_node(body)

    def _splice(self, node: torch.fx.Node, sub: torch.fx.GraphModule, inputs: list) -> list[torch.fx.Node]:
        """Replaces ``node`` by the nodes of ``sub``, whose placeholders take ``inputs``."""
        env: dict[torch.fx.Node, Any] = {}
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        env.update(zip(placeholders, inputs))
        inherited = {k: node.meta[k] for k in _INHERITED_META if k in node.meta}
        new_nodes: list[torch.fx.Node] = []
        result = None
        with self.graph.inserting_before(node):
            for n in sub.graph.nodes:
                if n.op == "placeholder":
                    continue
                if n.op == "output":
                    result = torch.fx.map_arg(n.args[0], lambda a: env[a])
                    continue
                if n.op == "get_attr":
                    # The attribute lives on `sub`; the copy reads it from `constants`.
                    name = f"_spliced_attribute_{len(self.constants)}"
                    self.constants[name] = getattr(sub, n.target)
                    copy = self.graph.get_attr(name)
                    copy.meta.update(n.meta)
                else:
                    copy = self.graph.node_copy(n, lambda a: env[a])
                copy.meta.update(inherited)
                env[n] = copy
                new_nodes.append(copy)
        self._replace_uses(node, result)
        return new_nodes

    def _replace_uses(self, node: torch.fx.Node, result) -> None:
        if isinstance(result, (list, tuple)):
            # A multi-output op is used through getitem nodes; each takes its item.
            for user in list(node.users):
                if user.target is not operator.getitem:
                    raise RuntimeError(f"{node.format_node()} is used whole by {user.format_node()}")
                item = result[cast(int, user.args[1])]
                if isinstance(item, torch.fx.Node):
                    user.replace_all_uses_with(item)
                elif user.users:
                    raise RuntimeError(f"output {user.args[1]} of the decomposition of {node.target} is not a tensor")
                self.graph.erase_node(user)
        else:
            node.replace_all_uses_with(result)
        self.graph.erase_node(node)

"""The TorchScript front end's second half: a TorchScript graph as an FX graph of ATen overloads,
the form the lowering takes from torch.export, so both front ends share one lowering, one
converter table and one writer.

Each ``aten::`` node becomes the overload its schema names. ``prim::`` nodes are resolved here:
constants, lists and tuples become Python values, ``prim::NumToTensor``/``aten::Int`` pairs and
integer arithmetic become arithmetic on sizes (so a size the tracer recorded stays a size of the
graph), ``prim::If``/``prim::Loop`` become torch.cond / while_loop, which the lowering writes as
ONNX If / Loop.

Every FX node gets ``meta["val"]`` the way torch.export records it: the graph runs under a fake
mode whose ShapeEnv makes the requested dynamic axes symbols, with the real example tensors
propagated beside (torch's ``fake_tensor_propagate_real_tensors``) when the graph reads data. A
data-dependent size (``nonzero``, a size read with ``item()``) is an unbacked symbol that no guard
settles to the example's value: an op that cannot take it runs on the example's values, its
result sizes new symbols (see ``_ShapeEnv``, ``_Translator.run``). Without dynamic axes or data
reads, the trace's own types are the graph's. A symbol the ShapeEnv replaces by a number is a
dynamic axis the graph fixes; ``JitProgram.fixed`` says which node fixed it.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import operator
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import sympy
import torch
import torch._functorch.config as functorch_config
import torch.utils._pytree as pytree
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
    compute_unbacked_bindings,
    free_unbacked_symbols,
)
from torch.utils._sympy.symbol import SymT, symbol_is_type

from ...core.dtypes import dtype_of_scalar_type, scalar_type_code
from ...dynamic.small_sizes import dynamic_small_sizes, retracing
from ...errors import ConversionError
from ..export.trace import needs_functionalization
from . import packed_rnn as _packed_rnn  # noqa: F401  # registers fastonnx::padded_rnn and its converter
from .quantized import PackedWeights, QTensor, QuantizedOps
from .trace import JitGraph

aten = torch.ops.aten

# Integer and float arithmetic of TorchScript (``aten::add.int``...), as the Python operators
# FX records for arithmetic on sizes; the lowering converts those.
_ARITHMETIC = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "div": operator.truediv,
    "remainder": operator.mod,
    "neg": operator.neg,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "__and__": operator.and_,
    "__or__": operator.or_,
    "__not__": torch.sym_not,
    "pow": operator.pow,
}
# 0-d tensor ops the tracer records on sizes (``x.size(0) * 2``, ``x.size(0) == 1``): computed as
# size arithmetic.
_SIZE_TENSOR_OPS = {
    **{k: _ARITHMETIC[k] for k in ("add", "sub", "mul", "div", "remainder", "eq", "ne", "lt", "le", "gt", "ge")},
    "rsub": operator.sub,  # (its operands swapped)
    "floor_divide": operator.floordiv,
}
_CPU = torch.device("cpu")
_PYTHON_TYPES = {int: (int, torch.SymInt), float: (float, torch.SymFloat), bool: (bool, torch.SymBool)}
_ENUM_ARGUMENTS = {
    "ScalarType": dtype_of_scalar_type,
    "Layout": lambda v: [torch.strided, torch.sparse_coo][v],
    "MemoryFormat": lambda v: [torch.contiguous_format, torch.preserve_format, torch.channels_last][v],
}


class Outputs(list):
    """What a handler returns for a node's outputs, one per output (any other return value is
    the value of the node's only output, a list included)."""


@dataclass(frozen=True)
class _Packed:
    """A packed sequence (``_pack_padded_sequence``'s data) kept as ONNX's recurrent ops take it:
    the padded time-major tensor and each batch entry's length."""

    padded: torch.fx.Node
    lengths: torch.fx.Node


@dataclass(frozen=True)
class _BatchSizes:
    """``_pack_padded_sequence``'s batch sizes, of which only the first (the batch) is read."""

    packed: _Packed


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


_TRACED_FRAME = re.compile(r"^(.+\.py)\((\d+)\): (\w+)$", re.MULTILINE)
_LIBRARIES = (f"{os.sep}torch{os.sep}", f"{os.sep}fastonnx{os.sep}")
# A frame of the stack outside the libraries (the line holds no library's directory).
_MODEL_FRAME = re.compile(
    "^(?!.*(?:" + "|".join(map(re.escape, _LIBRARIES)) + "))" + _TRACED_FRAME.pattern[1:], re.MULTILINE
)


def _source_line(node: torch._C.Node) -> str:
    """The model's source line that made the node, as a Python traceback line (what
    ``_graph.source_line`` reads): a scripted node's range, or the innermost frame outside torch
    of the stack the tracer recorded."""
    text = str(node.sourceRange())
    first = text.split("\n", 1)[0].strip()
    if first.startswith("File "):  # scripted: '  File "m.py", line 17' and the code
        return first
    # (innermost first: one search of the text stops at the model's frame)
    frame = _MODEL_FRAME.search(text) or _TRACED_FRAME.search(text)
    return f'File "{frame.group(1)}", line {frame.group(2)}, in {frame.group(3)}' if frame else ""


class _SizesFromData(Exception):
    """An op whose result size depends on the data, in a graph translated with the trace's types
    (see typed_by_trace), whose sizes after it are the example's: translated again with symbols."""


class _ShapeEnv(ShapeEnv):
    """torch's ShapeEnv without its last resort for unbacked symbols. With real values propagated,
    torch records the example's value of each symbol an op makes from data (nonzero's count, an
    ``item()``) and from then on settles any guard on that symbol with it, a runtime assertion
    fastonnx does not write: the guard's branch is taken for every input, and a size of the data
    may become the example's (a composite op's check of its own views' offsets against the real
    ones fixed ``where(mask)``'s count). Here such a guard fails instead, and the translator runs
    the op without real values or on its own ``hints`` with result sizes of their own (see
    ``exact`` and ``run``)."""

    def set_real_tensor_prop_unbacked_vals(self, k, v) -> None:
        return None


def _where(node: torch._C.Node) -> str:
    """``at file:line: code`` of the model's line that made the node, else the node."""
    found = re.match(r'File "(.+)", line (\d+)', _source_line(node))
    if found is None:
        return f"at {str(node).strip()}"
    code = linecache.getline(found.group(1), int(found.group(2))).strip()
    return f"at {found.group(1)}:{found.group(2)}" + (f": {code}" if code else "")


class _Translator(QuantizedOps):
    def __init__(
        self,
        jit: JitGraph,
        user_tensors: Sequence[torch.Tensor],
        dynamic: Sequence[dict[int, str]],
        input_names: Sequence[str],
        typed: bool,
    ):
        self.jit = jit
        self.user_tensors = list(user_tensors)
        self.inputs: list[torch.fx.Node] = []  # a control-flow function's placeholders (see sub)
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.shape_env = _ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.env: dict[torch._C.Value, Any] = {}  # TorchScript value -> FX node or Python value
        self.sizes: dict[torch._C.Value, Any] = {}  # a 0-d tensor computed from sizes -> the size (node or number)
        self.constants: dict[str, torch.Tensor] = {}
        self.dynamic, self.input_names = dynamic, input_names
        # Without dynamic axes or values read from data, the trace's own types are the graph's:
        # ATen nodes take them instead of running under the fake mode (most of the cost), and the
        # mode needs no real values beside (see translate).
        self.typed_by_trace = typed
        self.symbols: dict[Any, tuple[int, int]] = {}  # input symbol -> (input index, axis)
        self.fixed: dict[tuple[int, int], str] = {}
        self.node: torch._C.Node | None = None
        self._line: tuple = (None, "")  # the current node's source line
        self.functions: list[str] = []  # the control-flow functions, submodules of ``root``
        self.shape_tensors: dict = {}  # a `_shape_as_tensor` result -> its sizes
        self.known: dict = {}  # a small tensor computed from constants and static sizes -> its value
        self.hints: dict = {}  # unbacked symbol of a number read from a tensor -> the example's value
        self.examples: dict = {}  # FX node -> its value in the example, where computed (see example_of)
        self.binders: dict = {}  # unbacked symbol -> (the FX node that made it, the path to it in its value)
        self.guard_lines: dict = {}  # guard on sizes -> where: the TorchScript node that made it
        # Sizes of 0 and 1 of the dynamic axes are symbols (_small_sizes).
        self.small_sizes = False
        # A branch's own symbols of its operands' sizes -> the enclosing translator's (see sub).
        self.renamed: dict = {}

    # -- values ---------------------------------------------------------------------------------

    def fake(self, tensor: torch.Tensor, source: str | None = None, dynamic: dict[int, str] | None = None):
        if source is None or not dynamic:
            if self.typed_by_trace and _plain(tensor):
                # Without real values beside, only the type is needed: torch's conversion (which
                # describes the storage and views for them) costs most of a CNN's translation.
                return self.empty(tensor.shape, tensor.stride(), tensor.dtype, tensor.device, tensor)
            return self.mode.from_tensor(tensor, static_shapes=True)
        dims = [DimDynamic.DYNAMIC if d in dynamic else DimDynamic.STATIC for d in range(tensor.dim())]
        return self.mode.from_tensor(
            tensor,
            source=ConstantSource(source),
            symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims),
        )

    def empty(self, sizes, strides, dtype: torch.dtype, device: torch.device, like: torch.Tensor | None = None):
        """A fake tensor of this mode of that type, made as the mode's factory functions make
        theirs (not through its dispatch, whose cache keys cost more than the tensor); ``like``
        gives a weight's or an input's gradient flags."""
        grad = like is not None and like.requires_grad
        meta = torch.empty_strided(sizes, strides, dtype=dtype, device="meta", requires_grad=grad)
        return FakeTensor(self.mode, meta, device, _is_param=isinstance(like, torch.nn.Parameter))

    def add_node(self, target, args: tuple, kwargs: dict, val) -> torch.fx.Node:
        n = self.graph.call_function(target, args, kwargs)
        n.meta["val"] = val
        # The unbacked sizes this node made are bound to it, as torch.export binds them (a later
        # trace under this fake mode, a decomposition, finds none left pending).
        bindings = compute_unbacked_bindings(self.shape_env, val)
        if bindings:
            n.meta["unbacked_bindings"] = bindings
            self.binders.update((symbol, (n, path)) for symbol, path in bindings.items())
        if self.node is not None:
            if self._line[0] is not self.node:  # once per TorchScript node
                self._line = (self.node, _source_line(self.node))
            n.meta["stack_trace"] = self._line[1]
        return n

    def run(self, target, args: tuple, kwargs: dict):
        """``target`` applied to the fake values of ``args``/``kwargs`` (FX nodes and Python values).
        An op that takes a number where a symbolic one is given (``arange(end)`` of a value read
        from data) runs on the example's numbers instead, every dimension of its result then an
        unbacked size: dynamic in the graph, never the example's."""
        fargs, fkwargs = self.fake_of((args, kwargs))
        with self.mode:
            try:
                return self.exact(target, fargs, fkwargs)
            except _SizesFromData:
                raise
            except Exception:
                self.shape_env.pending_fresh_unbacked_symbols[:] = []
                if not any(_unbacked(x) for x in pytree.tree_leaves((fargs, fkwargs))):
                    raise
                concrete_args, concrete_kwargs = self.hinted((fargs, fkwargs))
                pending = list(self.shape_env.pending_fresh_unbacked_symbols)
                hinted = target(*concrete_args, **concrete_kwargs)
                # (sizes the op's own fake kernel made for the example: the result gets new ones)
                self.shape_env.pending_fresh_unbacked_symbols[:] = pending
            if not all(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(hinted)):
                raise ConversionError(f"{target} of a symbolic number gives {type(hinted).__name__}, not tensors")
            return pytree.tree_map(self.unbacked_like, hinted)

    def unbacked_like(self, example: torch.Tensor) -> torch.Tensor:
        """A tensor of ``example``'s type whose every size is a new unbacked symbol, the
        example's size its hint (fake, made under the fake mode)."""
        sizes = [self.shape_env.create_unbacked_symint() for _ in example.shape]
        self.hints.update((size.node.expr, actual) for size, actual in zip(sizes, example.shape))
        return torch.empty(sizes, dtype=example.dtype)

    def read_number(self, tensor: torch.fx.Node):
        """The number a 0-d tensor of the graph holds (``item()``), as a new unbacked symbol. Made
        here rather than by torch, which (2.14) keeps the example's value as the symbol's hint, so
        that a later op would settle it (``arange(end)``'s length) to the example's. The example's
        value is this translator's own hint."""
        val = self.fake_of(tensor)
        env = self.shape_env
        number: torch.SymBool | torch.SymFloat | torch.SymInt
        if val.dtype == torch.bool:
            number = env.create_unbacked_symbool()
        elif val.is_floating_point():
            number = env.create_unbacked_symfloat()
        else:
            number = env.create_unbacked_symint()
        real = self.example_of(tensor)
        if real is not None:
            self.hints[number.node.expr] = real.item()
        return self.add_node(aten._local_scalar_dense.default, (tensor,), {}, number)

    def example_of(self, node: torch.fx.Node) -> torch.Tensor | None:
        """The value ``node`` has in the example: its real value propagated beside, else computed
        eagerly from the example's values of the nodes it is made from (ops after a size read from
        data run without real values beside, see ``exact``); None where the example gives none
        (a loop body's values)."""
        needed, order, todo = set(), [], [node]
        while todo:
            n = todo.pop()
            if n in needed or n in self.examples:
                continue
            real = getattr(n.meta.get("val"), "real_tensor", None)
            if real is not None:
                self.examples[n] = real
                continue
            if n.op == "get_attr":  # a control-flow function
                self.examples[n] = functools.reduce(getattr, str(n.target).split("."), self.root)
                continue
            if n.op != "call_function":
                return None
            needed.add(n)
            todo.extend(n.all_input_nodes)
        if needed:
            order = [n for n in self.graph.nodes if n in needed]  # (inputs first)
        with unset_fake_temporarily():
            for n in order:
                args, kwargs = pytree.tree_map_only(torch.fx.Node, self.examples.__getitem__, (n.args, n.kwargs))
                try:
                    self.examples[n] = n.target(*args, **kwargs)
                except Exception:  # noqa: BLE001 - an op that cannot run on the example: no hint
                    return None
        return self.examples[node]

    def hint_of(self, symbol) -> None:
        """Records the example's value of an unbacked symbol a node made without real values beside
        (a size that depends on data, a size where the branches of an ``if`` differ), from the
        example's value of that node."""
        if symbol in self.hints or symbol not in self.binders:
            return
        node, path = self.binders[symbol]
        real = self.example_of(node)
        if real is not None:
            self.hints[symbol] = int(pytree.key_get(real, path))

    def record_hints(self, target, args: tuple, val) -> None:
        """The example's values of the unbacked symbols a node made (a number read from a
        tensor, a size that depends on the data), from the real values propagated beside."""
        if target is aten._local_scalar_dense.default and isinstance(
            val, torch.SymInt | torch.SymFloat | torch.SymBool
        ):
            real = getattr(self.fake_of(args[0]), "real_tensor", None)
            if real is not None and val.node.expr.is_Symbol:
                self.hints[val.node.expr] = real.item()
            return
        for t in val if isinstance(val, list | tuple) else [val]:
            real = getattr(t, "real_tensor", None)
            if real is None:
                continue
            for size, actual in zip(t.shape, real.shape):
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    self.hints.setdefault(size.node.expr, actual)

    def exact(self, target, fargs, fkwargs):
        """``target`` on fake values, its data-dependent sizes and numbers unbacked symbols. With
        real values propagated, torch gives an op whose size depends on the data (nonzero, a
        boolean mask) the example's size, or keeps the example's value as the new symbol's hint:
        an op that makes a symbol is run again without real values, and the example's sizes
        become hints of this translator's own (``hints``), used only where an op cannot take a
        symbol."""
        env = self.shape_env
        if any(
            isinstance(x, torch.SymInt | torch.SymFloat) and free_unbacked_symbols(x)
            for x in pytree.tree_leaves((fargs, fkwargs))
        ):
            # A number read from data may size the result (arange's end): with real values
            # beside, torch may settle it to the example's value; without them it stays a symbol,
            # or the op fails and run() gives it sizes of its own.
            assume_preconditions(target, fargs, fkwargs)
            return self.without_real_values(target, fargs, fkwargs)
        before = list(env.pending_fresh_unbacked_symbols)
        try:
            result = target(*fargs, **fkwargs)
        except Exception:  # noqa: BLE001 - values with no example (a loop body): torch's real-value checks fail
            env.pending_fresh_unbacked_symbols[:] = before
            return self.without_real_values(target, fargs, fkwargs)
        fresh = [s for s in env.pending_fresh_unbacked_symbols if s not in before]
        if not fresh:
            return result
        if self.typed_by_trace:
            raise _SizesFromData(target)
        # A new unbacked symbol: made again without real values, so that no later guard on it
        # settles it to the example's value (torch 2.14 keeps the example's value as its hint).
        env.pending_fresh_unbacked_symbols[:] = before
        symbolic = self.without_real_values(target, fargs, fkwargs)
        for exact_t, real_t in zip(pytree.tree_leaves(symbolic), pytree.tree_leaves(result)):
            if isinstance(exact_t, torch.Tensor) and isinstance(real_t, torch.Tensor):
                # (a fake kernel that makes its own symbol, torchvision's nms, leaves the example's
                # size only on the real tensor beside)
                real = real_t.real_tensor if isinstance(real_t, FakeTensor) else real_t
                if real is None:  # (no example beside: a loop body's value, or the trace's types)
                    continue
                for size, actual in zip(exact_t.shape, real.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol and isinstance(actual, int):
                        self.hints.setdefault(size.node.expr, actual)
        return symbolic

    def without_real_values(self, target, fargs, fkwargs):
        before, self.mode.propagate_real_tensors = self.mode.propagate_real_tensors, False
        try:
            return target(*fargs, **fkwargs)
        finally:
            self.mode.propagate_real_tensors = before

    def hinted(self, values):
        """``values`` with each symbolic number replaced by its value in the example."""
        env = self.shape_env
        # (torch renamed the map of backed values; the unbacked ones are recorded by ``emit``)
        backed = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
        known = {**backed, **self.hints}

        def concrete(x):
            if isinstance(x, torch.Tensor) and _unbacked(x):
                return torch.empty([concrete(d) for d in x.shape], dtype=x.dtype)
            if isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool):
                number = x.node.expr.xreplace(known)
                if not _is_value(number):
                    for symbol in number.free_symbols:
                        self.hint_of(symbol)
                    known.update(self.hints)
                    number = number.xreplace(known)
                if not _is_value(number):
                    raise ConversionError(f"the example's value of {x} is unknown")
                return (
                    int(number)
                    if isinstance(x, torch.SymInt)
                    else bool(number)
                    if isinstance(x, torch.SymBool)
                    else float(number)
                )
            return x

        return pytree.tree_map(concrete, values)

    def fake_of(self, a):
        """The fake value of an FX node; lists, tuples and dicts of them mapped (as plain ones)."""
        if isinstance(a, torch.fx.Node):
            return a.meta["val"]
        if isinstance(a, list | tuple):
            return type(a)(self.fake_of(x) for x in a) if type(a) in (list, tuple) else [self.fake_of(x) for x in a]
        if isinstance(a, dict):
            return {k: self.fake_of(v) for k, v in a.items()}
        return a

    def emit(self, target, args: tuple, kwargs: dict | None = None, traced: torch._C.Node | None = None):
        """An FX node of ``target`` with its fake value; a Python number when the value is one.
        ``traced``: the TorchScript node whose output this is, whose recorded type is used when the
        trace's types are the graph's."""
        kwargs = kwargs or {}
        types = self.traced_types(traced) if traced is not None and self.typed_by_trace else None
        if types is not None and len(types) == 1:
            return self.add_node(target, args, kwargs, types[0])
        val = self.run(target, args, kwargs)
        self.record_hints(target, args, val)
        if isinstance(val, (bool, int, float)) and not isinstance(val, torch.Tensor):
            return val
        return self.add_node(target, args, kwargs, val)

    # -- the graph ------------------------------------------------------------------------------

    def translate(self) -> JitProgram:
        jit = self.jit
        inputs = list(jit.graph.inputs())
        input_specs: list[InputSpec] = []
        real = iter([*self.user_tensors, *(t for _, t in jit.weights)])
        for i, v in enumerate(inputs):
            tensor = next(real)
            if i < jit.n_user and tensor.is_quantized:
                self.env[v] = self.quantized_input(
                    tensor, self.input_names[i], self.dynamic[i] if i < len(self.dynamic) else {}, input_specs
                )
                continue
            if i < jit.n_user:
                name = self.input_names[i]
                node = self.graph.placeholder(name)
                node.meta["val"] = self.fake(tensor, f"L['{name}']", self.dynamic[i] if i < len(self.dynamic) else {})
                for axis, size in enumerate(node.meta["val"].shape):
                    if isinstance(size, torch.SymInt):
                        self.symbols[size.node.expr] = (i, axis)
                input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
            elif not isinstance(tensor, torch.Tensor):  # packed quantized weights
                self.env[v] = PackedWeights(tensor)
                continue
            else:
                wname = jit.weights[i - jit.n_user][0]
                node = self.graph.placeholder("p_" + re.sub(r"\W", "_", wname))
                node.meta["val"] = self.fake(tensor)
                kind = InputKind.PARAMETER if isinstance(tensor, torch.nn.Parameter) else InputKind.BUFFER
                input_specs.append(InputSpec(kind, TensorArgument(node.name), wname, True))
            self.env[v] = node
            self.examples[node] = tensor
        self.block(jit.graph)
        outputs = list(jit.graph.outputs())
        returned = len(outputs) - len(jit.size_reads)
        results = [self.env[v] for v in outputs[:returned]]
        size_reads = [(*self.size_read(v), line) for v, line in zip(outputs[returned:], jit.size_reads)]
        leaves, it = [], iter(results)
        for i in range(len(jit.example_outputs)):
            leaves.append(jit.constant_outputs[i] if i in jit.constant_outputs else next(it))
        extra = list(it)
        if extra:
            raise ConversionError(
                f"the TorchScript graph returns {len(extra)} more value(s) than forward's result holds"
            )
        out_spec = jit.out_spec
        if any(isinstance(x, QTensor) for x in leaves):
            leaves, out_spec = pytree.tree_flatten(
                pytree.tree_unflatten(
                    [self.quantized_output(x) if isinstance(x, QTensor) else x for x in leaves], out_spec
                )
            )
        self.graph.output(tuple(leaves))  # type: ignore[arg-type]  # (nodes and Python constants)
        output_specs = [
            OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(x.name if isinstance(x, torch.fx.Node) else str(i)), None)
            for i, x in enumerate(leaves)
        ]
        # (its Python code is generated when it is first called or read, which no export does)
        module = _LazyGraphModule(self.root, self.graph)
        return JitProgram(
            module,
            ExportGraphSignature(input_specs, output_specs),
            dict(jit.weights),
            self.constants,
            dict(self.shape_env.var_to_range),
            SimpleNamespace(out_spec=out_spec),
            self.shape_env,
            self.mode,
            self.fixed,
            jit.tracer_warnings,
            input_symbols={axis: symbol for symbol, axis in self.symbols.items()},
            size_reads=size_reads,
            guard_lines=self.guard_lines,
        )

    def size_read(self, v) -> tuple[Any, frozenset]:
        """A number the model's Python code took from sizes, over the symbols (a sympy expression),
        and the symbols it reads; where the translation computed it as a tensor rather than a size
        (an op on sizes it does not follow), None and the symbols of the sizes it is made from."""
        number = self.sizes.get(v, self.env[v])
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

    def block(self, block) -> None:
        for node in block.nodes():
            self.node = node
            before = dict(self.shape_env.replacements)
            guards = len(self.shape_env.guards)
            try:
                self.translate_node(node)
            except (ConversionError, _SizesFromData):
                raise
            except Exception as e:  # a node torch cannot run on fake tensors, or an unknown kind
                raise ConversionError(
                    f"TorchScript node {node.kind()} failed to translate: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}\n  node: {str(node).strip()}"
                    + (f"\n  from {_source_line(node)}" if _source_line(node) else "")
                ) from e
            if len(self.shape_env.replacements) != len(before):
                self.record_fixed(node, before)
            for guard in self.shape_env.guards[guards:]:
                self.guard_lines.setdefault(guard.expr, _where(node))

    def record_fixed(self, node: torch._C.Node, before: dict) -> None:
        """A requested dynamic axis whose symbol this node replaced by a number: where it was fixed."""
        for sym, tgt in self.shape_env.replacements.items():
            if sym in before or sym not in self.symbols:
                continue
            where = _source_line(node) or str(node).strip()
            self.fixed[self.symbols[sym]] = f"{node.kind()} made it {tgt} ({where})"

    def translate_node(self, node: torch._C.Node) -> None:
        kind = node.kind()
        outs = _outputs(node)
        handler = getattr(self, "_" + kind.replace("::", "_"), None)
        if handler is not None:
            results = handler(node)
        elif kind.startswith("prim::"):
            raise ConversionError(f"the TorchScript front end does not convert {kind}")
        elif kind.startswith("quantized::"):
            results = self.quantized_like_float(node)
        else:
            results = self.op(node)
        if not isinstance(results, Outputs):
            results = Outputs([results])
        for v, r in zip(outs, results, strict=True):
            self.env[v] = r
        if kind.startswith("aten::") and len(outs) == 1 and outs[0] not in self.known:
            self.fold(node)

    def fold(self, node) -> None:
        """Records the value of a small tensor computed only from constants and static sizes (a
        detection model's image size, taken as a tensor), so that a number read from it is that
        number, as the TorchScript exporter's constant folding makes it, not a value of the data."""
        schema_text = node.schema()
        if schema_text == "(no schema)":
            return
        real = []
        for v in _inputs(node):
            value = self.env[v]
            if v in self.known:
                real.append(self.known[v])
            elif _holds_node(value) or isinstance(value, QTensor | PackedWeights | _Packed | _BatchSizes):
                return
            else:
                real.append(value)
        schema, _, op = _resolve(schema_text)
        args, kwargs = _bind(schema, real)
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

    # -- prim:: ---------------------------------------------------------------------------------

    def constant_node(self, value: torch.Tensor) -> torch.fx.Node:
        name = f"_tensor_constant{len(self.constants)}"
        self.constants[name] = value
        setattr(self.root, name, value)
        n = self.graph.get_attr(name)
        n.meta["val"] = self.fake(value)
        self.examples[n] = value
        return n

    def _prim_Constant(self, node):
        value = node.output().toIValue() if node.outputsSize() else None
        if isinstance(value, list | tuple) and any(isinstance(x, torch.Tensor) for x in value):
            # torch's constant propagation folds a list of constant tensors (indices) into one
            # constant: each tensor is a constant of the graph.
            return type(value)(self.constant_node(x) if isinstance(x, torch.Tensor) else x for x in value)
        if isinstance(value, torch.Tensor):
            n = self.constant_node(value)
            if value.numel() <= 64 and not value.is_quantized:
                self.known[node.output()] = value
            if value.dim() == 0 and not value.is_floating_point() and not value.is_complex():
                self.sizes[node.output()] = int(value)
            return n
        return value

    def _prim_ListConstruct(self, node):
        ins = _inputs(node)
        values = [self.env[v] for v in ins]
        if (
            values
            and any(v in self.known for v in ins)
            and all(v in self.known or not _holds_node(x) for v, x in zip(ins, values))
        ):
            self.known[node.output()] = [self.known.get(v, x) for v, x in zip(ins, values)]
        return values

    _prim_TupleConstruct = _prim_ListConstruct

    def _prim_ListUnpack(self, node):
        value = self.env[node.input()]
        if isinstance(value, list | tuple):
            return Outputs(value)
        return Outputs(self.emit(operator.getitem, (value, i)) for i in range(node.outputsSize()))

    _prim_TupleUnpack = _prim_ListUnpack

    def _prim_TupleIndex(self, node):
        seq, index = (self.env[v] for v in _inputs(node))
        return seq[index]

    def _aten___getitem__(self, node):
        seq, index = (self.env[v] for v in _inputs(node))
        if isinstance(seq, list | tuple) and isinstance(index, int):
            return seq[index]
        return self.op(node)

    def _aten___range_length(self, node):
        """The trip count of ``for i in range(lo, hi, step)`` in a scripted loop."""
        lo, hi, step = (self.env[v] for v in node.inputs())
        if not isinstance(step, int) or step == 0:
            raise ConversionError("a scripted range() with a step that is not a constant is not supported")
        if step < 0:
            lo, hi, step = hi, lo, -step
        span = self.arithmetic(operator.add, [self.arithmetic(operator.sub, [hi, lo]), step - 1])
        return self.arithmetic(torch.sym_max, [self.arithmetic(operator.floordiv, [span, step]), 0])

    def _aten___derive_index(self, node):
        index, start, step = (self.env[v] for v in node.inputs())
        return self.arithmetic(operator.add, [start, self.arithmetic(operator.mul, [index, step])])

    def _aten_len(self, node):
        seq = self.env[node.input()]
        if isinstance(seq, list | tuple):
            return len(seq)
        return self.op(node)

    def _prim_NumToTensor(self, node):
        size = self.env[node.input()]
        self.sizes[node.output()] = size
        dtype = torch.float64 if isinstance(self.fake_of(size), float | torch.SymFloat) else torch.int64
        if isinstance(size, int | float):
            self.known[node.output()] = torch.tensor(size, dtype=dtype)
        return self.emit(aten.scalar_tensor.default, (size,), {"dtype": dtype})

    def _number(self, node, cast=None):
        """``aten::Int`` and its kin: the size a 0-d tensor was made from, else the tensor's
        value (an unbacked symbol when it depends on data), converted by ``cast`` (int, float,
        bool; None keeps the number's own type)."""
        v = node.input()
        if v in self.known:
            number = self.known[v].item()
        elif v in self.sizes:
            number = self.sizes[v]
        else:
            value = self.env[v]
            if not isinstance(value, torch.fx.Node):
                return value if cast is None else cast(value)
            number = self.read_number(value)
        if cast is None or isinstance(self.fake_of(number), _PYTHON_TYPES[cast]):
            return number
        if cast is bool:
            return self.arithmetic(operator.ne, [number, 0])
        return self.arithmetic(torch.sym_int if cast is int else torch.sym_float, [number])

    def _aten_Int(self, node):
        return self._number(node, int)

    def _aten_Float(self, node):
        return self._number(node, float)

    def _aten_Bool(self, node):
        return self._number(node, bool)

    def _aten_ScalarImplicit(self, node):
        return self._number(node)

    _prim_ImplicitTensorToNum = _aten_ScalarImplicit

    def _aten_size(self, node):
        ins = [self.env[v] for v in _inputs(node)]
        if isinstance(ins[0], QTensor):
            ins[0] = ins[0].ints
        if isinstance(ins[0], _BatchSizes):  # batch_sizes.size(0): the longest sequence's length
            longest = self.emit(aten.max.default, (ins[0].packed.lengths,))
            return self.read_number(longest)
        val = self.fake_of(ins[0])
        if len(ins) == 2:
            dim = ins[1] % val.dim()
            return self.size_of(ins[0], dim)
        return [self.size_of(ins[0], d) for d in range(val.dim())]

    def size_of(self, tensor, dim: int):
        size = self.fake_of(tensor).shape[dim]
        if isinstance(size, int):
            return size
        return self.emit(aten.sym_size.int, (tensor, dim))

    def _aten__shape_as_tensor(self, node):
        """A tensor's shape as a 1-D tensor (torchvision's detection models take sizes this way);
        its elements stay the sizes they are for a select or slice of it."""
        value = self.env[node.input()]
        sizes = [self.size_of(value, d) for d in range(self.fake_of(value).dim())]
        parts = [self.emit(aten.scalar_tensor.default, (s,), {"dtype": torch.int64}) for s in sizes]
        shape = self.emit(aten.stack.default, (parts,))
        self.shape_tensors[node.output()] = sizes
        if all(isinstance(x, int) for x in sizes):
            self.known[node.output()] = torch.tensor(sizes, dtype=torch.int64)
        return shape

    def _aten_dim(self, node):
        value = self.env[node.input()]
        return self.fake_of(value.ints if isinstance(value, QTensor) else value).dim()

    def _prim_Uninitialized(self, node):
        return _UNINITIALIZED

    def _prim_dtype(self, node):
        return scalar_type_code(self.fake_of(self.env[node.input()]).dtype)

    def _prim_device(self, node):
        return torch.device("cpu")

    def _aten_numel(self, node):
        tensor = self.env[node.input()]
        numel = self.fake_of(tensor).numel()
        return numel if isinstance(numel, int) else self.emit(aten.sym_numel.default, (tensor,))

    # -- control flow ---------------------------------------------------------------------------

    def _prim_If(self, node):
        pred = self.env[node.input()]
        then_block, else_block = node.blocks()
        if not isinstance(pred, torch.fx.Node):  # decided when exporting: the branch taken, inline
            return Outputs(self.inline(then_block if pred else else_block))
        # A test of sizes (``x.size(0) == 1``): a branch the example does not take is translated
        # with its operands' sizes as sizes that pass the test, not the example's (see sub).
        condition = _condition_of(self.fake_of(pred))
        if condition is None:
            return self.translated_if(node, pred, None, None, renamed=False)
        taken = self.example_branch(pred)
        pending = list(self.shape_env.pending_fresh_unbacked_symbols)
        try:
            return self.translated_if(node, pred, condition, taken, renamed=True)
        except ConversionError:
            self.shape_env.pending_fresh_unbacked_symbols[:] = pending  # (sizes the attempt made)
            # Where its sizes without the example's values fail (an op that needs a value of
            # them), a branch is translated with the example's, as the branch it takes: each
            # guard it makes on them is then one the axis's sizes must pass (else the axis is
            # static).
            return self.translated_if(node, pred, condition, taken, renamed=False)

    def translated_if(self, node, pred: torch.fx.Node, condition, taken: bool | None, renamed: bool) -> Outputs:
        """``prim::If`` on ``pred`` as a cond node. ``condition``: the test ``pred`` makes of sizes;
        with ``renamed``, a branch the example does not take (``taken`` is the one it takes, None
        when the example gives no value) is translated assuming it, see sub."""
        then_block, else_block = node.blocks()
        # (each branch returns, after its outputs, the tensors made outside it that it writes into)
        written = _written_outside([then_block, else_block], "if", followed=True, at=node)
        operands = self.operands([then_block, else_block])
        subs, outs = [], []
        for block, then in ((then_block, True), (else_block, False)):
            assuming = None if not renamed or taken is then else condition if then else sympy.Not(condition)
            sub = self.sub(operands=operands, assuming=assuming)
            subs.append(sub)
            outs.append(sub.inline(block))
        numbers, read = self.reconciled(subs, outs, condition)
        branches, results = [], []
        for sub, branch_outs in zip(subs, outs):
            returned = [o for k, o in enumerate(branch_outs) if k not in numbers]
            # (a branch that leaves one as it was returns a copy: an If inside another's branch may
            # not return its input, which torch's functionalization of that branch refuses)
            returned += [
                sub.emit(aten.clone.default, (sub.env[v],)) if sub.env[v] in sub.inputs else sub.env[v] for v in written
            ]
            # (a branch is final: traced again, as the graph around it may be, it stays as it is,
            # see _Retrace; one writing into its own tensors is rewritten without in-place ops now)
            branch, vals = sub.finish(returned, "cond", self, rewrite=True if written else None)
            branches.append(branch)
            results.append([sub.outer_sizes(val) for val in vals])
        predicate = self.as_tensor(pred, torch.bool)  # (before the sizes made below, which the If binds)
        merged = []
        for a, b in zip(*results):
            if a.dtype != b.dtype or a.dim() != b.dim():
                raise ConversionError(
                    "the branches of a scripted `if` return tensors of different types or ranks "
                    f"({a.dtype}{list(a.shape)} and {b.dtype}{list(b.shape)}); ONNX If needs them alike"
                )
            sizes = [self.merged_size(x, y, condition) for x, y in zip(a.shape, b.shape)]
            with self.mode:
                merged.append(a.new_empty(sizes))
        args = (predicate, branches[0], branches[1], [self.env[v] for v in operands])
        out = self.add_node(torch.ops.higher_order.cond, args, {}, merged)
        items = iter([self.add_node(operator.getitem, (out, i), {}, v) for i, v in enumerate(merged)])
        results_of_if = []
        for k in range(len(outs[0])):
            if k in numbers:
                results_of_if.append(self.chosen(pred, condition, numbers[k]))
            elif k in read:  # (returned as a 0-d tensor)
                results_of_if.append(self.read_number(next(items)))
            else:
                results_of_if.append(next(items))
        for v, item in zip(written, items):  # what the branches wrote, from here on
            self.env[v] = item
            self.known.pop(v, None)
        return Outputs(results_of_if)

    def reconciled(self, subs: list[_Translator], outs: list[list], condition) -> tuple[dict[int, tuple], set[int]]:
        """The outputs of an ``if``'s branches made alike for ONNX If, in place: a value a branch
        leaves uninitialized (TorchScript's early ``return`` in the other one) a tensor of the
        other branch's type; a number (the flag of an early return) the branches' expressions of
        it where this translator computes it from them (returned by position), else a 0-d tensor
        both return (the positions returned second), whose number the enclosing graph reads."""
        numbers: dict[int, tuple] = {}
        read: set[int] = set()
        for k, (a, b) in enumerate(zip(*outs)):
            if a is _UNINITIALIZED and b is _UNINITIALIZED:
                numbers[k] = (a, b)
            elif a is _UNINITIALIZED or b is _UNINITIALIZED:
                filled, other = (0, 1) if a is _UNINITIALIZED else (1, 0)
                outs[filled][k] = subs[filled].tensor_like(subs[other], outs[other][k])
            elif _is_number(subs[0], a) or _is_number(subs[1], b):
                exprs = [sub.outer_expr(x) for sub, x in zip(subs, (a, b))]
                if condition is not None and all(e is not None and self.computable(e) for e in exprs):
                    numbers[k] = tuple(exprs)
                    continue
                for sub, branch_outs in zip(subs, outs):
                    branch_outs[k] = sub.as_tensor(branch_outs[k], _number_dtype(sub.fake_of(branch_outs[k])))
                read.add(k)
            elif not all(
                isinstance(x, torch.fx.Node) and isinstance(sub.fake_of(x), torch.Tensor)
                for sub, x in zip(subs, (a, b))
            ):
                raise ConversionError("a scripted `if` whose branches return lists or other values is not supported")
        return numbers, read

    def chosen(self, pred: torch.fx.Node, condition, exprs: tuple):
        """The number an ``if`` on ``condition`` gives whose branches give ``exprs`` (over this
        translator's symbols), computed here."""
        a, b = exprs
        if a is _UNINITIALIZED:
            return a
        if isinstance(a, sympy.logic.boolalg.Boolean) and isinstance(b, sympy.logic.boolalg.Boolean):
            return self.size_value(sympy.Or(sympy.And(condition, a), sympy.And(sympy.Not(condition), b)))
        return self.arithmetic(torch.sym_ite, [pred, self.size_value(a), self.size_value(b)])

    def outer_expr(self, value):
        """A number this function computes (a Python number, or a node of a symbolic one) as an
        expression over the enclosing translator's symbols; None when it is not one of sizes."""
        if isinstance(value, bool):
            return sympy.true if value else sympy.false
        if isinstance(value, int):
            return sympy.Integer(value)
        val = self.fake_of(value) if isinstance(value, torch.fx.Node) else None
        if isinstance(val, torch.SymInt | torch.SymBool):
            return val.node.expr.xreplace(self.renamed)
        return None

    def tensor_like(self, other: _Translator, value: torch.fx.Node) -> torch.fx.Node:
        """A tensor of this function standing for a value it leaves uninitialized, of the type of
        ``value`` of the other branch ``other`` (zeros; never read: TorchScript reads it only where
        the other branch ran), of its sizes where this function has them."""
        val = other.fake_of(value)
        if not isinstance(val, torch.Tensor):
            raise ConversionError(
                "a scripted `if` leaves a value uninitialized that is not a tensor in the other branch"
            )
        mine = {old: new for new, old in self.renamed.items()}
        sizes = []
        for d in val.shape:
            expr = d.node.expr.xreplace(other.renamed).xreplace(mine) if isinstance(d, torch.SymInt) else None
            sizes.append(d if expr is None else self.size_value(expr) if self.computable(expr) else 0)
        return self.emit(aten.zeros.default, (sizes,), {"dtype": val.dtype})

    def computable(self, expr) -> bool:
        """Whether ``size_value`` computes ``expr`` here."""
        if isinstance(expr, sympy.logic.boolalg.BooleanAtom) or expr.is_Integer:
            return True
        if expr.is_Symbol:
            return self.size_source(expr) is not None
        known = isinstance(expr, sympy.Not) or type(expr) in _COMBINED
        return known and all(self.computable(x) for x in expr.args)

    def size_source(self, symbol) -> tuple[torch.fx.Node, int | None] | None:
        """A value of this graph that is the size ``symbol``: a node of a symbolic size (None), or a
        tensor and one of its dimensions."""
        for n in self.graph.nodes:
            val = n.meta.get("val")
            if isinstance(val, torch.SymInt) and val.node.expr == symbol:
                return n, None
            if isinstance(val, torch.Tensor):
                for d, size in enumerate(val.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr == symbol:
                        return n, d
        return None

    def size_value(self, expr):
        """``expr`` (an expression of sizes, integer or boolean, over this translator's symbols)
        computed in this graph from the values whose sizes it reads (see computable)."""
        if isinstance(expr, sympy.logic.boolalg.BooleanAtom):
            return bool(expr)
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            source = self.size_source(expr)
            if source is None:
                raise ConversionError(f"the size {expr} is no size of a value of this graph")
            n, d = source
            return n if d is None else self.emit(aten.sym_size.int, (n, d))
        parts = [self.size_value(x) for x in expr.args]
        if isinstance(expr, sympy.Not):
            return self.arithmetic(torch.sym_not, parts)
        combine = _COMBINED.get(type(expr))
        if combine is None:
            raise ConversionError(f"the size {expr} has no computation here")
        return functools.reduce(lambda x, y: self.arithmetic(combine, [x, y]), parts)

    def merged_size(self, x, y, condition):
        """The size of an ``if``'s result whose branches give ``x`` and ``y``: the one size both are
        where the branch runs (``x.size(0) == 2`` gives 2 in the branch that tests it, the size
        in the other), else one more dynamic size of the result."""
        if x is y or _known_equal(x, y):
            return x
        if condition is not None:
            if _known_equal(*_given(condition, x, y)):
                return y
            if _known_equal(*_given(sympy.Not(condition), x, y)):
                return x
        return self.shape_env.create_unbacked_symint()

    def _prim_Loop(self, node):
        trips, first, *initial = (self.env[v] for v in node.inputs())
        (block,) = node.blocks()
        if isinstance(trips, int) and first is True and _always_true(block) and trips <= 64:
            # A loop of a trip count known when exporting, without `break`: unrolled, as exact.
            state = initial
            for i in range(trips):
                state = self.inline(block, [i, *state])[1:]
            return Outputs(state)
        return self.while_loop(trips, first, initial, block)

    def while_loop(self, trips, first, initial: list, block):
        """A scripted loop as torch's while_loop over (iteration, condition, *state); numbers in
        the state are carried as 0-d tensors."""
        _written_outside([block], "loop", followed=False)
        free = self.operands([block])
        kinds = [isinstance(x, torch.fx.Node) and isinstance(self.fake_of(x), torch.Tensor) for x in initial]
        carried = [self.as_tensor(0, torch.int64), self.as_tensor(first, torch.bool)]
        carried += [x if is_tensor else self.as_tensor(x, torch.int64) for x, is_tensor in zip(initial, kinds)]
        extra = [self.env[v] for v in free]
        limit = trips if isinstance(trips, int) else self.as_tensor(trips, torch.int64)
        carried_vals = [self.fake_of(c) for c in carried]

        bound_val = [] if isinstance(limit, int) else [self.fake_of(limit)]
        cond = self.sub(carried_vals + [self.fake_of(e) for e in extra] + bound_val)
        i, c = cond.inputs[0], cond.inputs[1]
        bound = limit if isinstance(limit, int) else cond.inputs[-1]
        below = cond.emit(aten.lt.Tensor if not isinstance(bound, int) else aten.lt.Scalar, (i, bound))
        cond_fn, _ = cond.finish([cond.emit(aten.logical_and.default, (below, c))], "while_loop_cond", self, None)

        body = self.sub(carried_vals, free, bound_val)
        i, state = body.inputs[0], body.inputs[2 : 2 + len(initial)]
        ts_state = [s if is_tensor else body.read_number(s) for s, is_tensor in zip(state, kinds)]
        outs = body.inline(block, [body.read_number(i), *ts_state])
        again, new_state = outs[0], outs[1:]
        updated = [body.emit(aten.add.Tensor, (i, 1)), body.as_tensor(again, torch.bool)]
        updated += [s if is_tensor else body.as_tensor(s, torch.int64) for s, is_tensor in zip(new_state, kinds)]
        for before, after in zip(carried_vals, updated):
            got = body.fake_of(after)
            if not isinstance(got, torch.Tensor) or got.dtype != before.dtype or list(got.shape) != list(before.shape):
                raise ConversionError(
                    "a scripted loop changes the type or shape of a value it carries "
                    f"({before.dtype}{list(before.shape)} -> {getattr(got, 'dtype', type(got).__name__)}"
                    f"{list(getattr(got, 'shape', []))}); fastonnx converts loops whose state keeps its shape"
                )
        # (final: see _Retrace; one writing into its own tensors is rewritten without in-place ops now)
        body_fn, _ = body.finish(updated, "while_loop_body", self, None)
        additional = extra + ([] if isinstance(limit, int) else [limit])
        args = (cond_fn, body_fn, tuple(carried), tuple(additional))
        out = self.add_node(torch.ops.higher_order.while_loop, args, {}, tuple(carried_vals))
        finals = [self.add_node(operator.getitem, (out, k), {}, v) for k, v in enumerate(carried_vals)][2:]
        return Outputs(f if is_tensor else self.read_number(f) for f, is_tensor in zip(finals, kinds))

    def operands(self, blocks) -> list:
        """The enclosing graph's values the blocks read that are graph values (inputs of the
        function); numbers and constants are read directly."""
        free = _free_values(blocks)
        lists = [v for v in free if _holds_node(self.env[v]) and not isinstance(self.env[v], torch.fx.Node)]
        if lists:
            raise ConversionError(
                "a scripted `if` or loop reads a list of tensors from outside it; this is not supported"
            )
        return [v for v in free if isinstance(self.env[v], torch.fx.Node)]

    def as_tensor(self, value, dtype: torch.dtype):
        """A number (Python or symbolic) or a tensor as a 0-d tensor of ``dtype`` (for control flow)."""
        if isinstance(value, torch.fx.Node) and isinstance(self.fake_of(value), torch.Tensor):
            return (
                value
                if self.fake_of(value).dtype == dtype
                else self.emit(aten._to_copy.default, (value,), {"dtype": dtype})
            )
        return self.emit(aten.scalar_tensor.default, (value,), {"dtype": dtype})

    def inline(self, block, inputs: Sequence = ()) -> list:
        """Translates ``block`` into this graph, its inputs bound to ``inputs``; its results."""
        for v, x in zip(block.inputs(), inputs):
            self.env[v] = x
        node = self.node
        self.block(block)
        self.node = node
        return [self.env[v] for v in block.outputs()]

    def example_branch(self, pred) -> bool | None:
        """The branch of a scripted ``if`` on ``pred`` (a graph value) the example takes; None when
        the example gives no value (inside a branch it does not take)."""
        val = self.fake_of(pred)
        if isinstance(val, torch.Tensor):
            real = self.example_of(pred)
            return None if real is None else bool(real)
        try:
            return bool(self.hinted(val))
        except ConversionError:
            return None

    def sub(
        self, before: Sequence = (), operands: Sequence = (), after: Sequence = (), assuming: Any = None
    ) -> _Translator:
        """A translator of a control-flow function, sharing this one's fake mode: its own graph,
        whose placeholders are the fake values ``before``, then the enclosing graph's values
        ``operands`` (TorchScript values, read in the function through them), then ``after``.

        ``assuming`` (a test of sizes, over this translator's symbols): the function is a branch
        the example does not take, which runs where the test holds. Its code need not hold at the
        example's sizes (``elif x.size(0) == 1: y = x + z`` broadcasts x only where that size is
        1), so each symbol of the operands' sizes is a new unbacked one there (any size), of which
        the test is assumed (``x.size(0)`` is 1 in that branch): torch decides on them what the
        test implies, the rest as for any size it has no value of (a squeeze at run time, a
        broadcast between equal sizes), and what would need a value of them fails (_prim_If then
        translates the branch with the example's sizes). The new symbols are the function's own
        (``outer_sizes`` maps them back), so that nothing assumed in it holds outside."""
        sub = _Translator.__new__(_Translator)
        sub.__dict__.update(self.__dict__)
        sub.graph, sub.root, sub.sizes = torch.fx.Graph(), torch.nn.Module(), {}
        # The enclosing graph's numbers and constants are the function's too; its nodes are not.
        sub.env = {v: x for v, x in self.env.items() if not _holds_node(x)}
        sub.inputs = []
        sub.renamed = {}
        operand_vals = [self.fake_of(self.env[v]) for v in operands]
        if assuming is not None:
            operand_vals = sub.renamed_values(operand_vals, assuming)
        for v, val in [(None, f) for f in before] + list(zip(operands, operand_vals)) + [(None, f) for f in after]:
            p = sub.graph.placeholder(f"arg{len(sub.inputs)}")
            p.meta["val"] = val
            sub.inputs.append(p)
            if v is not None:
                sub.env[v] = p
        return sub

    def renamed_values(self, values: list, assuming) -> list:
        """``values`` (fake tensors and symbolic numbers) with each symbol they hold a new unbacked
        one (``renamed`` maps it back), ``assuming`` held of the new ones (see sub)."""
        env = self.shape_env
        pending = list(env.pending_fresh_unbacked_symbols)
        new_of: dict = {}

        def rename(expr):
            for symbol in sorted(expr.free_symbols, key=str):
                if symbol not in new_of:
                    if symbol_is_type(symbol, (SymT.FLOAT, SymT.UNBACKED_FLOAT)):
                        new = env.create_unbacked_symfloat()
                    else:
                        # (any size: torch's 2 and up for a size traced so is no bound of a branch
                        # on the size being 1)
                        new = env.create_unbacked_symint()
                        torch._check(new >= 0)
                    new_of[symbol] = new.node.expr
            return expr.xreplace(new_of)

        def renamed(val):
            if isinstance(val, torch.Tensor):
                if not any(isinstance(d, torch.SymInt) for d in val.shape):
                    return val
                sizes = [
                    env.create_symintnode(rename(d.node.expr), hint=None) if isinstance(d, torch.SymInt) else d
                    for d in val.shape
                ]
                with self.mode:
                    return self.without_real_values(torch.empty, (sizes,), {"dtype": val.dtype, "device": val.device})
            if isinstance(val, torch.SymInt):
                return env.create_symintnode(rename(val.node.expr), hint=None)
            if isinstance(val, torch.SymFloat):
                return env.create_symfloatnode(rename(val.node.expr), hint=None)
            if isinstance(val, torch.SymBool):
                return env.create_symboolnode(rename(val.node.expr))
            return val

        new_values = [renamed(val) for val in values]
        for test in sympy.And.make_args(assuming):
            # (a part of the test on sizes the function does not read says nothing of it)
            if test.free_symbols and test.free_symbols <= new_of.keys():
                torch._check(env.create_symboolnode(test.xreplace(new_of)))
        # (placeholders of the function: no node of it makes them)
        env.pending_fresh_unbacked_symbols[:] = pending
        self.renamed = {new: old for old, new in new_of.items()}
        return new_values

    def outer_sizes(self, val):
        """A fake tensor this function returns, its sizes in the enclosing translator's symbols
        (those ``sub`` renamed mapped back)."""
        if not self.renamed or not isinstance(val, torch.Tensor):
            return val
        sizes = [
            _size(self.shape_env, d.node.expr.xreplace(self.renamed)) if isinstance(d, torch.SymInt) else d
            for d in val.shape
        ]
        with self.mode:
            return self.without_real_values(torch.empty, (sizes,), {"dtype": val.dtype, "device": val.device})

    def finish(
        self, outputs: list, kind: str, parent: _Translator, rewrite: bool | None = False
    ) -> tuple[torch.fx.Node, list]:
        """This control-flow function as a submodule of ``parent``'s module: the get_attr node of
        ``parent``'s graph that reads it, and the fake values it returns. ``rewrite``: traced again
        without in-place ops (True: it writes into some of its inputs and returns them last, see
        _prim_If; None: where an in-place op would be read through another name), as
        functionalized() does for the program, the writes into its inputs dropped (an ONNX If's
        branch computes, returns)."""
        from torch.fx.experimental.proxy_tensor import make_fx

        self.graph.output(tuple(outputs))
        module = torch.fx.GraphModule(self.root, self.graph)
        if rewrite is False or rewrite is None and not needs_functionalization(self.graph):
            return self._attach(module, kind, parent), [self.fake_of(o) for o in outputs]
        retrace = _Retrace(module)
        run = torch.func.functionalize(retrace.run, remove="mutations")
        values = [p.meta["val"] for p in self.inputs]
        trace = make_fx(run, decomposition_table=_VIEW_COPIES, tracing_mode="real")
        try:
            # (with the example's values beside where it has them, as functionalized() traces: torch's
            # view replays fail on some symbolic sizes without them)
            with self.mode:
                try:
                    new = trace(*values)
                except Exception:  # noqa: BLE001 - inputs without the example's values (a branch it does not take)
                    new = self.without_real_values(trace, tuple(values), {})
        except Exception as e:  # torch's retrace of the function
            retrace.forget()
            what = "writes into tensors made outside it" if rewrite else "writes into views of its tensors"
            raise ConversionError(
                f"a scripted `if` {what}, and rewriting its branch without in-place "
                f"ops failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        for n in list(new.graph.nodes):
            if n.target is aten.copy_.default and n.args[0].op == "placeholder" and not n.users:
                new.graph.erase_node(n)
        retrace.restore(new)
        results = cast(Sequence[torch.fx.Node], new.graph.output_node().args[0])
        return self._attach(new, kind, parent), [r.meta["val"] for r in results]

    @staticmethod
    def _attach(module: torch.fx.GraphModule, kind: str, parent: _Translator) -> torch.fx.Node:
        name = f"{kind}_{len(parent.functions)}"
        parent.functions.append(name)
        setattr(parent.root, name, module)
        return parent.graph.get_attr(name)

    def _aten__convolution(self, node):
        """The traced form of every convolution: ``convolution`` with backend flags after its
        arguments, which say nothing about the result."""
        values: list[Any] = [self.env[v] for v in _inputs(node)]
        # (torch's fake convolution picks a memory format by the sizes, a guard on the batch that
        # says nothing of the values: not one that would fix a batch traced at size 1)
        with self.shape_env.suppress_guards():
            return self.emit(aten.convolution.default, tuple(values[:9]), traced=node)

    # -- packed sequences (see _packed_rnn) -----------------------------------------------------

    def _aten__pack_padded_sequence(self, node):
        padded, lengths, batch_first = (self.env[v] for v in node.inputs())
        if batch_first:
            padded = self.emit(aten.transpose.int, (padded, 0, 1))
        packed = _Packed(padded, lengths)
        return Outputs([packed, _BatchSizes(packed)])

    def _recurrent(self, node, mode: str):
        values = [self.env[v] for v in node.inputs()]
        if not isinstance(values[0], _Packed):
            return self.padded_recurrent(node, values)
        packed, _, hx, params, has_biases, num_layers, dropout, train, bidirectional = values
        if train and dropout:
            raise ConversionError(f"{node.kind()} with dropout in training mode has no ONNX form; export in eval mode")
        states = list(hx) if isinstance(hx, list | tuple) else [hx]
        args = (mode, packed.padded, packed.lengths, states, list(params), has_biases, num_layers, bidirectional)
        out = self.emit(torch.ops.fastonnx.padded_rnn.default, args)
        items = [self.add_node(operator.getitem, (out, i), {}, out.meta["val"][i]) for i in range(3)]
        return Outputs([_Packed(items[0], packed.lengths), *items[1 : node.outputsSize()]])

    def padded_recurrent(self, node, values: list):
        """A recurrent layer over a padded tensor (``lstm.input``...). Its result types are
        computed here: the fake kernel torch runs underneath (mkldnn) gives a workspace size that
        disagrees with the real one, which real-value propagation refuses."""
        x, hx, bidirectional = values[0], values[1], values[7]
        states = list(hx) if isinstance(hx, list | tuple) else [hx]
        x_val, h_val = self.fake_of(x), self.fake_of(states[0])
        with self.mode:
            out = x_val.new_empty((*x_val.shape[:-1], (2 if bidirectional else 1) * h_val.shape[-1]))
            finals = [self.fake_of(h).new_empty(self.fake_of(h).shape) for h in states]
        _, _, op = _resolve(node.schema())
        result = self.add_node(op, tuple(values), {}, (out, *finals))
        return Outputs(self.add_node(operator.getitem, (result, i), {}, v) for i, v in enumerate((out, *finals)))

    def _aten_lstm(self, node):
        return self._recurrent(node, "lstm")

    def _aten_gru(self, node):
        return self._recurrent(node, "gru")

    def _aten_rnn_tanh(self, node):
        return self._recurrent(node, "rnn_tanh")

    def _aten_rnn_relu(self, node):
        return self._recurrent(node, "rnn_relu")

    def _aten__pad_packed_sequence(self, node):
        packed, _, batch_first, padding_value, total = (self.env[v] for v in node.inputs())
        if not isinstance(packed, _Packed):
            raise ConversionError("pad_packed_sequence of a value that is not a packed sequence of the graph")
        y, lengths = packed.padded, packed.lengths
        steps = self.fake_of(y).shape[0]
        if isinstance(total, int) and isinstance(steps, int) and total > steps:
            y = self.emit(aten.constant_pad_nd.default, (y, [0, 0, 0, 0, 0, total - steps]))
        elif isinstance(total, int) and not isinstance(steps, int):
            raise ConversionError("pad_packed_sequence's total_length over a dynamic sequence length is not supported")
        elif total is not steps:
            y = self.emit(aten.slice.Tensor, (y, 0, 0, total))
        if padding_value:
            time = self.emit(aten.arange.default, (self.size_of(y, 0),), {"dtype": torch.int64})
            inside = self.emit(aten.lt.Tensor, (self.emit(aten.unsqueeze.default, (time, 1)), lengths))
            y = self.emit(aten.where.ScalarOther, (self.emit(aten.unsqueeze.default, (inside, 2)), y, padding_value))
        if batch_first:
            y = self.emit(aten.transpose.int, (y, 0, 1))
        return Outputs([y, lengths])

    def _aten_copy_(self, node):
        """``dst.copy_(src)``, which broadcasts ``src`` to ``dst``'s shape. Of sizes without an example's
        value (a branch the example does not take), torch's fake copy_ asks whether one is 1, a guard
        it cannot decide, where expand requires of them what eager does: ``src`` is expanded first."""
        dst, src, *rest = (self.env[v] for v in _inputs(node))
        if isinstance(dst, torch.fx.Node) and isinstance(src, torch.fx.Node):
            d, s = self.fake_of(dst), self.fake_of(src)
            if (
                isinstance(d, torch.Tensor)
                and isinstance(s, torch.Tensor)
                and (_unbacked(d) or _unbacked(s))
                and not (d.dim() == s.dim() and all(_known_equal(x, y) for x, y in zip(d.shape, s.shape)))
            ):
                sizes = [self.size_of(dst, i) for i in range(d.dim())]
                expanded = self.emit(aten.expand.default, (src, sizes))
                return self.emit(aten.copy_.default, (dst, expanded, *rest))
        return self.op(node)

    def _aten_select(self, node):
        values = [self.env[v] for v in _inputs(node)]
        source = node.inputsAt(0)
        if source in self.shape_tensors and values[1] == 0 and isinstance(values[2], int):
            self.sizes[node.output()] = self.shape_tensors[source][values[2]]
        if not isinstance(values[0], _BatchSizes):
            return self.op(node)
        if values[1:] != [0, 0]:
            raise ConversionError("of a packed sequence's batch sizes only the first (batch_sizes[0]) is supported")
        batch = self.size_of(values[0].packed.padded, 1)
        self.sizes[node.output()] = batch
        return self.emit(aten.scalar_tensor.default, (batch,), {"dtype": torch.int64})

    # -- aten:: ---------------------------------------------------------------------------------

    def op(self, node: torch._C.Node):
        schema_text = node.schema()
        if schema_text == "(no schema)":
            raise ConversionError(f"TorchScript node {node.kind()} has no schema torch can match")
        schema, overload, op = _resolve(schema_text)
        namespace, name = schema.name.split("::")
        ins = _inputs(node)
        values = [self.env[v] for v in ins]
        if any(
            isinstance(v, QTensor) or isinstance(v, list) and any(isinstance(x, QTensor) for x in v) for v in values
        ):
            return self.on_quantized(node, values)
        if any(isinstance(v, _Packed | _BatchSizes) for v in values):
            raise ConversionError(
                f"{node.kind()} reads a packed sequence; only recurrent layers and pad_packed_sequence take one"
            )
        if (
            namespace == "aten"
            and schema.returns
            and all(str(r.type) in ("int", "float", "bool") for r in schema.returns)
        ):
            base = name.removeprefix("__").removesuffix("__") if name.startswith("__") else name
            fn = _ARITHMETIC.get(name, _ARITHMETIC.get(base))
            if fn is not None:
                return self.arithmetic(fn, values)
        if namespace == "aten" and name in _SIZE_TENSOR_OPS and node.output().type().kind() == "TensorType":
            self.size_arithmetic(node, name, values)
        args, kwargs = _bind(schema, values)
        # the `out=` arguments of an out variant
        written = [
            a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
        ]
        functional = _functional_overload(overload, schema) if written else None
        if functional is not None:
            # `op(..., out=t)`: the functional op, whose result is what `t` holds from here on.
            outs = [kwargs.pop(name) for name in written]
            if any(a.name == "dtype" for a in functional._schema.arguments) and isinstance(outs[0], torch.fx.Node):
                kwargs["dtype"] = self.fake_of(outs[0]).dtype  # an out= tensor gives the result's type
            result = self.emit(functional, tuple(args), kwargs)
            for v, value in zip(ins, values):
                if any(value is o for o in outs):
                    self.env[v] = result
            return result
        traced = self.traced_types(node) if self.typed_by_trace else None
        if traced is not None:
            result = self.add_node(op, tuple(args), kwargs, traced[0] if len(traced) == 1 else tuple(traced))
        else:
            result = self.emit(op, tuple(args), kwargs)
        n_out = node.outputsSize()
        val = self.fake_of(result)
        if n_out > 1 or isinstance(val, list | tuple):
            count = n_out if n_out > 1 else len(val)
            items = [self.add_node(operator.getitem, (result, i), {}, val[i]) for i in range(count)]
            return Outputs(items) if n_out > 1 else items
        return result

    def traced_types(self, node) -> list | None:
        """Fake tensors of the types the trace recorded for the node's outputs, when each is a
        tensor whose type is complete."""
        vals = []
        for out in _outputs(node):
            t = out.type()
            if t.kind() != "TensorType" or t.scalarType() is None or t.sizes() is None or t.strides() is None:
                return None
            dtype = getattr(torch, t.scalarType().lower(), None)  # Float -> torch.float
            if not isinstance(dtype, torch.dtype) or t.scalarType().startswith("Q"):  # (quantized: see QTensor)
                return None
            vals.append(self.empty(t.sizes(), t.strides(), dtype, _CPU))  # (what empty_strided gives)
        return vals

    def arithmetic(self, fn, values: list):
        if all(not isinstance(v, torch.fx.Node) for v in values):
            return fn(*values)
        return self.emit(fn, tuple(values))

    def size_arithmetic(self, node, name: str, values: list) -> None:
        """A 0-d tensor op over sizes the tracer recorded (``x.size(0) * 2``): its size, for an
        ``aten::Int`` of it to read."""
        ins = _inputs(node)
        operands = []
        for v, value in zip(ins[:2], values[:2]):
            if v in self.sizes:
                operands.append(self.sizes[v])
            elif isinstance(value, int | float) and not isinstance(value, bool):
                operands.append(value)
            else:
                return
        if self.fake_of(self.env[ins[0]]).dim() if isinstance(self.env[ins[0]], torch.fx.Node) else 0:
            return
        a, b = operands
        if name in ("add", "sub") and len(values) > 2 and values[2] != 1:
            b = self.arithmetic(operator.mul, [b, values[2]])
        fn = _SIZE_TENSOR_OPS[name]
        if name == "div" and len(values) > 2 and values[2] == "floor":
            fn = operator.floordiv
        elif name == "div" and len(values) > 2 and values[2] == "trunc":
            fn = operator.floordiv  # sizes are non-negative: truncation is flooring
        if name == "rsub":
            self.sizes[node.output()] = self.arithmetic(operator.sub, [b, a])
        else:
            self.sizes[node.output()] = self.arithmetic(fn, [a, b])


@functools.cache
def _resolve(schema_text: str) -> tuple[torch.FunctionSchema, Any, torch._ops.OpOverload]:
    """A TorchScript node's matched schema, its op's overload packet and the overload (parsed
    once per schema: every node of an op asks)."""
    schema = torch._C.parse_schema(schema_text)
    namespace, name = schema.name.split("::")
    packet = getattr(getattr(torch.ops, namespace), name)
    return schema, packet, getattr(packet, schema.overload_name or "default")


def _bind(schema: torch.FunctionSchema, values: Sequence) -> tuple[list, dict[str, Any]]:
    """A node's input values as the overload's positional and keyword arguments, TorchScript's
    integer enums (ScalarType, Layout, MemoryFormat) as torch's objects."""
    args: list = []
    kwargs: dict[str, Any] = {}
    for a, value in zip(schema.arguments, values):
        type_name = str(a.real_type).removeprefix("Optional[").removesuffix("]")
        if value is not None and type_name in _ENUM_ARGUMENTS and isinstance(value, int):
            value = _ENUM_ARGUMENTS[type_name](value)
        if a.kwarg_only:
            kwargs[a.name] = value
        else:
            args.append(value)
    return args, kwargs


def _functional_overload(packet, schema) -> torch._ops.OpOverload | None:
    """The functional overload of an out variant (``arange.out`` -> ``arange``,
    ``add.out`` -> ``add.Tensor``): same arguments but the ``out=`` ones."""
    wanted = [a.name for a in schema.arguments if not (a.kwarg_only and a.alias_info is not None)]
    for name in packet.overloads():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        rest = args[len(wanted) :]
        if (
            name != schema.overload_name
            and [a.name for a in args[: len(wanted)]] == wanted
            and all(a.has_default_value() or a.kwarg_only for a in rest)
            and not candidate._schema.is_mutable
        ):
            return candidate
    return None


def _slice_step(self, dim=0, start=None, end=None, step=1) -> list:
    return [step > 0]


# What ops require of their numbers (eager raises otherwise) that torch's fake kernels test with a
# guard, not torch._check: a guard on a number read from data fails, an assumption does not.
_PRECONDITIONS = {aten.slice.Tensor: _slice_step}


def assume_preconditions(target, args, kwargs) -> None:
    """Assumes the preconditions of ``target`` on symbolic numbers (read from data), as
    torch._check does: the runtime assertions of what eager would refuse."""
    conditions = _PRECONDITIONS.get(target)
    for condition in conditions(*args, **kwargs) if conditions is not None else ():
        if isinstance(condition, torch.SymBool):
            torch._check(condition)


def _inputs(node: torch._C.Node) -> list:
    """A TorchScript node's inputs. (By index: iterating ``node.inputs()`` costs some 20 µs a node
    in torch's bindings, whatever their count, more than translating most nodes does.)"""
    return [node.inputsAt(i) for i in range(node.inputsSize())]


def _outputs(node: torch._C.Node) -> list:
    """A TorchScript node's outputs (by index, as ``_inputs``)."""
    return [node.outputsAt(i) for i in range(node.outputsSize())]


# Functionalization replays views as copies (slice_copy), whose kernels fail on symbolic sizes
# (``storage_offset()``): a view and a clone instead.
_VIEW_COPIES = {
    aten.slice_copy.Tensor: lambda *args, **kwargs: aten.slice.Tensor(*args, **kwargs).clone(),
    aten.select_copy.int: lambda *args, **kwargs: aten.select.int(*args, **kwargs).clone(),
}


def _written_outside(blocks, what: str, followed: bool, at: torch._C.Node | None = None) -> list:
    """The tensors made outside the blocks of a scripted ``if`` or loop that the blocks write into
    (``y[:] = x`` in a branch, through views made in the blocks): torch's JIT passes remove only the
    mutations they can prove local, and the blocks become functions of their inputs, where such a
    write would be lost. With ``followed`` (an ``if``, node ``at``, whose branches then return the
    tensors they wrote), each must be a tensor of its own, not a view of another nor one with a view
    made before ``at`` read after it (it would read the tensor as it was); a ``ConversionError``
    says which write cannot be followed."""
    inside: set = set()
    nodes: set = set()

    def walk(block) -> None:
        inside.update(block.inputs())
        for node in block.nodes():
            nodes.add(node)
            for inner in node.blocks():
                walk(inner)
            inside.update(node.outputs())

    for block in blocks:
        walk(block)
    written: list = []

    def check(block) -> None:
        for node in block.nodes():
            for inner in node.blocks():
                check(inner)
            text = node.schema()
            if text == "(no schema)":
                continue
            schema = _resolve(text)[0]
            for a, v in zip(schema.arguments, _inputs(node)):
                if a.alias_info is None or not a.alias_info.is_write:
                    continue
                base = v
                # through the views made inside the blocks, to the tensor they view
                while base in inside and base.node().outputsSize() == 1 and _is_view(base.node()):
                    base = base.node().inputsAt(0)
                if base in inside or base in written:
                    continue
                stale = at is not None and any(
                    u.user not in nodes
                    and _is_view(u.user)
                    and any(later.user.isAfter(at) for later in u.user.output().uses())
                    for u in base.uses()
                )
                if not followed or _is_view(base.node()) or stale:
                    raise ConversionError(
                        f"a scripted `{what}` writes into a tensor made outside it ({node.kind()}"
                        + (f", {_where(node)}" if _source_line(node) else "")
                        + (
                            "; the tensor is a view, or a view of it made before the `if` is read after it)"
                            if followed
                            else "); fastonnx converts loops whose body writes only into its own tensors"
                        )
                    )
                written.append(base)

    for block in blocks:
        check(block)
    return written


def _is_view(node: torch._C.Node) -> bool:
    """Whether the node's output is a view of its first input (aten::slice, select, view...)."""
    text = node.schema()
    if text == "(no schema)":
        return False
    schema = _resolve(text)[0]
    return bool(schema.returns) and schema.returns[0].alias_info is not None and not schema.is_mutable


def _free_values(blocks) -> list:
    """The values the blocks (and blocks nested in them) read but do not define, in order of use."""
    defined: set = set()
    free: dict = {}

    def walk(block):
        defined.update(block.inputs())
        for n in block.nodes():
            for v in n.inputs():
                if v not in defined:
                    free.setdefault(v, None)
            for b in n.blocks():
                walk(b)
            defined.update(n.outputs())
        for v in block.outputs():
            if v not in defined:
                free.setdefault(v, None)

    for block in blocks:
        walk(block)
    return list(free)


# Ops whose result depends on the data beyond its type, whatever their arguments: control flow.
# Ops whose result size, or a number they return, depends on the data are those torch tags so
# (nonzero, masked_select, unique, item, index by a mask...; see _data_reading_kinds), and
# composites of them, which have no tag of their own.
_DATA_READS = {"prim::If", "prim::Loop"}
_DATA_TAGS = frozenset({torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output})
_COMPOSITE_DATA_READS = {
    aten.where.default,  # where(condition): nonzero's columns
    aten.nonzero_numpy.default,
    aten.argwhere.default,
    aten.repeat_interleave.self_Tensor,
    aten.tensor_split.tensor_indices_or_sections,
}
_NUMBER_READS = {"aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit", "prim::ImplicitTensorToNum"}


@functools.cache
def _data_reading_kinds() -> frozenset[str]:
    """The TorchScript kinds of the ATen ops with an overload torch tags as reading the data, and
    of the composites above."""
    kinds = {op._schema.name for op in _COMPOSITE_DATA_READS}
    for qualified in torch._C._dispatch_get_all_op_names():
        kind, _, overload = qualified.partition(".")
        if not kind.startswith("aten::") or kind in kinds:
            continue
        op = getattr(getattr(aten, kind[len("aten::") :], None), overload or "default", None)
        if isinstance(op, torch._ops.OpOverload) and _DATA_TAGS & set(op.tags):
            kinds.add(kind)
    return frozenset(kinds)


def typed_by_trace(jit: JitGraph, dynamic: Sequence[dict[int, str]]) -> bool:
    return not any(dynamic) and not _reads_data(jit.graph)


def _reads_data(graph) -> bool:
    """Whether the graph reads values from data (a number of a tensor that is not a size, an op
    whose result size depends on the data): the trace recorded the example's sizes for what
    follows, which only the fake mode's symbols keep apart from it. (torch's own search of the
    nodes of a kind, nested blocks included: a walk in Python costs more than the rest of a small
    model's translation.)"""
    if any(graph.findAllNodes(kind, True) for kind in _DATA_READS):
        return True
    if any(_reads_data_at(node) for kind in _data_reading_kinds() for node in graph.findAllNodes(kind, True)):
        return True
    return any(
        node.input().node().kind() != "prim::NumToTensor"
        for kind in _NUMBER_READS
        for node in graph.findAllNodes(kind, True)
    )


def _reads_data_at(node: torch._C.Node) -> bool:
    """Whether this node of a data-reading kind reads the data: its overload is tagged so (or a
    composite of one), and for indexing, an index is a mask that is not a constant; for one_hot,
    the class count is not given (-1)."""
    schema_text = node.schema()
    if schema_text == "(no schema)":
        return True
    _, _, op = _resolve(schema_text)
    if op in _COMPOSITE_DATA_READS:
        return True
    if not _DATA_TAGS & set(op.tags):
        return False
    if op is aten.index.Tensor:
        indices = node.inputsAt(1).node()
        if indices.kind() != "prim::ListConstruct":  # (a constant list: constant indices)
            return indices.kind() != "prim::Constant"
        return any(_mask_from_data(v) for v in _inputs(indices))
    if op is aten.one_hot.default:
        count = node.inputsAt(1)
        value = count.toIValue() if count.node().kind() == "prim::Constant" else None
        return not isinstance(value, int) or value < 0
    return True


def _mask_from_data(index: torch._C.Value) -> bool:
    """Whether an index the graph computes may be a boolean (or byte) mask: its count of true
    elements sizes the result. A constant index, or one the trace typed as integers, does not."""
    if index.node().kind() == "prim::Constant":
        return False
    t = index.type()
    if t.kind() == "OptionalType":
        t = t.getElementType()
    if t.kind() == "NoneType":
        return False
    return t.kind() != "TensorType" or t.scalarType() not in ("Long", "Int", "Short", "Char")


def _plain(tensor: torch.Tensor) -> bool:
    """Whether a tensor's fake is its type alone (no quantization, sparsity, conjugate view or
    tensor subclass for torch's conversion to describe)."""
    return (
        type(tensor) in (torch.Tensor, torch.nn.Parameter)
        and tensor.layout == torch.strided
        and not tensor.is_quantized
        and not tensor.is_conj()
        and not tensor.is_neg()
    )


def _unbacked(x) -> bool:
    """Whether a number or a tensor's sizes hold a symbol of a value read from data."""
    if isinstance(x, torch.Tensor):
        return any(isinstance(d, torch.SymInt) and free_unbacked_symbols(d) for d in x.shape)
    return isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool) and bool(free_unbacked_symbols(x))


def _free_symbols(value) -> set:
    """The symbols the sizes of a (nested) result's tensors are made of."""
    found: set = set()
    for t in pytree.tree_leaves(value):
        if isinstance(t, torch.Tensor):
            for size in t.shape:
                if isinstance(size, torch.SymInt):
                    found |= size.node.expr.free_symbols
        elif isinstance(t, torch.SymInt | torch.SymFloat | torch.SymBool):
            found |= t.node.expr.free_symbols
    return found


def _known_equal(x, y) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(x == y))


# Expressions of sizes and the operators that compute them (see _Translator.size_value).
_COMBINED = {
    sympy.Add: operator.add,
    sympy.Mul: operator.mul,
    sympy.Eq: operator.eq,
    sympy.Ne: operator.ne,
    sympy.StrictLessThan: operator.lt,
    sympy.LessThan: operator.le,
    sympy.StrictGreaterThan: operator.gt,
    sympy.GreaterThan: operator.ge,
    sympy.And: operator.and_,
    sympy.Or: operator.or_,
}


class _Uninitialized:
    """TorchScript's ``prim::Uninitialized``: the value of a branch that returned early, never read."""


_UNINITIALIZED = _Uninitialized()


def _is_number(translator: _Translator, value) -> bool:
    """Whether a value of a translated graph is a number (Python, or a node of a symbolic one)."""
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, torch.fx.Node) and isinstance(
        translator.fake_of(value), torch.SymInt | torch.SymFloat | torch.SymBool
    )


def _number_dtype(value) -> torch.dtype:
    """The dtype of a 0-d tensor holding ``value`` (a Python or symbolic number)."""
    if isinstance(value, bool | torch.SymBool):
        return torch.bool
    return torch.float64 if isinstance(value, float | torch.SymFloat) else torch.int64


def _is_value(x) -> bool:
    """Whether ``x`` (a sympy expression, or a number) is a value: a number, true or false."""
    return bool(getattr(x, "is_number", True)) or isinstance(x, sympy.logic.boolalg.BooleanAtom)


def _condition_of(val) -> Any:
    """The test a scripted ``if``'s predicate makes of sizes (a sympy boolean), when it is one."""
    if isinstance(val, torch.SymBool) and val.node.expr.free_symbols:
        return val.node.expr
    return None


def _given(condition, *sizes) -> list:
    """``sizes`` where ``condition`` holds: the symbols it makes equal to something replaced."""
    values = {}
    for test in sympy.And.make_args(condition):
        if isinstance(test, sympy.Eq):
            a, b = test.args
            if isinstance(a, sympy.Symbol):
                values[a] = b
            elif isinstance(b, sympy.Symbol):
                values[b] = a

    def given(size):
        if not isinstance(size, torch.SymInt) or not values:
            return size
        return _size(size.node.shape_env, size.node.expr.xreplace(values))

    return [given(size) for size in sizes]


def _size(shape_env: ShapeEnv, expr) -> int | torch.SymInt:
    """The size ``expr`` (over the ShapeEnv's symbols), with the example's value where it has one."""
    if expr.is_number:
        return int(expr)
    backed = shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val
    hint = expr.xreplace(backed)
    return shape_env.create_symintnode(expr, hint=int(hint) if hint.is_number else None)


def _holds_node(x) -> bool:
    if isinstance(x, torch.fx.Node):
        return True
    return isinstance(x, list | tuple) and any(_holds_node(y) for y in x)


def _always_true(block) -> bool:
    """Whether a loop body's continue-condition is the constant True (a loop without ``break``)."""
    cond = next(iter(block.outputs()))
    return cond.node().kind() == "prim::Constant" and cond.toIValue() is True


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
        program = _translated(jit, user_tensors, dynamic, input_names, typed, small_sizes)
    except _SizesFromData:  # an op _reads_data does not know (a composite returning a list)
        program = _translated(jit, user_tensors, dynamic, input_names, False, small_sizes)
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
        translator = _Translator(jit, user_tensors, dynamic, input_names, typed)
        translator.small_sizes = small_sizes
        return translator.translate()


def flat_tensors(args: tuple, kwargs: dict | None) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves((tuple(args), dict(kwargs or {}))) if isinstance(x, torch.Tensor)]


# The results of the control-flow nodes a graph traced again holds (see _Retrace), by key.
_KEPT: dict[int, list] = {}
_CONTROL_FLOW = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)


@torch.library.custom_op("fastonnx::kept_control_flow", mutates_args=())
def _kept_control_flow(key: int, tensors: list[torch.Tensor], sizes: list[int]) -> list[torch.Tensor]:
    """Stands for a translated cond or while_loop while a graph is traced again (see _Retrace);
    never run."""
    raise AssertionError("fastonnx::kept_control_flow only stands for control flow while a graph is traced again")


@_kept_control_flow.register_fake
def _(key, tensors, sizes):
    return [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device) for v in _KEPT[key]]


class _Retrace(torch.fx.Interpreter):
    """Runs the translated graph again (functionalizing it), with the preconditions the translation
    assumed. Each cond and while_loop node stays as it was translated: its functions are final
    (rewritten without in-place ops where needed when made), and torch would trace them again on
    the node's operands, without what the translation assumed in a branch the example does not
    take (see _Translator.sub): such a branch's sizes would be decided as the example's
    (``x + z`` broadcasting x's size 1 there would make x's size z's, outside the branch too). It
    is traced as one opaque op of its recorded results (``fastonnx::kept_control_flow``), which
    ``restore`` makes the node again."""

    def __init__(self, module: torch.fx.GraphModule):
        super().__init__(module)
        self.kept: dict[int, tuple] = {}  # key -> the node's target, its arguments' structure and leaves

    def run_node(self, n: torch.fx.Node):
        if n.op != "call_function" or n.target not in _CONTROL_FLOW:
            return super().run_node(n)
        leaves, spec = pytree.tree_flatten(self.map_nodes_to_values(n.args, n))
        key = max(_KEPT, default=0) + 1
        _KEPT[key] = list(n.meta["val"])
        self.kept[key] = (n.target, spec, leaves, n.meta["val"])
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        sizes = [x for x in leaves if isinstance(x, torch.SymInt)]
        return torch.ops.fastonnx.kept_control_flow(key, tensors, sizes)

    def call_function(self, target, args, kwargs):
        assume_preconditions(target, args, kwargs)
        return super().call_function(target, args, kwargs)

    def restore(self, module: torch.fx.GraphModule) -> None:
        """The control-flow nodes of the graph traced again (``module``'s) as they were (see
        run_node): their functions, their operands as traced again."""
        graph = module.graph
        for n in list(graph.nodes):
            if n.target is not torch.ops.fastonnx.kept_control_flow.default:
                continue
            key, tensors, sizes = n.args
            target, spec, leaves, vals = self.kept.pop(key)
            _KEPT.pop(key, None)
            tensor_args, size_args = iter(tensors), iter(sizes)
            args = []
            with graph.inserting_before(n):
                for leaf in leaves:
                    if isinstance(leaf, torch.fx.GraphModule):
                        name = f"{target.__name__}_function_{len(list(module.named_children()))}"
                        module.add_submodule(name, leaf)
                        args.append(graph.get_attr(name))
                    elif isinstance(leaf, torch.Tensor):
                        args.append(next(tensor_args))
                    elif isinstance(leaf, torch.SymInt):
                        args.append(next(size_args))
                    else:
                        args.append(leaf)
                node = graph.call_function(target, pytree.tree_unflatten(args, spec), {})
            node.meta = {**n.meta, "val": vals}
            n.replace_all_uses_with(node)
            graph.erase_node(n)
        module.recompile()
        self.forget()

    def forget(self) -> None:
        """Drops what the traces kept of the control-flow nodes (one that failed left some)."""
        for key in self.kept:
            _KEPT.pop(key, None)
        self.kept.clear()


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
    retrace = _Retrace(old)
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

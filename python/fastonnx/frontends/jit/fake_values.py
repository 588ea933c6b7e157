"""The FX graph the TorchScript translator builds and the fake values of its nodes.

Every FX node gets ``meta["val"]`` the way torch.export records it: the graph runs under a fake
mode whose ShapeEnv makes the requested dynamic axes symbols, with the real example tensors
propagated beside (torch's ``fake_tensor_propagate_real_tensors``) when the graph reads data. A
data-dependent size (``nonzero``, a size read with ``item()``) is an unbacked symbol that no guard
settles to the example's value: an op that cannot take it runs on the example's values, its
result sizes new symbols (see ``_ShapeEnv``, ``FakeValues.run``). Without dynamic axes or data
reads, the trace's own types are the graph's.
"""

from __future__ import annotations

import functools

import sympy
import torch
import torch.utils._pytree as pytree
from torch._dynamo.source import ConstantSource
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
    compute_unbacked_bindings,
    free_unbacked_symbols,
)

from ...errors import ConversionError
from .nodes import outputs, source_line

aten = torch.ops.aten

_CPU = torch.device("cpu")


class SizesFromData(Exception):
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


class FakeValues:
    """An FX graph being built under a fake mode: its nodes made with their fake values, the
    example's values beside where the translation needs them."""

    def __init__(self, typed: bool):
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.shape_env = _ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.mode._maybe_infer_fake = _without_guards(self.mode._maybe_infer_fake, self.shape_env)  # type: ignore[method-assign]
        self.constants: dict[str, torch.Tensor] = {}
        # Without dynamic axes or values read from data, the trace's own types are the graph's:
        # ATen nodes take them instead of running under the fake mode (most of the cost), and the
        # mode needs no real values beside (see translate).
        self.typed_by_trace = typed
        self.node: torch._C.Node | None = None  # the TorchScript node being translated
        self._line: tuple = (None, "")  # the current node's source line
        self.hints: dict = {}  # unbacked symbol of a number read from a tensor -> the example's value
        self.examples: dict = {}  # FX node -> its value in the example, where computed (see example_of)
        self.binders: dict = {}  # unbacked symbol -> (the FX node that made it, the path to it in its value)

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
        fake = FakeTensor(self.mode, meta, device)
        if isinstance(like, torch.nn.Parameter):
            # As torch's meta_utils marks a parameter's fake (torch 2.13's constructor takes
            # _is_param= to the same effect; 2.11 and 2.12's take no such argument).
            fake._is_param = True
        return fake

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
                self._line = (self.node, source_line(self.node))
            n.meta["stack_trace"] = self._line[1]
        return n

    def constant_node(self, value: torch.Tensor) -> torch.fx.Node:
        name = f"_tensor_constant{len(self.constants)}"
        self.constants[name] = value
        setattr(self.root, name, value)
        n = self.graph.get_attr(name)
        n.meta["val"] = self.fake(value)
        self.examples[n] = value
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
            except SizesFromData:
                raise
            except Exception:
                self.shape_env.pending_fresh_unbacked_symbols[:] = []
                if not any(unbacked(x) for x in pytree.tree_leaves((fargs, fkwargs))):
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
            raise SizesFromData(target)
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
            if isinstance(x, torch.Tensor) and unbacked(x):
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

    def traced_types(self, node) -> list | None:
        """Fake tensors of the types the trace recorded for the node's outputs, when each is a
        tensor whose type is complete."""
        vals = []
        for out in outputs(node):
            t = out.type()
            if t.kind() != "TensorType" or t.scalarType() is None or t.sizes() is None or t.strides() is None:
                return None
            dtype = getattr(torch, t.scalarType().lower(), None)  # Float -> torch.float
            if not isinstance(dtype, torch.dtype) or t.scalarType().startswith("Q"):  # (quantized: see QTensor)
                return None
            vals.append(self.empty(t.sizes(), t.strides(), dtype, _CPU))  # (what empty_strided gives)
        return vals

    def arithmetic(self, fn, values: list):
        """``fn`` (arithmetic on numbers, see core/arithmetic.py) of ``values``: computed when they
        are Python numbers, else a node of the graph."""
        if all(not isinstance(v, torch.fx.Node) for v in values):
            return fn(*values)
        return self.emit(fn, tuple(values))

    def size_of(self, tensor, dim: int):
        size = self.fake_of(tensor).shape[dim]
        if isinstance(size, int):
            return size
        return self.emit(aten.sym_size.int, (tensor, dim))


def _without_guards(check, shape_env: ShapeEnv):
    """torch's check of an op's fake result against its real one (real values propagated), made
    without guards: it compares a view's storage offset with ``!=``, a guard that settles a
    dynamic size the offset is made of to the example's (``x[:, x.size(0):]`` fixed ``x``'s rows)."""

    @functools.wraps(check)
    def checked(*args, **kwargs):
        with shape_env.suppress_guards():
            return check(*args, **kwargs)

    return checked


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


def unbacked(x) -> bool:
    """Whether a number or a tensor's sizes hold a symbol of a value read from data."""
    if isinstance(x, torch.Tensor):
        return any(isinstance(d, torch.SymInt) and free_unbacked_symbols(d) for d in x.shape)
    return isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool) and bool(free_unbacked_symbols(x))


def known_equal(x, y) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(x == y))


def _is_value(x) -> bool:
    """Whether ``x`` (a sympy expression, or a number) is a value: a number, true or false."""
    return bool(getattr(x, "is_number", True)) or isinstance(x, sympy.logic.boolalg.BooleanAtom)

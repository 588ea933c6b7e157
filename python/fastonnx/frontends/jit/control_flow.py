"""Control flow in the TorchScript translator: ``prim::If`` becomes torch.cond (which the lowering
writes as ONNX If), each branch a function of its own translated by a translator of its own
(``_sub_translator``, which loops.py's ``prim::Loop`` shares); an ``if`` decided when exporting is
inlined. Branches that give a list whose length the graph computes give sequences (sequences.py),
a value that may be None optionals (optionals.py)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any, cast

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.symbol import SymT, symbol_is_type

from ...core import arithmetic
from ...errors import ConversionError
from ..export.trace import needs_functionalization
from .fake_values import known_equal
from .nodes import inputs, is_view, resolve, source_line, where
from .optionals import OPTIONAL, held, is_optional, none_of
from .retrace import Retrace
from .sequences import SEQUENCE, as_sequence, empty, is_sequence, item_tensor
from .translator import Handler, Outputs, Translator, holds_node

aten = torch.ops.aten


def _if(t: Translator, node):
    pred = t.env[node.input()]
    then_block, else_block = node.blocks()
    if not isinstance(pred, torch.fx.Node):  # decided when exporting: the branch taken, inline
        return Outputs(t.inline(then_block if pred else else_block))
    raises = [any(n.kind() == "prim::RaiseException" for n in b.nodes()) for b in (then_block, else_block)]
    if raises[0] != raises[1]:
        # A check of the inputs (an RNN's of its state's batch): ONNX raises nothing, and every
        # input eager takes takes the other branch.
        return Outputs(t.inline(else_block if raises[0] else then_block))
    # A test of sizes (``x.size(0) == 1``): a branch the example does not take is translated
    # with its operands' sizes as sizes that pass the test, not the example's (see _sub_translator).
    condition = _condition_of(t.fake_of(pred))
    if condition is None:
        return _translated_if(t, node, pred, None, None, renamed=False)
    taken = _example_branch(t, pred)
    pending = list(t.shape_env.pending_fresh_unbacked_symbols)
    try:
        return _translated_if(t, node, pred, condition, taken, renamed=True)
    except ConversionError:
        t.shape_env.pending_fresh_unbacked_symbols[:] = pending  # (sizes the attempt made)
        # Where its sizes without the example's values fail (an op that needs a value of
        # them), a branch is translated with the example's, as the branch it takes: each
        # guard it makes on them is then one the axis's sizes must pass (else the axis is
        # static).
        return _translated_if(t, node, pred, condition, taken, renamed=False)


def _translated_if(t: Translator, node, pred: torch.fx.Node, condition, taken: bool | None, renamed: bool) -> Outputs:
    """``prim::If`` on ``pred`` as a cond node. ``condition``: the test ``pred`` makes of sizes;
    with ``renamed``, a branch the example does not take (``taken`` is the one it takes, None
    when the example gives no value) is translated assuming it, see _sub_translator."""
    then_block, else_block = node.blocks()
    # (each branch returns, after its outputs, the tensors made outside it that it writes into)
    written = _written_outside([then_block, else_block], "if", node)
    operands = _operands(t, [then_block, else_block])
    subs, outs = [], []
    for block, then in ((then_block, True), (else_block, False)):
        assuming = None if not renamed or taken is then else condition if then else sympy.Not(condition)
        sub = _sub_translator(t, operands=operands, assuming=assuming)
        subs.append(sub)
        outs.append(sub.inline(block))
    outs, lengths = _lists_spread(outs)
    numbers, read = _reconciled(t, subs, outs, condition)
    branches, results, sequences = [], [], []
    for sub, branch_outs in zip(subs, outs):
        returned = [o for k, o in enumerate(branch_outs) if k not in numbers]
        # (a branch that leaves one as it was returns a copy: an If inside another's branch may
        # not return its input, which torch's functionalization of that branch refuses)
        returned += [
            sub.emit(aten.clone.default, (sub.env[v],)) if sub.env[v] in sub.inputs else sub.env[v] for v in written
        ]
        # (a branch is final: traced again, as the graph around it may be, it stays as it is,
        # see retrace.Retrace; one writing into its own tensors is rewritten without in-place ops now)
        sequences.append([is_sequence(x) or is_sequence(sub.env.get(v)) for x, v in _with_written(returned, written)])
        branch, vals = _finish(sub, returned, "cond", t, rewrite=True if written else None)
        branches.append(branch)
        results.append([_outer_sizes(sub, val) for val in vals])
    predicate = _as_tensor(t, pred, torch.bool)  # (before the sizes made below, which the If binds)
    # (an output the graph returns and nothing reads may have another rank in each branch: see
    # _only_returned; it is declared with the example's)
    kept = [k for k in range(len(outs[0])) if k not in numbers] if all(n is None for n in lengths) else []
    returned_only = [_only_returned(node.outputsAt(k)) for k in kept]
    merged = []
    for i, (a, b, seq) in enumerate(zip(*results, [x or y for x, y in zip(*sequences)])):
        if seq and a.dim() != b.dim():  # (a stand-in: the shape of an item)
            b = a
        if a.dtype == b.dtype and a.dim() != b.dim() and i < len(returned_only) and returned_only[i]:
            merged.append(b if taken is False else a)
            continue
        if a.dtype != b.dtype or a.dim() != b.dim():
            raise ConversionError(
                "the branches of a scripted `if` return tensors of different types or ranks "
                f"({a.dtype}{list(a.shape)} and {b.dtype}{list(b.shape)}); ONNX If needs them alike"
            )
        sizes = [_merged_size(t, x, y, condition) for x, y in zip(a.shape, b.shape)]
        with t.mode:
            merged.append(a.new_empty(sizes))
    args = (predicate, branches[0], branches[1], [t.env[v] for v in operands])
    out = t.add_node(torch.ops.higher_order.cond, args, {}, merged)
    items = iter([t.add_node(operator.getitem, (out, i), {}, v) for i, v in enumerate(merged)])
    results_of_if = []
    for k in range(len(outs[0])):
        if k in numbers:
            results_of_if.append(_chosen(t, pred, condition, numbers[k]))
        elif k in read:  # (returned as a 0-d tensor)
            results_of_if.append(t.read_number(next(items)))
        else:
            item = next(items)
            for mark in (OPTIONAL, SEQUENCE):
                if isinstance(outs[0][k], torch.fx.Node) and outs[0][k].meta.get(mark):
                    item.meta[mark] = True
            results_of_if.append(item)
    for v, item in zip(written, items):  # what the branches wrote, from here on
        t.env[v] = item
        t.known.pop(v, None)
        if is_sequence(subs[0].env[v]):
            item.meta[SEQUENCE] = True
    return Outputs(_lists_gathered(results_of_if, lengths))


def _only_returned(value: torch._C.Value) -> bool:
    """Whether the graph returns ``value`` and nothing reads it: the output of an ``if`` whose
    branches give tensors of different ranks, which ONNX If allows (the rank varies at run time) as
    long as no op depends on it."""
    uses = value.uses()
    for use in uses:
        if use.user.kind() != "prim::Return":
            return False
        owner = use.user.owningBlock().owningNode()
        if owner is not None and (owner.kind() != "prim::If" or not _only_returned(owner.outputsAt(use.offset))):
            return False
    return bool(uses)


def _with_written(returned: list, written: list) -> list[tuple]:
    """A branch's returned values, each with the TorchScript value it writes (None for its outputs)."""
    return list(zip(returned, [None] * (len(returned) - len(written)) + list(written)))


def _lists_spread(outs: list[list]) -> tuple[list[list], list[int | None]]:
    """The outputs of an ``if``'s branches with each list both return at one length (``res =
    res + [x]`` in each) spread into its items, outputs of their own; the lengths by output
    (None: not spread)."""
    lengths = [
        len(a) if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) else None for a, b in zip(*outs)
    ]
    spread = [[x for o, n in zip(branch, lengths) for x in (o if n is not None else [o])] for branch in outs]
    return spread, lengths


def _lists_gathered(results: list, lengths: list[int | None]) -> list:
    """``results`` with the items of each list ``_lists_spread`` spread gathered back into one."""
    it = iter(results)
    return [next(it) if n is None else [next(it) for _ in range(n)] for n in lengths]


def chosen(t: Translator, hits: list, items: list) -> torch.fx.Node:
    """Of tensors ``items`` (one dtype and rank, any sizes), the one whose ``hits`` (0-d bool
    tensors, one true) is true: ONNX Ifs in a chain, each result's differing sizes new sizes of
    the graph (a list of tensors of several shapes read at a position the graph computes)."""
    result = items[-1]
    for hit, item in zip(reversed(hits[:-1]), reversed(items[:-1])):
        pair = [t.fake_of(item), t.fake_of(result)]
        branches = []
        for k in range(2):
            sub = _sub_translator(t, pair)
            branch, _ = _finish(sub, [sub.emit(aten.clone.default, (sub.inputs[k],))], "cond", t)
            branches.append(branch)
        a, b = pair
        with t.mode:
            merged = a.new_empty([_merged_size(t, x, y, None) for x, y in zip(a.shape, b.shape)])
        out = t.add_node(torch.ops.higher_order.cond, (hit, *branches, [item, result]), {}, [merged])
        result = t.add_node(operator.getitem, (out, 0), {}, merged)
    return result


def _reconciled(
    t: Translator, subs: list[Translator], outs: list[list], condition
) -> tuple[dict[int, tuple], set[int]]:
    """The outputs of an ``if``'s branches made alike for ONNX If, in place: a value a branch
    leaves uninitialized (TorchScript's early ``return`` in the other one) a tensor of the
    other branch's type; a number (the flag of an early return) the branches' expressions of
    it where this translator computes it from them (returned by position), else a 0-d tensor
    both return (the positions returned second), whose number the enclosing graph reads."""
    numbers: dict[int, tuple] = {}
    read: set[int] = set()
    for k, (a, b) in enumerate(zip(*outs)):
        if a is _UNINITIALIZED and b is _UNINITIALIZED or a is None and b is None:
            numbers[k] = (a, b)
        elif a is None or b is None or is_optional(a) or is_optional(b):
            _as_optionals(subs, outs, k)
        elif is_sequence(a) or is_sequence(b) or _list_or_uninitialized(a, b):
            _as_sequences(subs, outs, k)
        elif a is _UNINITIALIZED or b is _UNINITIALIZED:
            filled, other = (0, 1) if a is _UNINITIALIZED else (1, 0)
            outs[filled][k] = _tensor_like(subs[filled], subs[other], outs[other][k])
        elif _is_number(subs[0], a) or _is_number(subs[1], b):
            exprs = [_outer_expr(sub, x) for sub, x in zip(subs, (a, b))]
            if condition is not None and all(e is not None and _computable(t, e) for e in (*exprs, condition)):
                numbers[k] = tuple(exprs)
                continue
            for sub, branch_outs in zip(subs, outs):
                branch_outs[k] = _as_tensor(sub, branch_outs[k], _number_dtype(sub.fake_of(branch_outs[k])))
            read.add(k)
        elif not all(
            isinstance(x, torch.fx.Node) and isinstance(sub.fake_of(x), torch.Tensor) for sub, x in zip(subs, (a, b))
        ):
            raise ConversionError("a scripted `if` whose branches return lists or other values is not supported")
    return numbers, read


def _list_or_uninitialized(a, b) -> bool:
    """Whether an ``if``'s branches give a list of tensors (or ints) of a known length and leave it
    uninitialized (an early ``return`` of it in the other branch)."""
    return any(x is _UNINITIALIZED and isinstance(y, list) and y for x, y in ((a, b), (b, a)))


def _as_sequences(subs: list[Translator], outs: list[list], k: int) -> None:
    """The ``k``-th outputs of an ``if``'s branches, one a sequence and the other a sequence, a
    list of a known length or uninitialized (an early ``return`` in the first), as sequences:
    the list as a sequence of its items, an uninitialized one as an empty sequence."""
    values = [branch_outs[k] for branch_outs in outs]
    i = 0 if is_sequence(values[0]) or isinstance(values[0], list) and values[0] else 1
    item = subs[i].fake_of(values[i] if is_sequence(values[i]) else item_tensor(subs[i], values[i][0]))
    for sub, value, branch_outs in zip(subs, values, outs):
        if value is _UNINITIALIZED:
            branch_outs[k] = empty(sub, item)
        elif isinstance(value, list):
            branch_outs[k] = as_sequence(sub, value, item)
        elif not is_sequence(value):
            raise ConversionError("a scripted `if` gives a list in one branch and no list in the other")


def _as_optionals(subs: list[Translator], outs: list[list], k: int) -> None:
    """The ``k``-th outputs of an ``if``'s branches, one None (or optional) and the other a tensor
    (or optional), as optionals of one type: None as an empty optional of the other's dtype and
    sizes (where its function has them, else 0). Each is declared with the enclosing graph's
    sizes (``_outer_sizes``), the type the If returns, as the TorchScript exporter declares it."""
    values = [branch_outs[k] for branch_outs in outs]
    for i, (sub, value) in enumerate(zip(subs, values)):
        if value is None:
            other, like = subs[1 - i], values[1 - i]
            val = other.fake_of(like)
            if not isinstance(val, torch.Tensor):
                raise ConversionError("a scripted `if` gives None or a value that is not a tensor")
            made = none_of(sub, val.dtype, _sizes_like(sub, other, val))
        elif isinstance(value, torch.fx.Node) and isinstance(sub.fake_of(value), torch.Tensor):
            made = held(sub, value)
        else:
            raise ConversionError("a scripted `if` gives None or a value that is not a tensor")
        made.meta["val"] = _outer_sizes(sub, made.meta["val"])
        outs[i][k] = made


def _chosen(t: Translator, pred: torch.fx.Node, condition, exprs: tuple):
    """The number an ``if`` on ``condition`` gives whose branches give ``exprs`` (over this
    translator's symbols), computed here."""
    a, b = exprs
    if a is _UNINITIALIZED or a is None:
        return a
    if isinstance(a, sympy.logic.boolalg.Boolean) and isinstance(b, sympy.logic.boolalg.Boolean):
        return _size_value(t, sympy.Or(sympy.And(condition, a), sympy.And(sympy.Not(condition), b)))
    return t.arithmetic(torch.sym_ite, [pred, _size_value(t, a), _size_value(t, b)])


def _outer_expr(t: Translator, value):
    """A number this function computes (a Python number, or a node of a symbolic one) as an
    expression over the enclosing translator's symbols; None when it is not one of sizes."""
    if isinstance(value, bool):
        return sympy.true if value else sympy.false
    if isinstance(value, int):
        return sympy.Integer(value)
    val = t.fake_of(value) if isinstance(value, torch.fx.Node) else None
    if isinstance(val, torch.SymInt | torch.SymBool):
        return val.node.expr.xreplace(t.renamed)
    return None


def _tensor_like(t: Translator, other: Translator, value: torch.fx.Node) -> torch.fx.Node:
    """A tensor of this function standing for a value it leaves uninitialized, of the type of
    ``value`` of the other branch ``other`` (zeros; never read: TorchScript reads it only where
    the other branch ran), of its sizes where this function has them."""
    val = other.fake_of(value)
    if not isinstance(val, torch.Tensor):
        raise ConversionError("a scripted `if` leaves a value uninitialized that is not a tensor in the other branch")
    return t.emit(aten.zeros.default, (_sizes_like(t, other, val),), {"dtype": val.dtype})


def _sizes_like(t: Translator, other: Translator, val: torch.Tensor) -> list:
    """The sizes of ``val`` (a fake tensor of the other branch ``other``) computed in this function
    where it has them, else 0."""
    mine = {old: new for new, old in t.renamed.items()}
    sizes = []
    for d in val.shape:
        expr = d.node.expr.xreplace(other.renamed).xreplace(mine) if isinstance(d, torch.SymInt) else None
        sizes.append(d if expr is None else _size_value(t, expr) if _computable(t, expr) else 0)
    return sizes


def _computable(t: Translator, expr) -> bool:
    """Whether ``_size_value`` computes ``expr`` here."""
    if isinstance(expr, sympy.logic.boolalg.BooleanAtom) or expr.is_Integer:
        return True
    if expr.is_Symbol:
        return _size_source(t, expr) is not None
    return type(expr) in _COMBINED and all(_computable(t, x) for x in expr.args)


def _size_source(t: Translator, symbol) -> tuple[torch.fx.Node, int | None] | None:
    """A value of this graph that is the size ``symbol``: a node of a symbolic size (None), or a
    tensor and one of its dimensions."""
    for n in t.graph.nodes:
        val = n.meta.get("val")
        if is_optional(n):  # (whose size the graph cannot read)
            continue
        if isinstance(val, torch.SymInt) and val.node.expr == symbol:
            return n, None
        if isinstance(val, torch.Tensor):
            for d, size in enumerate(val.shape):
                if isinstance(size, torch.SymInt) and size.node.expr == symbol:
                    return n, d
    return None


def _size_value(t: Translator, expr):
    """``expr`` (an expression of sizes, integer or boolean, over this translator's symbols)
    computed in this graph from the values whose sizes it reads (see _computable)."""
    if isinstance(expr, sympy.logic.boolalg.BooleanAtom):
        return bool(expr)
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        source = _size_source(t, expr)
        if source is None:
            raise ConversionError(f"the size {expr} is no size of a value of this graph")
        n, d = source
        return n if d is None else t.emit(aten.sym_size.int, (n, d))
    parts = [_size_value(t, x) for x in expr.args]
    combine = _COMBINED.get(type(expr))
    if combine is None:
        raise ConversionError(f"the size {expr} has no computation here")
    if len(parts) == 1:  # (a negation)
        return t.arithmetic(combine, parts)
    return functools.reduce(lambda x, y: t.arithmetic(combine, [x, y]), parts)


def _merged_size(t: Translator, x, y, condition):
    """The size of an ``if``'s result whose branches give ``x`` and ``y``: the one size both are
    where the branch runs (``x.size(0) == 2`` gives 2 in the branch that tests it, the size
    in the other), else one more dynamic size of the result."""
    if x is y or known_equal(x, y):
        return x
    if condition is not None:
        if known_equal(*_given(condition, x, y)):
            return y
        if known_equal(*_given(sympy.Not(condition), x, y)):
            return x
    return t.shape_env.create_unbacked_symint()


def _operands(t: Translator, blocks, carried: Sequence = ()) -> list:
    """The enclosing graph's values the blocks read that are graph values (inputs of the
    function), but for ``carried`` (what a loop carries by name: the tensors it writes into, the
    lists it appends to); numbers and constants are read directly."""
    free = [v for v in _free_values(blocks) if v not in carried]
    lists = [v for v in free if holds_node(t.env[v]) and not isinstance(t.env[v], torch.fx.Node)]
    if lists:
        raise ConversionError("a scripted `if` or loop reads a list of tensors from outside it; this is not supported")
    return [v for v in free if isinstance(t.env[v], torch.fx.Node)]


def _as_tensor(t: Translator, value, dtype: torch.dtype):
    """A number (Python or symbolic) or a tensor as a 0-d tensor of ``dtype`` (for control flow)."""
    if isinstance(value, torch.fx.Node) and isinstance(t.fake_of(value), torch.Tensor):
        return value if t.fake_of(value).dtype == dtype else t.emit(aten._to_copy.default, (value,), {"dtype": dtype})
    return t.emit(aten.scalar_tensor.default, (value,), {"dtype": dtype})


def _example_branch(t: Translator, pred) -> bool | None:
    """The branch of a scripted ``if`` on ``pred`` (a graph value) the example takes; None when
    the example gives no value (inside a branch it does not take)."""
    val = t.fake_of(pred)
    if isinstance(val, torch.Tensor):
        real = t.example_of(pred)
        return None if real is None else bool(real)
    try:
        return bool(t.hinted(val))
    except ConversionError:
        return None


def _sub_translator(
    t: Translator, before: Sequence = (), operands: Sequence = (), after: Sequence = (), assuming: Any = None
) -> Translator:
    """A translator of a control-flow function, sharing this one's fake mode: its own graph,
    whose placeholders are the fake values ``before``, then the enclosing graph's values
    ``operands`` (TorchScript values, read in the function through them), then ``after``.

    ``assuming`` (a test of sizes, over this translator's symbols): the function is a branch
    the example does not take, which runs where the test holds. Its code need not hold at the
    example's sizes (``elif x.size(0) == 1: y = x + z`` broadcasts x only where that size is
    1), so each symbol of the operands' sizes is a new unbacked one there (any size), of which
    the test is assumed (``x.size(0)`` is 1 in that branch): torch decides on them what the
    test implies, the rest as for any size it has no value of (a squeeze at run time, a
    broadcast between equal sizes), and what would need a value of them fails (_if then
    translates the branch with the example's sizes). The new symbols are the function's own
    (``_outer_sizes`` maps them back), so that nothing assumed in it holds outside."""
    sub = Translator.__new__(Translator)
    sub.__dict__.update(t.__dict__)
    sub.graph, sub.root, sub.sizes = torch.fx.Graph(), torch.nn.Module(), {}
    # The enclosing graph's numbers and constants are the function's too; its nodes are not.
    sub.env = {v: x for v, x in t.env.items() if not holds_node(x)}
    sub.inputs = []
    sub.renamed = {}
    operand_vals = [t.fake_of(t.env[v]) for v in operands]
    if assuming is not None:
        operand_vals = _renamed_values(sub, operand_vals, assuming)
    for v, val in [(None, f) for f in before] + list(zip(operands, operand_vals)) + [(None, f) for f in after]:
        p = sub.graph.placeholder(f"arg{len(sub.inputs)}")
        p.meta["val"] = val
        sub.inputs.append(p)
        if v is not None:
            sub.env[v] = p
            for mark in (OPTIONAL, SEQUENCE):  # (the function reads an optional or a sequence as one)
                if t.env[v].meta.get(mark):
                    p.meta[mark] = True
    return sub


def _renamed_values(t: Translator, values: list, assuming) -> list:
    """``values`` (fake tensors and symbolic numbers) with each symbol they hold a new unbacked
    one (``renamed`` maps it back), ``assuming`` held of the new ones (see _sub_translator)."""
    env = t.shape_env
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
            with t.mode:
                return t.without_real_values(torch.empty, (sizes,), {"dtype": val.dtype, "device": val.device})
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
    t.renamed = {new: old for old, new in new_of.items()}
    return new_values


def _outer_sizes(t: Translator, val):
    """A fake tensor this function returns, its sizes in the enclosing translator's symbols
    (those ``_sub_translator`` renamed mapped back)."""
    if not t.renamed or not isinstance(val, torch.Tensor):
        return val
    sizes = [
        _size(t.shape_env, d.node.expr.xreplace(t.renamed)) if isinstance(d, torch.SymInt) else d for d in val.shape
    ]
    with t.mode:
        return t.without_real_values(torch.empty, (sizes,), {"dtype": val.dtype, "device": val.device})


def _finish(
    t: Translator, outputs: list, kind: str, parent: Translator, rewrite: bool | None = False
) -> tuple[torch.fx.Node, list]:
    """This control-flow function as a submodule of ``parent``'s module: the get_attr node of
    ``parent``'s graph that reads it, and the fake values it returns. ``rewrite``: traced again
    without in-place ops (True: it writes into some of its inputs and returns them last, see
    _translated_if; None: where an in-place op would be read through another name), as
    functionalized() does for the program, the writes into its inputs dropped (an ONNX If's
    branch computes, returns)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    t.graph.output(tuple(outputs))
    module = torch.fx.GraphModule(t.root, t.graph)
    if rewrite is False or rewrite is None and not needs_functionalization(t.graph):
        return _attach(module, kind, parent), [t.fake_of(o) for o in outputs]
    retrace = Retrace(module)
    run = torch.func.functionalize(retrace.run, remove="mutations")
    values = [p.meta["val"] for p in t.inputs]
    trace = make_fx(run, decomposition_table=_VIEW_COPIES, tracing_mode="real")
    try:
        # (with the example's values beside where it has them, as functionalized() traces: torch's
        # view replays fail on some symbolic sizes without them)
        with t.mode:
            try:
                new = trace(*values)
            except Exception:  # noqa: BLE001 - inputs without the example's values (a branch it does not take)
                new = t.without_real_values(trace, tuple(values), {})
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
    return _attach(new, kind, parent), [r.meta["val"] for r in results]


def _attach(module: torch.fx.GraphModule, kind: str, parent: Translator) -> torch.fx.Node:
    name = f"{kind}_{len(parent.functions)}"
    parent.functions.append(name)
    setattr(parent.root, name, module)
    return parent.graph.get_attr(name)


def _uninitialized(t: Translator, node):
    return Outputs([_UNINITIALIZED] * node.outputsSize())


# Functionalization replays views as copies (slice_copy), whose kernels fail on symbolic sizes
# (``storage_offset()``): a view and a clone instead.
_VIEW_COPIES = {
    aten.slice_copy.Tensor: lambda *args, **kwargs: aten.slice.Tensor(*args, **kwargs).clone(),
    aten.select_copy.int: lambda *args, **kwargs: aten.select.int(*args, **kwargs).clone(),
}


def _written_outside(blocks, what: str, at: torch._C.Node, carried: Sequence = ()) -> list:
    """The tensors made outside the blocks of a scripted ``if`` or loop (node ``at``) that the
    blocks write into (``y[:] = x`` in a branch, through views made in the blocks): torch's JIT
    passes remove only the mutations they can prove local, and the blocks become functions of
    their inputs, where such a write would be lost, so an ``if``'s branches return the tensors
    they wrote and a loop carries them. Each must be a tensor of its own, not a view of another
    nor one with a view made before ``at`` read after it (or, for a loop, in it: it would read the
    tensor as it was); a ``ConversionError`` says which write cannot be followed. ``carried``:
    the lists a loop appends to, which it carries as sequences (loops._appended_lists)."""
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
            if node.kind() == "prim::SetAttr":
                raise ConversionError(
                    f"a scripted `{what}` sets module attribute `{node.s('name')}`"
                    + (f" ({where(node)})" if source_line(node) else "")
                    + "; fastonnx follows module attributes set outside the control flow that depends on the inputs"
                )
            text = node.schema()
            if text == "(no schema)":
                continue
            schema = resolve(text)[0]
            for a, v in zip(schema.arguments, inputs(node)):
                if a.alias_info is None or not a.alias_info.is_write:
                    continue
                base = v
                # through the views made inside the blocks, to the tensor they view
                while base in inside and base.node().outputsSize() == 1 and is_view(base.node()):
                    base = base.node().inputsAt(0)
                if base in inside or base in written or base in carried and node.kind() == "aten::append":
                    continue
                # (a loop's later iterations read what earlier ones wrote, through such a view too)
                stale = any(
                    u.user not in nodes
                    and is_view(u.user)
                    and any(
                        later.user.isAfter(at) or what == "loop" and later.user in nodes
                        for later in u.user.output().uses()
                    )
                    for u in base.uses()
                )
                if is_view(base.node()) or stale:
                    raise ConversionError(
                        f"a scripted `{what}` writes into a tensor made outside it ({node.kind()}"
                        + (f", {where(node)}" if source_line(node) else "")
                        + f"; the tensor is a view, or a view of it made before the `{what}` is read "
                        + ("in it or after it)" if what == "loop" else "after it)")
                    )
                written.append(base)

    for block in blocks:
        check(block)
    return written


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


# Expressions of sizes and the operations that compute them (see _size_value).
_COMBINED = {row.sympy: row.python for row in arithmetic.TABLE if row.sympy is not None}


class _Uninitialized:
    """TorchScript's ``prim::Uninitialized``: the value of a branch that returned early, never read."""


_UNINITIALIZED = _Uninitialized()


def _is_number(translator: Translator, value) -> bool:
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


def _always_true(block) -> bool:
    """Whether a loop body's continue-condition is the constant True (a loop without ``break``)."""
    cond = next(iter(block.outputs()))
    return cond.node().kind() == "prim::Constant" and cond.toIValue() is True


HANDLERS: dict[str, Handler] = {
    "prim::If": _if,
    "prim::Uninitialized": _uninitialized,
}

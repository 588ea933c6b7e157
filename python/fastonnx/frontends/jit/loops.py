"""Scripted loops in the TorchScript translator: ``prim::Loop`` of a trip count known when
exporting and without ``break`` unrolled, any other one torch's while_loop (which the lowering
writes as an ONNX Loop) over (iteration, condition, *state), its body a function of its own
translated by a translator of its own (control_flow's ``_sub_translator``). Besides the block's
own state, the loop carries the tensors made outside it that its body writes into and the lists it
appends to (as ONNX sequences, see sequences); a value that may be None as an ONNX optional."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from ...errors import ConversionError
from .control_flow import (
    _always_true,
    _as_tensor,
    _finish,
    _operands,
    _sizes_like,
    _sub_translator,
    _written_outside,
)
from .optionals import OPTIONAL, held, is_optional, none_of, refuse_optional
from .sequences import SEQUENCE, as_sequence, is_sequence, item_like
from .translator import Handler, Outputs, Translator

aten = torch.ops.aten


def _loop(t: Translator, node):
    trips, first, *initial = (t.env[v] for v in node.inputs())
    (block,) = node.blocks()
    if isinstance(trips, int) and first is True and _always_true(block) and trips <= 64:
        # A loop of a trip count known when exporting, without `break`: unrolled, as exact.
        state = initial
        for i in range(trips):
            state = t.inline(block, [i, *state])[1:]
        return Outputs(state)
    return _while_loop(t, trips, first, initial, block, node)


def _while_loop(t: Translator, trips, first, initial: list, block, node: torch._C.Node):
    """A scripted loop as torch's while_loop over (iteration, condition, *state); numbers in
    the state are carried as 0-d tensors, a value that may be None (its TorchScript type
    ``Optional``) and is None at the start or in the body as an ONNX optional (see
    _optional_state). The tensors made outside it that the body writes into are state too (the
    loop's results are what they hold from then on), as are the lists it appends to, carried as
    sequences (_sequences_appended)."""
    lists = _appended_lists(t, block)
    written = _written_outside([block], "loop", node, carried=lists)
    by_name = written + lists  # (state the block reads by name, not as its inputs)
    for v in by_name:  # (what it holds at the start is no value of a later iteration)
        t.known.pop(v, None)
    free = _operands(t, [block], carried=by_name)
    kinds = [isinstance(x, torch.fx.Node) and isinstance(t.fake_of(x), torch.Tensor) for x in initial]
    carried = [_as_tensor(t, 0, torch.int64), _as_tensor(t, first, torch.bool)]
    carried += [x if is_tensor or x is None else _as_tensor(t, x, torch.int64) for x, is_tensor in zip(initial, kinds)]
    carried += [t.env[v] for v in written]
    kinds += [True] * len(written)
    extra = [t.env[v] for v in free]
    limit = trips if isinstance(trips, int) else _as_tensor(t, trips, torch.int64)
    bound_val = [] if isinstance(limit, int) else [t.fake_of(limit)]
    if lists:
        carried += _sequences_appended(t, block, carried, kinds, written, lists, free, bound_val)
        kinds += [True] * len(lists)
    may_be_none = [isinstance(v.type(), torch._C.OptionalType) for v in node.outputs()] + [False] * len(by_name)
    if any(may_be_none):
        carried[2:] = _optional_state(t, block, carried, kinds, may_be_none, free, bound_val, by_name)
        kinds = [is_tensor or is_optional(c) for c, is_tensor in zip(carried[2:], kinds)]
    refuse_optional("a scripted loop", [c for c, may in zip(carried[2:], may_be_none) if not may])
    optional = [is_optional(c) for c in carried[2:]]
    carried_vals = [t.fake_of(c) for c in carried]

    cond = _sub_translator(t, carried_vals + [t.fake_of(e) for e in extra] + bound_val)
    i, c = cond.inputs[0], cond.inputs[1]
    bound = limit if isinstance(limit, int) else cond.inputs[-1]
    below = cond.emit(aten.lt.Tensor if not isinstance(bound, int) else aten.lt.Scalar, (i, bound))
    cond_fn, _ = _finish(cond, [cond.emit(aten.logical_and.default, (below, c))], "while_loop_cond", t, None)

    sequence = [is_sequence(c) for c in carried[2:]]
    body, outs = _loop_body(t, block, carried_vals, kinds, optional, free, bound_val, by_name, sequence=sequence)
    i = body.inputs[0]
    again, new_state = outs[0], outs[1:]
    new_state = [
        _carried_optional(body, s, before) if may else s
        for s, may, before in zip(new_state, optional, carried_vals[2:])
    ]
    updated = [body.emit(aten.add.Tensor, (i, 1)), _as_tensor(body, again, torch.bool)]
    updated += [s if is_tensor else _as_tensor(body, s, torch.int64) for s, is_tensor in zip(new_state, kinds)]
    for before, after in zip(carried_vals, updated):
        got = body.fake_of(after)
        # (a sequence's items may differ in shape: its stand-in's is only the last one's)
        same_shape = is_sequence(after) or isinstance(got, torch.Tensor) and list(got.shape) == list(before.shape)
        if not isinstance(got, torch.Tensor) or got.dtype != before.dtype or not same_shape:
            raise ConversionError(
                "a scripted loop changes the type or shape of a value it carries "
                f"({before.dtype}{list(before.shape)} -> {getattr(got, 'dtype', type(got).__name__)}"
                f"{list(getattr(got, 'shape', []))}); fastonnx converts loops whose state keeps its shape"
            )
    # (final: see retrace.Retrace; one writing into its own tensors is rewritten without in-place ops now)
    body_fn, _ = _finish(body, updated, "while_loop_body", t, True if written else None)
    additional = extra + ([] if isinstance(limit, int) else [limit])
    args = (cond_fn, body_fn, tuple(carried), tuple(additional))
    out = t.add_node(torch.ops.higher_order.while_loop, args, {}, tuple(carried_vals))
    finals = [t.add_node(operator.getitem, (out, k), {}, v) for k, v in enumerate(carried_vals)][2:]
    for f, may in zip(finals, optional):
        if may:
            f.meta[OPTIONAL] = True
    # (what the written tensors and the lists hold from here on)
    for v, f, is_list in zip(by_name, finals[len(initial) :], sequence[len(initial) :]):
        if is_list:
            f.meta[SEQUENCE] = True
        t.env[v] = f
    return Outputs(f if is_tensor else t.read_number(f) for f, is_tensor in zip(finals[: len(initial)], kinds))


def _loop_body(
    t: Translator,
    block,
    carried_vals: list,
    kinds: list[bool],
    optional: list[bool],
    free: list,
    bound_val: list,
    by_name: Sequence = (),
    absent: Sequence[bool] = (),
    sequence: Sequence[bool] = (),
) -> tuple[Translator, list]:
    """A loop's body translated into a function of its own (see _while_loop): the translator and
    the block's results, then the values of ``by_name`` (the tensors it writes into and the lists
    it appends to, the state's last values). A state value ``absent`` marks is None in it, one
    ``optional`` marks an optional, one ``sequence`` marks a sequence."""
    body = _sub_translator(t, carried_vals, free, bound_val)
    n = len(kinds) - len(by_name)
    i, state = body.inputs[0], body.inputs[2 : 2 + len(kinds)]
    ts_state = []
    for k, (s, is_tensor, may) in enumerate(zip(state, kinds, optional)):
        if may:
            s.meta[OPTIONAL] = True
        if k < len(sequence) and sequence[k]:
            s.meta[SEQUENCE] = True
        ts_state.append(None if k < len(absent) and absent[k] else s if is_tensor else body.read_number(s))
    for v, s in zip(by_name, state[n:]):
        body.env[v] = s
    outs = body.inline(block, [body.read_number(i), *ts_state[:n]])
    return body, outs + [body.env[v] for v in by_name]


def _optional_state(
    t: Translator,
    block,
    carried: list,
    kinds: list[bool],
    may_be_none: list[bool],
    free: list,
    bound_val: list,
    by_name: list,
) -> list:
    """A loop's initial state (``carried`` after the iteration and the condition) with each value
    that may be None and is None at the start or in the body an optional, as the TorchScript
    exporter carries it. A value None at the start has the type the body gives it: the body is
    translated once with None for it, a translation then dropped (the body of the loop converted
    reads such a value only to refuse it, see optionals)."""
    pending = list(t.shape_env.pending_fresh_unbacked_symbols)
    counter = t.fake_of(carried[0])  # (the placeholder of a None, which the body does not read)
    vals = [counter if c is None else t.fake_of(c) for c in carried]
    optional = [is_optional(c) for c in carried[2:]]
    absent = [c is None for c in carried[2:]]
    sequence = [is_sequence(c) for c in carried[2:]]
    probe, outs = _loop_body(t, block, vals, kinds, optional, free, bound_val, by_name, absent, sequence)
    t.shape_env.pending_fresh_unbacked_symbols[:] = pending
    state = []
    for c, out, may, is_tensor in zip(carried[2:], outs[1:], may_be_none, kinds):
        if not may or not any(x is None or is_optional(x) for x in (c, out)):
            state.append(c)
        elif c is not None:
            if not is_tensor:
                raise ConversionError("a scripted loop carries a value that may be None and is no tensor otherwise")
            state.append(held(t, c))
        else:
            val = probe.fake_of(out) if isinstance(out, torch.fx.Node) else None
            if not isinstance(val, torch.Tensor):
                raise ConversionError("a scripted loop carries a value that may be None and is no tensor otherwise")
            made = none_of(t, val.dtype, _sizes_like(t, probe, val))
            made.meta["val"] = val
            state.append(made)
    return state


def _carried_optional(t: Translator, value, like: torch.Tensor) -> torch.fx.Node:
    """What a loop's body gives a value it carries as an optional of ``like``'s type, as one."""
    if value is None:
        made = none_of(t, like.dtype, _sizes_like(t, t, like))
        made.meta["val"] = like
        return made
    if not isinstance(value, torch.fx.Node) or not isinstance(t.fake_of(value), torch.Tensor):
        raise ConversionError("a scripted loop gives a value that may be None something that is no tensor")
    return held(t, value)


def _appended_lists(t: Translator, block) -> list:
    """The lists made outside a loop's block that it (or a block in it) appends to, which the loop
    carries as sequences (see sequences)."""
    inside: set = set()
    found: dict = {}

    def walk(b) -> None:
        inside.update(b.inputs())
        for node in b.nodes():
            if node.kind() == "aten::append" and node.inputsAt(0).type().kind() == "ListType":
                v = node.inputsAt(0)
                if v not in inside and (isinstance(t.env.get(v), list) or is_sequence(t.env.get(v))):
                    found.setdefault(v, None)
            for inner in node.blocks():
                walk(inner)
            inside.update(node.outputs())

    walk(block)
    return list(found)


def _sequences_appended(
    t: Translator, block, carried: list, kinds: list[bool], written: list, lists: list, free: list, bound_val: list
) -> list:
    """The initial sequences of the lists a loop appends to (``lists``; ``carried`` ends with the
    tensors it writes into, ``written``): a list of a known length as a sequence of its items. The
    type of the items of a list of tensors empty at the start is that of the first the body
    appends (Translator.appended): the body is translated once with a sequence of 0-d tensors for
    it, a translation then dropped, which may fail after that append."""
    for v in lists:
        # (each name of the list reads the sequence from the loop on: one that another name or
        # list holds too would keep the items it had)
        value = t.env[v]
        if isinstance(value, list) and any(
            w != v and (x is value or isinstance(x, list | tuple) and any(y is value for y in x))
            for w, x in t.env.items()
        ):
            raise ConversionError(
                "a scripted loop of a trip count the graph computes appends to a list that another "
                "list or name holds too"
            )
    items = [
        t.fake_of(t.env[v]) if is_sequence(t.env[v]) else item_like(t, t.env[v], v.type().getElementType())
        for v in lists
    ]
    failure = None
    if any(item is None for item in items):
        pending = list(t.shape_env.pending_fresh_unbacked_symbols)
        counter = t.fake_of(carried[0])  # (the placeholder of a None, which the body does not read)
        with t.mode:
            stand_in = torch.empty((), dtype=torch.get_default_dtype())
        vals = [counter if c is None else t.fake_of(c) for c in carried] + [stand_in] * len(lists)
        absent = [c is None for c in carried[2:]]
        optional = [is_optional(c) for c in carried[2:]] + [False] * len(lists)
        sequence = [is_sequence(c) for c in carried[2:]] + [True] * len(lists)
        try:
            by_name = written + lists
            _loop_body(
                t, block, vals, kinds + [True] * len(lists), optional, free, bound_val, by_name, absent, sequence
            )
        except ConversionError as e:
            failure = e
        t.shape_env.pending_fresh_unbacked_symbols[:] = pending
        items = [t.appended.get(v) if item is None else item for v, item in zip(lists, items)]
    sequences = []
    for v, item in zip(lists, items):
        if item is None:
            if failure is not None:
                raise failure
            raise ConversionError(
                "a scripted loop of a trip count the graph computes appends to a list whose items' type "
                "the export does not find (the body appends nothing on the example's path)"
            )
        sequences.append(t.env[v] if is_sequence(t.env[v]) else as_sequence(t, t.env[v], item))
    return sequences


HANDLERS: dict[str, Handler] = {"prim::Loop": _loop}

"""Packed sequences in the TorchScript translator: ``pack_padded_sequence``'s result kept as ONNX's
recurrent ops take it (the padded tensor and each batch entry's length), a recurrent layer over
it as ``fastonnx::padded_rnn`` (see packed_rnn), and ``pad_packed_sequence`` of it."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import torch

from ...errors import ConversionError
from . import packed_rnn as _packed_rnn  # noqa: F401  # declares fastonnx::padded_rnn (converted natively)
from .nodes import resolve
from .translator import Handler, Opaque, Outputs, Translator

aten = torch.ops.aten


@dataclass(frozen=True)
class Packed(Opaque):
    """A packed sequence (``_pack_padded_sequence``'s data) kept as ONNX's recurrent ops take it:
    the padded time-major tensor and each batch entry's length."""

    padded: torch.fx.Node
    lengths: torch.fx.Node


@dataclass(frozen=True)
class BatchSizes(Opaque):
    """``_pack_padded_sequence``'s batch sizes, of which only the first (the batch) is read."""

    packed: Packed


def _pack_padded_sequence(t: Translator, node):
    padded, lengths, batch_first = (t.env[v] for v in node.inputs())
    if batch_first:
        padded = t.emit(aten.transpose.int, (padded, 0, 1))
    packed = Packed(padded, lengths)
    return Outputs([packed, BatchSizes(packed)])


def _recurrent(t: Translator, node, mode: str):
    values = [t.env[v] for v in node.inputs()]
    if not isinstance(values[0], Packed):
        return _padded_recurrent(t, node, values)
    packed, _, hx, params, has_biases, num_layers, dropout, train, bidirectional = values
    if train and dropout:
        raise ConversionError(f"{node.kind()} with dropout in training mode has no ONNX form; export in eval mode")
    states = list(hx) if isinstance(hx, list | tuple) else [hx]
    args = (mode, packed.padded, packed.lengths, states, list(params), has_biases, num_layers, bidirectional)
    out = t.emit(torch.ops.fastonnx.padded_rnn.default, args)
    items = [t.add_node(operator.getitem, (out, i), {}, out.meta["val"][i]) for i in range(3)]
    return Outputs([Packed(items[0], packed.lengths), *items[1 : node.outputsSize()]])


def _padded_recurrent(t: Translator, node, values: list):
    """A recurrent layer over a padded tensor (``lstm.input``...). Its result types are
    computed here: the fake kernel torch runs underneath (mkldnn) gives a workspace size that
    disagrees with the real one, which real-value propagation refuses."""
    x, hx, bidirectional = values[0], values[1], values[7]
    states = list(hx) if isinstance(hx, list | tuple) else [hx]
    x_val, h_val = t.fake_of(x), t.fake_of(states[0])
    with t.mode:
        out = x_val.new_empty((*x_val.shape[:-1], (2 if bidirectional else 1) * h_val.shape[-1]))
        finals = [t.fake_of(h).new_empty(t.fake_of(h).shape) for h in states]
    _, _, op = resolve(node.schema())
    result = t.add_node(op, tuple(values), {}, (out, *finals))
    return Outputs(t.add_node(operator.getitem, (result, i), {}, v) for i, v in enumerate((out, *finals)))


def _pad_packed_sequence(t: Translator, node):
    packed, _, batch_first, padding_value, total = (t.env[v] for v in node.inputs())
    if not isinstance(packed, Packed):
        raise ConversionError("pad_packed_sequence of a value that is not a packed sequence of the graph")
    y, lengths = packed.padded, packed.lengths
    steps = t.fake_of(y).shape[0]
    if isinstance(total, int) and isinstance(steps, int) and total > steps:
        y = t.emit(aten.constant_pad_nd.default, (y, [0, 0, 0, 0, 0, total - steps]))
    elif isinstance(total, int) and not isinstance(steps, int):
        raise ConversionError("pad_packed_sequence's total_length over a dynamic sequence length is not supported")
    elif total is not steps:
        y = t.emit(aten.slice.Tensor, (y, 0, 0, total))
    if padding_value:
        time = t.emit(aten.arange.default, (t.size_of(y, 0),), {"dtype": torch.int64})
        inside = t.emit(aten.lt.Tensor, (t.emit(aten.unsqueeze.default, (time, 1)), lengths))
        y = t.emit(aten.where.ScalarOther, (t.emit(aten.unsqueeze.default, (inside, 2)), y, padding_value))
    if batch_first:
        y = t.emit(aten.transpose.int, (y, 0, 1))
    return Outputs([y, lengths])


HANDLERS: dict[str, Handler] = {
    "aten::_pack_padded_sequence": _pack_padded_sequence,
    **{f"aten::{mode}": functools.partial(_recurrent, mode=mode) for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")},
    "aten::_pad_packed_sequence": _pad_packed_sequence,
}

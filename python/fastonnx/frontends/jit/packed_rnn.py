"""Recurrent layers over packed sequences (``pack_padded_sequence`` -> LSTM/GRU/RNN ->
``pad_packed_sequence``), as ONNX LSTM/GRU/RNN with ``sequence_lens``.

A packed sequence's layout (time steps of shrinking batches, ``batch_sizes``) is data-dependent,
which is why torch.export cannot trace it. ONNX's recurrent ops take the padded tensor and the
lengths instead, so the TorchScript front end keeps a packed value as (padded time-major tensor,
lengths) and turns the layer into one ``fastonnx::padded_rnn`` node, which the converter below
writes as one ONNX recurrent node per layer. Outputs past a sequence's length are zero, and each
direction's final state is the one at the sequence's own last step, as PyTorch's packed layers
give them.
"""

from __future__ import annotations

import torch

from ...converters.registry import register_converter

# ONNX op, gates per cell, PyTorch's gate blocks in ONNX's order (LSTM: ifgo -> iofc; GRU: rzn ->
# zrh), extra attributes.
_CELLS = {
    "lstm": ("LSTM", 4, [0, 3, 1, 2], {}),
    "gru": ("GRU", 3, [1, 0, 2], {"linear_before_reset_i": 1}),
    "rnn_tanh": ("RNN", 1, [0], {}),
    "rnn_relu": ("RNN", 1, [0], {}),
}


@torch.library.custom_op("fastonnx::padded_rnn", mutates_args=())
def padded_rnn(
    mode: str,
    input: torch.Tensor,
    lengths: torch.Tensor,
    hx: list[torch.Tensor],
    params: list[torch.Tensor],
    has_biases: bool,
    num_layers: int,
    bidirectional: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``mode`` (lstm, gru, rnn_tanh, rnn_relu) over the time-major padded ``input`` whose batch
    entries have ``lengths``: the padded output (zero past each length), final hidden and cell
    states (the hidden state again for cells without one)."""
    packed = torch.nn.utils.rnn.pack_padded_sequence(input, lengths.cpu(), enforce_sorted=False)
    order = packed.sorted_indices
    assert order is not None and packed.unsorted_indices is not None  # enforce_sorted=False sorts
    states = [h.index_select(1, order) for h in hx]
    layer = getattr(torch._VF, mode)
    args = (packed.data, packed.batch_sizes)
    flags = (params, has_biases, num_layers, 0.0, False, bidirectional)
    out = layer(*args, states, *flags) if mode == "lstm" else layer(*args, states[0], *flags)
    data, finals = out[0], [s.index_select(1, packed.unsorted_indices) for s in out[1:]]
    padded, _ = torch.nn.utils.rnn.pad_packed_sequence(
        torch.nn.utils.rnn.PackedSequence(data, packed.batch_sizes, order, packed.unsorted_indices),
        total_length=input.shape[0],
    )
    return padded, finals[0], (finals[1] if mode == "lstm" else finals[0].clone())


@padded_rnn.register_fake
def _(mode, input, lengths, hx, params, has_biases, num_layers, bidirectional):
    hidden = hx[0].shape[-1]
    directions = 2 if bidirectional else 1
    out = input.new_empty((input.shape[0], input.shape[1], directions * hidden))
    return out, hx[0].new_empty(hx[0].shape), hx[0].new_empty(hx[0].shape)


def _gate_rows(g, weight, cell: tuple, hidden: int):
    """A PyTorch weight or bias with its gate blocks in ONNX's order."""
    order = cell[2]
    rows = torch.cat([torch.arange(k * hidden, (k + 1) * hidden) for k in order])
    return g.op("Gather", weight, g.constant(rows), axis_i=0)


def _stacked(g, per_direction: list):
    parts = [g.op("Unsqueeze", p, g.constant([0])) for p in per_direction]
    return parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=0)


def _convert(g, mode, input, lengths, hx, params, has_biases, num_layers, bidirectional):
    cell = _CELLS[mode]
    op_type = cell[0]
    directions = 2 if bidirectional else 1
    hidden = int(hx[0].shape[-1]) if hx[0].shape is not None else None
    if hidden is None:
        raise ValueError("the hidden state's size must be known")
    per_layer = 4 if has_biases else 2
    if len(params) != num_layers * directions * per_layer:
        raise ValueError(f"{len(params)} weights for {num_layers} layer(s): projections (proj_size) are not supported")
    seq_lens = g.op("Cast", lengths, to_i=6)  # int32
    attrs = dict(cell[3])
    attrs["hidden_size_i"] = hidden
    attrs["direction_s"] = "bidirectional" if bidirectional else "forward"
    if op_type == "RNN":
        attrs["activations_ss"] = ["Relu" if mode == "rnn_relu" else "Tanh"] * directions
    x, finals_h, finals_c = input, [], []
    for layer in range(num_layers):
        ws = [
            params[(layer * directions + d) * per_layer : (layer * directions + d + 1) * per_layer]
            for d in range(directions)
        ]
        w = _stacked(g, [_gate_rows(g, p[0], cell, hidden) for p in ws])
        r = _stacked(g, [_gate_rows(g, p[1], cell, hidden) for p in ws])
        b = None
        if has_biases:
            b = _stacked(
                g,
                [
                    g.op("Concat", _gate_rows(g, p[2], cell, hidden), _gate_rows(g, p[3], cell, hidden), axis_i=0)
                    for p in ws
                ],
            )
        rows = g.constant(list(range(layer * directions, (layer + 1) * directions)))
        h0 = g.op("Gather", hx[0], rows, axis_i=0)
        inputs = [x, w, r, b, seq_lens, h0]
        if op_type == "LSTM":
            inputs.append(g.op("Gather", hx[1], rows, axis_i=0))
        outs = g.op(op_type, *inputs, outputs=3 if op_type == "LSTM" else 2, **attrs)
        y = outs[0]  # (T, directions, B, H)
        x = g.op("Reshape", g.op("Transpose", y, perm_i=[0, 2, 1, 3]), g.constant([0, 0, -1]), allowzero_i=0)
        finals_h.append(outs[1])
        if op_type == "LSTM":
            finals_c.append(outs[2])
    h = finals_h[0] if num_layers == 1 else g.op("Concat", *finals_h, axis_i=0)
    c = (finals_c[0] if num_layers == 1 else g.op("Concat", *finals_c, axis_i=0)) if finals_c else g.op("Identity", h)
    return x, h, c


register_converter("fastonnx::padded_rnn", _convert)

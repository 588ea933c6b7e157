"""Recurrent layers over packed sequences (``pack_padded_sequence`` -> LSTM/GRU/RNN ->
``pad_packed_sequence``), as ONNX LSTM/GRU/RNN with ``sequence_lens``.

A packed sequence's layout (time steps of shrinking batches, ``batch_sizes``) is data-dependent,
which is why torch.export cannot trace it. ONNX's recurrent ops take the padded tensor and the
lengths instead, so the TorchScript front end keeps a packed value as (padded time-major tensor,
lengths) and turns the layer into one ``fastonnx::padded_rnn`` node. Its native converter
(cpp/converters/rnn.cpp, the one of ``aten::lstm`` and the others) writes one ONNX recurrent node
per layer. Outputs past a sequence's length are zero, and each direction's final state is the one
at the sequence's own last step, as PyTorch's packed layers give them.
"""

from __future__ import annotations

from importlib import resources

import torch


def _declared_schema(name: str) -> str:
    """The schema op_schemas.txt declares for ``fastonnx::<name>``, without the name: codegen
    generates the op's converter from the same line."""
    text = resources.files("fastonnx").joinpath("op_schemas.txt").read_text(encoding="utf-8")
    for line in map(str.strip, text.splitlines()):
        if line.startswith(name + "("):
            return line[len(name) :]
    raise LookupError(f"op_schemas.txt declares no `{name}`")


@torch.library.custom_op("fastonnx::padded_rnn", mutates_args=(), schema=_declared_schema("padded_rnn"))
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
    # The output has h's features (proj_size of them for a projecting LSTM); c has hidden_size.
    hidden = hx[0].shape[-1]
    directions = 2 if bidirectional else 1
    out = input.new_empty((input.shape[0], input.shape[1], directions * hidden))
    return out, hx[0].new_empty(hx[0].shape), hx[-1].new_empty(hx[-1].shape)

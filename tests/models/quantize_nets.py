"""The small models the quantization tests export (tests/test_quantize.py, MatMulNBits;
tests/test_quantize_dequantize_linear.py, DequantizeLinear): the same models, so that the two
forms are tested on the same graphs."""

from __future__ import annotations

import torch


class Mlp(torch.nn.Module):
    """A Linear with a bias, then one without; by default K not a multiple of the block (40).
    Weights above 4096 elements (Mlp(128, 96, 64)) are above what the clean-up casts eagerly:
    streamed, each is cast while written."""

    def __init__(self, inputs: int = 40, hidden: int = 96, outputs: int = 24):
        super().__init__()
        self.up = torch.nn.Linear(inputs, hidden)
        self.down = torch.nn.Linear(hidden, outputs, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class TiedLm(torch.nn.Module):
    """An embedding tied to the LM head (the head reads it through a Transpose the clean-up keeps),
    a Gemm (2-D input, transB) inside."""

    def __init__(self, vocab: int = 64, width: int = 32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids).flatten(0, 1)
        return self.head(torch.tanh(self.mix(x)))

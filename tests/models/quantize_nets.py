"""The small models the quantization tests export (tests/test_quantize.py, MatMulNBits;
tests/test_quantize_dequantize_linear.py, DequantizeLinear): the same models, so that the two
forms are tested on the same graphs."""

from __future__ import annotations

import torch


class Mlp(torch.nn.Module):
    """K not a multiple of the block (40), a Linear with a bias and one without."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(40, 96)
        self.down = torch.nn.Linear(96, 24, bias=False)

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

"""Modules written for torch.jit.script, as the torch.onnx docs teach for loops and branches
(scripting needs their source in a file)."""

from __future__ import annotations

import torch


class Branchy(torch.nn.Module):
    """A branch on the data: ONNX If."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            y = self.fc(x) * 2
        else:
            y = self.fc(x) - 1
        return y


class PerRowLoop(torch.nn.Module):
    """A loop over a dynamic size that reads a weight inside its body: ONNX Loop."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = torch.zeros_like(x)
        for _ in range(x.size(0)):
            h = torch.tanh(self.fc(x) + h)
        return h


class CountingLoop(torch.nn.Module):
    """A loop carrying a number and indexing with its counter, returning the number."""

    def forward(self, x):
        acc = x[0]
        n = 0
        for i in range(1, x.size(0)):
            acc = acc + x[i] * i
            n += 1
        return acc, n


class UnrolledLoop(torch.nn.Module):
    """A loop of a constant trip count: unrolled, exactly."""

    def forward(self, x):
        for _ in range(3):
            x = x * 2
        return x

"""onnxruntime time of the two ways to convert transformers::grouped_mm_fallback: one MatMul per
expert on its slice of rows (fastonnx's converter), or each row's expert weights gathered into an
[S, K, N] tensor for one batched MatMul (below). Run with

    python -m benchmarks.grouped_mm

Measured (2-core machine, one onnxruntime thread, ms per run):

    E=8  S=256  K=256 N=512:  per-expert MatMul  2.69, gathered batched MatMul  35.36
    E=8  S=2048 K=512 N=1024: per-expert MatMul 26.20, gathered batched MatMul 611.14
    E=64 S=2048 K=256 N=256:  per-expert MatMul  4.61, gathered batched MatMul 108.06
"""

from __future__ import annotations

import time

import numpy as np
import onnxruntime as ort
import torch
import transformers.integrations.moe  # noqa: F401 (registers the op)

import fastonnx
from fastonnx.converters.registry import GraphContext, Value
from fastonnx.converters.transformers import _experts, _size0, grouped_mm


def grouped_mm_gathered(g: GraphContext, input: Value, weight: Value, offs: Value) -> Value:
    """The product with each row's expert weights gathered into [S, K, N] for one batched MatMul."""
    experts = _experts(weight)
    ends = g.op("Cast", offs, to_i=7)
    rows = g.op("Range", g.constant(0), g.op("Squeeze", _size0(g, input), g.constant([0])), g.constant(1))
    passed = g.op("GreaterOrEqual", g.op("Unsqueeze", rows, g.constant([1])), g.op("Unsqueeze", ends, g.constant([0])))
    group = g.op("ReduceSum", g.op("Cast", passed, to_i=7), g.constant([1]), keepdims_i=0)
    weights = g.op("Gather", weight, g.op("Min", group, g.constant(experts - 1)), axis_i=0)
    product = g.op("Squeeze", g.op("MatMul", g.op("Unsqueeze", input, g.constant([1])), weights), g.constant([1]))
    taken = g.op("Unsqueeze", g.op("Less", group, g.constant(experts)), g.constant([1]))
    return g.op("Where", taken, product, g.constant(0.0, dtype=input.dtype))


class GroupedMatMul(torch.nn.Module):
    def __init__(self, experts: int, k: int, n: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, k, n) / k**0.5)

    def forward(self, x, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, self.weight, offs)


def milliseconds(converter, experts: int, rows: int, k: int, n: int, runs: int = 10) -> float:
    fastonnx.register_converter("transformers::grouped_mm_fallback", converter)
    model = GroupedMatMul(experts, k, n)
    x = torch.randn(rows, k)
    offs = torch.bincount(torch.randint(0, experts, (rows,)), minlength=experts).cumsum(0).to(torch.int32)
    proto = fastonnx.export(model, (x, offs), dynamic_shapes=({0: "rows"}, None)).model_proto
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"x": x.numpy(), "offs": offs.numpy()}
    np.testing.assert_allclose(session.run(None, feeds)[0], model(x, offs).detach().numpy(), rtol=1e-3, atol=1e-3)
    start = time.perf_counter()
    for _ in range(runs):
        session.run(None, feeds)
    return (time.perf_counter() - start) / runs * 1000


def main() -> None:
    for experts, rows, k, n in [(8, 256, 256, 512), (8, 2048, 512, 1024), (64, 2048, 256, 256)]:
        per_expert = milliseconds(grouped_mm, experts, rows, k, n)
        gathered = milliseconds(grouped_mm_gathered, experts, rows, k, n)
        print(f"E={experts} S={rows} K={k} N={n}: per-expert MatMul {per_expert:.2f} ms, gathered {gathered:.2f} ms")
    fastonnx.register_converter("transformers::grouped_mm_fallback", grouped_mm)


if __name__ == "__main__":
    main()

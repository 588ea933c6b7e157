"""Weights on their way to the file: external data, shared tensors written once, folded weights
computed while writing, and a model beyond protobuf's 2 GB exported within the memory bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import fastonnx
from support import check


class TiedLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(200, 64)
        self.proj = torch.nn.Linear(64, 64)
        self.head = torch.nn.Linear(64, 200, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens):
        return self.head(self.proj(self.embed(tokens)).tanh())


def _run(path_or_proto, tokens) -> np.ndarray:
    source = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"tokens": tokens.numpy()})[0]


def test_external_data_beside_the_model(tmp_path):
    model, tokens = TiedLM().eval(), torch.randint(0, 200, (2, 7))
    path = tmp_path / "lm.onnx"
    fastonnx.export(model, (tokens,), str(path), external_data=True)
    assert sorted(os.listdir(tmp_path)) == ["lm.onnx", "lm.onnx.data"]
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path), load_external_data=False)
    external = [t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert {t.name for t in external} >= {"embed.weight", "proj.weight_transpose"}
    for t in external:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "lm.onnx.data"
        assert int(info["offset"]) % (4096 if int(info["length"]) >= 65536 else 64) == 0
    np.testing.assert_allclose(_run(str(path), tokens), model(tokens).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_shared_weight_is_one_initializer():
    model, tokens = TiedLM().eval(), torch.randint(0, 200, (2, 7))
    proto = fastonnx.export(model, (tokens,)).model_proto
    check(proto)
    names = [t.name for t in proto.graph.initializer]
    assert names.count("embed.weight") == 1 and not any(n.startswith("head.") for n in names), names
    # A small tied weight: the head reads a transposed copy, folded, not a Transpose node.
    assert "Transpose" not in {n.op_type for n in proto.graph.node}
    np.testing.assert_allclose(_run(proto, tokens), model(tokens).detach().numpy(), rtol=1e-5, atol=1e-5)


class LargeTiedLM(torch.nn.Module):
    def __init__(self, vocab: int = 8192, width: int = 64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)  # 2 MB
        self.head = torch.nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def test_large_tied_weight_is_written_once(tmp_path):
    """A large weight read both as it is (Gather) and transposed (the head) keeps its Transpose
    node: a folded copy would write the weight twice (GPT-2's tied embedding: 154 MB)."""
    model, tokens = LargeTiedLM().eval(), torch.randint(0, 8192, (2, 7))
    path = tmp_path / "lm.onnx"
    fastonnx.export(model, (tokens,), str(path))
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path))
    assert [t.name for t in proto.graph.initializer] == ["embed.weight"]
    assert [n.op_type for n in proto.graph.node] == ["Gather", "Transpose", "MatMul"]
    weight_bytes = 8192 * 64 * 4
    assert weight_bytes < os.path.getsize(path) < weight_bytes + 4096
    np.testing.assert_allclose(_run(str(path), tokens), model(tokens).detach().numpy(), rtol=1e-5, atol=1e-5)


class TransposedBuffer(torch.nn.Module):
    def __init__(self, w: torch.Tensor):
        super().__init__()
        self.register_buffer("w", w)

    def forward(self, x):
        return self.w.t() + x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8])
@pytest.mark.parametrize(
    "shape", [(8, 8), (3, 5), (1000, 777), (777, 1000), (9, 70 * 4096), (300_000, 3), (1024, 96), (1048, 72)]
)
def test_transposed_weight_bytes(tmp_path, dtype, shape):
    """A weight folded through a Transpose is computed while it is written: by vector bands that
    fill a cache line of each output row (streamed where output rows are 32-byte multiples:
    (1024, 96), and (1048, 72) in float32, which also leaves an 8-row strip), 8x8 tiles, element
    by element at the edges and in chunks that end inside an output row (rows beyond 1 MB), on a
    helper thread when saved and in line for to_bytes(). Every path gives torch's bytes."""
    w = (torch.arange(shape[0] * shape[1]) % 251 - 120).reshape(shape).to(dtype)
    result = fastonnx.export(TransposedBuffer(w), (torch.zeros((), dtype=dtype),))
    path = tmp_path / "m.onnx"
    result.save(str(path))
    assert path.read_bytes() == result.to_bytes()
    (init,) = [t for t in onnx.load(str(path)).graph.initializer if list(t.dims) == [shape[1], shape[0]]]
    assert init.raw_data == w.t().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


# Runs in a subprocess so its peak RSS is the export's own: builds `LAYERS` square Linear layers
# of `WIDTH` (float32) without initializing them on the Python side beyond a cheap fill, then
# either traces them with torch.export alone or exports them with fastonnx to `path`.
_STACKED = textwrap.dedent(
    """
    import json, resource, sys, torch
    import fastonnx
    width, layers, mode, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with torch.device("meta"):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    model = model.to_empty(device="cpu").eval()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.fill_(1.0 / width if p.dim() == 2 else 0.01 * (i + 1))
    x = torch.ones(1, width)
    report = {}
    if mode == "trace":
        with torch.no_grad():
            torch.export.export(model, (x,))
    else:
        result = fastonnx.export(model, (x,), path, verbose=False)
        try:
            result.to_bytes()
            report["in_memory_refused"] = False
        except fastonnx.ExportError as e:
            report["in_memory_refused"] = "external data" in str(e)
    report["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(report))
    """
)


def _stacked(tmp_path, mode: str, width: int, layers: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _STACKED, str(width), str(layers), mode, str(tmp_path / "big.onnx")],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_three_gigabyte_model(tmp_path):
    """~3.2 GB of weights: written to external data automatically, loaded by onnxruntime, and the
    export's peak memory stays within torch.export's own plus 10% of the weights."""
    width, layers = 8192, 12
    weights = layers * (width * width + width) * 4
    if torch.cuda.is_available() or os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize < 2 * weights:
        pytest.fail("the 3 GB export test needs twice the weights' size in free disk space")
    traced = _stacked(tmp_path, "trace", width, layers)["peak_rss"]
    report = _stacked(tmp_path, "export", width, layers)
    exported = report["peak_rss"]
    assert report["in_memory_refused"], "to_bytes() of a model beyond 2 GB must raise ExportError naming external data"
    assert exported <= traced + 0.10 * weights, (
        f"peak RSS {exported / 2**30:.2f} GiB exporting vs {traced / 2**30:.2f} GiB tracing alone "
        f"(allowed: +{0.10 * weights / 2**30:.2f} GiB)"
    )
    path = str(tmp_path / "big.onnx")
    assert os.path.getsize(path + ".data") >= weights
    assert os.path.getsize(path) < 1 << 20
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: np.ones((1, width), np.float32)})
    # Each layer maps a constant vector c to c + bias: (c * width / width) + b.
    expected = 1.0 + sum(0.01 * (2 * i + 2) for i in range(layers))
    np.testing.assert_allclose(out, np.full((1, width), expected, np.float32), rtol=1e-4)

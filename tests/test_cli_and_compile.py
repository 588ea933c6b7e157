"""The command line (python -m fastonnx) and the torch.compile backend."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

import fastonnx


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fastonnx", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "mlp.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    fastonnx.export(model, (torch.randn(3, 4),), str(path), dynamic_axes={"input": {0: "batch"}})
    return str(path)


def test_cli_help():
    out = _cli("--help")
    assert out.returncode == 0 and "inspect" in out.stdout and "verify" in out.stdout
    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"fastonnx {fastonnx.__version__}"


def test_cli_every_argument_has_help():
    import argparse

    from fastonnx.__main__ import parser

    main = parser()
    (commands,) = [a for a in main._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in [("python -m fastonnx", main), *commands.choices.items()]:
        missing = [a.dest for a in command._actions if not a.help and not isinstance(a, argparse._SubParsersAction)]
        assert not missing, f"{name}: arguments without help text: {missing}"


def test_cli_inspect(model_path):
    out = _cli("inspect", model_path)
    assert out.returncode == 0, out.stderr
    assert "input: float[batch, 4]" in out.stdout and "output: float[batch, 2]" in out.stdout
    assert "ai.onnx 18" in out.stdout and "Gemm" in out.stdout


def test_cli_verify(model_path):
    out = _cli("verify", model_path, "--dim", "batch=5")
    assert out.returncode == 0, out.stderr
    assert "checker (full, with strict shape inference): ok" in out.stdout and "float32[5, 2]" in out.stdout


def test_cli_reads_a_model_without_its_weights_and_groups_numbered_values(tmp_path):
    """inspect parses the graph and skips each weight's bytes (an inline 600 MB model took
    onnx.load 13 s), and values of one type whose names differ in one number are one line."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from fastonnx.__main__ import _load

    names = ["past.0.key", "past.1.key", "past.2.key", "past.4.key"]
    weight = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "weight")
    graph = helper.make_graph(
        [helper.make_node("MatMul", [name, "weight"], [f"present.{name[5]}"]) for name in names],
        "cache",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 8]) for name in names],
        [helper.make_tensor_value_info(f"present.{name[5]}", TensorProto.FLOAT, ["batch", 8]) for name in names],
        [weight],
    )
    path = tmp_path / "cache.onnx"
    onnx.save(helper.make_model(graph), path)
    read = _load(str(path))
    assert read.graph.node == onnx.load(path).graph.node
    (kept,) = read.graph.initializer
    assert (kept.name, list(kept.dims), kept.data_type, kept.raw_data) == ("weight", [8, 8], TensorProto.FLOAT, b"")
    out = _cli("inspect", str(path))
    assert out.returncode == 0, out.stderr
    assert "  past.{0,1,2,4}.key: float[batch, 8]" in out.stdout and "  present.{0,1,2,4}: float[batch, 8]" in out.stdout
    assert "1 initializers" in out.stdout


def test_cli_errors(tmp_path):
    assert "does not exist" in _cli("inspect", str(tmp_path / "missing.onnx")).stderr
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    assert "not a readable ONNX model" in _cli("verify", str(tmp_path / "junk.onnx")).stderr
    assert _cli("verify", str(tmp_path / "junk.onnx"), "--dim", "x").returncode != 0


def test_cli_export_errors_are_one_line(tmp_path):
    """export-hf says an ExportError as one `error:` line, as argparse does, without the traceback."""
    from fastonnx.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["export-hf", str(tmp_path / "missing"), str(tmp_path / "out.onnx"), "--quiet"])
    assert info.value.code == f"error: weights: {tmp_path / 'missing'} does not exist"


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.a(x).relu()
        print("a graph break")  # dynamo splits the graph here
        return self.b(h).softmax(-1)


def test_compile_backend_runs_graphs_in_onnxruntime():
    from fastonnx.integrations.compile import OnnxRuntimeGraph, backend

    model = Blocks().eval()
    x = torch.randn(8, 16)
    # Registered through the torch_dynamo_backends entry point, found by name.
    assert "fastonnx" in torch._dynamo.list_backends(exclude_tags=())
    torch._dynamo.reset()
    with torch.no_grad():
        expected = model(x)
        torch.testing.assert_close(torch.compile(model, backend="fastonnx")(x), expected)

    compiled_graphs = []

    def recording(gm, inputs):
        compiled_graphs.append(backend(gm, inputs))
        return compiled_graphs[-1]

    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend=recording)(x), expected)
    assert len(compiled_graphs) == 2 and all(isinstance(g, OnnxRuntimeGraph) for g in compiled_graphs)


def test_compile_backend_runs_unconvertible_graphs_eagerly():
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x) * 2

    torch._dynamo.reset()
    x = torch.randn(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(Unsupported(), backend="fastonnx")(x)
    torch.testing.assert_close(out, torch.special.erfcx(x) * 2)
    assert any("runs eagerly" in str(w.message) and "erfcx" in str(w.message) for w in caught)

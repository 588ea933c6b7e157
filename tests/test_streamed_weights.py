"""Models on the meta device whose weights come from a checkpoint (export(weights=...)): each kind
of source, the errors listed at once before anything is written, weights_mode="reference",
dtype conversion while streaming, and a process whose peak RSS stays far below the weights."""

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
from safetensors.torch import save_file

import fastonnx


class Net(torch.nn.Module):
    """Linear layers (transposed weights), a tied pair, and a buffer that is not persisted."""

    def __init__(self, width: int = 32, depth: int = 2):
        super().__init__()
        self.embed = torch.nn.Embedding(50, width)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.head = torch.nn.Linear(width, 50, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.linspace(0.5, 1.5, width), persistent=False)
        self.width, self.depth = width, depth  # what rebuilding it for `scale` passes again

    def forward(self, ids):
        x = self.embed(ids) * self.scale
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


def _real_and_meta(**kw) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    real = Net(**kw).eval()
    with torch.device("meta"):
        meta = Net(**kw).eval()
    return real, meta


def _ids():
    return torch.tensor([[1, 7, 3, 49]])


def _run(path, ids) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: ids.numpy()})[0]


def _checkpoint(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict as transformers saves one: tied weights once."""
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "head.weight"}
    return state


def _source(kind: str, real: torch.nn.Module, tmp_path):
    state = _checkpoint(real)
    if kind == "mapping":
        return state
    if kind == "file":
        save_file(state, str(tmp_path / "weights.safetensors"))
        return tmp_path / "weights.safetensors"
    if kind == "directory":
        save_file(state, str(tmp_path / "model.safetensors"))
        return tmp_path
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, part in shards.items():
        save_file({n: state[n] for n in part}, str(tmp_path / file))
    index = {"metadata": {}, "weight_map": {n: f for f, part in shards.items() for n in part}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    return tmp_path


@pytest.mark.parametrize("kind", ["file", "directory", "sharded", "mapping"])
def test_each_kind_of_source(kind, tmp_path):
    real, meta = _real_and_meta()
    path = tmp_path / "m.onnx"
    fastonnx.export(meta, (_ids(),), path, weights=_source(kind, real, tmp_path), verbose=False)
    np.testing.assert_allclose(_run(path, _ids()), real(_ids()).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_weights_read_while_tracing(tmp_path):
    """The checkpoint's weights are read into the page cache while the model is traced, each
    checkpoint tensor once (the tied pair once); a mapping of tensors in memory has nothing to read."""
    import time

    from fastonnx.weights.source import open_source, read_while_tracing

    real, meta = _real_and_meta()
    checkpoint = open_source(_source("sharded", real, tmp_path))
    reading = read_while_tracing(meta, checkpoint)
    assert reading is not None
    stored = sum(t.numel() * t.element_size() for t in _checkpoint(real).values())
    deadline = time.monotonic() + 30
    while reading.read < stored and time.monotonic() < deadline:
        time.sleep(0.01)
    reading.stop()
    assert reading.read == stored
    assert read_while_tracing(meta, open_source(_checkpoint(real))) is None


def test_external_data_streamed_from_shards(tmp_path):
    real, meta = _real_and_meta()
    path = tmp_path / "m.onnx"
    fastonnx.export(meta, (_ids(),), path, weights=_source("sharded", real, tmp_path), external_data=True)
    onnx.checker.check_model(str(path), full_check=True)
    assert os.path.getsize(str(path) + ".data") > 0
    np.testing.assert_allclose(_run(path, _ids()), real(_ids()).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_transformers_names_and_rotary_buffers(tmp_path, capsys):
    """A LLaMA built from its config on the meta device: the checkpoint saved by transformers
    (tied embeddings, rotary inv_freq not saved) gives the eager model's logits."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, tie_word_embeddings=True, use_cache=False,
    )
    torch.manual_seed(0)
    real = transformers.LlamaForCausalLM(config).eval()
    real.save_pretrained(tmp_path)
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(config).eval()
    # The base model alone is saved without the `model.` prefix of the causal LM's names.
    base = {k.removeprefix("model."): v for k, v in real.state_dict().items() if k.startswith("model.")}
    with torch.device("meta"):
        meta_base = transformers.LlamaModel(config).eval()
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    path = tmp_path / "llama.onnx"
    fastonnx.export(meta, (ids,), path, weights=tmp_path, verbose=False)
    np.testing.assert_allclose(_run(path, ids), real(ids).logits.detach().numpy(), rtol=1e-4, atol=1e-4)
    save_file({f"model.{k}": v.contiguous() for k, v in base.items() if "inv_freq" not in k}, str(tmp_path / "b.safetensors"))
    fastonnx.export(meta_base, (ids,), tmp_path / "base.onnx", weights=tmp_path / "b.safetensors", verbose=False)

    from fastonnx.__main__ import main

    assert main(["export-hf", str(tmp_path), str(tmp_path / "cli.onnx"), "--dynamic", "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert f"{tmp_path / 'cli.onnx'}: " in summary and "exported in " in summary
    assert "input_ids: int64[batch, sequence]" in summary and "static shapes" not in summary
    assert main(["export-hf", str(tmp_path), str(tmp_path / "fixed.onnx"), "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "input_ids: int64[1, 8]" in summary and "static shapes: input_ids is [1, 8]" in summary
    longer = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5], [2, 7, 1, 8, 2, 8, 1, 8, 2]])
    np.testing.assert_allclose(
        _run(tmp_path / "cli.onnx", longer), real(longer).logits.detach().numpy(), rtol=1e-4, atol=1e-4
    )


def test_a_buffer_computed_beside_large_parameters(tmp_path, monkeypatch):
    """gemma's scaled embedding computes its scale as a buffer (not saved) beside its weight,
    which on a real model is too large to build again on the CPU: the scale is made with the
    weight left on the meta device (here every module counts as large) and gives eager's logits
    at other sizes than traced."""
    transformers = pytest.importorskip("transformers")
    from fastonnx.weights import source

    config = transformers.GemmaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, vocab_size=128, use_cache=False,
    )
    torch.manual_seed(0)
    real = transformers.GemmaForCausalLM(config).eval()
    real.save_pretrained(tmp_path)
    with torch.device("meta"):
        meta = transformers.GemmaForCausalLM(config).eval()
    monkeypatch.setattr(source, "_MAX_REBUILT_BYTES", 0)
    ids = torch.tensor([[1, 5, 9, 2, 7], [4, 4, 8, 1, 3]])
    path = tmp_path / "gemma.onnx"
    fastonnx.export(meta, (ids,), path, weights=tmp_path, dynamic_axes={"input_ids": [0, 1]}, verbose=False)
    longer = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5]])
    np.testing.assert_allclose(_run(path, longer), real(longer).logits.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_every_missing_or_mismatched_weight_in_one_error_and_nothing_written(tmp_path):
    real, meta = _real_and_meta()
    state = _checkpoint(real)
    del state["layers.0.weight"], state["layers.1.bias"]
    state["layers.1.weight"] = state["layers.1.weight"][:, :16].contiguous()
    state["layers.0.bias"] = state["layers.0.bias"].double()
    path = tmp_path / "m.onnx"
    with pytest.raises(fastonnx.ArgumentError) as e:
        fastonnx.export(meta, (_ids(),), path, weights=state)
    message = str(e.value)
    assert "4 weight(s)" in message
    for expected in ("`layers.0.weight`: not in the checkpoint", "`layers.1.bias`: not in the checkpoint",
                     "`layers.1.weight`: shape [32, 16] in the checkpoint, [32, 32] in the model",
                     "`layers.0.bias`: dtype torch.float64 in the checkpoint, torch.float32 in the model"):
        assert expected in message
    assert os.listdir(tmp_path) == []


def test_bad_weights_arguments(tmp_path):
    _, meta = _real_and_meta()
    with pytest.raises(fastonnx.ArgumentError, match="weights_mode must be one of"):
        fastonnx.export(meta, (_ids(),), weights={}, weights_mode="link")
    with pytest.raises(fastonnx.ArgumentError, match="dtype must be None or one of"):
        fastonnx.export(meta, (_ids(),), weights={}, dtype=torch.int8)
    with pytest.raises(fastonnx.ArgumentError, match="does not exist"):
        fastonnx.export(meta, (_ids(),), weights=tmp_path / "nothing.safetensors")
    with pytest.raises(fastonnx.ArgumentError, match="neither model.safetensors"):
        fastonnx.export(meta, (_ids(),), weights=tmp_path)
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(fastonnx.ArgumentError, match="not a safetensors file"):
        fastonnx.export(meta, (_ids(),), weights=tmp_path / "bad.safetensors")


def test_reference_mode_points_into_the_checkpoint(tmp_path):
    real, meta = _real_and_meta(width=64)
    source = _source("directory", real, tmp_path)
    path = tmp_path / "m.onnx"
    fastonnx.export(meta, (_ids(),), path, weights=source, weights_mode="reference")
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path), load_external_data=False)
    locations = {
        t.name: {e.key: e.value for e in t.external_data}["location"]
        for t in model.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
    }
    assert set(locations.values()) == {"model.safetensors"}
    assert not (tmp_path / "m.onnx.data").exists()  # nothing went to a data file of its own: none is left
    assert "layers.0.weight" in locations and "embed.weight" in locations
    assert any(n.op_type == "Transpose" for n in model.graph.node)  # the weights are as stored
    np.testing.assert_allclose(_run(path, _ids()), real(_ids()).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_reference_mode_needs_the_model_beside_the_checkpoint(tmp_path):
    real, meta = _real_and_meta()
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "out").mkdir()
    source = _source("directory", real, tmp_path / "ckpt")
    with pytest.raises(fastonnx.ArgumentError, match="must be saved in the checkpoint's directory"):
        fastonnx.export(meta, (_ids(),), tmp_path / "out" / "m.onnx", weights=source, weights_mode="reference")
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_bfloat16_checkpoint_converted_while_streaming(dtype, tmp_path):
    real, meta = _real_and_meta()
    real = real.to(torch.bfloat16)
    save_file(_checkpoint(real), str(tmp_path / "model.safetensors"))
    path = tmp_path / "m.onnx"
    fastonnx.export(meta, (_ids(),), path, weights=tmp_path, dtype=dtype, external_data=True)
    model = onnx.load(str(path), load_external_data=False)
    want = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(str(dtype).removeprefix("torch.")))
    assert {t.data_type for t in model.graph.initializer if t.name.startswith("layers")} == {want}
    assert not any(n.op_type == "Transpose" for n in model.graph.node)  # folded into the converted weights
    expected = real.to(dtype)(_ids()).detach().float().numpy()
    np.testing.assert_allclose(_run(path, _ids()).astype(np.float32), expected, rtol=2e-2, atol=2e-2)
    assert next(meta.parameters()).dtype == torch.float32  # the caller's module is left as it was


_RSS_SCRIPT = textwrap.dedent(
    """
    import sys, torch, fastonnx
    width, layers, directory, write = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
    with torch.device("meta"):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)]).eval()
    fastonnx.export(model, (torch.ones(1, width),), directory + "/m.onnx" if write else None,
                    weights=directory, external_data=True, verbose=False)
    # VmHWM: this program's own peak (getrusage's ru_maxrss starts at the forking parent's RSS).
    print(next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="peak RSS semantics and page dropping are Linux's")
def test_peak_rss_far_below_the_weights(tmp_path):
    """A 384 MB checkpoint exported by a process whose peak RSS grows by less than 96 MB over the
    same process that exports without writing (interpreter, torch, the trace): the weights
    pass through in pieces, transposed on the way, never held whole."""
    width, layers = 2048, 24
    generator = torch.Generator().manual_seed(0)
    # Orthogonal-ish layers keep the product's scale: the output is a check of every weight.
    state = {f"{i}.weight": torch.randn(width, width, generator=generator) / width**0.5 for i in range(layers)}
    save_file(state, str(tmp_path / "model.safetensors"))
    weights = width * width * layers * 4

    def peak(write: bool) -> int:
        cmd = [sys.executable, "-c", _RSS_SCRIPT, str(width), str(layers), str(tmp_path), "1" if write else "0"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        return int(out.stdout.split()[-1])

    baseline, exporting = peak(False), peak(True)
    assert os.path.getsize(tmp_path / "m.onnx.data") >= weights
    grown = exporting - baseline
    print(f"peak RSS: {baseline / 2**20:.0f} MB without writing, {exporting / 2**20:.0f} MB writing {weights >> 20} MB")
    assert grown < weights / 4, f"peak RSS grew by {grown >> 20} MB writing {weights >> 20} MB of weights"
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    x = torch.ones(1, width)
    y = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    for i in range(layers):
        x = x @ state[f"{i}.weight"].T
    np.testing.assert_allclose(y, x.numpy(), rtol=1e-3, atol=1e-3)


class _Bar:
    """tqdm's stand-in: what each progress bar was told."""

    closed: list[_Bar] = []

    def __init__(self, total=None, desc="", **_):
        self.total, self.desc, self.n = total, desc, 0

    def update(self, n):
        self.n += n

    def refresh(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        _Bar.closed.append(self)


class _Terminal:
    def isatty(self):
        return True

    def write(self, text):
        return len(text)

    def flush(self):
        pass


@pytest.mark.parametrize("mode", ["copy", "reference"])
def test_progress_counts_the_bytes_written_and_ends_at_its_total(mode, tmp_path, monkeypatch):
    """The writing bar's total is the bytes the files hold: in reference mode, not the weights
    the model points at in the checkpoint (it stopped short of its total before), and in copy
    mode the graph and the padding too (it went past it)."""
    real, meta = _real_and_meta(width=64)
    source = _source("directory", real, tmp_path)
    monkeypatch.setattr("tqdm.tqdm", _Bar)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    _Bar.closed = []
    path = tmp_path / "m.onnx"
    fastonnx.export(meta, (_ids(),), path, weights=source, weights_mode=mode, external_data=True)
    (writing,) = [b for b in _Bar.closed if b.desc == "writing"]
    written = os.path.getsize(path) + (os.path.getsize(str(path) + ".data") if os.path.exists(str(path) + ".data") else 0)
    assert writing.total == writing.n == written
    if mode == "reference":
        assert written < os.path.getsize(tmp_path / "model.safetensors") / 2


_GENERATION_SCRIPT = textwrap.dedent(
    """
    import copy, sys, torch, transformers
    from transformers.exporters import ExportedModel
    from transformers.exporters.utils import decompose_prefill_decode
    from fastonnx.__main__ import main

    checkpoint, out = sys.argv[1], sys.argv[2]
    assert main(["export-hf", checkpoint, out, "--generation", "--quiet"]) == 0
    eager = transformers.LlamaForCausalLM.from_pretrained(checkpoint).eval()
    ids = torch.randint(1, 128, (3, 9), generator=torch.Generator().manual_seed(1))
    stages = decompose_prefill_decode(eager, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    loaded = ExportedModel.from_pretrained(out)
    for name in ("prefill", "decode"):
        submodel, inputs = stages[name]
        with torch.no_grad():
            want = submodel(**copy.deepcopy(inputs))
        got = loaded.runners[name](**copy.deepcopy(inputs))
        leaves = lambda x: [t for t in torch.utils._pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]
        assert len(leaves(got)) == len(leaves(want)) > 1, name  # the logits and the cache
        for i, (g, w) in enumerate(zip(leaves(got), leaves(want))):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=lambda m, i=i: f"{name}, tensor {i}: {m}")
        print(name, "matches eager")
    """
)


def test_export_hf_for_generation(tmp_path):
    """``export-hf --generation``: a LLaMA checkpoint written by transformers, built on the meta
    device with its KV cache, exported as transformers' prefill and decode graphs with the
    weights streamed; both run on transformers' ONNX Runtime runner at another batch and prompt
    length than traced and match the eager model loaded from the same checkpoint. In a process
    of its own: transformers' exporter and runner register its cache types with torch's pytrees
    for good, which changes what later tests' exports trace."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "checkpoint")
    out = tmp_path / "exported"
    cmd = [sys.executable, "-c", _GENERATION_SCRIPT, str(tmp_path / "checkpoint"), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-3:] == ["prefill matches eager", "decode matches eager", ""]
    # Nothing a user of the command line cannot act on: transformers' advice to pass explicit
    # dynamic_shapes, torch's lines on the decode step's one query token.
    assert "dynamic_shapes" not in done.stderr and "specialized" not in done.stderr, done.stderr
    assert {"prefill.onnx", "prefill.onnx.data", "decode.onnx", "decode.onnx.data"} <= {p.name for p in out.iterdir()}
    for name in ("prefill", "decode"):
        onnx.checker.check_model(str(out / f"{name}.onnx"), full_check=True)


def test_export_hf_for_generation_refuses_what_does_not_apply(tmp_path):
    transformers = pytest.importorskip("transformers")
    from fastonnx.__main__ import main

    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64
    )
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    with pytest.raises(SystemExit, match="^error: .*--reference does not apply"):
        main(["export-hf", str(tmp_path / "llama"), str(tmp_path / "out"), "--generation", "--reference", "--quiet"])
    encoder = transformers.DistilBertConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, hidden_dim=64)
    transformers.DistilBertModel(encoder).save_pretrained(tmp_path / "encoder")
    with pytest.raises(SystemExit, match="^error: .*--generation exports causal language models"):
        main(["export-hf", str(tmp_path / "encoder"), str(tmp_path / "out"), "--generation", "--quiet"])


def test_a_tensor_the_forward_makes_from_python_values_is_named_on_meta(tmp_path):
    """A list used as an index becomes a constant torch.export lifts; made on the meta device it
    has no value, and the error says so and what to do (not a bare "not in the checkpoint")."""

    class PicksColumns(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x)[:, [3, 0]]

    real = PicksColumns()
    save_file(dict(real.state_dict()), str(tmp_path / "model.safetensors"))
    with torch.device("meta"):
        meta = PicksColumns()
    with pytest.raises(fastonnx.ArgumentError, match="creates from Python values.*with its weights loaded"):
        fastonnx.export(meta, (torch.randn(2, 4),), tmp_path / "m.onnx", weights=tmp_path, verbose=False)
    assert not (tmp_path / "m.onnx").exists()

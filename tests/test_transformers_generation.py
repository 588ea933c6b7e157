"""Language models exported for generation with a KV cache, through transformers' exporters
(``export_for_generation``) with fastonnx as the ONNX step: a prefill and a decode graph per
model, with dynamic batch, sequence and past length, run on transformers' ONNX Runtime runner at
another batch and prompt length than traced, against eager PyTorch."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from models.generation import ARCHITECTURES, ENCODER_DECODER, build, prompt
from support import assert_declared_shapes_hold, check
from transformers.exporters import ExportedModel, OnnxConfig
from transformers.exporters.utils import decompose_prefill_decode, onnx_feed

import fastonnx
from fastonnx import DynamicAxesWarning
from fastonnx.integrations.transformers import FastOnnxExporter

# Traced on a batch of 2 and a prompt of 5; run on a batch of 3 and a prompt of 9.
TRACED, RUN = prompt(2, 5), prompt(3, 9, seed=1)


def _export(model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' notes on Dim.AUTO and version drift
        return FastOnnxExporter().export_for_generation(model, TRACED, OnnxConfig(dynamic=True), **kwargs)


def _dims(program, name: str) -> list:
    value = next(v for v in program.graph.inputs if v.name == name)
    return [d if isinstance(d, int) else str(d) for d in value.shape]


def _assert_dynamic_axes(arch: str, exported) -> None:
    """Batch everywhere; the prompt in the prefill (decoder-only); the past in the decode."""
    for name, component in exported.components.items():
        program = component.program
        for value in program.graph.inputs:
            dims = _dims(program, value.name)
            if not dims:  # a cache's counters (a sliding window's size)
                continue
            assert isinstance(dims[0], str), f"{name}: `{value.name}` has a static batch: {dims}"
            if name == "decode" and value.name.endswith(("keys", "values")):
                assert isinstance(dims[2], str), f"decode: `{value.name}` has a static past length: {dims}"
        if name == "prefill" and arch not in ENCODER_DECODER:
            assert all(isinstance(d, str) for d in _dims(program, "input_ids")), _dims(program, "input_ids")


def _assert_close(got, want, what: str) -> None:
    got = [t for t in torch.utils._pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
    want = [t for t in torch.utils._pytree.tree_leaves(want) if isinstance(t, torch.Tensor)]
    assert len(got) == len(want), f"{what}: {len(got)} tensors, eager gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"{what}: tensor {i} is {g.dtype}, eager gives {w.dtype}"
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-5, msg=lambda m, i=i: f"{what}, tensor {i}: {m}")


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_prefill_and_decode_run_at_another_prompt_length(arch):
    model = build(arch)
    exported = _export(model)
    assert set(exported.components) == {"prefill", "decode"}
    _assert_dynamic_axes(arch, exported)
    stages = decompose_prefill_decode(model, RUN)
    for name in ("prefill", "decode"):
        submodel, inputs = stages[name]
        program = exported.components[name].program
        check(onnx.load(program.meta["path"]))
        with torch.no_grad():
            want = submodel(**copy.deepcopy(inputs))
        got = exported.runners[name](**copy.deepcopy(inputs))
        _assert_close(got, want, f"{arch} {name}")
        names = [v.name for v in program.graph.inputs]
        assert_declared_shapes_hold(onnx.load(program.meta["path"]), onnx_feed(names, inputs))


def test_multi_token_decode_takes_several_tokens():
    """``multi_token_decode``: the decode graph's query axis is dynamic too (a continuation from
    the past, or a prefill on an empty cache)."""
    model = build("llama")
    exported = _export(model, multi_token_decode=True)
    decode = exported.components["decode"].program
    assert all(isinstance(d, str) for d in _dims(decode, "input_ids"))
    stages = decompose_prefill_decode(model, RUN, multi_token_decode=True)
    submodel, inputs = stages["decode"]
    with torch.no_grad():
        want = submodel(**copy.deepcopy(inputs))
    _assert_close(exported.runners["decode"](**copy.deepcopy(inputs)), want, "multi-token decode")


def test_multi_token_decode_graph_alone_runs_the_prompt_on_an_empty_cache():
    """The one graph a caller asks for with ``multi_token_decode=True``: the decode graph also
    runs the prompt, on a cache of no positions (a size torch.export never saw)."""
    model = build("qwen3")
    exported = _export(model, multi_token_decode=True)
    decode = exported.components["decode"].program
    session = ort.InferenceSession(decode.meta["path"], providers=["CPUExecutionProvider"])
    ids = RUN["input_ids"]
    feeds = {}
    for value in session.get_inputs():
        if value.name.endswith(("keys", "values")):
            feeds[value.name] = np.zeros((ids.shape[0], value.shape[1], 0, value.shape[3]), dtype=np.float32)
        elif value.name == "position_ids":
            feeds[value.name] = np.arange(ids.shape[1])[None].repeat(ids.shape[0], 0)
        else:
            feeds[value.name] = RUN[value.name].numpy()
    logits = session.run(["logits"], feeds)[0]
    with torch.no_grad():
        want = model(**RUN).logits
    torch.testing.assert_close(torch.from_numpy(logits), want, rtol=1e-3, atol=1e-5)


def test_saved_export_loads_and_generates(tmp_path):
    """``save_pretrained`` writes each graph beside its weights; ``from_pretrained`` runs them."""
    model = build("qwen2")
    _export(model).save_pretrained(tmp_path)
    assert {"prefill.onnx", "prefill.onnx.data", "decode.onnx", "decode.onnx.data", "export.json"} <= {
        p.name for p in tmp_path.iterdir()}
    loaded = ExportedModel.from_pretrained(tmp_path)
    stages = decompose_prefill_decode(model, RUN)
    for name in ("prefill", "decode"):
        submodel, inputs = stages[name]
        with torch.no_grad():
            want = submodel(**copy.deepcopy(inputs))
        _assert_close(loaded.runners[name](**copy.deepcopy(inputs)), want, f"loaded {name}")


def test_cache_keeps_the_model_dtype():
    """A half-precision model takes and returns its cache in half precision (no casts at the
    graph's edges), and its logits match eager."""
    model = build("llama", torch.float16)
    exported = _export(model)
    decode = exported.components["decode"].program
    for value in list(decode.graph.inputs) + list(decode.graph.outputs):
        if "cache" in value.name:
            assert value.dtype.name == "FLOAT16", f"`{value.name}` is {value.dtype}"


def test_a_batch_of_one_is_said_to_stay_static():
    """torch.export makes an axis traced at size 1 static: a batch of one gives graphs for one
    sequence only, and a warning says so (not the decode step's one query token, by design)."""
    with pytest.warns(DynamicAxesWarning) as caught:
        FastOnnxExporter().export_for_generation(build("gpt2"), prompt(1, 5), OnnxConfig(dynamic=True))
    messages = [str(w.message) for w in caught if issubclass(w.category, DynamicAxesWarning)]
    assert len(messages) == 2  # prefill and decode
    assert all("`input_ids` axis 0" in m and "`input_ids` axis 1" not in m for m in messages)
    assert "`input.cache.layers.0.keys` axis 0" in messages[1]


def test_export_of_one_graph_and_the_options_it_refuses():
    """``export`` makes one graph the same way; what fastonnx does not do is an error that says
    what to change."""
    model = build("gpt2")
    inputs = prompt(2, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = FastOnnxExporter().export(model, dict(inputs), OnnxConfig(dynamic=True))
    with torch.no_grad():
        want = model(**inputs)
    _assert_close(exported(**prompt(2, 5)).logits, want.logits, "export")
    with pytest.raises(fastonnx.ArgumentError, match="ort_fusions"):
        FastOnnxExporter().export(model, dict(inputs), OnnxConfig(dynamic=True, ort_fusions="cpu"))
    with pytest.raises(fastonnx.ArgumentError, match="sets \\['opset_version'\\] itself"):
        FastOnnxExporter(opset_version=17)

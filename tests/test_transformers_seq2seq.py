"""Encoder-decoder language models (t5, bart) exported as Optimum lays them out for onnxruntime
(``export_genai`` on such a model, ``integrations/seq2seq.py``): the encoder run once and the
decoder step by step in onnxruntime, feeding its presents back, at another batch and prompt
length than traced, against eager greedy generation (tokens and logits); the three graphs share
one data file holding each weight once. And ``save_together``, the writer's sharing, on its own."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from models.generation import ENCODER_DECODER, build, prompt
from support import check

import fastonnx
from fastonnx.integrations.checkpoint import export_hf
from fastonnx.integrations.genai import export_genai
from fastonnx.integrations.seq2seq import DATA, DECODER, DECODER_WITH_PAST, ENCODER
from fastonnx.pipeline.result import save_together

# Traced on a batch of 2, an encoder length of 7 and a decoder query of 5 (after a past of 3);
# run on a batch of 3 and a prompt of 4, one token at a time.
RUN = prompt(3, 4, seed=1)
NEW_TOKENS = 6


def _session(path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _external(path: str) -> dict[str, tuple[str, int, int]]:
    """Each initializer stored outside the model: (location, offset, length)."""
    out = {}
    for tensor in onnx.load(path, load_external_data=False).graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entry = {e.key: e.value for e in tensor.external_data}
            out[tensor.name] = (entry["location"], int(entry["offset"]), int(entry["length"]))
    return out


def _greedy_in_onnxruntime(directory: str, inputs: dict[str, torch.Tensor], start: int):
    """Optimum's loop: the encoder once, the first step on decoder_model.onnx, every later one on
    decoder_with_past_model.onnx with the self-attention presents fed back and the first step's
    cross-attention ones. Returns the tokens and each step's logits."""
    encoder, first, later = (_session(os.path.join(directory, f)) for f in (ENCODER, DECODER, DECODER_WITH_PAST))
    mask = inputs["attention_mask"].numpy()
    (hidden,) = encoder.run(None, {"input_ids": inputs["input_ids"].numpy(), "attention_mask": mask})
    ids = np.full((mask.shape[0], 1), start, dtype=np.int64)
    outputs = first.run(None, {"input_ids": ids, "encoder_attention_mask": mask, "encoder_hidden_states": hidden})
    presents = dict(zip([o.name for o in first.get_outputs()], outputs))
    cross = {k.replace("present", "past_key_values"): v for k, v in presents.items() if ".encoder." in k}
    tokens, logits = [], []
    for step in range(NEW_TOKENS):
        logits.append(presents["logits"][:, -1])
        tokens.append(logits[-1].argmax(-1))
        if step == NEW_TOKENS - 1:
            break
        feeds = {"input_ids": tokens[-1][:, None], "encoder_attention_mask": mask, **cross}
        feeds |= {k.replace("present", "past_key_values"): v for k, v in presents.items() if ".decoder." in k}
        presents = dict(zip([o.name for o in later.get_outputs()], later.run(None, feeds)))
    return np.stack(tokens, 1), np.stack(logits, 1)


def _dims(path: str) -> dict[str, list]:
    """Each graph input's and output's dimensions: a name, or a size."""
    graph = onnx.load(path, load_external_data=False).graph
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*graph.input, *graph.output]}


def _assert_optimum_dim_names(directory) -> None:
    """The dimension names of Optimum's seq2seq OnnxConfig (its decoder's present length is the
    same sum, spelled ``past_decoder_sequence_length + decoder_sequence_length`` there)."""
    encoder, first, later = (_dims(str(directory / f)) for f in (ENCODER, DECODER, DECODER_WITH_PAST))
    encoded = ["batch_size", "encoder_sequence_length"]
    assert encoder["input_ids"] == encoder["attention_mask"] == encoder["last_hidden_state"][:2] == encoded
    for graph in (first, later):
        assert graph["input_ids"] == graph["logits"][:2] == ["batch_size", "decoder_sequence_length"]
        assert graph["encoder_attention_mask"] == encoded
    assert first["encoder_hidden_states"][:2] == encoded
    # Each self-attention cache's length by graph, input or output (a cross-attention's is the encoder's).
    lengths = {
        (DECODER, "present"): "decoder_sequence_length",
        (DECODER_WITH_PAST, "past_key_values"): "past_decoder_sequence_length",
        (DECODER_WITH_PAST, "present"): "decoder_sequence_length + past_decoder_sequence_length",
    }
    for f, graph in ((DECODER, first), (DECODER_WITH_PAST, later)):
        caches = [name for name in graph if name.startswith(("past_key_values.", "present."))]
        assert caches
        for name in caches:
            side, _, attention, _ = name.split(".")
            length = "encoder_sequence_length" if attention == "encoder" else lengths[(f, side)]
            assert [graph[name][0], graph[name][2]] == ["batch_size", length], (f, name, graph[name])


def _greedy_eager(model, inputs: dict[str, torch.Tensor]):
    # Every step runs, as in the loop above: no end of sequence (generate takes what a config it is
    # given leaves unset from the model's own, so it is unset there).
    model.generation_config.eos_token_id = model.generation_config.forced_eos_token_id = None
    with torch.no_grad():
        out = model.generate(
            **inputs, do_sample=False, max_new_tokens=NEW_TOKENS, output_logits=True, return_dict_in_generate=True
        )
    return out.sequences[:, 1:].numpy(), torch.stack(out.logits, 1).numpy()


# t5 exported from memory; bart as `python -m fastonnx export-hf CHECKPOINT OUT --genai` does it:
# built on the meta device, its weights streamed from the checkpoint.
@pytest.mark.parametrize("arch, source", [("t5", "memory"), ("bart", "checkpoint")])
def test_encoder_decoder_generates_in_onnxruntime(arch, source, tmp_path):
    assert arch in ENCODER_DECODER
    model = build(arch)
    out = tmp_path / "out"
    if source == "memory":
        export_genai(model, out, verbose=False)
    else:
        model.save_pretrained(tmp_path / "checkpoint")
        export_hf(str(tmp_path / "checkpoint"), str(out), None, False, False, False, genai=True)
    files = [ENCODER, DECODER, DECODER_WITH_PAST, DATA, "config.json", "generation_config.json"]
    assert sorted(os.listdir(out)) == sorted(files)  # no genai_config.json: onnxruntime-genai cannot run it
    for f in (ENCODER, DECODER, DECODER_WITH_PAST):
        check(onnx.load(out / f))
    _assert_optimum_dim_names(out)
    left = sorted(os.listdir(tmp_path))
    assert left == (["out"] if source == "memory" else ["checkpoint", "out"]), f"a temporary directory was left: {left}"

    tokens, logits = _greedy_in_onnxruntime(str(out), RUN, model.config.decoder_start_token_id)
    want_tokens, want_logits = _greedy_eager(model, RUN)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(tokens, want_tokens)

    # One data file, each weight's bytes once in it: the graphs point at the same offsets.
    external = {f: _external(str(out / f)) for f in (ENCODER, DECODER, DECODER_WITH_PAST)}
    assert {loc for graph in external.values() for loc, _, _ in graph.values()} == {DATA}
    regions = {f: {(offset, length) for _, offset, length in graph.values()} for f, graph in external.items()}
    assert regions[DECODER_WITH_PAST] <= regions[DECODER]  # its weights are the first step's
    assert regions[ENCODER] & regions[DECODER], "the encoder and the decoder share no weight (the embedding)"
    size = os.path.getsize(out / DATA)
    unique = sum(length for _, length in set().union(*regions.values()))
    referenced = sum(length for graph in regions.values() for _, length in graph)
    parameters = sum(p.nbytes for p in model.parameters())  # tied ones once
    print(
        f"{arch}: {DATA} {size} bytes; distinct weights {unique}; referenced by the graphs {referenced}; "
        f"the model's parameters {parameters}"
    )
    assert unique <= size <= unique * 1.1 + 64 * len(set().union(*regions.values()))  # alignment only
    assert size < 0.75 * referenced, "weights the graphs share were written more than once"


def test_save_together_writes_each_weight_once(tmp_path):
    """Two graphs of one module that both read a weight transposed (bytes computed while written,
    the weight being too large to fold in memory), one also as it is: each distinct tensor lands
    once in the shared file, and each graph runs from it at a batch other than traced."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(128, 96)

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = linear

        def forward(self, x):
            return self.linear(x) * 2 + self.linear.weight.sum()

    x = torch.randn(2, 3, 128)  # 3-D: a MatMul of the transposed weight, not a Gemm
    batch = {0: torch.export.Dim("batch")}
    first = fastonnx.export(linear, (x,), dynamic_shapes=(batch,), verbose=False)
    second = fastonnx.export(Scaled().eval(), (x,), dynamic_shapes=(batch,), verbose=False)
    paths = {str(tmp_path / "a.onnx"): first, str(tmp_path / "b.onnx"): second}
    save_together(paths, tmp_path / "weights.data")
    assert sorted(os.listdir(tmp_path)) == ["a.onnx", "b.onnx", "weights.data"]
    a, b = (_external(p) for p in paths)
    assert {loc for graph in (a, b) for loc, _, _ in graph.values()} == {"weights.data"}
    assert len(b) == 2 and set(a.values()) < set(b.values()), (a, b)  # the transposed weight, shared
    assert os.path.getsize(tmp_path / "weights.data") == 2 * linear.weight.nbytes
    run = torch.randn(5, 3, 128)
    for path, module in zip(paths, (linear, Scaled())):
        check(onnx.load(path))
        session = _session(path)
        (got,) = session.run(None, {session.get_inputs()[0].name: run.numpy()})
        np.testing.assert_allclose(got, module(run).detach().numpy(), rtol=1e-4, atol=1e-4)

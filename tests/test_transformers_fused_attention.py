"""optimize_for="onnxruntime": attention with a KV cache becomes com.microsoft
GroupQueryAttention where its mask is established (by evaluating it on probe inputs) to be causal
over the padded keys, and stays plain elsewhere with a report line saying why. Each fused graph
runs in onnxruntime at sizes other than traced (prompts on an empty past, single and multi-token
steps, left-padded batches as onnxruntime-genai feeds them) against the same export unfused."""

from __future__ import annotations

import collections
import os

import numpy as np
import onnx
import onnxruntime as ort
import onnxruntime_genai as og
import pytest
import torch
from models.checkpoints import with_special_tokens
from models.generation import VOCAB, build

import fastonnx
import fastonnx.pipeline.export as pipeline_export
from fastonnx.integrations.genai import export_genai

# (architecture, sliding window): mistral's window is shorter than the sequences run below, so
# the fused graph must hide the keys it hides.
ARCHS = [("llama", None), ("qwen2", None), ("qwen3", None), ("mistral", 4)]
# (batch, past, query, left padding per row); traced at batch 2, past 3, query 5.
STEPS = [
    (1, 0, 7, [0]),  # a prompt on an empty past
    (1, 6, 1, [0]),  # one token with a past
    (3, 0, 9, [0, 3, 0]),  # a left-padded batch
    (3, 9, 1, [0, 3, 0]),
    (2, 6, 3, [2, 0]),  # several tokens at once, with a past, in a padded batch
    (1, 11, 2, [0]),
    (1, 0, 13, [0]),
]


def _session(path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(os.fspath(path), options, providers=["CPUExecutionProvider"])


def _feeds(session, batch, past, query, pads, rng) -> dict:
    mask = np.ones((batch, past + query), np.int64)
    for row, pad in enumerate(pads):
        mask[row, :pad] = 0
    feeds = {"input_ids": rng.integers(3, VOCAB, (batch, query)), "attention_mask": mask}
    for value in session.get_inputs():
        if value.name == "position_ids":
            feeds["position_ids"] = np.clip(mask.cumsum(-1) - 1, 0, None)[:, past:]
        elif value.name.startswith("past_key_values."):
            shape = (batch, value.shape[1], past, value.shape[3])
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _export(model, directory, **kwargs) -> dict:
    """export_genai, returning export()'s rewrite report."""
    reports = []
    export = pipeline_export.export

    def recording(*args, **kw):
        result = export(*args, **kw)
        reports.append(result.rewrites)
        return result

    pipeline_export.export = recording
    try:
        export_genai(model, directory, **kwargs)
    finally:
        pipeline_export.export = export
    return reports[0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Per architecture: the model, its plain and its fused directory, and the fusion's report."""
    out = {}
    for arch, window in ARCHS:
        model = with_special_tokens(build(arch))
        if window is not None:
            model.config.sliding_window = window
        root = tmp_path_factory.mktemp(arch)
        _export(model, root / "plain", optimize_for=None)
        report = _export(model, root / "fused", optimize_for="onnxruntime-genai")
        out[arch] = (model, root / "plain", root / "fused", report)
    return out


@pytest.mark.parametrize("arch", [arch for arch, _ in ARCHS])
def test_attention_becomes_group_query_attention_and_computes_the_same(arch, exported):
    model, plain_dir, fused_dir, report = exported[arch]
    layers = model.config.num_hidden_layers
    proto = onnx.load(fused_dir / "model.onnx")
    onnx.checker.check_model(proto, full_check=True)
    ops = collections.Counter(node.op_type for node in proto.graph.node)
    assert ops["GroupQueryAttention"] == layers
    assert ops["Softmax"] == 0
    # (the norms fuse as well: fuse_norms' counts and lines are tested in test_onnxruntime_norms.py)
    assert dict(report["counts"])["GroupQueryAttention"] == layers
    assert dict(report["counts"])["shared KV cache"] == layers
    window = f", window {model.config.sliding_window}" if arch == "mistral" else ""
    # Rotary inside RotaryEmbedding, over tables as long as the context genai serves.
    positions = model.config.max_position_embeddings
    assert [line for line in report["lines"] if line.startswith("attention ")] == [
        f"attention {i}: GroupQueryAttention (num_heads 4, kv_num_heads 2{window}), rotary {positions} positions"
        for i in range(layers)
    ]
    assert ops["RotaryEmbedding"] == 2 * layers
    plain, fused = _session(plain_dir / "model.onnx"), _session(fused_dir / "model.onnx")
    rng = np.random.default_rng(0)
    for step in STEPS:
        feeds = _feeds(plain, *step, rng)
        want, got = plain.run(None, feeds), fused.run(None, feeds)
        for name, w, g in zip([o.name for o in plain.get_outputs()], want, got):
            # Padded positions too: both graphs give them the same values.
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"{name} at {step}")


@pytest.mark.parametrize("arch", [arch for arch, _ in ARCHS])
def test_the_kv_cache_runs_as_one_buffer_shared_by_past_and_present(arch, exported):
    """As onnxruntime-genai runs it with past_present_share_buffer: every past input and its
    present bound to one buffer longer than the sequence, appended to in place, through a
    left-padded batch's prompt, single and multi-token steps (past the sliding window's 4 keys);
    its logits are the plain graph's, whose cache grows by concatenation."""
    _, plain_dir, fused_dir, _ = exported[arch]
    plain, fused = _session(plain_dir / "model.onnx"), _session(fused_dir / "model.onnx")
    pasts = [value for value in plain.get_inputs() if value.name.startswith("past_key_values.")]
    batch, pads, longest = 3, [0, 3, 1], 24
    cache = {p.name: np.zeros((batch, p.shape[1], 0, p.shape[3]), np.float32) for p in pasts}
    buffers = {
        p.name: ort.OrtValue.ortvalue_from_numpy(np.zeros((batch, p.shape[1], longest, p.shape[3]), np.float32))
        for p in pasts
    }
    rng = np.random.default_rng(3)
    total = 0
    for query in [7, 1, 3, 1, 2, 1]:
        mask = np.ones((batch, total + query), np.int64)
        for row, pad in enumerate(pads):
            mask[row, :pad] = 0
        feeds = {
            "input_ids": rng.integers(3, VOCAB, (batch, query)),
            "attention_mask": mask,
            "position_ids": np.clip(mask.cumsum(-1) - 1, 0, None)[:, total:],
        }
        names = [o.name for o in plain.get_outputs()]
        want = dict(zip(names, plain.run(None, feeds | cache)))
        cache = {name.replace("present.", "past_key_values."): want[name] for name in names if name != "logits"}
        binding = fused.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name, buffer in buffers.items():
            binding.bind_ortvalue_input(name, buffer)
            binding.bind_ortvalue_output(name.replace("past_key_values.", "present."), buffer)
        binding.bind_output("logits")
        fused.run_with_iobinding(binding)
        logits = binding.copy_outputs_to_cpu()[-1]
        np.testing.assert_allclose(logits, want["logits"], rtol=1e-4, atol=1e-4, err_msg=f"{arch}, past {total}")
        for name, value in cache.items():  # the buffer holds the cache so far, in place
            np.testing.assert_allclose(buffers[name].numpy()[:, :, : total + query], value, rtol=1e-5, atol=1e-6)
        total += query


def test_a_position_past_the_rotary_tables_is_an_error_not_a_wrong_answer(exported):
    model, _, fused_dir, _ = exported["llama"]
    fused = _session(fused_dir / "model.onnx")
    feeds = _feeds(fused, 1, 0, 3, [0], np.random.default_rng(0))
    fused.run(None, feeds)
    feeds["position_ids"] = feeds["position_ids"] + model.config.max_position_embeddings - 2  # the last is past
    with pytest.raises(Exception, match="out of range"):
        fused.run(None, feeds)


class RotaryAttention(torch.nn.Module):
    """Attention over a KV cache with rotary q and k, whose frequencies are fixed, or chosen by
    all the positions fed (as longrope and dynamic NTK scaling choose them by the longest): a
    table of positions alone cannot hold the second."""

    def __init__(self, by_longest: bool):
        super().__init__()
        torch.manual_seed(0)
        self.by_longest = by_longest
        self.qkv = torch.nn.Linear(32, 96)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8), persistent=False)

    def forward(self, x, attention_mask, position_ids, past_key, past_value):
        batch, query, _ = x.shape
        q, k, v = (t.view(batch, query, 4, 8).transpose(1, 2) for t in self.qkv(x).split(32, -1))
        inv_freq = self.inv_freq
        if self.by_longest:
            # (a sum, which the probes evaluate, for longrope's max)
            inv_freq = inv_freq * torch.where(position_ids.sum() >= 8, 0.25, 1.0)
        freqs = position_ids[..., None].float() * inv_freq
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]

        def rotate(t):
            return torch.cat([-t[..., 4:], t[..., :4]], -1)

        q, k = q * cos + rotate(q) * sin, k * cos + rotate(k) * sin
        key, value = torch.cat([past_key, k], 2), torch.cat([past_value, v], 2)
        total = key.shape[2]
        positions = torch.arange(query) + (total - query)
        mask = attention_mask.bool()[:, None, None, :] & (torch.arange(total)[None, :] <= positions[:, None])
        out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=mask)
        return out.transpose(1, 2).reshape(batch, query, 32), key, value


@pytest.mark.parametrize("by_longest", [False, True])
def test_rotary_tables_only_for_frequencies_of_each_position_alone(by_longest, tmp_path):
    args = (torch.randn(2, 5, 32), torch.ones(2, 8, dtype=torch.long), torch.arange(3, 8).expand(2, 5),
            torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8))
    auto = torch.export.Dim.AUTO
    dynamic = ({0: auto, 1: auto}, {0: auto, 1: auto}, {0: auto, 1: auto}, {0: auto, 2: auto}, {0: auto, 2: auto})
    names = ["x", "attention_mask", "position_ids", "past_key", "past_value"]
    model = RotaryAttention(by_longest)
    kwargs = dict(input_names=names, dynamic_shapes=dynamic)
    result = fastonnx.export(model, args, tmp_path / "fused.onnx", optimize_for="onnxruntime", max_positions=32,
                             **kwargs)
    fastonnx.export(model, args, tmp_path / "plain.onnx", **kwargs)
    if by_longest:
        assert result.rewrites["lines"] == [
            "attention 0: GroupQueryAttention (num_heads 4, kv_num_heads 4); rotary left in the graph: cos and sin "
            "at a position depend on more than that position"
        ]
    else:
        assert result.rewrites["lines"] == [
            "attention 0: GroupQueryAttention (num_heads 4, kv_num_heads 4), rotary 32 positions"
        ]
    plain, fused = _session(tmp_path / "plain.onnx"), _session(tmp_path / "fused.onnx")
    rng = np.random.default_rng(2)
    for batch, past, query in [(1, 0, 3), (1, 0, 6), (3, 5, 1), (1, 9, 3), (2, 20, 4)]:  # few and many positions
        feeds = {
            "x": rng.standard_normal((batch, query, 32)).astype(np.float32),
            "attention_mask": np.ones((batch, past + query), np.int64),
            "position_ids": np.broadcast_to(np.arange(past, past + query), (batch, query)).copy(),
            "past_key": rng.standard_normal((batch, 4, past, 8)).astype(np.float32),
            "past_value": rng.standard_normal((batch, 4, past, 8)).astype(np.float32),
        }
        for w, g in zip(plain.run(None, feeds), fused.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{batch, past, query}")


def test_max_positions_goes_with_optimize_for(tmp_path):
    with pytest.raises(fastonnx.ArgumentError, match="pass optimize_for='onnxruntime' too"):
        _export_cached(True, tmp_path / "m.onnx", max_positions=64)
    with pytest.raises(fastonnx.ArgumentError, match="max_positions is None or a positive int"):
        _export_cached(True, tmp_path / "m.onnx", "onnxruntime", max_positions=0)


def test_onnxruntime_genai_runs_the_fused_graph_to_eager_greedy_tokens(exported):
    model, _, fused_dir, _ = exported["llama"]
    prompt = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10, min_new_tokens=10, do_sample=False
        )
    og_model = og.Model(str(fused_dir))
    params = og.GeneratorParams(og_model)
    params.set_search_options(max_length=17, min_length=17, do_sample=False, batch_size=2)
    generator = og.Generator(og_model, params)
    generator.append_tokens(prompt.numpy())
    while not generator.is_done():
        generator.generate_next_token()
    assert [list(generator.get_sequence(i))[7:] for i in range(2)] == want[:, 7:].tolist()


class CachedAttention(torch.nn.Module):
    """One attention over a KV cache whose mask is causal with padding, or only padding (a
    query sees later keys: not what GroupQueryAttention computes)."""

    def __init__(self, causal: bool):
        super().__init__()
        torch.manual_seed(0)
        self.causal = causal
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x, attention_mask, past_key, past_value):
        batch, query, _ = x.shape
        q, k, v = (t.view(batch, query, 4, 8).transpose(1, 2) for t in self.qkv(x).split(32, -1))
        key, value = torch.cat([past_key, k], 2), torch.cat([past_value, v], 2)
        total = key.shape[2]
        mask = attention_mask.bool()[:, None, None, :].expand(batch, 1, query, total)
        if self.causal:
            positions = torch.arange(query) + (total - query)
            mask = mask & (torch.arange(total)[None, :] <= positions[:, None])
        out = torch.nn.functional.scaled_dot_product_attention(q, key, value, attn_mask=mask)
        return out.transpose(1, 2).reshape(batch, query, 32), key, value


def _export_cached(causal: bool, path, optimize_for=None, **kwargs):
    args = (torch.randn(2, 5, 32), torch.ones(2, 8, dtype=torch.long), torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8))
    auto = torch.export.Dim.AUTO  # the mask's length is the past's plus the query's
    dynamic = ({0: auto, 1: auto}, {0: auto, 1: auto}, {0: auto, 2: auto}, {0: auto, 2: auto})
    return fastonnx.export(
        CachedAttention(causal),
        args,
        path,
        input_names=["x", "attention_mask", "past_key", "past_value"],
        dynamic_shapes=dynamic,
        optimize_for=optimize_for,
        **kwargs,
    )


def test_a_mask_that_is_not_causal_stays_plain_and_a_causal_one_fuses(tmp_path):
    result = _export_cached(False, tmp_path / "bidirectional.onnx", "onnxruntime")
    assert result.rewrites == {
        "counts": [],
        "lines": ["attention 0: left plain: the mask lets a query see a padded or a later key"],
    }
    assert "GroupQueryAttention" not in {n.op_type for n in onnx.load(tmp_path / "bidirectional.onnx").graph.node}

    result = _export_cached(True, tmp_path / "causal.onnx", "onnxruntime")
    assert result.rewrites["lines"] == ["attention 0: GroupQueryAttention (num_heads 4, kv_num_heads 4)"]
    _export_cached(True, tmp_path / "plain.onnx")
    plain, fused = _session(tmp_path / "plain.onnx"), _session(tmp_path / "causal.onnx")
    rng = np.random.default_rng(1)
    for batch, past, query, pads in [(1, 0, 6, [0]), (3, 5, 1, [0, 2, 0]), (2, 4, 3, [1, 0])]:
        mask = np.ones((batch, past + query), np.int64)
        for row, pad in enumerate(pads):
            mask[row, :pad] = 0
        feeds = {
            "x": rng.standard_normal((batch, query, 32)).astype(np.float32),
            "attention_mask": mask,
            "past_key": rng.standard_normal((batch, 4, past, 8)).astype(np.float32),
            "past_value": rng.standard_normal((batch, 4, past, 8)).astype(np.float32),
        }
        for w, g in zip(plain.run(None, feeds), fused.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)

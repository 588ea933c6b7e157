"""export(quantize=fastonnx.Quantization(form="DequantizeLinear")): the quantized MatMul weights
as standard ONNX, opset 21's blocked DequantizeLinear of int4 (or int8) values feeding the MatMul.

The values and scales in each file are checked against the documented rule computed here in
numpy from the float weights, exactly; each model runs in onnxruntime (at sizes other than the
traced ones) against a reference computed with the dequantized weights (q * s), with onnxruntime
asked to compute with them exactly (its fused MatMulNBits at accuracy level 0), so "close" means
only float rounding."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from models.quantize_nets import Mlp, TiedLm
from onnx import numpy_helper
from safetensors.torch import save_file

import fastonnx

OPSET = 21
BLOCK = 32


def _quantization(bits: int = 4, **kwargs) -> fastonnx.Quantization:
    return fastonnx.Quantization(bits=bits, form="DequantizeLinear", **kwargs)


def _rule(w: np.ndarray, bits: int, scale_dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """The documented rule for W [N, K]: q [N, K] and the scales [N, blocks] (as stored, in
    float32). Per block of 32 along K: m the weight of largest magnitude (the first, its sign
    kept), s = m / -2^(bits-1) in the scales' dtype, q = clip(round_half_even(w / s)); 0 where s = 0."""
    n, k = w.shape
    blocks = -(-k // BLOCK)
    padded = np.zeros((n, blocks * BLOCK), np.float32)
    padded[:, :k] = w
    padded = padded.reshape(n, blocks, BLOCK)
    m = np.take_along_axis(padded, np.abs(padded).argmax(-1)[..., None], -1)[..., 0]
    zero = 1 << (bits - 1)
    s = (m / np.float32(-zero)).astype(scale_dtype).astype(np.float32)
    safe = np.where(s == 0, np.float32(1), s)[..., None]
    q = np.where(s[..., None] == 0, 0, np.clip(np.rint(padded / safe), -zero, zero - 1))
    return q.reshape(n, -1)[:, :k].astype(np.int8), s


def _dequantized(w: np.ndarray, bits: int, scale_dtype=np.float32) -> np.ndarray:
    """W [N, K] as the rule quantizes it: q * s."""
    q, s = _rule(w, bits, scale_dtype)
    return q.astype(np.float32) * np.repeat(s, BLOCK, axis=1)[:, : w.shape[1]]


def _session(path, optimized=None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    # onnxruntime fuses DequantizeLinear -> MatMul into MatMulNBits at accuracy level 4 (int8
    # activations) unless told; 0 computes with the dequantized weights.
    options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _checked(path) -> onnx.ModelProto:
    """The file, which onnx's checker accepts and which holds standard ONNX only."""
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node), [n.domain for n in model.graph.node]
    assert [o.domain for o in model.opset_import if o.domain not in ("", "ai.onnx")] == []
    return model


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {i.name: i for i in model.graph.initializer}


def _check_quantized(inits: dict, name: str, w: np.ndarray, bits: int, scale_dtype=np.float32) -> None:
    """`name`'s values and scales in the file are the rule's, in DequantizeLinear's [K, N] layout."""
    values, scales = inits[f"{name}_Q{bits}"], inits[f"{name}_scales"]
    assert values.data_type == (onnx.TensorProto.INT4 if bits == 4 else onnx.TensorProto.INT8)
    q, s = _rule(w, bits, scale_dtype)
    assert list(values.dims) == [w.shape[1], w.shape[0]] and list(scales.dims) == [s.shape[1], s.shape[0]]
    if bits == 4:
        assert len(values.raw_data) == (w.size + 1) // 2
    np.testing.assert_array_equal(numpy_helper.to_array(values), q.T, err_msg=name)
    np.testing.assert_array_equal(numpy_helper.to_array(scales).astype(np.float32), s.T, err_msg=name)


def _dequantize_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "DequantizeLinear"]


def _export_mlp(model, dtype, path, quantization):
    return fastonnx.export(
        model,
        (torch.randn(2, 3, 40, dtype=dtype),),
        path,
        input_names=["x"],
        dynamic_axes={"x": {0: "batch", 1: "seq"}},
        opset_version=OPSET,
        quantize=quantization,
    )


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dequantize_linear_is_the_dequantized_weights_product(bits, dtype, tmp_path):
    torch.manual_seed(0)
    model = Mlp().eval().to(dtype)
    path = tmp_path / "m.onnx"
    result = _export_mlp(model, dtype, path, _quantization(bits))
    assert result.rewrites["counts"] == [(f"DequantizeLinear (int{bits})", 2)]
    proto = _checked(path)
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("DequantizeLinear") == 2 and ops.count("MatMul") == 2 and "MatMulNBits" not in ops
    for node in _dequantize_nodes(proto):
        assert {a.name: a.i for a in node.attribute} == {"axis": 0, "block_size": BLOCK}
    inits = _initializers(proto)
    assert "up.weight" not in inits and "down.weight" not in inits  # the float weights are not written
    np_dtype = np.float16 if dtype == torch.float16 else np.float32
    for name, layer in (("up.weight", model.up), ("down.weight", model.down)):
        _check_quantized(inits, name, layer.weight.detach().float().numpy(), bits, np_dtype)
        assert inits[f"{name}_scales"].data_type == (
            onnx.TensorProto.FLOAT16 if dtype == torch.float16 else onnx.TensorProto.FLOAT
        )

    x = torch.randn(5, 7, 40, dtype=dtype)  # other sizes than the traced [2, 3]
    (y,) = _session(path, tmp_path / "optimized.onnx").run(None, {"x": x.numpy()})
    up = _dequantized(model.up.weight.detach().float().numpy(), bits, np_dtype)
    down = _dequantized(model.down.weight.detach().float().numpy(), bits, np_dtype)
    h = x.float().numpy() @ up.T + model.up.bias.detach().float().numpy()
    h = np.maximum(h, 0).astype(np_dtype).astype(np.float32)
    reference = h @ down.T
    tolerance = 2e-3 if dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(y.astype(np.float32), reference, rtol=tolerance, atol=tolerance)
    # standard ONNX that onnxruntime runs as its own MatMulNBits: both DequantizeLinear fused
    optimized = [n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node]
    assert optimized.count("MatMulNBits") == 2 and "DequantizeLinear" not in optimized, optimized


@pytest.mark.parametrize("bits", [4, 8])
def test_same_outputs_as_matmulnbits(bits, tmp_path):
    """The two forms hold the same quantized weights: onnxruntime computes the same outputs from
    either (MatMulNBits at accuracy level 0)."""
    torch.manual_seed(0)
    model = Mlp().eval()
    _export_mlp(model, torch.float32, tmp_path / "dq.onnx", _quantization(bits))
    _export_mlp(model, torch.float32, tmp_path / "nbits.onnx", fastonnx.Quantization(bits=bits, accuracy_level=0))
    assert "MatMulNBits" in [n.op_type for n in onnx.load(str(tmp_path / "nbits.onnx")).graph.node]
    x = torch.randn(4, 9, 40)
    (dq,) = _session(tmp_path / "dq.onnx").run(None, {"x": x.numpy()})
    (nbits,) = _session(tmp_path / "nbits.onnx").run(None, {"x": x.numpy()})
    np.testing.assert_allclose(dq, nbits, rtol=1e-5, atol=1e-5)


class OddWidths(torch.nn.Module):
    """Output widths N that are odd (a row of int4 values ends inside a byte, so ONNX's packing
    runs across rows), a Linear's weight (read along K) and a [K, N] parameter (read along N)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(40, 7)
        self.b = torch.nn.Parameter(torch.randn(64, 5))
        self.c = torch.nn.Linear(7, 3, bias=False)

    def forward(self, x, y):
        return self.c(self.a(x)), y @ self.b


@pytest.mark.parametrize("bits", [4, 8])
def test_odd_output_widths(bits, tmp_path):
    torch.manual_seed(0)
    model = OddWidths().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.randn(2, 3, 40), torch.randn(2, 3, 64)),
        path,
        input_names=["x", "y"],
        dynamic_axes={"x": {0: "b", 1: "s"}, "y": {0: "b", 1: "s"}},
        opset_version=OPSET,
        quantize=_quantization(bits),
    )
    assert result.rewrites["counts"] == [(f"DequantizeLinear (int{bits})", 3)]
    proto = _checked(path)
    inits = _initializers(proto)
    weights = {
        "a.weight": model.a.weight.detach().numpy(),
        "b": model.b.detach().numpy().T,
        "c.weight": model.c.weight.detach().numpy(),
    }
    # c's weight, small enough to be transposed when folded, keeps no name of its own ("weight")
    values = {tuple(inits[n.input[0]].dims): n.input[0] for n in _dequantize_nodes(proto)}
    names = {"a.weight": "a.weight", "b": "b", "c.weight": values[(7, 3)].removesuffix(f"_Q{bits}")}
    for name, w in weights.items():
        _check_quantized(inits, names[name], w, bits)
    x, y = torch.randn(3, 5, 40), torch.randn(3, 5, 64)
    out_x, out_y = _session(path).run(None, {"x": x.numpy(), "y": y.numpy()})
    a = x.numpy() @ _dequantized(weights["a.weight"], bits).T + model.a.bias.detach().numpy()
    np.testing.assert_allclose(out_x, a @ _dequantized(weights["c.weight"], bits).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out_y, y.numpy() @ _dequantized(weights["b"], bits).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head_bits", [None, 8, 0])
def test_lm_head_bits_a_tied_embedding_and_a_gemm(head_bits, tmp_path):
    torch.manual_seed(0)
    model = TiedLm().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.tensor([[1, 2, 3]]),),
        path,
        input_names=["ids"],
        dynamic_axes={"ids": {0: "b", 1: "s"}},
        opset_version=OPSET,
        quantize=_quantization(4, head_bits=head_bits),
    )
    proto = _checked(path)
    inits = _initializers(proto)
    assert "embed.weight" in inits  # the Gather still reads the float table
    gemm = next(n for n in proto.graph.node if n.op_type == "Gemm")
    assert {a.name: a.i for a in gemm.attribute if a.name.startswith("trans")}.get("transB", 0) == 0
    assert gemm.input[1] == "mix.weight_dequantized" and gemm.input[2] == "mix.bias"
    _check_quantized(inits, "mix.weight", model.mix.weight.detach().numpy(), 4)
    embed = model.embed.weight.detach().numpy()
    counts = dict(result.rewrites["counts"])
    if head_bits == 0:
        assert counts == {"DequantizeLinear (int4)": 1}
        assert any("LM head" in line for line in result.rewrites["lines"])
        head = embed
    else:
        head_q = head_bits or 4
        assert counts == (
            {"DequantizeLinear (int4)": 2}
            if head_q == 4
            else {"DequantizeLinear (int4)": 1, "DequantizeLinear (int8)": 1}
        )
        _check_quantized(inits, "embed.weight", embed, head_q)
        head = _dequantized(embed, head_q)
    ids = torch.tensor([[5, 9, 63, 0, 2], [7, 7, 1, 4, 3]])
    (y,) = _session(path, tmp_path / "optimized.onnx").run(None, {"ids": ids.numpy()})
    optimized = [n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node]
    assert "DequantizeLinear" not in optimized and "Gemm" not in optimized, optimized  # the Gemm's fused too
    x = embed[ids.numpy()].reshape(-1, 32)
    h = np.tanh(x @ _dequantized(model.mix.weight.detach().numpy(), 4).T + model.mix.bias.detach().numpy())
    np.testing.assert_allclose(y, h @ head.T, rtol=1e-5, atol=1e-5)


def test_tiny_llama(tmp_path):
    """A LLaMA (random weights): every projection and the LM head read through a DequantizeLinear;
    logits at other batch and sequence sizes than traced are those of the same model whose Linear
    weights are the dequantized ones."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, tie_word_embeddings=False, use_cache=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path / "llama.onnx"
    result = fastonnx.export(
        model,
        (torch.tensor([[1, 5, 9, 2, 7], [4, 4, 8, 1, 3]]),),
        path,
        input_names=["input_ids"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}},
        opset_version=OPSET,
        quantize=_quantization(4),
    )
    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert len(linears) == 7 * 2 + 1
    assert result.rewrites["counts"] == [("DequantizeLinear (int4)", len(linears))]
    inits = _initializers(_checked(path))
    reference = copy.deepcopy(model)
    for name, linear in linears.items():
        w = linear.weight.detach().numpy()
        _check_quantized(inits, f"{name}.weight", w, 4)
        reference.get_submodule(name).weight = torch.nn.Parameter(torch.from_numpy(_dequantized(w, 4)))
    session = _session(path, tmp_path / "optimized.onnx")
    fused = [n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node].count("MatMulNBits")
    assert fused == len(linears)
    for ids in (torch.randint(0, 128, (3, 9)), torch.tensor([[11]])):
        (logits,) = session.run(None, {"input_ids": ids.numpy()})
        with torch.no_grad():
            want = reference(ids).logits.numpy()
        np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-4)


def test_streamed_checkpoint_quantizes_as_the_model_in_memory(tmp_path):
    """A meta model whose float32 weights stream from safetensors, cast to float16 on the way, is
    quantized from the checkpoint's bytes exactly as the same model cast in memory is."""
    torch.manual_seed(0)
    real = Mlp(128, 96, 65).eval()  # N odd: 4-bit values packed across rows
    with torch.device("meta"):
        meta = Mlp(128, 96, 65).eval()
    weights = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in real.state_dict().items()}, str(weights))
    q = _quantization(4)
    x = torch.randn(2, 128).half()
    options = {"opset_version": OPSET, "quantize": q, "input_names": ["x"], "dynamic_axes": {"x": {0: "b"}}}
    fastonnx.export(copy.deepcopy(real).half(), (x,), tmp_path / "mem.onnx", **options)
    fastonnx.export(meta, (x,), tmp_path / "streamed.onnx", weights=weights, dtype=torch.float16, **options)
    mem, streamed = _initializers(_checked(tmp_path / "mem.onnx")), _initializers(_checked(tmp_path / "streamed.onnx"))
    assert sorted(mem) == sorted(streamed)
    for name, value in mem.items():
        np.testing.assert_array_equal(numpy_helper.to_array(streamed[name]), numpy_helper.to_array(value), name)
    for name, layer in (("up.weight", real.up), ("down.weight", real.down)):
        _check_quantized(streamed, name, layer.weight.detach().half().float().numpy(), 4, np.float16)
    x2 = torch.randn(5, 128).half()
    (y,) = _session(tmp_path / "streamed.onnx").run(None, {"x": x2.numpy()})
    up = _dequantized(real.up.weight.detach().half().float().numpy(), 4, np.float16)
    down = _dequantized(real.down.weight.detach().half().float().numpy(), 4, np.float16)
    h = x2.float().numpy() @ up.T + real.up.bias.detach().half().float().numpy()
    h = np.maximum(h, 0).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), h @ down.T, rtol=2e-3, atol=2e-3)


def test_external_data_holds_the_packed_values(tmp_path):
    """Written to an external data file, an int4 tensor takes ceil(numel / 2) bytes there."""
    torch.manual_seed(0)
    model = Mlp(128, 96, 65).eval()  # N odd: 4-bit values packed across rows
    path = tmp_path / "m.onnx"
    x = torch.randn(2, 128)
    fastonnx.export(model, (x,), path, opset_version=OPSET, quantize=_quantization(4), external_data=True)
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path), load_external_data=False)
    lengths = {
        i.name: int({e.key: e.value for e in i.external_data}["length"])
        for i in proto.graph.initializer
        if i.external_data
    }
    assert lengths["down.weight_Q4"] == (96 * 65 + 1) // 2 and lengths["up.weight_Q4"] == 128 * 96 // 2
    inits = _initializers(onnx.load(str(path)))
    _check_quantized(inits, "down.weight", model.down.weight.detach().numpy(), 4)
    (y,) = _session(path).run(None, {proto.graph.input[0].name: x.numpy()})
    h = np.maximum(x.numpy() @ _dequantized(model.up.weight.detach().numpy(), 4).T + model.up.bias.detach().numpy(), 0)
    np.testing.assert_allclose(y, h @ _dequantized(model.down.weight.detach().numpy(), 4).T, rtol=1e-5, atol=1e-5)


def test_bad_form_and_an_opset_before_21():
    model, x = Mlp().eval(), torch.randn(2, 40)
    with pytest.raises(fastonnx.ArgumentError, match="form is one of 'MatMulNBits', 'DequantizeLinear', got 'QDQ'"):
        fastonnx.Quantization(form="QDQ")
    for opset in (None, 20):
        with pytest.raises(fastonnx.ArgumentError, match="opset_version=21 or more"):
            fastonnx.export(model, (x,), opset_version=opset, quantize=_quantization(4))
    # GatherBlockQuantized is onnxruntime's op: standard ONNX keeps the embeddings float.
    with pytest.raises(fastonnx.ArgumentError, match="embedding_bits=4 writes com.microsoft GatherBlockQuantized"):
        fastonnx.Quantization(form="DequantizeLinear", embedding_bits=4)

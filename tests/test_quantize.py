"""export(quantize=...): MatMul weights as onnxruntime's MatMulNBits, quantized while written.

Each quantized file is checked against a reference computed here from the file's own quantized
values and scales (dequantized in numpy), so "close" means exactly what round-to-nearest allows;
the codes themselves are recomputed from the float weights with the documented rule and must be
equal, bit for bit. Every model runs in onnxruntime at sizes other than the traced ones."""

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

# accuracy_level 0: onnxruntime computes with the dequantized weights in the activations' type,
# so its result is the dequantized reference's up to float rounding.
EXACT = 0


def _initializers(path) -> dict[str, np.ndarray]:
    model = onnx.load(str(path))
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _codes(blob: np.ndarray, bits: int) -> np.ndarray:
    """MatMulNBits' B [N, blocks, bytes] unpacked to its codes [N, blocks, block]."""
    if bits == 8:
        return blob.astype(np.int32)
    return np.stack([blob & 15, blob >> 4], axis=-1).reshape(blob.shape[0], blob.shape[1], -1).astype(np.int32)


def _expected_codes(w: np.ndarray, bits: int, block: int, scale_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The documented rule (Quantization's docstring), in numpy: the scales and codes of W [N, K]."""
    n, k = w.shape
    blocks = -(-k // block)
    padded = np.zeros((n, blocks * block), np.float32)
    padded[:, :k] = w
    padded = padded.reshape(n, blocks, block)
    largest = np.take_along_axis(padded, np.abs(padded).argmax(-1)[..., None], -1)[..., 0]
    zero = 1 << (bits - 1)
    scales = (largest / np.float32(-zero)).astype(scale_dtype).astype(np.float32)
    inverse = np.where(scales == 0, np.float32(0), np.float32(1) / np.where(scales == 0, 1, scales))
    codes = np.clip(np.rint(padded * inverse[..., None]), -zero, zero - 1).astype(np.int32) + zero
    return scales, codes


def _dequantized(inits: dict, name: str, bits: int, k: int) -> np.ndarray:
    """W [N, K] as the file holds it: (code - 2^(bits-1)) * scale."""
    codes = _codes(inits[f"{name}_Q{bits}"], bits)
    scales = inits[f"{name}_scales"].astype(np.float32)
    w = (codes - (1 << (bits - 1))).astype(np.float32) * scales[..., None]
    return w.reshape(w.shape[0], -1)[:, :k]


def _session(path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _ops(path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node]


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmulnbits_is_the_dequantized_weights_product(bits, dtype, tmp_path):
    torch.manual_seed(0)
    model = Mlp().eval().to(dtype)
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.randn(2, 3, 40, dtype=dtype),),
        path,
        input_names=["x"],
        dynamic_axes={"x": {0: "batch", 1: "seq"}},
        quantize=fastonnx.Quantization(bits=bits, accuracy_level=EXACT),
    )
    assert _ops(path) == ["MatMulNBits", "Relu", "MatMulNBits"]
    assert result.native.rewrites["counts"] == [(f"MatMulNBits (int{bits})", 2)]
    inits = _initializers(path)
    assert "up.weight" not in inits and "down.weight" not in inits  # the float weights are not written
    np_dtype = np.float16 if dtype == torch.float16 else np.float32
    for name, layer in (("up.weight", model.up), ("down.weight", model.down)):
        w = layer.weight.detach().float().numpy()
        scales, codes = _expected_codes(w, bits, 32, np_dtype)
        np.testing.assert_array_equal(inits[f"{name}_scales"].astype(np.float32), scales)
        np.testing.assert_array_equal(_codes(inits[f"{name}_Q{bits}"], bits), codes)
        # round to nearest: no weight is further than half a step from its value, except the one a
        # positive block maximum clamps to 2^(bits-1) - 1 (a whole step)
        error = np.abs(_dequantized(inits, name, bits, w.shape[1]) - w)
        assert (error <= np.abs(scales).repeat(32, 1)[:, : w.shape[1]] * 1.0001).all()

    x = torch.randn(5, 7, 40, dtype=dtype)  # other sizes than the traced [2, 3]
    (y,) = _session(path).run(None, {"x": x.numpy()})
    h = x.float().numpy() @ _dequantized(inits, "up.weight", bits, 40).T + model.up.bias.detach().float().numpy()
    h = np.maximum(h, 0).astype(np_dtype).astype(np.float32)
    reference = h @ _dequantized(inits, "down.weight", bits, 96).T
    tolerance = 2e-3 if dtype == torch.float16 else 1e-5
    np.testing.assert_allclose(y.astype(np.float32), reference, rtol=tolerance, atol=tolerance)


def test_default_accuracy_level_runs_int8_activations_close_to_the_reference(tmp_path):
    torch.manual_seed(0)
    model = Mlp().eval()
    path = tmp_path / "m.onnx"
    fastonnx.export(
        model, (torch.randn(2, 40),), path, input_names=["x"], dynamic_axes={"x": {0: "b"}}, quantize="int4"
    )
    node = onnx.load(str(path)).graph.node[0]
    assert {a.name: a.i for a in node.attribute}["accuracy_level"] == 4
    inits = _initializers(path)
    x = torch.randn(6, 40)
    (y,) = _session(path).run(None, {"x": x.numpy()})
    h = np.maximum(x.numpy() @ _dequantized(inits, "up.weight", 4, 40).T + model.up.bias.detach().numpy(), 0)
    reference = h @ _dequantized(inits, "down.weight", 4, 96).T
    # int8 activations per block of 32: a relative error of about 1/127 per block
    np.testing.assert_allclose(y, reference, rtol=0, atol=0.02 * np.abs(reference).max())


@pytest.mark.parametrize("head_bits", [None, 8, 0])
def test_lm_head_bits_and_a_tied_embedding(head_bits, tmp_path):
    torch.manual_seed(0)
    model = TiedLm().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.tensor([[1, 2, 3]]),),
        path,
        input_names=["ids"],
        dynamic_axes={"ids": {0: "b", 1: "s"}},
        quantize=fastonnx.Quantization(bits=4, accuracy_level=EXACT, head_bits=head_bits, embedding_bits=0),
    )
    ops = _ops(path)
    inits = _initializers(path)
    assert "embed.weight" in inits  # the Gather still reads the float table (embedding_bits=0)
    ids = torch.tensor([[5, 9, 63, 0, 2], [7, 7, 1, 4, 3]])
    (y,) = _session(path).run(None, {"ids": ids.numpy()})
    x = model.embed.weight.detach().numpy()[ids.numpy()].reshape(-1, 32)
    h = np.tanh(x @ _dequantized(inits, "mix.weight", 4, 32).T + model.mix.bias.detach().numpy())
    if head_bits == 0:
        assert ops.count("MatMulNBits") == 1
        assert any("LM head" in line for line in result.native.rewrites["lines"])
        reference = h @ model.embed.weight.detach().numpy().T
    else:
        assert ops.count("MatMulNBits") == 2
        reference = h @ _dequantized(inits, "embed.weight", head_bits or 4, 32).T
    np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)


def _embedding_codes(data: np.ndarray, bits: int, block: int) -> np.ndarray:
    """GatherBlockQuantized's uint8 data [rows, width * bits / 8] as MatMulNBits' blobs [rows, blocks, bytes]."""
    return _codes(data.reshape(data.shape[0], -1, block * bits // 8), bits)


@pytest.mark.parametrize(
    ("embedding_bits", "head_bits", "expected_bits"),
    [(None, None, 4), (None, 8, 8), (None, 0, 0), (4, 0, 4), (8, None, 8), (0, None, 0)],
)
def test_token_embeddings_as_gather_block_quantized(embedding_bits, head_bits, expected_bits, tmp_path):
    """The token embeddings' Gather as GatherBlockQuantized over the same blocks and codes as
    MatMulNBits (recomputed here by the documented rule, bit for bit): by default where the LM
    head reads the same table (tied) and is quantized, with its bits, the bytes then written once;
    or with the bits asked. The graph at other sizes gives the model over the dequantized table."""
    torch.manual_seed(0)
    model = TiedLm().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.tensor([[1, 2, 3]]),),
        path,
        input_names=["ids"],
        dynamic_axes={"ids": {0: "b", 1: "s"}},
        external_data=True,
        quantize=fastonnx.Quantization(
            bits=4, accuracy_level=EXACT, head_bits=head_bits, embedding_bits=embedding_bits
        ),
    )
    onnx.checker.check_model(str(path), full_check=True)
    ops = _ops(path)
    inits = _initializers(path)
    table = model.embed.weight.detach().numpy()
    if expected_bits:
        assert ops.count("GatherBlockQuantized") == 1 and "Gather" not in ops
        assert dict(result.native.rewrites["counts"])[f"GatherBlockQuantized (int{expected_bits})"] == 1
        data = inits[f"embed.weight_embedding_Q{expected_bits}"]
        assert data.dtype == np.uint8 and data.shape == (64, 32 * expected_bits // 8)
        scales, codes = _expected_codes(table, expected_bits, 32, np.float32)
        np.testing.assert_array_equal(inits["embed.weight_embedding_scales"], scales)
        np.testing.assert_array_equal(_embedding_codes(data, expected_bits, 32), codes)
        embedded = ((codes - (1 << (expected_bits - 1))) * scales[..., None]).reshape(64, 32)
    else:
        assert "GatherBlockQuantized" not in ops and "Gather" in ops
        embedded = table
    ids = torch.tensor([[5, 9, 63, 0, 2], [7, 7, 1, 4, 3]])
    (y,) = _session(path).run(None, {"ids": ids.numpy()})
    x = embedded[ids.numpy()].reshape(-1, 32)
    h = np.tanh(x @ _dequantized(inits, "mix.weight", 4, 32).T + model.mix.bias.detach().numpy())
    reference = h @ table.T if head_bits == 0 else h @ _dequantized(inits, "embed.weight", head_bits or 4, 32).T
    np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
    # The float table is written only where a Gather or the head still reads it.
    float_tables = [a for a in inits.values() if a.dtype == np.float32 and a.size == table.size]
    assert bool(float_tables) == (head_bits == 0 or not expected_bits)


def test_a_tied_table_and_head_share_their_quantized_bytes(tmp_path):
    """A table large enough to be read where the model holds it (above the size the clean-up folds
    eagerly): the head's MatMulNBits blobs and scales and the GatherBlockQuantized data and scales
    are the same bytes of the data file."""
    torch.manual_seed(0)
    model = TiedLm(vocab=256, width=64).eval()
    path = tmp_path / "m.onnx"
    fastonnx.export(
        model,
        (torch.tensor([[1, 2, 3]]),),
        path,
        input_names=["ids"],
        dynamic_axes={"ids": {0: "b", 1: "s"}},
        external_data=True,
        quantize=fastonnx.Quantization(bits=4, accuracy_level=EXACT),
    )
    proto = onnx.load(str(path), load_external_data=False)
    offsets = {
        i.name: {e.key: e.value for e in i.external_data}.get("offset")
        for i in proto.graph.initializer
        if i.data_location == onnx.TensorProto.EXTERNAL
    }
    assert offsets["embed.weight_embedding_Q4"] == offsets["embed.weight_Q4"] is not None
    ids = torch.tensor([[5, 9, 255, 0, 2], [7, 7, 1, 4, 3]])
    (y,) = _session(path).run(None, {"ids": ids.numpy()})
    inits = _initializers(path)
    table = _dequantized(inits, "embed.weight", 4, 64)
    h = np.tanh(
        table[ids.numpy()].reshape(-1, 64) @ _dequantized(inits, "mix.weight", 4, 64).T
        + model.mix.bias.detach().numpy()
    )
    np.testing.assert_allclose(y, h @ table.T, rtol=1e-5, atol=1e-5)


class Positions(torch.nn.Module):
    """Token embeddings (of the ids flattened, as gpt2 views them: a graph input reshaped), and a
    position table gathered by computed indices (0..s-1) whose rows are no output's width: only
    the token embeddings are quantized."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 32)
        self.pos = torch.nn.Embedding(16, 32)
        self.head = torch.nn.Linear(32, 64)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        tokens = self.embed(ids.reshape(-1)).reshape(ids.shape[0], ids.shape[1], -1)
        return self.head(tokens + self.pos(positions))


def test_only_the_token_embeddings_are_quantized(tmp_path):
    torch.manual_seed(0)
    model = Positions().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.tensor([[1, 2, 3]]),),
        path,
        input_names=["ids"],
        dynamic_axes={"ids": {0: "b", 1: "s"}},
        quantize=fastonnx.Quantization(bits=4, accuracy_level=EXACT, head_bits=0, embedding_bits=4),
    )
    nodes = onnx.load(str(path)).graph.node
    assert [n.input[0] for n in nodes if n.op_type == "GatherBlockQuantized"] == ["embed.weight_embedding_Q4"]
    assert "pos.weight" in [n.input[0] for n in nodes if n.op_type == "Gather"]
    assert any(
        "pos.weight: left unquantized: not the token embeddings" in line for line in result.native.rewrites["lines"]
    )
    inits = _initializers(path)
    _, codes = _expected_codes(model.embed.weight.detach().numpy(), 4, 32, np.float32)
    scales = inits["embed.weight_embedding_scales"]
    dequantized = ((codes - 8) * scales[..., None]).reshape(64, 32)
    ids = torch.tensor([[5, 9, 63, 0, 2], [7, 7, 1, 4, 3]])
    (y,) = _session(path).run(None, {"ids": ids.numpy()})
    x = dequantized[ids.numpy()] + model.pos.weight.detach().numpy()[:5]
    reference = x @ model.head.weight.detach().numpy().T + model.head.bias.detach().numpy()
    np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)


def test_streamed_checkpoint_quantizes_as_the_model_in_memory(tmp_path):
    """A meta model whose float32 weights stream from safetensors, cast to float16 on the way,
    is quantized from the checkpoint's bytes exactly as the same model cast in memory is."""
    torch.manual_seed(0)
    real = Mlp(128, 96, 64).eval()
    with torch.device("meta"):
        meta = Mlp(128, 96, 64).eval()
    weights = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in real.state_dict().items()}, str(weights))
    q = fastonnx.Quantization(bits=4, accuracy_level=EXACT)
    x = torch.randn(2, 128).half()
    fastonnx.export(copy.deepcopy(real).half(), (x,), tmp_path / "mem.onnx", quantize=q)
    fastonnx.export(meta, (x,), tmp_path / "streamed.onnx", weights=weights, dtype=torch.float16, quantize=q)
    mem, streamed = _initializers(tmp_path / "mem.onnx"), _initializers(tmp_path / "streamed.onnx")
    assert sorted(mem) == sorted(streamed)
    for name, value in mem.items():
        np.testing.assert_array_equal(streamed[name], value, err_msg=name)
    w16 = real.down.weight.detach().half().float().numpy()
    scales, codes = _expected_codes(w16, 4, 32, np.float16)
    np.testing.assert_array_equal(_codes(streamed["down.weight_Q4"], 4), codes)


def test_what_is_not_quantized_stays_and_says_why(tmp_path):
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(32, 32)

        def forward(self, x, y):
            return self.w(x).to(torch.bfloat16) @ y  # activations times activations; bfloat16

    model = Mixed().eval()
    path = tmp_path / "m.onnx"
    x, y = torch.randn(2, 32), torch.randn(32, 3, dtype=torch.bfloat16)
    fastonnx.export(model, (x, y), path, quantize=fastonnx.Quantization(accuracy_level=EXACT))
    assert _ops(path).count("MatMulNBits") == 1 and _ops(path).count("MatMul") == 1

    class Bf16(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(32, 8)

        def forward(self, x):
            return self.w(x)

    result = fastonnx.export(Bf16().to(torch.bfloat16), (torch.randn(2, 32, dtype=torch.bfloat16),), quantize="int4")
    assert "MatMulNBits" not in [n.op_type for n in result.model_proto.graph.node]
    assert any("w.weight: left unquantized" in line and "bfloat16" in line for line in result.native.rewrites["lines"])


def test_bad_quantize_arguments():
    model, x = Mlp().eval(), torch.randn(2, 40)
    with pytest.raises(fastonnx.ArgumentError, match="quantize is None, 'int4', 'int8'"):
        fastonnx.export(model, (x,), quantize="int3")
    for block_size in (48, 8, 512):  # not a power of two; below and above onnxruntime's kernels' range
        with pytest.raises(fastonnx.ArgumentError, match="block_size is one of 16, 32, 64, 128, 256"):
            fastonnx.Quantization(block_size=block_size)
    with pytest.raises(fastonnx.ArgumentError, match="bits is 4 or 8, got 2"):
        fastonnx.Quantization(bits=2)
    with pytest.raises(fastonnx.ArgumentError, match="accuracy_level is 0 to 4, got 5"):
        fastonnx.Quantization(accuracy_level=5)
    with pytest.raises(fastonnx.ArgumentError, match=r"head_bits is None .*, 4 or 8, got 16"):
        fastonnx.Quantization(head_bits=16)
    with pytest.raises(
        fastonnx.ArgumentError, match=r"embedding_bits is None \(as a tied LM head\), 0 \(unquantized\), 4 or 8, got 2"
    ):
        fastonnx.Quantization(embedding_bits=2)
    with pytest.raises(fastonnx.ArgumentError, match="optimize_for is None"):
        fastonnx.export(model, (x,), optimize_for="tensorrt")
    with pytest.raises(fastonnx.ArgumentError, match="export_modules_as_functions"):
        fastonnx.export(model, (x,), quantize="int4", export_modules_as_functions=True)


class Qkv(torch.nn.Module):
    """Three projections of one input (packed into one MatMulNBits and a Split), with biases or
    not; a fourth of another input stays alone."""

    def __init__(self, bias: bool):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(64, n, bias=bias) for n in (64, 32, 32))
        self.o = torch.nn.Linear(64, 16)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return self.o(q * torch.cat([k, v], -1))


@pytest.mark.parametrize("bias", [True, False])
def test_projections_of_one_input_are_packed(bias, tmp_path):
    torch.manual_seed(0)
    model = Qkv(bias).eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.randn(2, 3, 64),),
        path,
        input_names=["x"],
        dynamic_axes={"x": {0: "b", 1: "s"}},
        quantize=fastonnx.Quantization(accuracy_level=EXACT),
    )
    ops = _ops(path)
    assert ops.count("MatMulNBits") == 2 and ops.count("Split") == 1
    assert ("MatMulNBits packed", 3) in result.native.rewrites["counts"]
    inits = _initializers(path)
    packed = next(n for n in onnx.load(str(path)).graph.node if n.op_type == "MatMulNBits" and "packed" in n.input[1])
    assert {a.name: a.i for a in packed.attribute}["N"] == 128
    # the stacked values are the three quantized weights one after the other
    w = torch.cat([model.q.weight, model.k.weight, model.v.weight]).detach().numpy()
    scales, codes = _expected_codes(w, 4, 32, np.float32)
    np.testing.assert_array_equal(_codes(inits[packed.input[1]], 4), codes)
    np.testing.assert_array_equal(inits[packed.input[2]], scales)
    x = torch.randn(4, 5, 64)
    (y,) = _session(path).run(None, {"x": x.numpy()})
    dq = {
        name: torch.from_numpy(
            ((codes_ := _expected_codes(m.weight.detach().numpy(), 4, 32, np.float32))[1] - 8).astype(np.float32)
            * codes_[0][..., None]
        ).reshape(m.weight.shape[0], -1)[:, : m.weight.shape[1]]
        for name, m in (("q", model.q), ("k", model.k), ("v", model.v), ("o", model.o))
    }
    reference = copy.deepcopy(model)
    for name, weight in dq.items():
        getattr(reference, name).weight = torch.nn.Parameter(weight)
    with torch.no_grad():
        want = reference(x).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


class FloatProjections(torch.nn.Module):
    """Projections of one input in float, each kind of weight the writer computes: a Linear's
    (transposed while written), one with a bias, and a [K, N] parameter read as it is. A Linear
    applied twice stays its own: its weight is two transposed initializers of one parameter, which
    the writer writes once (large enough not to be folded in memory)."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(64, 48, bias=False)
        self.k = torch.nn.Linear(64, 16)
        self.v = torch.nn.Parameter(torch.randn(64, 24))
        self.twice = torch.nn.Linear(64, 80, bias=False)

    def forward(self, x, y):
        q, k, v = self.q(x), self.k(x), x @ self.v
        return torch.cat([q, k, v, self.twice(x), self.twice(y)], -1)


def test_float_projections_of_one_input_are_packed(tmp_path):
    torch.manual_seed(0)
    model = FloatProjections().eval()
    path = tmp_path / "m.onnx"
    result = fastonnx.export(
        model,
        (torch.randn(2, 3, 64), torch.randn(2, 3, 64)),
        path,
        input_names=["x", "y"],
        dynamic_axes={"x": {0: "b", 1: "s"}, "y": {0: "b", 1: "s"}},
        optimize_for="onnxruntime",
    )
    assert ("MatMul packed", 3) in result.native.rewrites["counts"]
    graph = onnx.load(str(path)).graph
    packed = [n for n in graph.node if n.op_type == "MatMul" and "packed" in n.input[1]]
    assert len(packed) == 1 and [n.op_type for n in graph.node].count("MatMul") == 3
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    want = torch.cat([model.q.weight.T, model.k.weight.T, model.v], -1).detach().numpy()
    np.testing.assert_array_equal(inits[packed[0].input[1]], want)
    session = _session(path)
    for b, s in ((1, 1), (4, 7)):
        x, y = torch.randn(b, s, 64), torch.randn(b, s, 64)
        (out,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(out, model(x, y).numpy(), rtol=1e-5, atol=1e-5)


def test_a_head_with_a_bias_is_the_head(tmp_path):
    """head_bits applies to the LM head also when its bias is fused into MatMulNBits (the graph
    output is then the Add's)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 48)).eval()
    path = tmp_path / "m.onnx"
    x = torch.randn(2, 3, 32)
    result = fastonnx.export(
        model,
        (x,),
        path,
        input_names=["x"],
        dynamic_axes={"x": {0: "b", 1: "s"}},
        quantize=fastonnx.Quantization(accuracy_level=EXACT, head_bits=0),
    )
    assert _ops(path) == ["MatMulNBits", "Tanh", "MatMul", "Add"]
    assert any("2.weight: left unquantized (the LM head" in line for line in result.native.rewrites["lines"])
    inits = _initializers(path)
    x2 = torch.randn(4, 5, 32)
    (y,) = _session(path).run(None, {"x": x2.numpy()})
    h = np.tanh(x2.numpy() @ _dequantized(inits, "0.weight", 4, 32).T + model[0].bias.detach().numpy())
    want = h @ model[2].weight.detach().numpy().T + model[2].bias.detach().numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)

"""export(optimize_for="onnxruntime"): RMSNorm -> RMSNormalization (opset 23), a residual Add
before it -> SkipSimplifiedLayerNormalization (com.microsoft), LayerNormalization after a residual
Add -> SkipLayerNormalization (com.microsoft); what does not match stays plain, with a report line.

Every export passes the full checker (conftest.py checks each one), run in onnxruntime at sizes
other than the traced ones and compared with eager PyTorch and with the same model exported
plain."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
import torch
import transformers
from support import run_ort
from torch import nn

import fastonnx

_PLAIN_RMS = {"Pow", "ReduceMean", "Sqrt", "Reciprocal"}


def _ops(proto: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in proto.graph.node)


def _fused_norms(result: fastonnx.ExportResult) -> dict:
    """The norm rewrites' counts (the same export also packs projections: test_quantize.py)."""
    return {k: v for k, v in result.native.rewrites["counts"] if k.endswith("Normalization")}


def _export(model, args, fuse: bool, **kwargs) -> fastonnx.ExportResult:
    """At opset 23 unless asked otherwise: a norm with no residual before it is then ONNX's
    RMSNormalization (before 23 it stays plain: test_a_lone_rms_norm_before_opset_23_stays_plain)."""
    kwargs.setdefault("opset_version", 23)
    return fastonnx.export(model.eval(), args, optimize_for="onnxruntime" if fuse else None, **kwargs)


def _assert_close(got, want, rtol: float, atol: float) -> None:
    want = torch.as_tensor(np.asarray(want, dtype=np.float32))
    scale = max(1.0, float(want.abs().max()))
    torch.testing.assert_close(torch.from_numpy(np.asarray(got, dtype=np.float32)), want, rtol=rtol, atol=atol * scale)


def _compare(model, fused, plain, inputs, rtol=1e-3, atol=1e-4) -> None:
    """Both files in onnxruntime on `inputs` (sizes other than the traced ones), against eager."""
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected.logits if hasattr(expected, "logits") else expected
    expected = expected.float().numpy()
    got_fused = run_ort(fused.model_proto, list(inputs))[0]
    got_plain = run_ort(plain.model_proto, list(inputs))[0]
    _assert_close(got_fused, expected, rtol, atol)
    _assert_close(got_fused, got_plain, rtol, atol)


def _tiny(config_class, model_class, dtype=torch.float32, **extra):
    torch.manual_seed(0)
    config = config_class(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        use_cache=False,
        **extra,
    )
    return model_class(config).eval().to(dtype)


_TOKENS = dict(dynamic_shapes=({0: "batch", 1: "seq"},))


def _tokens(batch: int, seq: int) -> torch.Tensor:
    return torch.randint(4, 96, (batch, seq), generator=torch.Generator().manual_seed(batch * 100 + seq))


@pytest.mark.parametrize(
    ("name", "build", "simplified", "skip"),
    [
        # input_layernorm of layer 0 reads the embedding; the other 2 per layer and the final
        # norm read a residual sum.
        ("llama", lambda: _tiny(transformers.LlamaConfig, transformers.LlamaForCausalLM), 1, 4),
        # q_norm and k_norm over the heads' last axis too (4 more, on [batch, seq, heads, 8])
        ("qwen3", lambda: _tiny(transformers.Qwen3Config, transformers.Qwen3ForCausalLM, head_dim=8), 5, 4),
        # (1 + w), folded by the clean-up into a new constant
        ("gemma", lambda: _tiny(transformers.GemmaConfig, transformers.GemmaForCausalLM, head_dim=8), 1, 4),
    ],
)
def test_rms_norms_of_decoders_fuse(name, build, simplified, skip):
    model = build()
    fused, plain = (_export(model, (_tokens(2, 5),), fuse, **_TOKENS) for fuse in (True, False))
    ops = _ops(fused.model_proto)
    assert ops["RMSNormalization"] == simplified
    assert ops["SkipSimplifiedLayerNormalization"] == skip
    assert not _PLAIN_RMS & set(ops), ops
    assert _fused_norms(fused) == {
        "RMSNormalization": simplified,
        "SkipSimplifiedLayerNormalization": skip,
    }
    assert fused.native.rewrites["lines"] == []
    assert {n.domain for n in fused.model_proto.graph.node if n.op_type.startswith("Skip")} == {"com.microsoft"}
    assert {n.domain for n in fused.model_proto.graph.node if n.op_type == "RMSNormalization"} == {""}
    _compare(model, fused, plain, (_tokens(3, 7),))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_llama_fuses_the_casts_too(dtype):
    # The norm is computed in float32 between Casts; the fused ops take the model's dtype.
    model = _tiny(transformers.LlamaConfig, transformers.LlamaForCausalLM, dtype)
    fused, plain = (_export(model, (_tokens(2, 5),), fuse, **_TOKENS) for fuse in (True, False))
    ops = _ops(fused.model_proto)
    assert (ops["RMSNormalization"], ops["SkipSimplifiedLayerNormalization"]) == (1, 4)
    assert not _PLAIN_RMS & set(ops)
    assert _ops(plain.model_proto)["Cast"] - ops["Cast"] == 2 * 5  # each norm's two
    if dtype == torch.float16:  # numpy has no bfloat16 for the logits (the next test runs bfloat16)
        _compare(model.float(), fused, plain, (_tokens(3, 7),), rtol=2e-2, atol=2e-2)


class RMSNorm(nn.Module):
    """LlamaRMSNorm's computation on a model of `dtype` (in `compute`, float32 as transformers
    does), between float32 inputs and outputs."""

    def __init__(
        self,
        hidden: int,
        dtype=torch.float32,
        eps: float = 1e-5,
        square=lambda x: x.pow(2),
        dim=-1,
        compute=torch.float32,
    ):
        super().__init__()
        shape = (hidden,) if dim == -1 else (hidden, 1)
        self.weight = nn.Parameter(torch.rand(shape, dtype=dtype) + 0.5)
        self.eps, self.square, self.dim, self.dtype, self.compute = eps, square, dim, dtype, compute

    def forward(self, x):
        x = x.to(self.dtype)
        h = x.to(self.compute)
        h = h * torch.rsqrt(self.square(h).mean(self.dim, keepdim=True) + self.eps)
        return (self.weight * h.to(self.dtype)).float()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rms_norm_in_each_dtype(dtype):
    model = RMSNorm(16, dtype, eps=1e-3, square=lambda x: x * x)  # x * x: the Mul form of the square
    args = (torch.randn(2, 5, 16),)
    fused, plain = (_export(model, args, fuse, dynamic_shapes=({0: "b", 1: "s"},)) for fuse in (True, False))
    node = next(n for n in fused.model_proto.graph.node if n.op_type == "RMSNormalization")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"axis": -1, "epsilon": pytest.approx(1e-3), "stash_type": 1}
    ops = _ops(fused.model_proto)
    assert ops.pop("Cast", 0) == (0 if dtype == torch.float32 else 2)  # from the float32 input, to the output
    assert ops == {"RMSNormalization": 1}
    inputs = (torch.randn(3, 4, 16),)
    if dtype == torch.bfloat16:
        # onnxruntime's CPU provider has no bfloat16 Mul, which both the plain graph and its
        # RMSNormalization (run as its function body) need: neither runs there.
        for result in (fused, plain):
            with pytest.raises(Exception, match="Could not find an implementation for Mul"):
                run_ort(result.model_proto, list(inputs))
    else:
        tolerance = 1e-4 if dtype == torch.float32 else 2e-2
        _compare(model, fused, plain, inputs, rtol=tolerance, atol=tolerance)


def test_rms_norm_without_weight_gets_ones():
    model = nn.RMSNorm(16, eps=1e-5, elementwise_affine=False)
    args = (torch.randn(2, 5, 16),)
    fused, plain = (_export(model, args, fuse, dynamic_shapes=({0: "b", 1: "s"},)) for fuse in (True, False))
    (node,) = fused.model_proto.graph.node
    (weight,) = fused.model_proto.graph.initializer
    assert node.op_type == "RMSNormalization" and node.input[1] == weight.name
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(weight), np.ones(16, np.float32))
    _compare(model, fused, plain, (torch.randn(3, 4, 16),))


class DividedNorm(nn.Module):
    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_rms_norm_written_as_a_division():
    model = DividedNorm()
    args = (torch.randn(2, 5, 16),)
    fused, plain = (_export(model, args, fuse, dynamic_shapes=({0: "b", 1: "s"},)) for fuse in (True, False))
    assert "Div" in _ops(plain.model_proto)
    assert _ops(fused.model_proto) == {"RMSNormalization": 1}
    _compare(model, fused, plain, (torch.randn(3, 4, 16),))


class GemmaNorm(nn.Module):
    """gemma's RMSNorm: (1 + w), here over more elements than the clean-up folds (4096)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden) * 0.1)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return h * (1.0 + self.weight)


def test_one_plus_weight_left_by_the_clean_up_becomes_a_new_weight():
    model = GemmaNorm(4100)
    args = (torch.randn(1, 3, 4100),)
    fused, plain = (_export(model, args, fuse, dynamic_shapes=({0: "b", 1: "s"},)) for fuse in (True, False))
    assert "Add" in _ops(plain.model_proto)  # the weight's 1 + w, not folded
    assert _ops(fused.model_proto) == {"RMSNormalization": 1}
    _compare(model, fused, plain, (torch.randn(2, 2, 4100),))


class Residual(nn.Module):
    """Two residual blocks, each normalized after the sum: x1 = x + f(x); norm(x1); x2 = x1 + g;
    norm(x2), as a pre-norm decoder does."""

    def __init__(self, norm: type[nn.Module], hidden: int = 16):
        super().__init__()
        self.f, self.g = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.n1, self.n2 = norm(hidden), norm(hidden)

    def forward(self, x):
        x1 = x + self.f(x)
        x2 = x1 + self.g(self.n1(x1))
        return self.n2(x2)


@pytest.mark.parametrize("opset", [17, None])  # 17: ReduceMean's axes an attribute
@pytest.mark.parametrize(
    ("norm", "op"), [(RMSNorm, "SkipSimplifiedLayerNormalization"), (nn.LayerNorm, "SkipLayerNormalization")]
)
def test_residual_sums_go_into_the_skip_ops(norm, op, opset):
    torch.manual_seed(0)
    model = Residual(norm)
    args = (torch.randn(2, 5, 16),)
    fused, plain = (
        _export(model, args, fuse, dynamic_shapes=({0: "b", 1: "s"},), opset_version=opset) for fuse in (True, False)
    )
    nodes = [n for n in fused.model_proto.graph.node if n.op_type == op]
    assert len(nodes) == 2 and {n.domain for n in nodes} == {"com.microsoft"}
    # The first sum is read by the second residual: the op returns it (output 3); the last is not.
    assert [len(n.output) for n in nodes] == [4, 1]
    assert not {"LayerNormalization", "SimplifiedLayerNormalization"} & set(_ops(fused.model_proto))
    _compare(model, fused, plain, (torch.randn(3, 4, 16),))


class BiasThenResidual(nn.Module):
    def __init__(self, hidden: int = 16):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(hidden))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x, skip):
        return self.norm((x + self.bias) + skip)


def test_bias_before_the_residual_is_the_kernels_bias_input():
    model = BiasThenResidual()
    args = (torch.randn(2, 5, 16), torch.randn(2, 5, 16))
    dims = dict(dynamic_shapes=({0: "b", 1: "s"}, {0: "b", 1: "s"}))
    fused, plain = (_export(model, args, fuse, **dims) for fuse in (True, False))
    (node,) = fused.model_proto.graph.node
    assert node.op_type == "SkipLayerNormalization" and len(node.input) == 5  # input, skip, gamma, beta, bias
    _compare(model, fused, plain, (torch.randn(3, 4, 16), torch.randn(3, 4, 16)))


class BroadcastResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x, per_batch):
        return self.norm(x + per_batch)


def test_a_residual_the_kernel_cannot_broadcast_stays_an_add():
    model = BroadcastResidual()
    args = (torch.randn(2, 5, 16), torch.randn(2, 1, 16))
    dims = ({0: "b", 1: "s"}, {0: "b"})
    fused, plain = (_export(model, args, fuse, dynamic_shapes=dims) for fuse in (True, False))
    assert _ops(fused.model_proto) == _ops(plain.model_proto) == {"Add": 1, "LayerNormalization": 1}
    assert fused.native.rewrites["lines"] == [
        "ONNX LayerNormalization node of FX node `layer_norm` (output `output`): not fused with the Add before it "
        "into SkipLayerNormalization: its addends are [b, s, 16] and [b, 1, 16], the kernel takes two of the sum's "
        "shape [b, s, 16] (or a second of [1, seq, hidden] or [seq, hidden])"
    ]
    _compare(model, fused, plain, (torch.randn(3, 4, 16), torch.randn(3, 1, 16)))


@pytest.mark.parametrize(
    ("name", "build"),
    [
        (
            "gpt2",
            lambda: transformers.GPT2LMHeadModel(
                transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
            ),
        ),
        (
            "bert",
            lambda: transformers.BertModel(
                transformers.BertConfig(
                    vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
                )
            ),
        ),
    ],
)
def test_layer_norms_after_residuals_fuse(name, build):
    # Every LayerNormalization of both reads a sum: GPT-2's first adds the position embeddings,
    # [1, seq, hidden] (the kernel repeats it over the batch), BERT's the embeddings.
    torch.manual_seed(0)
    model = build().eval()
    fused, plain = (_export(model, (_tokens(2, 5),), fuse, **_TOKENS) for fuse in (True, False))
    ops = _ops(fused.model_proto)
    norms = 2 * 2 + 1
    assert ops["SkipLayerNormalization"] == norms and "LayerNormalization" not in ops
    assert _fused_norms(fused) == {"SkipLayerNormalization": norms}
    with torch.no_grad():
        inputs = (_tokens(3, 7),)
        out = model(*inputs)
    expected = (out.logits if name == "gpt2" else out.last_hidden_state).numpy()
    got_fused, got_plain = (run_ort(r.model_proto, list(inputs))[0] for r in (fused, plain))
    _assert_close(got_fused, expected, 1e-3, 1e-4)
    _assert_close(got_fused, got_plain, 1e-3, 1e-4)


class WeightInput(nn.Module):
    def forward(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class Standalone(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(x)


@pytest.mark.parametrize(
    ("model", "args", "line"),
    [
        (
            RMSNorm(5, dim=1),
            (torch.randn(2, 5, 16),),
            "ONNX ReduceMean node of FX node `mean` (output `mean`): RMSNorm left plain: it reduces over axes [1] of a "
            "value [s0, 5, 16], not the last axis alone",
        ),
        (
            WeightInput(),
            (torch.randn(2, 5, 16), torch.rand(16)),
            "ONNX ReduceMean node of FX node `mean` (output `mean`): RMSNorm left plain: its weight `weight` is not a "
            "constant",
        ),
        (
            RMSNorm(16, torch.float64, compute=torch.float64),
            (torch.randn(2, 5, 16),),
            "ONNX ReduceMean node of FX node `mean` (output `mean`): RMSNorm left plain: it computes in float64, which "
            "onnxruntime's CPU kernels do not take (float32, float16, bfloat16)",
        ),
        (Standalone(), (torch.randn(2, 5, 16),), None),  # no Add before it: plain LayerNormalization, nothing to say
    ],
    ids=["not-the-last-axis", "weight-is-an-input", "float64", "layer-norm-alone"],
)
def test_what_does_not_match_stays_plain_and_says_why(model, args, line):
    dims = ({0: "s0"}, *(None for _ in args[1:]))  # a dynamic batch
    fused, plain = (_export(model, args, fuse, dynamic_shapes=dims) for fuse in (True, False))
    assert _ops(fused.model_proto) == _ops(plain.model_proto)
    assert fused.native.rewrites == {"counts": [], "lines": [line] if line else []}
    _compare(model, fused, plain, (torch.cat([args[0], args[0][:1]]), *args[1:]))


def test_a_lone_rms_norm_before_opset_23_stays_plain():
    """Before opset 23 the only fused form of an RMSNorm with no residual Add before it is
    onnxruntime's SimplifiedLayerNormalization, in ONNX's own domain, which onnx's checker
    rejects: it stays plain and says so; the norms after a residual still fuse."""
    model = _tiny(transformers.LlamaConfig, transformers.LlamaForCausalLM)
    fused, plain = (_export(model, (_tokens(2, 5),), fuse, opset_version=18, **_TOKENS) for fuse in (True, False))
    ops = _ops(fused.model_proto)
    assert "SimplifiedLayerNormalization" not in ops and "RMSNormalization" not in ops
    assert ops["SkipSimplifiedLayerNormalization"] == 4 and ops["ReduceMean"] == 1
    assert _fused_norms(fused) == {"SkipSimplifiedLayerNormalization": 4}
    (line,) = [line for line in fused.native.rewrites["lines"] if "RMSNorm" in line]
    assert "RMSNorm left plain" in line and "opset_version 23 or later writes ONNX's RMSNormalization" in line
    _compare(model, fused, plain, (_tokens(3, 7),))

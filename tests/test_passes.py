"""The clean-up passes (cpp/src/passes/passes.cpp) and the constant folder (cpp/src/passes/fold.cpp):
a node whose inputs are all constants becomes an initializer holding what onnxruntime computes for it,
constants built from iotas (masks, position tables) fold away, and weights are never copied."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import transformers
from onnx import helper, numpy_helper

import fastonnx
from support import check, export_and_compare, run_ort


@torch.library.custom_op("fastonnx_test::probe", mutates_args=())
def probe(like: torch.Tensor) -> torch.Tensor:
    return like.clone()


@probe.register_fake
def _(like):
    return torch.empty_like(like)


class Probe(torch.nn.Module):
    def forward(self, like):
        return probe(like)


def _onnxruntime_computes(op: str, inputs: list[np.ndarray], attrs: dict) -> np.ndarray:
    """What onnxruntime computes for one `op` node on constant `inputs`."""
    names = [f"in{i}" for i in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["out"], **attrs)], "reference", [], [],
        initializer=[numpy_helper.from_array(a, n) for a, n in zip(inputs, names)],
    )
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    model.graph.output.extend(model.graph.value_info)  # the node's output, typed by inference
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {})[0]


def _folded(op: str, inputs: list[np.ndarray], attrs: dict, expected: np.ndarray) -> onnx.ModelProto:
    """Exports a graph whose output is an Identity of `op` on constant `inputs`."""
    def convert(g, like):
        return g.op("Identity", g.op(op, *[g.constant(torch.from_numpy(a)) for a in inputs], **attrs))

    fastonnx.register_converter("fastonnx_test::probe", convert)
    try:
        return fastonnx.export(Probe(), (torch.from_numpy(np.zeros_like(expected)),)).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::probe")


_i64, _f32 = np.int64, np.float32
_positions = np.arange(6, dtype=_i64).reshape(1, 6)
_FOLDS = {
    "not": ("Not", [np.array([[True, False], [False, False]])], {}),
    "less_or_equal": ("LessOrEqual", [_positions.reshape(1, 1, 1, 6), _positions.reshape(1, 1, 6, 1)], {}),
    "greater_or_equal": ("GreaterOrEqual", [np.array([1.5, -2.0, np.nan], _f32), np.array(-2.0, _f32)], {}),
    "where": ("Where", [np.array([[True], [False]]), np.arange(3, dtype=_f32), np.array(-np.inf, _f32)], {}),
    "cumsum": ("CumSum", [np.array([[1, 0, 1], [0, 1, 1]], _i64), np.array(1, _i64)], {}),
    "cumsum_exclusive_reverse": ("CumSum", [np.array([[1, 2, 3], [4, 5, 6]], np.int32), np.array(-2, np.int32)],
                                 {"exclusive": 1, "reverse": 1}),
    "cumsum_float": ("CumSum", [np.array([0.1, 0.2, 0.3, 1e8, 1.0], _f32), np.array(0, _i64)], {"exclusive": 1}),
    "gather_nd": ("GatherND", [np.arange(12, dtype=_f32).reshape(3, 4), np.array([[0, 1], [2, -1], [-3, 0]], _i64)], {}),
    "gather_nd_slices": ("GatherND", [_positions, np.zeros((1, 1, 6, 1, 2), _i64) + np.array([0, 1])], {}),
    "gather_nd_batch": ("GatherND", [np.arange(24, dtype=_i64).reshape(2, 3, 4), np.array([[[2], [0]], [[1], [1]]], _i64)],
                        {"batch_dims": 1}),
    "sin": ("Sin", [np.linspace(-7, 7, 11, dtype=_f32)], {}),
    "cos": ("Cos", [np.linspace(-7, 7, 11, dtype=_f32)], {}),
    "cos_half": ("Cos", [np.linspace(-3, 3, 7, dtype=np.float16)], {}),
    "sqrt": ("Sqrt", [np.array([0.0, 2.0, 1e-6], _f32)], {}),
    "reciprocal": ("Reciprocal", [np.array([3.0, -0.5, 7.0], _f32)], {}),
    "exp": ("Exp", [np.array([-1.0, 0.0, 10.0], _f32)], {}),
    "log": ("Log", [np.array([0.5, 1.0, 1e4], _f32)], {}),
    "reduce_prod_all": ("ReduceProd", [np.array([[2, 3], [4, 5]], _i64)], {"keepdims": 0}),
    "reduce_prod_every_axis": ("ReduceProd", [np.array([3, 4], _i64), np.array([-1], _i64)], {}),
    "reduce_sum_all": ("ReduceSum", [np.array([[2, 3], [4, 5]], np.int32)], {}),
}


@pytest.mark.parametrize("case", list(_FOLDS))
def test_constant_node_folds_to_what_onnxruntime_computes(case):
    op, inputs, attrs = _FOLDS[case]
    expected = _onnxruntime_computes(op, inputs, attrs)
    proto = _folded(op, inputs, attrs, expected)
    check(proto)
    assert [n.op_type for n in proto.graph.node] == ["Identity"], f"{op} was not folded"
    (constant,) = [t for t in proto.graph.initializer if t.name == proto.graph.node[0].input[0]]
    folded = numpy_helper.to_array(constant)
    assert folded.dtype == expected.dtype and folded.shape == expected.shape
    if np.issubdtype(expected.dtype, np.floating):
        # Computed in double and rounded once: within an ulp of the runtime's own arithmetic.
        np.testing.assert_allclose(folded, expected, rtol=2 * np.finfo(expected.dtype).eps)
    else:
        np.testing.assert_array_equal(folded, expected)


def test_gather_nd_out_of_range_is_left_to_the_runtime():
    inputs = [np.arange(4, dtype=_f32), np.array([[4]], _i64)]

    def convert(g, like):
        return g.op("Identity", g.op("GatherND", *[g.constant(torch.from_numpy(a)) for a in inputs]))

    fastonnx.register_converter("fastonnx_test::probe", convert)
    try:
        proto = fastonnx.export(Probe(), (torch.zeros(1),)).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::probe")
    assert [n.op_type for n in proto.graph.node] == ["GatherND", "Identity"]


def _constant_nodes(proto: onnx.ModelProto) -> list[str]:
    """Nodes (but graph outputs' producers) every input of which is a constant."""
    constants = {t.name for t in proto.graph.initializer}
    outputs = {o.name for o in proto.graph.output}
    return [n.op_type for n in proto.graph.node
            if all(i in constants for i in n.input if i) and not outputs & set(n.output)]


def test_llama_masks_and_rotary_tables_fold_away():
    # 128 tokens: the causal mask (16384 elements) and the rotary tables (8192) are past the size
    # up to which weights are read, but they are built from iotas, so they fold.
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=64, use_cache=False)
    model, tokens = transformers.LlamaForCausalLM(config).eval(), torch.randint(0, 96, (1, 128))
    result = fastonnx.export(model, (tokens,))
    proto = result.model_proto
    assert _constant_nodes(proto) == []
    assert not {"CumSum", "GatherND", "Sin", "Cos", "Not", "LessOrEqual"} & {n.op_type for n in proto.graph.node}
    assert result.native.pass_stats["folded"] > 0
    with torch.no_grad():
        expected = model(tokens).logits.numpy()
    check(proto)
    np.testing.assert_allclose(run_ort(proto, [tokens])[0], expected, rtol=1e-4, atol=1e-5)


class ScaledWeight(torch.nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(size))

    def forward(self, x):
        return x + self.weight.cos() * (torch.arange(x.shape[-1]) < 8)


@pytest.mark.parametrize("size", [16, 5000])
def test_weights_are_read_by_folds_only_when_small(size):
    # A small weight's cosine is computed once, at export; a larger one stays a Cos of the
    # weight, not a copy of it.
    proto = export_and_compare(ScaledWeight(size), (torch.randn(2, size),))
    ops = [n.op_type for n in proto.graph.node]
    assert ops == (["Add"] if size == 16 else ["Cos", "Mul", "Add"]), ops
    assert _constant_nodes(proto) == ([] if size == 16 else ["Cos"])


class TransposedTwice(torch.nn.Module):
    def forward(self, x):
        # attention's K: a permute, then its last two dimensions swapped; and a round trip
        return x.permute(0, 2, 1, 3).transpose(-1, -2) * 2, x.transpose(1, 2).transpose(1, 2) + 1


def test_a_transpose_of_a_transpose_is_one_transpose():
    x = torch.randn(2, 3, 4, 5)
    result = fastonnx.export(TransposedTwice(), (x,))
    proto = result.model_proto
    assert [n.op_type for n in proto.graph.node] == ["Transpose", "Mul", "Add"]
    (transpose,) = [n for n in proto.graph.node if n.op_type == "Transpose"]
    assert list(helper.get_attribute_value(transpose.attribute[0])) == [0, 2, 3, 1]
    assert result.native.pass_stats["composed"] == 2
    check(proto)
    for got, want in zip(run_ort(proto, [x]), TransposedTwice()(x)):
        np.testing.assert_array_equal(got, want.numpy())


class FlattenAndSliceAll(torch.nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)[:, :].relu() + x.reshape(x.shape[0], -1)[:, :, None][:, :].squeeze(-1)


def test_shape_chains_on_constants_fold_and_slices_of_everything_go():
    """flatten's size of the merged dimensions is a ReduceProd over a constant slice of the shape:
    it folds to the number; a Slice from 0 to the end with step 1 (torch's `x[:, :]`) is its
    input. The model still runs at other sizes."""
    model = FlattenAndSliceAll()
    proto = export_and_compare(model, (torch.randn(2, 3, 4),), dynamic_axes={"x": {0: "batch", 2: "w"}},
                               input_names=["x"])
    constants = {t.name: numpy_helper.to_array(t).tolist() for t in proto.graph.initializer}
    everything = [
        n.name
        for n in proto.graph.node
        if n.op_type == "Slice"
        and constants.get(n.input[1]) == [0] * len(constants.get(n.input[1], []))
        and all(e == 2**63 - 1 for e in constants.get(n.input[2], [0]))
        and (len(n.input) < 5 or all(s == 1 for s in constants.get(n.input[4], [0])))
    ]
    assert not everything, f"Slices from 0 to the end left: {everything}"
    for shape in [(5, 3, 4), (1, 3, 7)]:
        x = torch.randn(*shape)
        (got,) = run_ort(proto, [x])
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-6, atol=1e-6)
    static = fastonnx.export(model, (torch.randn(2, 3, 4),), dynamic_axes={"x": {0: "batch"}}).model_proto
    assert "ReduceProd" not in [n.op_type for n in static.graph.node]

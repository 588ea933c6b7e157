"""Models that used to load and compute something else than eager PyTorch, with nothing said: each
now matches eager in onnxruntime or fails with a ConversionError. And the guarantee behind them:
a type the graph declares that contradicts the node computing it is a ConversionError, never a
file onnxruntime refuses."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch.export import Dim

import fastonnx
from fastonnx import _C
from fastonnx.lowering.decompose import Decomposer, copy_graph, decomposition_of
from fastonnx.core.dtypes import dtype_code
from support import OPSET_MATRIX, Lambda, Lambda2, assert_matches, export_and_compare, run_ort


def _sizes(n: int) -> torch.Tensor:
    return torch.tensor([n])


# -- squeeze of a size torch.export could not decide --------------------------------------------
# torch traces squeeze(dim) of a size read from data (.item(), an unbacked size) as if the size
# were not 1, and records no check; eager PyTorch squeezes when it is 1. The ONNX graph decides
# when it runs.

SQUEEZES = {
    "dim": lambda d1, d2: torch.zeros(d1[0], d2[0]).squeeze(0),
    "dims": lambda d1, d2: torch.ones(d1[0], 1, d2[0]).squeeze((0, 1)),
    "all": lambda d1, d2: torch.ones(d1[0], 1, d2[0]).squeeze(),
    "then_add": lambda d1, d2: torch.ones(d1[0], d2[0]).squeeze(0) + 1,
}


@pytest.mark.parametrize("opset", [13, 18, fastonnx._C.MAX_OPSET])
@pytest.mark.parametrize("name", list(SQUEEZES))
def test_squeeze_of_a_size_read_from_data(name, opset):
    model = Lambda2(SQUEEZES[name])
    proto = fastonnx.export(model, (_sizes(1), _sizes(4)), opset_version=opset).model_proto
    for a, b in [(1, 4), (3, 4), (1, 1), (2, 1), (0, 3)]:
        args = (_sizes(a), _sizes(b))
        (got,) = run_ort(proto, list(args))
        want = model(*args)
        assert got.shape == tuple(want.shape), f"sizes {a}, {b}"
        np.testing.assert_array_equal(got, want.numpy())


def test_the_rank_of_a_squeeze_decided_at_run_time_is_not_assumed():
    # torch traced sum(-1) over dim 1 of a rank-2 tensor; eager sums dim 0 when the squeeze
    # happened. No converter may take torch's traced rank for granted.
    model = Lambda2(lambda d1, d2: torch.ones(d1[0], d2[0]).squeeze(0).sum(-1))
    with pytest.raises(fastonnx.ConversionError, match=r"aten::sum.dim_IntList \(FX node `sum_1`\): the rank of value "
                                                       r"squeeze is not known"):
        fastonnx.export(model, (_sizes(1), _sizes(4)))


# -- the model's code testing a size traced at 0 or 1 -------------------------------------------
# An axis traced at 0 or 1 is traced dynamic (tests/test_dynamic_axes.py). Traced so, a test of the
# size in the model's code is only a guard, and the graph would hold the branch the example took
# for every size; torch.onnx's dynamo exporter writes such a file. A test against 0 is decided
# without even a guard, as if the size were 1 or more, the wrong branch for an example of size 0.
# The axis is static instead, and the warning names the line.

BRANCHES = {
    "eq_1": (lambda x: x * 2 if x.size(0) == 1 else x + 1, 1),
    "gt_1": (lambda x: x + 1 if x.size(0) > 1 else x * 2, 1),
    "eq_0": (lambda x: torch.ones(2, 3) if x.size(0) == 0 else x * 2, 0),
    "numel_0": (lambda x: torch.ones(2, 3) if x.numel() == 0 else x * 2, 0),
    "int": (lambda x: x + torch.arange(int(x.size(0))).unsqueeze(1), 1),
    "len": (lambda x: sum(x[i] for i in range(len(x))) + x, 1),
}


@pytest.mark.parametrize("tracer", ["export", "jit"])
@pytest.mark.parametrize("name", list(BRANCHES))
def test_a_test_of_a_size_traced_at_zero_or_one_keeps_the_axis_static(name, tracer):
    fn, size = BRANCHES[name]
    model = Lambda(fn)
    with pytest.warns(fastonnx.DynamicAxesWarning) as caught:
        result = fastonnx.export(model, (torch.randn(size, 3),), dynamic_axes={"x": {0: "n"}}, tracer=tracer)
    (message,) = [str(w.message) for w in caught if issubclass(w.category, fastonnx.DynamicAxesWarning)]
    assert f"input `x` axis 0 ('n'): fixed to {size} (the traced code depends on the size being {size}, at " in message
    assert "test_silent_wrong.py" in message, message
    proto = result.model_proto
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == size
    assert_matches(proto, model, (torch.randn(size, 3),), rtol=1e-5, atol=1e-6)


def test_a_strict_dynamic_dimension_the_code_tests_at_one_is_an_error():
    model = Lambda(BRANCHES["eq_1"][0])
    for spec in (Dim.DYNAMIC, "n"):
        with pytest.raises(fastonnx.TraceError, match=r"dynamic_shapes: L\['x'\] axis 0.* is fixed to 1 \(the traced "
                                                      r"code depends on the size being 1, at .*test_silent_wrong.py"):
            fastonnx.export(model, (torch.randn(1, 3),), dynamic_shapes=({0: spec},))


# -- mean over no elements ----------------------------------------------------------------------
# ONNX's ReduceMean gives 0 over an empty axis; torch gives NaN (0/0).

@pytest.mark.parametrize("opset", [13, 18])
def test_mean_over_no_elements_is_nan(opset):
    model = Lambda(lambda x: (x.mean(1), x.mean(), x.mean((0, 1), keepdim=True)))
    static = fastonnx.export(model, (torch.randn(3, 0),), opset_version=opset).model_proto
    dynamic = fastonnx.export(model, (torch.randn(3, 4),), opset_version=opset,
                              dynamic_shapes=({0: Dim("m", min=0), 1: Dim("n", min=0)},)).model_proto
    for proto, x in [(static, torch.randn(3, 0)), *((dynamic, x) for x in (torch.randn(3, 4), torch.randn(3, 0),
                                                                             torch.randn(0, 2)))]:
        got = run_ort(proto, [x])
        for g, w in zip(got, model(x), strict=True):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-7)  # (NaN equals NaN here)
            assert np.isnan(g).any() == w.isnan().any().item()


def test_squeeze_of_a_dim_whose_range_includes_one():
    model = Lambda(lambda x: x.squeeze(0) * 2)
    proto = fastonnx.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("b", min=1)},)).model_proto
    for n in (1, 3):
        assert_matches(proto, model, (torch.randn(n, 4),), rtol=0, atol=0)


def test_squeeze_of_a_dim_torch_export_keeps_above_one():
    # Dim.AUTO traces sizes of 2 or more (the program refuses 1): the dim stays, no run-time test.
    model = Lambda(lambda x: x.squeeze(0) * 2)
    proto = fastonnx.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim.AUTO},)).model_proto
    assert [n.op_type for n in proto.graph.node] == ["Mul"]
    assert_matches(proto, model, (torch.randn(5, 4),), rtol=0, atol=0)


# -- eye of dynamic sizes -------------------------------------------------------------------------
# torch.export keeps every size dynamic; eye had no converter, and its decomposition was traced
# outside the program's fake mode (eye's inputs are all sizes), which pinned the sizes to the
# example's.

EYES = {
    "eye_m": lambda x: x + torch.eye(x.shape[1], x.shape[2]),
    "eye_n": lambda x: x[0] @ torch.eye(x.shape[2]),
    "eye_batch": lambda x: torch.eye(x.shape[0], dtype=torch.int64).sum(1) + x.shape[1],
}


def _dim_params(proto: onnx.ModelProto) -> list[list[str]]:
    return [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in proto.graph.input]


@pytest.mark.parametrize("opset", OPSET_MATRIX, ids=lambda v: f"opset{v}")
@pytest.mark.parametrize("name", list(EYES))
def test_eye_of_dynamic_sizes_stays_dynamic(name, opset):
    model = Lambda(EYES[name])
    proto = fastonnx.export(model, (torch.randn(2, 3, 4),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.AUTO},),
                            opset_version=opset).model_proto
    assert all(_dim_params(proto)[0]), _dim_params(proto)
    for shape in [(2, 3, 4), (5, 6, 7), (4, 4, 2)]:
        assert_matches(proto, model, (torch.randn(*shape),), rtol=1e-5, atol=1e-5)


def test_eye_with_dynamic_axes_stays_dynamic():
    model = Lambda(EYES["eye_m"])
    proto = fastonnx.export(model, (torch.randn(2, 3, 4),), dynamic_axes={"input_1": [0, 1, 2]},
                            input_names=["input_1"]).model_proto
    assert all(_dim_params(proto)[0]), _dim_params(proto)
    assert_matches(proto, model, (torch.randn(5, 6, 7),), rtol=1e-5, atol=1e-5)


def _program_with_eye() -> torch.export.ExportedProgram:
    dims = {0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.AUTO}
    return torch.export.export(Lambda(EYES["eye_m"]), (torch.randn(2, 3, 4),), dynamic_shapes=(dims,))


def test_decomposing_an_op_of_sizes_keeps_them_symbolic():
    graph = copy_graph(_program_with_eye().graph)
    Decomposer(graph, lambda node: decomposition_of(node.target) if node.target is torch.ops.aten.eye.m else None).run()
    x = next(n for n in graph.nodes if n.op == "placeholder")
    assert not any(d.node.expr.is_number for d in x.meta["val"].shape), x.meta["val"].shape
    assert torch.ops.aten.arange.default in {n.target for n in graph.nodes}


def test_a_decomposition_that_pins_a_size_is_an_error():
    def pinning_eye(n, m, **kwargs):
        return torch.zeros(int(n), int(m))  # int() of a symbolic size guards it to its example value

    graph = copy_graph(_program_with_eye().graph)
    with pytest.raises(fastonnx.ConversionError, match=r"decomposition of aten.eye.m \(FX node `eye`\) fixes the "
                                                       r"dynamic size\(s\) s\d+ = 3"):
        Decomposer(graph, lambda node: pinning_eye if node.target is torch.ops.aten.eye.m else None).run()


# -- the TorchScript front end's rewriting of in-place writes into views ---------------------------


class OneHotAndWrite(torch.nn.Module):
    def forward(self, x, count, totals):
        classes = torch.nn.functional.one_hot(x, count.to(torch.int32)[0])
        totals[0] = classes.sum()
        return classes * 2, totals


def test_rewriting_writes_into_views_takes_no_value_of_the_example():
    """The rewrite without in-place ops retraced the graph with the example's values beside:
    one_hot's question whether a count read from data is -1 was answered with the example's count,
    and the model had its 15 classes at every count. It now matches eager at other counts, -1
    included, or is a ConversionError."""
    x = torch.tensor([3, 1, 7, 2])
    try:
        proto = fastonnx.export(OneHotAndWrite(), (x, torch.tensor([15.0]), torch.zeros(3)), tracer="jit").model_proto
    except fastonnx.ConversionError as e:
        assert "rewriting it without in-place ops failed" in str(e)
        return
    for count in (15.0, 9.0, -1.0):
        args = (x, torch.tensor([count]), torch.zeros(3))
        got = run_ort(proto, [a.clone() for a in args])
        for g, want in zip(got, OneHotAndWrite()(*args)):
            assert g.shape == tuple(want.shape), f"count {count}"
            np.testing.assert_array_equal(g, want.numpy())


# -- complex values and casts ---------------------------------------------------------------------
# FNet: fftn over (1, 2) of a real input casts it to complex64 first; that Cast was written as an
# ONNX Cast to complex64 whose output the graph declared float (complex values are real pairs),
# and onnxruntime refused the file.

SPECTRA = {
    "fftn_real": lambda x: torch.fft.fftn(x, dim=(1, 2)).real,
    "fft2_real": lambda x: torch.fft.fft2(x).real,
    "fft2_imag": lambda x: torch.fft.fft2(x).imag,
    "fft2_abs": lambda x: torch.fft.fft2(x).abs(),
    "rfft_real": lambda x: torch.fft.rfft(x).real,
    "rfft_abs": lambda x: torch.fft.rfft(x, dim=1).abs(),
    "ifft_real": lambda x: torch.fft.ifft(x).real,
    "ifft_imag": lambda x: torch.fft.ifft(x, dim=1).imag.resolve_neg(),
    "ifftn_abs": lambda x: torch.fft.ifftn(x).abs(),
    "complex128": lambda x: torch.fft.fft(x.to(torch.complex128)).imag,
    "complex_to_real": lambda x: torch.fft.fft(x).to(torch.float64),
}


@pytest.mark.filterwarnings("ignore:Casting complex values to real discards the imaginary part")
@pytest.mark.parametrize("opset", [13, 18, 20], ids=lambda v: f"opset{v}")
@pytest.mark.parametrize("name", list(SPECTRA))
def test_spectra_of_real_inputs(name, opset):
    torch.manual_seed(0)
    export_and_compare(Lambda(SPECTRA[name]), (torch.randn(2, 3, 4),), rtol=1e-4, atol=1e-5, opset_version=opset)


# -- declared types that contradict the graph -----------------------------------------------------


@pytest.mark.parametrize("wrong", [
    lambda g, x: g.op("Shape", x),
    lambda g, x: g.op("ArgMax", x, axis_i=1, keepdims_i=1),
    # Once declared float, this Cast looked like a no-op to the passes, which removed it.
    lambda g, x: g.op("Cast", x, to_i=7),
], ids=["Shape", "ArgMax", "Cast"])
def test_a_python_converter_result_of_another_type(wrong):
    fastonnx.register_converter("aten::relu", wrong)
    try:
        with pytest.raises(fastonnx.ConversionError, match=r"the Python converter of aten::relu \(FX node `relu`\) "
                                                           r"returned a wrong result 0: the value is int64 in the ONNX "
                                                           r"graph where torch has float32"):
            fastonnx.export(Lambda(torch.relu), (torch.randn(2, 3),))
    finally:
        fastonnx.unregister_converter("aten::relu")


def test_an_onnx_node_typed_complex_is_refused():
    session = _C.Session(18)
    x = session.add_input("x", dtype_code(torch.float32), [2])
    with pytest.raises(fastonnx.ConversionError, match="ONNX Cast would make complex values"):
        session.add_node("", "Cast", [x], [("to", "i", onnx.TensorProto.COMPLEX64)], 1)


def test_a_control_flow_node_declaring_another_type_than_its_branches():
    session = _C.Session(18)
    x = session.add_input("x", dtype_code(torch.float32), [2])
    flag = session.add_input("flag", dtype_code(torch.bool), [])
    branches = []
    for op in ("Neg", "Abs"):
        session.begin_subgraph()
        (out,) = session.add_node("", op, [x], [], 1)
        branches.append(session.end_subgraph([out]))
    (y,) = session.control_flow("If", [flag], [("then_branch", "g", branches[0]), ("else_branch", "g", branches[1])],
                                [(dtype_code(torch.int64), [2])], "cond")
    session.set_outputs([(y, "y")])
    with pytest.raises(fastonnx.ConversionError, match=r"ONNX If node of FX node `cond` \(output `y`\): output 0 of its "
                                                       r"`then_branch` subgraph is float32 where the graph declares "
                                                       r"int64"):
        session.finish("test")

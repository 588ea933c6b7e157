"""Control flow: torch.cond -> If, while_loop -> Loop, scan -> Scan, run in onnxruntime on
inputs that take each branch (or loop a different number of times) and compared with eager."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch._higher_order_ops.map import map as hmap
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import fastonnx
from support import assert_matches, run_ort


def _ops(graph: onnx.GraphProto) -> list[str]:
    """Op types of a graph and of its subgraphs, depth first."""
    out = []
    for node in graph.node:
        out.append(node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _ops(a.g)
    return out


def _compare(proto: onnx.ModelProto, model: torch.nn.Module, *inputs_list: tuple) -> None:
    for args in inputs_list:
        assert_matches(proto, model, args, rtol=1e-4, atol=1e-5)


class CondWithWeights(torch.nn.Module):
    """Branches that use the module's weights and the operands."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, y):
        def then(x, y):
            return self.lin(x) + y

        def otherwise(x, y):
            return x * self.scale - y

        return torch.cond(x.sum() > 0, then, otherwise, (x, y))


POSITIVE = torch.ones(2, 4)
NEGATIVE = -torch.ones(2, 4)


@pytest.mark.parametrize("opset", [13, 18, fastonnx._C.MAX_OPSET])
def test_cond_takes_each_branch(opset):
    torch.manual_seed(0)
    model = CondWithWeights().eval()
    y = torch.randn(2, 4)
    proto = fastonnx.export(model, (torch.randn(2, 4), y), opset_version=opset).model_proto
    assert [n.op_type for n in proto.graph.node].count("If") == 1
    # The weights stay initializers of the main graph, read by the branches by name.
    assert {"lin.weight", "lin.bias", "scale"} <= {i.name for i in proto.graph.initializer}
    then_out = model(POSITIVE, y)
    assert not torch.equal(then_out, model(NEGATIVE, y))
    _compare(proto, model, (POSITIVE, y), (NEGATIVE, y))


class CondMultipleOutputs(torch.nn.Module):
    def forward(self, x):
        return torch.cond(
            x.mean() > 0.5,
            lambda x: (x + 1, x.sum(dim=1), x),  # an operand returned as it is
            lambda x: (x * 2, x.amax(dim=1), x - 1),
            (x,),
        )


def test_cond_multiple_outputs():
    model = CondMultipleOutputs()
    proto = fastonnx.export(model, (torch.rand(3, 5),)).model_proto
    assert len(proto.graph.output) == 3
    _compare(proto, model, (torch.rand(3, 5) + 1,), (torch.rand(3, 5) - 1,))


class NestedCond(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([0.5, -0.5, 1.5]))

    def forward(self, x):
        def outer_then(x):
            return torch.cond(x[0] > 0, lambda x: x + self.bias, lambda x: x - self.bias, (x,))

        def outer_else(x):
            return x * 3

        return torch.cond(x.sum() > 0, outer_then, outer_else, (x,))


@pytest.mark.parametrize("opset", [13, 18])
def test_nested_cond(opset):
    model = NestedCond()
    proto = fastonnx.export(model, (torch.tensor([1.0, 2.0, 3.0]),), opset_version=opset).model_proto
    assert _ops(proto.graph).count("If") == 2
    _compare(
        proto, model,
        (torch.tensor([1.0, 2.0, 3.0]),),  # outer then, inner then
        (torch.tensor([-1.0, 2.0, 3.0]),),  # outer then, inner else
        (torch.tensor([-1.0, -2.0, 0.5]),),  # outer else
    )


class CondOnOuterValues(torch.nn.Module):
    """Branches that read values computed before the cond (operands from the main graph), and a
    value only a branch reads: dead-code elimination must keep it."""

    def forward(self, x):
        h = torch.relu(x) * 2  # only the branches read h
        return torch.cond(x.sum() > 0, lambda h, x: h.sin(), lambda h, x: h.cos() + x, (h, x))


def test_cond_reads_values_of_the_main_graph():
    model = CondOnOuterValues()
    proto = fastonnx.export(model, (torch.randn(4),)).model_proto
    assert "Relu" in [n.op_type for n in proto.graph.node]
    _compare(proto, model, (torch.ones(4),), (-torch.ones(4),))


class CondDynamicBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.lin(x).relu(), lambda x: self.lin(-x), (x,))


def test_cond_with_dynamic_batch():
    model = CondDynamicBatch().eval()
    batch = torch.export.Dim("batch")
    proto = fastonnx.export(model, (torch.randn(4, 3),), dynamic_shapes=({0: batch},)).model_proto
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    _compare(proto, model, (torch.ones(2, 3),), (-torch.ones(2, 3),), (torch.ones(7, 3),), (-torch.ones(7, 3),))


class CondOnShape(torch.nn.Module):
    """A predicate on a dynamic size (a SymBool), not on data."""

    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x.sum(dim=0), lambda x: x.amax(dim=0), (x,))


def test_cond_on_a_dynamic_size():
    model = CondOnShape()
    proto = fastonnx.export(model, (torch.randn(3, 2),), dynamic_shapes=({0: torch.export.Dim("n")},)).model_proto
    _compare(proto, model, (torch.randn(3, 2),), (torch.randn(6, 2),))


class CountUp(torch.nn.Module):
    """A loop whose trip count is data: while i < n."""

    def forward(self, n, x):
        def cond_fn(i, x):
            return i < n

        def body_fn(i, x):
            return i + 1, x * 2 + 1

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


@pytest.mark.parametrize("opset", [13, 18, fastonnx._C.MAX_OPSET])
def test_while_loop_with_data_dependent_trip_count(opset):
    model = CountUp()
    proto = fastonnx.export(model, (torch.tensor(3), torch.randn(2, 3)), opset_version=opset).model_proto
    assert "Loop" in [n.op_type for n in proto.graph.node]
    x = torch.randn(2, 3)
    _compare(proto, model, (torch.tensor(3), x), (torch.tensor(7), x), (torch.tensor(0), x))


class LoopWithWeights(torch.nn.Module):
    """A loop body that uses a weight and an outer value, and a condition on carried data."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, limit):
        def cond_fn(x):
            return x.abs().sum() < limit

        def body_fn(x):
            return (torch.tanh(self.lin(x)) + x * 1.5,)

        return while_loop(cond_fn, body_fn, (x,))


def test_while_loop_with_weights_and_a_data_condition():
    torch.manual_seed(0)
    model = LoopWithWeights().eval()
    x = torch.full((1, 3), 0.1)
    proto = fastonnx.export(model, (x, torch.tensor(10.0))).model_proto
    _compare(proto, model, (x, torch.tensor(10.0)), (x, torch.tensor(100.0)), (x, torch.tensor(0.0)))


class CumulativeSum(torch.nn.Module):
    def forward(self, x):
        def combine(carry, row):
            total = carry + row
            return total, total * 2

        return scan(combine, torch.zeros(x.shape[1]), x, dim=0)


@pytest.mark.parametrize("opset", [13, 18, fastonnx._C.MAX_OPSET])
def test_scan_cumulative(opset):
    model = CumulativeSum()
    proto = fastonnx.export(model, (torch.randn(5, 3),), opset_version=opset).model_proto
    assert "Scan" in [n.op_type for n in proto.graph.node]
    _compare(proto, model, (torch.randn(5, 3),))
    carry, ys = run_ort(proto, [torch.arange(15.0).reshape(5, 3)])
    np.testing.assert_allclose(ys, 2 * np.cumsum(np.arange(15.0).reshape(5, 3), axis=0))


class ScanOverDim1WithWeight(torch.nn.Module):
    """A scan over the second dimension, an RNN-like step with a weight."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.Linear(4, 4)

    def forward(self, x):
        def combine(h, x_t):
            h = torch.tanh(self.cell(h) + x_t)
            return h, h.clone()  # torch rejects a function returning one tensor twice

        return scan(combine, torch.zeros(x.shape[0], 4), x, dim=1)


def test_scan_over_another_dim_with_a_weight():
    torch.manual_seed(0)
    model = ScanOverDim1WithWeight().eval()
    proto = fastonnx.export(model, (torch.randn(2, 6, 4),)).model_proto
    _compare(proto, model, (torch.randn(2, 6, 4),))


class BranchNeedsDecomposition(torch.nn.Module):
    """logaddexp has no converter but a decomposition: it is decomposed inside the branch too."""

    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda x, y: torch.logaddexp(x, y), lambda x, y: torch.rad2deg(x - y), (x, y))


def test_ops_in_branches_are_decomposed():
    model = BranchNeedsDecomposition()
    result = fastonnx.export(model, (torch.randn(3), torch.randn(3)), report=False)
    ops = _ops(result.model_proto.graph)
    assert "If" in ops and "Exp" in ops
    y = torch.randn(3)
    _compare(result.model_proto, model, (torch.ones(3), y), (-torch.ones(3), y))


def test_unsupported_ops_in_branches_are_listed_with_the_rest():
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            x = torch.special.i0e(x)
            return torch.cond(x.sum() > 0, lambda x: torch.special.erfcx(x), lambda x: torch.special.i0e(x) * 2, (x,))

    with pytest.raises(fastonnx.UnsupportedOpsError) as info:
        fastonnx.export(Unsupported(), (torch.randn(3),))
    ops = {op.overload: op.count for op in info.value.ops}
    assert ops == {"aten::special_i0e": 2, "aten::special_erfcx": 1}


class IntCounter(torch.nn.Module):
    """A counter carried as a Python int (a symbolic int in the loop, an int64 scalar in ONNX)."""

    def forward(self, x, n):
        i, y = while_loop(lambda i, y: y.sum() < n, lambda i, y: (i + 1, y * 2), (0, x))
        return y + i


def test_while_loop_carries_a_python_int():
    model = IntCounter()
    x = torch.tensor([0.5, 1.0])
    proto = fastonnx.export(model, (x, torch.tensor(10.0))).model_proto
    _compare(proto, model, (x, torch.tensor(10.0)), (x, torch.tensor(1.0)), (x, torch.tensor(100.0)))


def _branchy_session():
    """A session whose If branches both compute Abs of an outer value only they read."""
    from fastonnx.core.dtypes import dtype_code

    f32, b8 = dtype_code(torch.float32), dtype_code(torch.bool)
    s = fastonnx._C.Session(18)
    x = s.add_input("x", f32, [3])
    pred = s.add_input("pred", b8, [])
    (outer,) = s.add_node("", "Neg", [x], [], 1)
    s.set_meta(outer, f32, [3])
    branches = []
    for _ in range(2):
        s.begin_subgraph()
        (inner,) = s.add_node("", "Abs", [outer], [], 1)
        s.set_meta(inner, f32, [3])
        branches.append(s.end_subgraph([inner]))
    with pytest.raises(fastonnx._C.ConvertError, match="names no subgraph"):
        s.control_flow("If", [pred], [("then_branch", "g", 99)], [(f32, [3])], "bad")
    with pytest.raises(fastonnx._C.ConvertError, match="another node or attribute owns"):
        s.control_flow("If", [pred], [("then_branch", "g", branches[0]), ("else_branch", "g", branches[0])],
                       [(f32, [3])], "twice")
    (out,) = s.control_flow("If", [pred], [("then_branch", "g", branches[0]), ("else_branch", "g", branches[1])],
                            [(f32, [3])], "choice")
    with pytest.raises(fastonnx._C.ConvertError, match="another node or attribute owns"):
        s.control_flow("If", [pred], [("then_branch", "g", branches[0]), ("else_branch", "g", branches[1])],
                       [(f32, [3])], "again")
    s.set_outputs([(out, "y")])
    return s


def test_passes_keep_outer_values_and_do_not_merge_across_branches():
    model = _branchy_session().finish("test")
    proto = onnx.load_from_string(model.to_bytes())
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node] == ["Neg", "If"]  # Neg is read only by the branches
    then_branch, else_branch = (a.g for a in proto.graph.node[1].attribute)
    assert [n.op_type for n in then_branch.node] == [n.op_type for n in else_branch.node] == ["Abs"]
    assert then_branch.node[0].output[0] != else_branch.node[0].output[0]
    assert model.num_nodes == 4
    x = torch.tensor([1.0, -2.0, 3.0])
    for pred in (True, False):
        (got,) = run_ort(proto, [x, torch.tensor(pred)])
        np.testing.assert_allclose(got, x.abs().numpy())


def test_a_subgraph_must_be_ended():
    from fastonnx.core.dtypes import dtype_code

    s = fastonnx._C.Session(18)
    with pytest.raises(fastonnx._C.ConvertError, match="without begin_subgraph"):
        s.end_subgraph([])
    s.begin_subgraph()
    s.add_subgraph_input("i", dtype_code(torch.int64), [])
    with pytest.raises(fastonnx._C.ConvertError, match="not ended"):
        s.finish("test")


class ReverseScan(torch.nn.Module):
    def forward(self, x):
        return scan(lambda c, r: (c * 0.5 + r, c + r), torch.zeros(3), x, dim=0, reverse=True)


def test_scan_in_reverse():
    model = ReverseScan()
    proto = fastonnx.export(model, (torch.randn(4, 3),)).model_proto
    _compare(proto, model, (torch.randn(4, 3),))


class CondInLoop(torch.nn.Module):
    def forward(self, n, x):
        def body(i, x):
            return i + 1, torch.cond(x.sum() > 0, lambda x: x - 1.5, lambda x: x + 1.0, (x,))

        return while_loop(lambda i, x: i < n, body, (torch.zeros((), dtype=torch.int64), x))


class ScanInCond(torch.nn.Module):
    def forward(self, x):
        def cumulative(x):
            return scan(lambda c, r: (c + r, c * r), torch.zeros(3), x)[1]

        return torch.cond(x.sum() > 0, cumulative, lambda x: x * 2, (x,))


def test_control_flow_inside_control_flow():
    loop = CondInLoop()
    proto = fastonnx.export(loop, (torch.tensor(3), torch.randn(2))).model_proto
    assert _ops(proto.graph).count("If") == 1 and "Loop" in _ops(proto.graph)
    x = torch.tensor([2.0, 1.0])
    _compare(proto, loop, (torch.tensor(0), x), (torch.tensor(1), x), (torch.tensor(5), x))
    nested_scan = ScanInCond()
    proto = fastonnx.export(nested_scan, (torch.randn(4, 3),)).model_proto
    _compare(proto, nested_scan, (torch.rand(4, 3),), (-torch.rand(4, 3),))


class BigWeightInBranches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x @ self.w, lambda x: x @ self.w.t(), (x,))


def test_branch_weights_in_external_data(tmp_path):
    import onnxruntime as ort

    model = BigWeightInBranches()
    path = tmp_path / "m.onnx"
    fastonnx.export(model, (torch.randn(2, 64),), path, external_data=True)
    assert (tmp_path / "m.onnx.data").stat().st_size >= 64 * 64 * 4
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for x in (torch.ones(2, 64), -torch.ones(2, 64)):
        (got,) = session.run(None, {"x": x.numpy()})
        torch.testing.assert_close(torch.from_numpy(got), model(x).detach(), rtol=1e-4, atol=1e-4)


@torch.library.custom_op("fastonnx_test::cf_double", mutates_args=())
def cf_double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@cf_double.register_fake
def _(x):
    return torch.empty_like(x)


def test_python_converter_inside_a_branch():
    class UsesCustom(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: cf_double(x), lambda x: -x, (x,))

    fastonnx.register_converter("fastonnx_test::cf_double", lambda g, x: g.op("Add", x, x))
    try:
        model = UsesCustom()
        proto = fastonnx.export(model, (torch.randn(3),)).model_proto
    finally:
        fastonnx.unregister_converter("fastonnx_test::cf_double")
    _compare(proto, model, (torch.ones(3),), (-torch.ones(3),))


def test_report_counts_the_ops_of_subgraphs(tmp_path):
    report = tmp_path / "report.md"
    fastonnx.export(CondWithWeights(), (torch.randn(2, 4), torch.randn(2, 4)), report=report)
    text = report.read_text()
    written = text.split("## ONNX ops written")[1]
    for op in ("| If | 1 |", "| Gemm | 1 |", "| Sub | 1 |"):
        assert op in written
    assert "| cond | 1 |" in text.split("## ATen ops converted")[1]
    assert "| aten::linear | 1 |" in text


class InplaceInBranch(torch.nn.Module):
    """An in-place op inside a branch that a view reads afterwards: the branch is functionalized
    (converting add_ as add would lose the update the view sees)."""

    def forward(self, x):
        def then(x):
            y = x * 2
            flat = y.view(-1)
            y.add_(1)
            return flat.clone()

        return torch.cond(x.sum() > 0, then, lambda x: x.reshape(-1) - 1, (x,))


def test_inplace_op_in_a_branch_is_functionalized():
    model = InplaceInBranch()
    proto = fastonnx.export(model, (torch.randn(2, 3),)).model_proto
    _compare(proto, model, (torch.ones(2, 3),), (-torch.ones(2, 3),))


class MapRows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, xs, y):
        return hmap(lambda x, y: (self.lin(x * y).relu(), x.sum()), xs, y)


def test_map_is_a_scan_without_state():
    model = MapRows().eval()
    proto = fastonnx.export(model, (torch.randn(4, 3), torch.randn(3))).model_proto
    assert "Scan" in [n.op_type for n in proto.graph.node]
    _compare(proto, model, (torch.randn(4, 3), torch.randn(3)))


class PinnedCondition(torch.nn.Module):
    """A loop condition on a static size: torch traces it as the constant False."""

    def forward(self, x):
        return while_loop(lambda x: x.shape[0] > 100, lambda x: (x + 1,), (x,))


def test_while_loop_with_a_constant_condition():
    model = PinnedCondition()
    proto = fastonnx.export(model, (torch.randn(3),)).model_proto
    _compare(proto, model, (torch.randn(3),))

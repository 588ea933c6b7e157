"""The TorchScript front end: what torch.export refuses, traced with torch.jit (or given as a
ScriptModule), lowered through the same converters, and run in onnxruntime at the traced sizes
and at others on the dynamic axes."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest
import torch
from models.scripted import Branchy, CountingLoop, PerRowLoop, UnrolledLoop
from support import assert_declared_shapes_hold, assert_matches, run_ort
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import fastonnx
from fastonnx import ArgumentError, TraceError, TracerFallbackWarning


def _export_quietly(model, args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(model, args, **kwargs)
    return result, [w for w in caught if issubclass(w.category, TracerFallbackWarning)]


class DataDependent(torch.nn.Module):
    """A size read from the data (torch.export: a data-dependent guard)."""

    def forward(self, x):
        n = int(x.abs().sum().item()) % 3 + 1
        return x[x > 0].sum() + torch.nonzero(x > 0).float().mean(), torch.zeros(n)


def test_auto_falls_back_with_one_warning_naming_why_and_what_was_fixed():
    x = torch.randn(5, 3)
    result, fallbacks = _export_quietly(DataDependent(), (x,))
    assert result.tracer == "torch.jit.trace"
    assert len(fallbacks) == 1
    message = str(fallbacks[0].message)
    assert "torch.export refused: GuardOnDataDependentSymNode" in message
    assert "Converting a tensor to a Python number" in message and "test_jit_front_end.py" in message
    assert_matches(result.model_proto, DataDependent(), (x,), rtol=1e-4, atol=1e-5)
    # The number of positive elements stays a size of the graph (never the example's count); the
    # number read with int() is the example's, as the warning says.
    other = torch.randn(5, 3)
    for x2 in (other, x.abs()):
        got = run_ort(result.model_proto, [x2])[0]
        np.testing.assert_allclose(got, DataDependent()(x2)[0].numpy(), rtol=1e-4, atol=1e-5)


def test_forced_front_ends():
    x = torch.randn(5, 3)
    with pytest.raises(TraceError, match="GuardOnDataDependentSymNode"):
        fastonnx.export(DataDependent(), (x,), tracer="export")
    result, fallbacks = _export_quietly(torch.nn.Linear(3, 2), (x,), tracer="jit")
    assert result.tracer == "torch.jit.trace" and not fallbacks
    assert fastonnx.export(torch.nn.Linear(3, 2), (x,)).tracer == "torch.export"
    with pytest.raises(ArgumentError, match="tracer must be one of"):
        fastonnx.export(torch.nn.Linear(3, 2), (x,), tracer="dynamo")


def test_an_op_without_converter_never_falls_back():
    class Erfinv(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x)

    with pytest.raises(fastonnx.UnsupportedOpsError):
        fastonnx.export(Erfinv(), (torch.randn(3),))


def test_dynamic_axes_stay_dynamic_through_the_tracer():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            return y.view(x.size(0), -1) * x.size(0)

    model = Net().eval()
    result = fastonnx.export(model, (torch.randn(2, 4),), tracer="jit", dynamic_axes={"x": {0: "batch"}})
    assert [d.dim_param for d in result.model_proto.graph.input[0].type.tensor_type.shape.dim] == ["batch", ""]
    for batch in (2, 5):
        assert_matches(result.model_proto, model, (torch.randn(batch, 4),), rtol=1e-4, atol=1e-5)


def test_a_size_subtracted_from_a_number_with_alpha():
    """``torch.rsub(size, n, alpha=a)`` on a size the tracer records is ``n - a * size``."""

    class Net(torch.nn.Module):
        def forward(self, x):
            return x.new_zeros(torch.rsub(torch._shape_as_tensor(x)[0], 20, alpha=2)) + x.sum()

    model = Net()
    result, _ = _export_quietly(model, (torch.randn(3, 2),), tracer="jit", dynamic_axes={"x": {0: "n"}})
    for n in (3, 5):
        assert_matches(result.model_proto, model, (torch.randn(n, 2),), rtol=1e-4, atol=1e-5)


def test_an_axis_the_trace_fixes_is_static_and_verify_checks_other_sizes(capsys):
    class Fixes(torch.nn.Module):
        def forward(self, x):
            return x.reshape(int(x.shape[0]), -1)

    with pytest.warns(fastonnx.DynamicAxesWarning, match="fixed to 3"):
        result = fastonnx.export(Fixes(), (torch.randn(3, 2, 2),), tracer="jit", dynamic_axes={"x": {0: "n"}})
    assert result.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3

    class Good(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1)

    fastonnx.export(Good(), (torch.randn(3, 2, 2),), tracer="jit", dynamic_axes={"x": {0: "n"}}, verify=True)
    assert "at n=4:" in capsys.readouterr().out


# -- packed sequences --------------------------------------------------------------------------


class Packed(torch.nn.Module):
    def __init__(self, kind, bidirectional, layers, batch_first, nonlinearity="tanh", proj_size=0):
        super().__init__()
        extra = {"nonlinearity": nonlinearity} if kind == "RNN" else {"proj_size": proj_size} if proj_size else {}
        self.rnn = getattr(torch.nn, kind)(3, 5, num_layers=layers, bidirectional=bidirectional,
                                           batch_first=batch_first, **extra)
        self.batch_first = batch_first

    def forward(self, x, lengths, h0=None):
        packed = pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=False)
        out, state = self.rnn(packed, h0)
        padded, _ = pad_packed_sequence(out, batch_first=self.batch_first)
        return padded, state


def _packed_inputs(model, steps, batch, initial):
    shape = (batch, steps, 3) if model.batch_first else (steps, batch, 3)
    lengths = torch.randint(1, steps + 1, (batch,))
    lengths[0] = steps
    args = [torch.randn(*shape), lengths]
    if initial:
        rnn = model.rnn
        layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
        h = torch.randn(layers, batch, getattr(rnn, "proj_size", 0) or 5)
        args.append((h, torch.randn(layers, batch, 5)) if isinstance(rnn, torch.nn.LSTM) else h)
    return tuple(args)


@pytest.mark.parametrize("initial", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["time_major", "batch_first"])
@pytest.mark.parametrize(
    "kind,bidirectional,layers,nonlinearity",
    [("LSTM", True, 2, None), ("LSTM", False, 1, None), ("GRU", True, 3, None), ("GRU", False, 2, None),
     ("RNN", True, 2, "tanh"), ("RNN", False, 1, "relu")],
    ids=lambda v: str(v),
)
def test_packed_sequence_rnns(kind, bidirectional, layers, nonlinearity, batch_first, initial):
    torch.manual_seed(0)
    model = Packed(kind, bidirectional, layers, batch_first, nonlinearity or "tanh").eval()
    args = _packed_inputs(model, 6, 4, initial)
    names = ["x", "lengths"] + (["h0", "c0"] if initial and kind == "LSTM" else ["h0"] if initial else [])
    time_axis, batch_axis = (1, 0) if batch_first else (0, 1)
    axes = {"x": {time_axis: "steps", batch_axis: "batch"}, "lengths": {0: "batch"}}
    axes.update({n: {1: "batch"} for n in names[2:]})
    result, fallbacks = _export_quietly(model, args, input_names=names, dynamic_axes=axes)
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    assert any(n.op_type == {"RNN": "RNN"}.get(kind, kind) for n in result.model_proto.graph.node)
    for steps, batch in ((6, 4), (9, 3)):
        torch.manual_seed(steps)
        other = _packed_inputs(model, steps, batch, initial)
        assert_matches(result.model_proto, model, other, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("initial", [False, True], ids=["no_h0", "h0"])
@pytest.mark.parametrize("bidirectional,layers", [(False, 1), (True, 2)], ids=["forward", "bidirectional_2_layers"])
def test_packed_sequence_lstm_with_projections(bidirectional, layers, initial):
    """An LSTM with proj_size: ONNX's LSTM computes all but each sequence's first step, which for
    the reverse direction is at the sequence's own last step; a sequence of length 1 has only it."""
    torch.manual_seed(0)
    model = Packed("LSTM", bidirectional, layers, batch_first=True, proj_size=2).eval()
    args = _packed_inputs(model, 6, 4, initial)
    names = ["x", "lengths"] + (["h0", "c0"] if initial else [])
    axes = {"x": {0: "batch", 1: "steps"}, "lengths": {0: "batch"}, **{n: {1: "batch"} for n in names[2:]}}
    result, fallbacks = _export_quietly(model, args, input_names=names, dynamic_axes=axes)
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    for steps, batch in ((6, 4), (9, 3), (1, 2)):
        torch.manual_seed(steps)
        other = list(_packed_inputs(model, steps, batch, initial))
        other[1][-1] = 1
        assert_matches(result.model_proto, model, tuple(other), rtol=1e-4, atol=1e-5)


def test_own_ops_are_declared_with_the_schemas_codegen_reads():
    """The torch.library ops fastonnx declares have the schemas op_schemas.txt gives codegen
    (from which the native converters' signatures are generated)."""
    text = (Path(fastonnx.__file__).parent / "op_schemas.txt").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines
    for line in lines:
        name = line[: line.index("(")]
        assert str(getattr(torch.ops.fastonnx, name).default._schema) == f"fastonnx::{line}"
        assert f"fastonnx::{name}" in fastonnx.supported_ops()


# -- ScriptModules -----------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Branchy, PerRowLoop, CountingLoop, UnrolledLoop])
def test_script_modules_with_loops_and_branches(cls):
    model = torch.jit.script(cls().eval())
    result = fastonnx.export(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert result.tracer == "torch.jit.script"
    ops = {n.op_type for n in result.model_proto.graph.node}
    assert {"Branchy": "If", "PerRowLoop": "Loop", "CountingLoop": "Loop"}.get(cls.__name__, "Mul") in ops
    for rows in (3, 6):
        for sign in (1, -1):
            x = torch.randn(rows, 4).abs() * sign
            want = model(x)
            want = [torch.as_tensor(w) for w in (want if isinstance(want, tuple) else (want,))]
            for got, expected in zip(run_ort(result.model_proto, [x]), want, strict=True):
                np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-4, atol=1e-5)


class OneRowBroadcasts(torch.nn.Module):
    def forward(self, x, y):
        if x.size(0) == 1:
            return x + y  # x's one row broadcast over y's
        return x * 2


def test_a_scripted_if_on_a_size_traced_at_zero_stays_an_if():
    """Traced at size 0, the branch the example does not take (x + y, which broadcasts only where
    x has one row) is translated with x's dynamic sizes unknown, not as the example's 0."""
    model = torch.jit.script(OneRowBroadcasts())
    y = torch.randn(4, 3)
    result = fastonnx.export(model, (torch.randn(0, 3), y), dynamic_axes={"x": {0: "n"}})
    assert result.tracer == "torch.jit.script"
    assert "If" in {n.op_type for n in result.model_proto.graph.node}
    for rows in (0, 1, 2, 4):
        x = torch.randn(rows, 3)
        (got,) = run_ort(result.model_proto, [x, y])
        want = model(x, y)
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


class WritesOutsideBranch(torch.nn.Module):
    """A scripted `if` on a dynamic size writing into a tensor made before it: ONNX's branches are
    functions of their inputs, and the file lost the write (it gave zeros)."""

    def forward(self, x):
        y = torch.zeros(x.size(0), 3)
        z = torch.ones(2)
        if x.size(0) == 2:
            y[:] = x + 1
            z.mul_(3)
        elif x.size(0) == 3:
            y[:] = x * 3
        return y + z.sum()


def test_a_scripted_if_writing_into_tensors_made_outside_it_returns_them():
    model = torch.jit.script(WritesOutsideBranch())
    result = fastonnx.export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})
    assert "If" in {n.op_type for n in result.model_proto.graph.node}
    for rows in (2, 3, 4):
        x = torch.randn(rows, 3)
        np.testing.assert_allclose(run_ort(result.model_proto, [x])[0], model(x).numpy(), rtol=1e-5, atol=1e-6)


class WritesOutsideLoop(torch.nn.Module):
    def forward(self, x):
        y = torch.zeros(x.size(0), 3)
        for i in range(x.size(0)):
            y[i] = x[i] * 2
        return y


class SkipsTheFirstRow(torch.nn.Module):
    """Reads in a loop a constant tensor the loop writes into: each iteration reads what the one
    before wrote, not the constant (the first version folded it: the file added no row)."""

    def forward(self, x):
        flags = torch.zeros(2)
        total = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            if flags[0] > 0:
                total = total + x[i]
            flags[0] = 1.0
        return total


@pytest.mark.parametrize("cls", [WritesOutsideLoop, SkipsTheFirstRow])
def test_a_scripted_loop_writing_into_tensors_made_outside_it_carries_them(cls):
    """The tensor a loop over a dynamic size writes into is state of the ONNX Loop, what it holds
    after the loop its result (torch's suite: test_inplace_sequence_with_loop)."""
    model = torch.jit.script(cls())
    result = fastonnx.export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})
    assert "Loop" in {n.op_type for n in result.model_proto.graph.node}
    for rows in (2, 1, 5):
        x = torch.randn(rows, 3)
        np.testing.assert_allclose(run_ort(result.model_proto, [x])[0], model(x).numpy(), rtol=1e-5, atol=1e-6)


class WritesIntoAViewOutside(torch.nn.Module):
    def forward(self, x):
        y = torch.zeros(x.size(0), 3)
        top = y[:1]
        if x.size(0) == 2:
            top.add_(1)
        return y


class WritesIntoAViewOutsideInALoop(torch.nn.Module):
    def forward(self, x):
        y = torch.zeros(x.size(0), 3)
        top = y[:1]
        for i in range(x.size(0)):
            top.add_(x[i])
        return y


class ReadsInALoopAViewOfWhatItWrites(torch.nn.Module):
    def forward(self, x):
        flags = torch.zeros(2)
        first = flags[:1]
        total = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            if first[0] > 0:
                total = total + x[i]
            flags[0] = 1.0
        return total


@pytest.mark.parametrize(
    "cls, what",
    [
        (WritesIntoAViewOutsideInALoop, "loop"),
        (ReadsInALoopAViewOfWhatItWrites, "loop"),
        (WritesIntoAViewOutside, "if"),
    ],
)
def test_control_flow_writing_into_what_it_cannot_return_is_an_error(cls, what):
    with pytest.raises(fastonnx.ConversionError, match=rf"a scripted `{what}` writes into a tensor made outside it "
                                                       r"\(aten::(copy|add)_, at .*test_jit_front_end.py:\d+: (y|top|flags)"):
        fastonnx.export(torch.jit.script(cls()), (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})


def test_a_script_module_cannot_be_forced_through_torch_export():
    with pytest.raises(ArgumentError, match="ScriptModule goes through the TorchScript front end"):
        fastonnx.export(torch.jit.script(Branchy()), (torch.randn(3, 4),), tracer="export")


# -- scripted code a traced module calls -------------------------------------------------------
# torch.export runs a scripted function's Python, so its test of a size fixes the axis; the
# TorchScript graph keeps the test as an If or a Loop, and tracer="auto" takes it then.


@torch.jit.script
def fill_state(x: torch.Tensor, prev: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's suite's test_index_put_if_2, small: a state made when ``prev`` is empty, from it
    when it has one row (broadcast over the state's two), constant when two."""
    state = torch.zeros(2, x.size(0), 3)
    seen = torch.zeros(2, x.size(0), 3)
    if prev.size(0) == 0:
        for i in range(2):
            state[:] = torch.ones(x.size(0), 3) * i
            seen[:] = torch.ones(x.size(0), 3) * i
    elif prev.size(0) == 1:
        s = state[:]
        state[:] = prev + s
    elif prev.size(0) == 2:
        state[:] = torch.ones(x.size(0), 3) * 4
    return state, seen


class FillsState(torch.nn.Module):
    def forward(self, x, prev):
        state, seen = fill_state(x, prev)
        return state + x.sum(), seen


@pytest.mark.parametrize("batch_dynamic", [True, False], ids=["batch_dynamic", "batch_static"])
def test_a_scripted_function_whose_ifs_test_a_size_traced_at_zero(batch_dynamic):
    model = FillsState()
    axes = {"prev": [0, 1, 2], **({"x": {0: "batch"}} if batch_dynamic else {})}
    result, fallbacks = _export_quietly(model, (torch.randn(1, 3), torch.zeros(0, 0, 0)), dynamic_axes=axes)
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    message = str(fallbacks[0].message)
    assert "input `prev` axis 0" in message and "if prev.size(0) == 0:" in message and "scripted code" in message
    prev_axes = [d.dim_param for d in result.model_proto.graph.input[1].type.tensor_type.shape.dim]
    assert prev_axes == ["prev_dynamic_axes_1", "prev_dynamic_axes_2", "prev_dynamic_axes_3"]
    batches = (1, 3) if batch_dynamic else (1,)
    # each branch at its size (3 takes none), and prev's one row broadcast over the batch and the
    # last axis, which the branch of one row accepts
    for batch in batches:
        for prev in ((0, 0, 0), (1, batch, 3), (1, 1, 3), (1, batch, 1), (2, batch, 3), (3, batch, 3)):
            args = (torch.randn(batch, 3), torch.randn(*prev))
            assert_matches(result.model_proto, model, args, rtol=1e-5, atol=1e-6)


@torch.jit.script
def by_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if x.size(0) == 2:
        return x * 2 + y
    elif x.size(0) == 1:
        return x + y.expand(4, y.size(0))  # one row broadcast over four: code for one row only
    return x.flip(0) - y.sum()


class ByRows(torch.nn.Module):
    def forward(self, x, y):
        return by_rows(x, y) + 1


def test_a_scripted_function_with_a_size_branch_traced_at_two_runs_at_other_sizes():
    model = ByRows()
    y = torch.randn(5)
    result, fallbacks = _export_quietly(model, (torch.randn(2, 5), y), dynamic_axes={"x": {0: "rows"}})
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    assert "input `x` axis 0: at " in str(fallbacks[0].message)
    assert "If" in {n.op_type for n in result.model_proto.graph.node}
    for rows in (2, 3, 1, 6, 0):
        x = torch.randn(rows, 5)
        (got,) = run_ort(result.model_proto, [x, y])
        want = model(x, y)
        assert got.shape == tuple(want.shape), f"{rows} rows"
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    # torch.export's own trace of it holds for the traced size only, and says where
    fixed = r"fixed to 2 at .*test_jit_front_end.py:\d+: +if x.size\(0\) == 2"
    with pytest.warns(fastonnx.DynamicAxesWarning, match=fixed):
        static = fastonnx.export(model, (torch.randn(2, 5), y), dynamic_axes={"x": {0: "rows"}}, tracer="export")
    assert static.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


@torch.jit.script
def weighted_rows(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(x[0])
    for i in range(x.size(0)):
        acc = acc + x[i] * i
    return acc * x.size(0)


class WeightedRows(torch.nn.Module):
    def forward(self, x):
        return weighted_rows(x) - x.mean(0)


def test_a_scripted_loop_over_a_size():
    model = WeightedRows()
    result, fallbacks = _export_quietly(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    assert "for i in range(x.size(0)):" in str(fallbacks[0].message)
    assert "Loop" in {n.op_type for n in result.model_proto.graph.node}
    for rows in (3, 1, 2, 7):
        assert_matches(result.model_proto, model, (torch.randn(rows, 4),), rtol=1e-5, atol=1e-5)


@torch.jit.script
def columns_or_sums(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros_like(y)
    for i in range(x.size(0)):
        if x.size(1) == 1:
            acc = acc + x[i] + y  # x's one column broadcast over y's
        else:
            acc = acc + x[i].sum()
    return acc


class ColumnsOrSums(torch.nn.Module):
    def forward(self, x, y):
        return columns_or_sums(x, y)


class ColumnsOrSumsWrittenThrough(torch.nn.Module):
    """The same, and a write through a view read afterwards: the program is rewritten without
    in-place ops, the loop and the if in it as they were translated."""

    def forward(self, x, y):
        out = columns_or_sums(x, y)
        out[:1].add_(1)
        return out * 2


@pytest.mark.parametrize("cls", [ColumnsOrSums, ColumnsOrSumsWrittenThrough])
def test_a_scripted_loop_whose_body_tests_a_size(cls):
    model, y = cls(), torch.randn(4)
    result, fallbacks = _export_quietly(model, (torch.randn(3, 4), y), dynamic_axes={"x": {0: "n", 1: "k"}})
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    for shape in ((3, 4), (5, 4), (2, 1), (4, 1), (1, 1)):
        assert_matches(result.model_proto, model, (torch.randn(*shape), y), rtol=1e-5, atol=1e-5)


def test_torch_export_stays_where_the_program_taken_instead_fails_to_convert(monkeypatch):
    def fails(program):
        raise fastonnx.ConversionError("as if the TorchScript program failed to convert")

    monkeypatch.setattr(fastonnx.pipeline.export, "functionalized", fails)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(ByRows(), (torch.randn(2, 5), torch.randn(5)), dynamic_axes={"x": {0: "rows"}})
    assert result.tracer == "torch.export"
    assert not [w for w in caught if issubclass(w.category, TracerFallbackWarning)]
    assert any(issubclass(w.category, fastonnx.DynamicAxesWarning) and "fixed to 2" in str(w.message) for w in caught)


class PythonTestsTheSize(torch.nn.Module):
    """A test of the size in the traced module's own Python code, which torch.jit.trace would
    bake in: torch.export's trace stays, static there."""

    def forward(self, x):
        y = weighted_rows(x)
        if x.size(0) > 3:
            return y + 1
        return y


class PythonOnly(torch.nn.Module):
    def forward(self, x):
        if x.size(0) == 3:
            return x * 2
        return x


@pytest.mark.parametrize("cls", [PythonTestsTheSize, PythonOnly])
def test_an_axis_a_test_in_python_code_fixes_stays_with_torch_export(cls):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(cls(), (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert result.tracer == "torch.export"
    assert not [w for w in caught if issubclass(w.category, TracerFallbackWarning)]
    assert any(issubclass(w.category, fastonnx.DynamicAxesWarning) and "fixed to 3" in str(w.message) for w in caught)
    assert result.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3


# -- eager-mode quantized modules --------------------------------------------------------------


class QuantizedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import torch.ao.nn.quantized as nnq

        self.quant = nnq.Quantize(0.05, 128, torch.quint8)
        self.conv = nnq.Conv2d(3, 4, 3)
        self.conv.set_weight_bias(
            torch.quantize_per_channel(torch.randn(4, 3, 3, 3), torch.rand(4) * 0.05 + 0.01,
                                       torch.zeros(4, dtype=torch.long), 0, torch.qint8),
            torch.randn(4),
        )
        self.conv.scale, self.conv.zero_point = 0.1, 100
        self.func = nnq.QFunctional()
        self.func.scale, self.func.zero_point = 0.2, 90
        self.linear = nnq.Linear(16, 5)
        self.linear.set_weight_bias(torch.quantize_per_tensor(torch.randn(5, 16), 0.02, 0, torch.qint8), torch.randn(5))
        self.linear.scale, self.linear.zero_point = 0.15, 120

    def forward(self, x):
        q = self.quant(x)
        y = self.conv(q)
        y = self.func.add(y, torch.relu(y))
        y = self.func.cat([y, y], 1)
        y = torch.nn.functional.max_pool2d(y, 2).reshape(x.shape[0], -1)[:, :16]
        return torch.dequantize(self.linear(y))


def test_eager_mode_quantized_modules_as_quantize_dequantize_pairs():
    torch.manual_seed(0)
    model = QuantizedNet().eval()
    x = torch.randn(2, 3, 6, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates its quantized tensors
        result, fallbacks = _export_quietly(model, (x,), dynamic_axes={"x": {0: "batch"}})
        ops = [n.op_type for n in result.model_proto.graph.node]
        assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
        assert {"QuantizeLinear", "DequantizeLinear", "Conv", "Gemm"} <= set(ops)
        int_weights = [i for i in result.model_proto.graph.initializer if i.data_type == 3 and len(i.dims) >= 2]  # int8
        assert len(int_weights) == 2  # the conv's and the linear's weights stay int8
        for batch in (2, 5):
            other = torch.randn(batch, 3, 6, 6)
            # Quantization rounds: one step of the output scale at most.
            np.testing.assert_allclose(run_ort(result.model_proto, [other])[0], model(other).numpy(), atol=0.15 + 1e-6)


def test_quantized_inputs_and_outputs_are_integers_scale_and_zero_point():
    class Pool(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(torch.relu(x), 2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.quantize_per_tensor(torch.randn(1, 2, 4, 4), 0.2, 3, torch.quint8)
        result, _ = _export_quietly(Pool(), (x,))
        assert result.input_names == ["x", "x_scale", "x_zero_point"]
        got = run_ort(result.model_proto, [x.int_repr(), torch.tensor(0.2, dtype=torch.float64), torch.tensor(3)])
        want = Pool()(x)
    assert np.array_equal(got[0], want.int_repr().numpy())
    assert got[1] == pytest.approx(0.2) and got[2] == 3
    assert got[1].dtype == np.float32 and got[2].dtype == np.uint8  # as torch.onnx's exporter gives them


def _one_d_conv(transposed: bool):
    import torch.ao.nn.quantized as nnq

    conv = nnq.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1) if transposed else nnq.Conv1d(4, 6, 3, stride=2)
    shape = (4, 6, 3) if transposed else (6, 4, 3)
    conv.set_weight_bias(torch.quantize_per_tensor(torch.randn(shape), 0.05, 0, torch.qint8), torch.randn(6))
    return conv


def _wide_output_padding():
    """A transposed convolution whose output_padding reaches the stride (PyTorch's quantized
    kernels take it; onnxruntime's ConvTranspose does not)."""
    import torch.ao.nn.quantized as nnq

    conv = nnq.ConvTranspose3d(4, 6, [2, 3, 2], output_padding=(0, 1, 2), stride=[3, 1, 2])
    conv.set_weight_bias(torch.quantize_per_tensor(torch.randn(4, 6, 2, 3, 2), 0.05, 0, torch.qint8), torch.randn(6))
    return conv


class QuantizedHardswish(torch.nn.Module):
    def forward(self, x):
        return torch.ao.nn.quantized.functional.hardswish(x, 0.05, 100)


@pytest.mark.parametrize(
    "make, rank",
    [(lambda: _one_d_conv(False), 3), (lambda: _one_d_conv(True), 3), (_wide_output_padding, 5), (QuantizedHardswish, 4)],
    ids=["conv1d", "conv_transpose1d", "conv_transpose3d_wide_output_padding", "hardswish"],
)
def test_quantized_one_d_convolutions_and_ops_named_by_their_input(make, rank):
    """PyTorch packs a quantized 1-d convolution as a 2-d one over a height of 1; a transposed one may
    pad its output by the stride or more; quantized::hardswish names its operand `input`. The
    integers of the output match PyTorch's exactly."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().eval()
        x = torch.quantize_per_tensor(torch.randn((2, 4, 9, 5, 4)[:rank]), 0.1, 128, torch.quint8)
        result, _ = _export_quietly(model, (x,))
        got = run_ort(result.model_proto, [x.int_repr(), torch.tensor(0.1, dtype=torch.float64), torch.tensor(128)])
        want = model(x)
    np.testing.assert_array_equal(got[0], want.int_repr().numpy())


def test_a_float_model_returning_quantized_tensors_falls_back_to_the_jit_front_end():
    """torch.export traces quantize_per_tensor with a float32 result; the TorchScript front end
    returns each quantized tensor as its integers, scale and zero point."""

    class Quantize(torch.nn.Module):
        def forward(self, x):
            return torch.quantize_per_tensor(x, 0.2, 0, torch.qint8), torch.quantize_per_tensor(x, 0.2, 128, torch.quint8)

    x = torch.randn(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result, fallbacks = _export_quietly(Quantize(), (x,))
        want = Quantize()(x)
    assert result.tracer == "torch.jit.trace" and "quantized tensors" in str(fallbacks[0].message)
    got = run_ort(result.model_proto, [x])
    np.testing.assert_array_equal(got[0], want[0].int_repr().numpy())
    np.testing.assert_array_equal(got[3], want[1].int_repr().numpy())
    assert [got[1], got[2], got[4], got[5]] == [pytest.approx(0.2), 0, pytest.approx(0.2), 128]


# -- what torch.export refuses among the torch.onnx suite's cases ------------------------------


def test_data_dependent_arange_and_in_place_writes():
    class ArangeOut(torch.nn.Module):
        def forward(self, end):
            return torch.arange(end, out=torch.zeros(1))

    class WriteRows(torch.nn.Module):
        def forward(self, x, rows, data):
            x[rows] = data
            return x * 2

    result, _ = _export_quietly(ArangeOut(), (torch.tensor(8.5),))
    assert result.tracer == "torch.jit.trace"
    for end in (8.5, 3.2):
        assert_matches(result.model_proto, ArangeOut(), (torch.tensor(end),), rtol=1e-4, atol=1e-5)
    args = (torch.randn(5, 3), torch.tensor([0, 2]), torch.randn(2, 3))
    result, _ = _export_quietly(WriteRows(), tuple(a.clone() for a in args))
    assert_matches(result.model_proto, WriteRows(), tuple(a.clone() for a in args), rtol=1e-4, atol=1e-5)


class ColumnsOfAMask(torch.nn.Module):
    """Sizes read from the data and nothing else that reads it: where(mask) (a composite of
    nonzero, one TorchScript node returning a list), a boolean mask's index, a size of its result."""

    def forward(self, x, scores):
        columns = torch.where(scores > 0)[1]
        picked = x[:, columns]
        positive = x[x > 0]
        return picked * 2, positive + 1, torch.zeros(positive.size(0))


def test_sizes_read_from_data_stay_sizes_of_the_graph():
    """The trace's types are the example's sizes: after an op whose size depends on the data they
    are not the graph's (the trace's types were taken for where(mask)'s, which then failed to
    translate; a mask's index kept the example's count). The counts stay symbols: the model runs at
    other counts, none included, and every size it declares holds there."""
    x, scores = torch.randn(3, 5), torch.tensor([[1.0, -1.0, 2.0, 3.0, -2.0]])
    result, _ = _export_quietly(ColumnsOfAMask(), (x, scores), tracer="jit")
    for args in [(x, scores), (torch.randn(3, 5), torch.randn(1, 5)), (torch.randn(3, 5), -torch.ones(1, 5))]:
        assert_matches(result.model_proto, ColumnsOfAMask(), args, rtol=1e-6, atol=0)
        assert_declared_shapes_hold(result.model_proto, {"x": args[0].numpy(), "scores": args[1].numpy()})


class WriteAtIndex(torch.nn.Module):
    """In-place writes into views at an index or a step read from data (x[ind] = data: select,
    then copy_)."""

    def forward(self, x, ind, step, row, column):
        x[ind] = row
        x[:, ind] += column
        x[1::step, :ind] = 0.5
        return x * 2


def test_writes_into_views_at_an_index_or_step_read_from_data():
    """Rewriting the in-place ops retraced the graph with the example's values beside, and torch's
    check of a view's offset against the real one guarded on the index read from data (a select at
    it has an offset of its own symbol), which failed. Retraced on symbols only, a slice's step read
    from data is assumed positive as eager requires (torch's fake slice guards on it). The index
    and the step stay inputs: other rows, columns and steps, negative indices included, are written
    where eager PyTorch writes them."""

    def inputs(ind, step):
        return (torch.randn(5, 4), torch.tensor(ind), torch.tensor(step), torch.randn(4), torch.randn(5))

    result, _ = _export_quietly(WriteAtIndex(), inputs(2, 2))
    assert result.tracer == "torch.jit.trace"
    for ind, step in [(2, 2), (0, 1), (3, 3), (-1, 2), (-4, 7)]:
        args = inputs(ind, step)
        got = run_ort(result.model_proto, [a.clone() for a in args])[0]  # (eager writes into x)
        np.testing.assert_allclose(got, WriteAtIndex()(*args).numpy(), rtol=1e-6, atol=1e-6)


def test_one_hot_and_linspace_of_counts_read_from_data():
    """torch's decompositions of one_hot and linspace ask whether a count read from data is -1 or
    0; fastonnx's choose in the graph. The models run at counts other than the example's, a
    count of -1 included (one_hot then counts the classes)."""

    class OneHot(torch.nn.Module):
        def forward(self, x, num_classes):
            return torch.nn.functional.one_hot(x, num_classes.to(torch.int32)[0])

    class Linspace(torch.nn.Module):
        def forward(self, start, end, steps):
            return torch.linspace(start, end, steps)

    x = torch.tensor([3, 1, 7, 2, 2, 0, 1, 1, 4, 3])
    result, _ = _export_quietly(OneHot(), (x, torch.tensor([15.0])))
    for count in (15.0, 9.0, -1.0):
        assert_matches(result.model_proto, OneHot(), (x, torch.tensor([count])), rtol=0, atol=0)
    result, _ = _export_quietly(Linspace(), (torch.tensor(3.0), torch.tensor(10.0), torch.tensor(5)))
    for start, end, steps in [(3.0, 10.0, 5), (-1.7, 10.3, 8), (2.0, 5.0, 1), (1.0, 2.0, 0)]:
        args = (torch.tensor(start), torch.tensor(end), torch.tensor(steps))
        assert_matches(result.model_proto, Linspace(), args, rtol=1e-6, atol=1e-6)


def test_report_names_the_front_end(tmp_path):
    path = tmp_path / "m.onnx"
    _export_quietly(DataDependent(), (torch.randn(5, 3),), f=str(path), report=True)
    assert "front end: torch.jit.trace" in (tmp_path / "m.onnx.report.md").read_text()


class DictSubclass(dict):
    """A result class of the model's own (pytree does not know it)."""


def test_outputs_in_a_dict_subclass_are_flattened():
    """The TorchScript tracer flattens any dict, list or tuple; pytree kept an instance of an
    unregistered dict subclass whole, as one output that is not a tensor."""

    class ReturnsDictSubclass(torch.nn.Module):
        def forward(self, a, b, c):
            return DictSubclass(first=a + 1, pair=(b, c * 2), rest=[a * b])

    args = (torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3))
    result, fallbacks = _export_quietly(ReturnsDictSubclass(), args, verify=True)
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    assert result.output_names == ["first", "pair_0", "pair_1", "rest_0"]
    eager = ReturnsDictSubclass()(*args)
    want = [eager["first"], *eager["pair"], *eager["rest"]]
    for got, expected in zip(run_ort(result.model_proto, list(args)), want):
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool])
def test_indexing_with_a_constant_mask(dtype):
    """torch's constant propagation folds the list of indices holding a constant tensor into one
    constant list; its tensor is a constant of the graph (it reached the converter as a tensor)."""

    class ConstantMask(torch.nn.Module):
        def forward(self, x):
            return x[torch.tensor([0, 1, 1], dtype=dtype)] * 2

    x = torch.randn(3, 4, 5)
    result, _ = _export_quietly(ConstantMask(), (x,), tracer="jit")
    assert_matches(result.model_proto, ConstantMask(), (x,), rtol=1e-6, atol=0)


def test_where_with_a_byte_condition():
    """torch.where takes a uint8 condition (nonzero is true; torch.export refuses it, the
    TorchScript trace keeps it); ONNX's Where takes bool only."""

    class ByteCondition(torch.nn.Module):
        def forward(self, condition, x, y):
            return torch.where(condition, x, y)

    args = (torch.tensor([[1, 0, 2], [255, 0, 7]], dtype=torch.uint8), torch.randn(2, 3), torch.ones(2, 3))
    result, fallbacks = _export_quietly(ByteCondition(), args)
    assert result.tracer == "torch.jit.trace" and len(fallbacks) == 1
    assert_matches(result.model_proto, ByteCondition(), args, rtol=0, atol=0)

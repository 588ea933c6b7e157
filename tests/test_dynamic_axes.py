"""dynamic_axes as torch.onnx means it: the ONNX graph takes any size on a requested axis that the
traced model leaves dynamic; an axis the model fixes stays static, with one warning that lists it.
Names pair with the flattened tensor inputs. Every model runs in onnxruntime at sizes other than
the traced ones."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import fastonnx
from fastonnx import ArgumentError, DynamicAxesWarning, TraceError
from support import Lambda, assert_declared_shapes_hold


def _dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _export(model, args, **kwargs):
    """Exports, returning the result and the DynamicAxesWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(model, args, **kwargs)
    return result, [w for w in caught if issubclass(w.category, DynamicAxesWarning)]


def _run_and_compare(result, model, args, kwargs=None):
    """onnxruntime against eager PyTorch on these inputs (fed by the result's input names)."""
    kwargs = kwargs or {}
    tensors = [x for x in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: t.numpy() for n, t in zip(result.input_names, tensors)})
    with torch.no_grad():
        want = [torch.as_tensor(x) for x in torch.utils._pytree.tree_leaves(model(*args, **kwargs))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


class SumModule(torch.nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


@pytest.mark.parametrize(
    "axes, names",
    [
        ({"x": {0: "my_custom_axis_name"}, "sum": {0: "my_custom_axis_name"}}, ("my_custom_axis_name",) * 2),
        ({"x": [0], "sum": [0]}, ("x_dynamic_axes_1", "sum_dynamic_axes_1")),
        ({"x": {0: "my_custom_axis_name"}, "sum": [0]}, ("my_custom_axis_name", "sum_dynamic_axes_1")),
    ],
    ids=["named", "list", "docs"],
)
def test_torch_onnx_docs_example(axes, names):
    """The example of torch.onnx.export's documentation, both forms; an output's axis that is an
    input's dimension is named as dynamic_axes names it, as torch.onnx does."""
    model = SumModule()
    result, warned = _export(model, (torch.ones(2, 2),), input_names=["x"], output_names=["sum"], dynamic_axes=axes)
    assert not warned
    graph = result.model_proto.graph
    assert (_dims(graph.input[0]), _dims(graph.output[0])) == ([names[0], 2], [names[1]])
    _run_and_compare(result, model, (torch.randn(7, 2),))


class FixesAxes(torch.nn.Module):
    """Fixes x's first axis (a view to 4 rows) and y's second (added to a weight of 3)."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))

    def forward(self, x, y):
        rows = x.view(4, -1)
        return rows * 2, y + self.weight


def test_an_axis_the_model_fixes_stays_static_with_one_warning():
    model = FixesAxes().eval()
    axes = {"x": {0: "rows", 1: "cols"}, "y": {0: "n", 1: "three"}}
    result, warned = _export(model, (torch.randn(4, 6), torch.randn(5, 3)), dynamic_axes=axes)
    assert len(warned) == 1
    message = str(warned[0].message)
    print(message)
    assert "2 axis/axes asked to be dynamic are static" in message
    assert "input `x` axis 0 ('rows'): fixed to 4 at " in message and "rows = x.view(4, -1)" in message
    assert "input `y` axis 1 ('three'): fixed to 3 at " in message and "y + self.weight" in message
    # Points at the caller of export, outside the package (whatever the checkout's folder is called).
    assert not Path(warned[0].filename).resolve().is_relative_to(Path(fastonnx.__file__).resolve().parent)
    graph = result.model_proto.graph
    # dim_params exactly on the axes that stayed dynamic.
    assert [_dims(i) for i in graph.input] == [[4, "cols"], ["n", 3]]
    assert [_dims(o) for o in graph.output] == [[4, "cols"], ["n", 3]]
    _run_and_compare(result, model, (torch.randn(4, 10), torch.randn(2, 3)))


def test_dynamic_shapes_keep_torch_export_strictness():
    """The same request through dynamic_shapes (names, Dim): torch.export refuses, as asked."""
    for spec in ({"x": {0: "rows"}}, {"x": {0: Dim("rows")}}):
        with pytest.raises(TraceError, match="rows|x"):
            fastonnx.export(FixesAxes(), (torch.randn(4, 6), torch.randn(5, 3)), dynamic_shapes=spec)




def test_output_axes_that_are_static_are_in_the_warning():
    model = FixesAxes().eval()
    result, warned = _export(model, (torch.randn(4, 6), torch.randn(5, 3)),
                             dynamic_axes={"x": {1: "cols"}, "y": {0: "n"}, "output_0": {0: "r", 1: "c"},
                                           "output_1": {0: "m"}})
    assert len(warned) == 1
    message = str(warned[0].message)
    assert "1 axis/axes" in message and "output `output_0` axis 0 ('r'): fixed to 4" in message
    assert [_dims(o) for o in result.model_proto.graph.output] == [[4, "c"], ["m", 3]]
    _run_and_compare(result, model, (torch.randn(4, 2), torch.randn(9, 3)))


class Concat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y]), x + y


def test_axes_torch_finds_equal_share_the_first_name():
    model = Concat()
    result, warned = _export(model, (torch.randn(3, 2), torch.randn(3, 2)),
                             dynamic_axes={"x": {0: "a"}, "y": {0: "b"}, "output_0": {0: "total"}, "output_1": {0: "s"}})
    assert len(warned) == 1 and "'b' (input `y` axis 0) is 'a'" in str(warned[0].message)
    graph = result.model_proto.graph
    assert [_dims(i) for i in graph.input] == [["a", 2], ["a", 2]]
    # An output dimension that is an expression keeps it; one that is a symbol takes the name asked.
    assert [_dims(o) for o in graph.output] == [["2*a", 2], ["s", 2]]
    _run_and_compare(result, model, (torch.randn(5, 2), torch.randn(5, 2)))


class CatScaled(torch.nn.Module):
    def forward(self, past, new):
        total = torch.cat([past, new], 1)
        return total * 2, total.sum(1)


def test_an_exported_program_s_dynamic_axes_are_named():
    """A program traced already: dynamic_axes names the axes it has dynamic, keyed by input_names
    or its placeholders' names and by output names. An output's axis names its size wherever the
    graph has it (the concatenation's `past + new` too); the file runs at other sizes, each name
    one size throughout the graph."""
    batch = Dim("b")
    program = torch.export.export(
        CatScaled(), (torch.randn(2, 3), torch.randn(2, 4)),
        dynamic_shapes=({0: batch, 1: Dim("p")}, {0: batch, 1: Dim("q")}),
    )
    result, warned = _export(
        program, (), input_names=["past"], output_names=["doubled"],
        dynamic_axes={"past": {0: "batch", 1: "past_length"}, "new": {1: "query"}, "doubled": {1: "total"}},
    )
    assert not warned
    graph = result.model_proto.graph
    assert [_dims(v) for v in [*graph.input, *graph.output]] == [
        ["batch", "past_length"], ["batch", "query"], ["batch", "total"], ["batch"]
    ]
    assert [_dims(v) for v in graph.value_info] == [["batch", "total"]]  # the concatenation
    args = (torch.randn(3, 5), torch.randn(3, 2))
    assert_declared_shapes_hold(result.model_proto, {"past": args[0].numpy(), "new": args[1].numpy()})
    _run_and_compare(result, CatScaled(), args)


def test_an_exported_program_refuses_to_name_a_static_axis():
    """Naming cannot make an axis dynamic that the program traced static: the error lists them
    and says how to trace them dynamic; dynamic_shapes, which would trace, is refused."""
    program = torch.export.export(CatScaled(), (torch.randn(2, 3), torch.randn(2, 4)))
    with pytest.raises(ArgumentError) as error:
        fastonnx.export(program, (), dynamic_axes={"past": {0: "batch"}, "output_0": {1: "total"}})
    assert str(error.value) == (
        "dynamic_axes names axes that the ExportedProgram has static (torch.export fixed them when it traced the "
        "program, so the graph takes only that size):\n"
        "  - input `past` axis 0 ('batch'): traced as 2\n"
        "  - output `output_0` axis 1 ('total'): traced as 7\n"
        "trace the program again with a torch.export.Dim for each (torch.export.export(..., dynamic_shapes=...)), "
        "or leave them out of dynamic_axes"
    )
    with pytest.raises(ArgumentError, match=r"an ExportedProgram already fixed which dimensions are dynamic \(give"):
        fastonnx.export(program, (), dynamic_shapes=({0: Dim("b")}, None))


class LSTMLike(torch.nn.Module):
    def forward(self, input, hidden, seq_lengths):
        h0, c0 = hidden
        return input.sum(0) * h0[0] + c0[0], seq_lengths * 2


def _lstm_args(seq, batch):
    return torch.randn(seq, batch, 4), (torch.randn(1, batch, 4), torch.randn(1, batch, 4)), torch.arange(batch)


def test_input_names_pair_with_flattened_tensors():
    """torch.onnx's pairing: forward(input, (h0, c0), seq_lengths) has four tensor inputs."""
    model = LSTMLike()
    result, warned = _export(model, _lstm_args(5, 3), input_names=["input", "h0", "c0", "seq_lengths"],
                             dynamic_axes={"input": {0: "seq", 1: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"},
                                           "seq_lengths": {0: "batch"}})
    assert not warned
    graph = result.model_proto.graph
    assert result.input_names == ["input", "h0", "c0", "seq_lengths"]
    assert [_dims(i) for i in graph.input] == [["seq", "batch", 4], [1, "batch", 4], [1, "batch", 4], ["batch"]]
    _run_and_compare(result, model, _lstm_args(2, 6))


def test_default_names_are_the_flattened_paths():
    model = LSTMLike()
    result, _ = _export(model, _lstm_args(5, 3),
                        dynamic_axes={"input": {1: "batch"}, "hidden_0": {1: "batch"}, "hidden_1": [1]})
    assert result.input_names == ["input", "hidden_0", "hidden_1", "seq_lengths"]
    assert [_dims(i) for i in result.model_proto.graph.input] == [
        [5, "batch", 4], [1, "batch", 4], [1, "batch", 4], [3]]
    _run_and_compare(result, model, (torch.randn(5, 8, 4), (torch.randn(1, 8, 4), torch.randn(1, 8, 4)),
                                     torch.arange(3)))


def test_a_structure_cannot_take_axes_by_its_argument_name():
    with pytest.raises(ArgumentError, match=r"argument `hidden` is a tuple of 2 tensor\(s\).*'hidden_0', 'hidden_1'"):
        fastonnx.export(LSTMLike(), _lstm_args(5, 3), dynamic_axes={"hidden": {1: "batch"}})


class Mixed(torch.nn.Module):
    def forward(self, x, steps: int, extra: dict, *, scale, mask=None, bias=None):
        out = x * scale + extra["a"] * steps
        return out if mask is None else out * mask, extra["b"] + bias


def _mixed(batch, n):
    args = (torch.randn(batch, 3), 2, {"a": torch.randn(batch, 3), "b": torch.randn(n)})
    kwargs = {"bias": torch.randn(n), "scale": torch.randn(3), "mask": None}  # not in forward's order
    return args, kwargs


def test_keyword_and_dict_inputs_and_non_tensor_leaves():
    """Keyword arguments come after the positional ones, in the order given; an int and a None
    take no name; a dict's tensors are named by their keys."""
    model = Mixed()
    args, kwargs = _mixed(4, 2)
    result, warned = _export(model, args, kwargs=kwargs,
                             dynamic_axes={"x": {0: "batch"}, "extra_a": {0: "batch"}, "extra_b": {0: "n"},
                                           "bias": {0: "n"}, "output_1": {0: "n_out"}})
    assert not warned
    assert result.input_names == ["x", "extra_a", "extra_b", "bias", "scale"]
    graph = result.model_proto.graph
    assert [_dims(i) for i in graph.input] == [["batch", 3], ["batch", 3], ["n"], ["n"], [3]]
    assert [_dims(o) for o in graph.output] == [["batch", 3], ["n_out"]]
    args, kwargs = _mixed(7, 5)
    _run_and_compare(result, model, args, kwargs)


def test_input_names_skip_non_tensor_leaves():
    model = Mixed()
    args, kwargs = _mixed(4, 2)
    result, warned = _export(model, args, kwargs=kwargs, input_names=["x", "a", "b", "bias_in"],
                             dynamic_axes={"x": {0: "batch"}, "a": {0: "batch"}, "b": [0], "bias_in": [0]})
    assert not warned
    assert result.input_names == ["x", "a", "b", "bias_in", "scale"]
    # b + bias: torch finds the two sizes equal, the first name wins (one made up: no warning).
    assert [_dims(i) for i in result.model_proto.graph.input][:4] == [
        ["batch", 3], ["batch", 3], ["b_dynamic_axes_1"], ["b_dynamic_axes_1"]]
    args, kwargs = _mixed(3, 6)
    _run_and_compare(result, model, args, kwargs)


@pytest.mark.parametrize(
    "axes, error",
    [
        ({"x": {2: "z"}}, "dimension 2 does not exist in a tensor of rank 2"),
        ({"output_1": {"1": "m"}}, "dimension '1' is not an axis number"),
    ],
)
def test_bad_dynamic_axes(axes, error):
    args, kwargs = _mixed(4, 2)
    with pytest.raises(ArgumentError, match=error):
        fastonnx.export(Mixed(), args, kwargs=kwargs, dynamic_axes=axes)


def test_an_output_axis_that_does_not_exist_is_ignored_with_a_warning():
    """torch.onnx names the requested axes an output has and ignores the others: fastonnx too,
    and says so."""
    args, kwargs = _mixed(4, 2)
    with pytest.warns(DynamicAxesWarning, match=r"\['output_0'\] axis 2 is ignored: output `output_0` has rank 2"):
        result = fastonnx.export(Mixed(), args, kwargs=kwargs, dynamic_axes={"x": {0: "batch"}, "output_0": [0, 2]})
    assert _dims(result.model_proto.graph.output[0])[1] == 3
    _run_and_compare(result, Mixed(), args, kwargs)


@pytest.mark.parametrize("key", ["steps", "mask"])
def test_a_key_of_an_argument_without_a_tensor_is_ignored_with_a_warning(key):
    """torch.onnx ignores a dynamic_axes key of an argument that holds no tensor in the call (an
    int, None): fastonnx too, and says so."""
    args, kwargs = _mixed(4, 2)
    with pytest.warns(DynamicAxesWarning, match=rf"dynamic_axes\['{key}'\] is ignored: the argument `{key}` is "):
        result = fastonnx.export(Mixed(), args, kwargs=kwargs,
                                 dynamic_axes={"x": {0: "batch"}, "extra_a": {0: "batch"}, key: [0]})
    assert _dims(result.model_proto.graph.input[0]) == ["batch", 3]


def test_one_input_named_twice():
    args, kwargs = _mixed(4, 2)
    with pytest.raises(ArgumentError, match="names input 'x' twice"):
        fastonnx.export(Mixed(), args, kwargs=kwargs, input_names=["inp"], dynamic_axes={"x": [0], "inp": [0]})


def test_dynamic_shapes_names_land_on_their_flattened_tensor():
    """dynamic_shapes by argument name: a structure without a spec still counts its tensors."""
    model = Mixed()
    args, kwargs = _mixed(4, 2)
    result, warned = _export(model, args, kwargs=kwargs,
                             dynamic_shapes={"x": {0: "batch"}, "extra": {"a": {0: "batch"}, "b": None},
                                             "bias": None, "scale": None, "steps": None, "mask": None})
    assert not warned
    assert [_dims(i) for i in result.model_proto.graph.input] == [["batch", 3], ["batch", 3], [2], [2], [3]]
    result, _ = _export(model, args, kwargs=kwargs, dynamic_shapes={"bias": {0: Dim("n")}, "extra": {"b": {0: Dim("n")}}})
    assert [_dims(i) for i in result.model_proto.graph.input] == [[4, 3], [4, 3], ["n"], ["n"], [3]]
    args, kwargs = _mixed(4, 9)
    _run_and_compare(result, model, args, kwargs)


RECURRENT = {
    "lstm": lambda: torch.nn.LSTM(4, 8, num_layers=2),
    "lstm_bidirectional_batch_first": lambda: torch.nn.LSTM(4, 8, bidirectional=True, batch_first=True),
    "gru": lambda: torch.nn.GRU(4, 8, num_layers=2),
    "rnn_tanh_bidirectional": lambda: torch.nn.RNN(4, 8, bidirectional=True),
    "rnn_relu": lambda: torch.nn.RNN(4, 8, nonlinearity="relu", num_layers=2),
}


@pytest.mark.parametrize("name", list(RECURRENT))
def test_recurrent_layers_keep_a_dynamic_sequence_length(name):
    """nn.LSTM, nn.GRU and nn.RNN trace with a symbolic sequence length (as while-loops, written
    as ONNX LSTM, GRU and RNN), also when the same layer was exported before without dynamic
    axes (torch caches the kernel an op dispatched to)."""
    model = RECURRENT[name]().eval()
    first = model.batch_first
    x = torch.randn(3, 5, 4) if first else torch.randn(5, 3, 4)
    fastonnx.export(model, (x,))
    axes = {0: "batch", 1: "steps"} if first else {0: "steps", 1: "batch"}
    result, warned = _export(model, (x,), input_names=["x"], dynamic_axes={"x": axes})
    assert not warned, [str(w.message) for w in warned]
    assert _dims(result.model_proto.graph.input[0])[:2] == [axes[0], axes[1]]
    for steps, batch in ((9, 2), (1, 4)):
        y = torch.randn(batch, steps, 4) if first else torch.randn(steps, batch, 4)
        _run_and_compare(result, model, (y,))
    # And a later export without dynamic axes unrolls again, at the traced length only.
    assert _dims(fastonnx.export(model, (x,)).model_proto.graph.input[0]) == list(x.shape)


@pytest.mark.parametrize("tracer", ["export", "jit"])
def test_a_view_back_to_its_input_shape_at_the_traced_size_is_general_or_fixed_with_a_warning(tracer):
    """Traced at size 2, a view of ((s//2), 2) as (1, -1) has its input's shape, which torch records
    under a guard s//2 == 1; with s % 2 == 0, that pins s to 2. torch 2.13 does not solve it and
    torch.export drops it: the output is then declared with the shape the view asks for, so the
    model runs (and its declared shapes hold) at other sizes, empty included. torch 2.15 simplifies
    the view's next test, 2*(s//2) == 2, to s == 2 and fixes s: then the axis is static with one
    warning, as any axis the trace fixes (test_an_axis_the_model_fixes_stays_static_with_one_warning).
    Never silently: a TorchScript graph holds the same 1 when the model computes it from the size,
    x.view(int(x.shape[0]) // 2, -1), which is right at size 2 only."""

    class ViewTwice(torch.nn.Module):
        def forward(self, x):
            return x.view(-1, 2).view(1, -1)

    model = ViewTwice()
    result, warned = _export(model, (torch.ones(2),), input_names=["x"], dynamic_axes={"x": [0]}, tracer=tracer)
    assert _dims(result.model_proto.graph.output[0])[0] == 1
    if _dims(result.model_proto.graph.input[0]) == [2]:
        assert len(warned) == 1, [str(w.message) for w in warned]
        assert "input `x` axis 0 ('x_dynamic_axes_1'): fixed to 2" in str(warned[0].message)
        assert "view" in str(warned[0].message)
        sizes: tuple[int, ...] = (2,)
    else:
        assert not warned, [str(w.message) for w in warned]
        sizes = (2, 6, 0)
    for size in sizes:
        _run_and_compare(result, model, (torch.arange(size, dtype=torch.float32),))


# -- axes traced at size 0 or 1 ------------------------------------------------------------------
# torch.onnx's docs trace with a batch of one and ask for a dynamic batch; torch.export makes such
# an axis static. fastonnx traces it as a symbol (torch's backed_size_oblivious, a size traced at 0
# nonnegative) and keeps it dynamic where the traced code does not depend on the size being 0 or
# 1 (_small_sizes). Each model runs in onnxruntime at the traced size and at others, against eager.

TRACERS = ["export", "jit"]


def _assert_runs_like_eager(result, model, inputs):
    """onnxruntime against eager PyTorch, shapes included (a squeeze at run time changes the rank)."""
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: t.numpy() for n, t in zip(result.input_names, inputs)})
    with torch.no_grad():
        want = [torch.as_tensor(x) for x in torch.utils._pytree.tree_leaves(model(*inputs))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape), f"shape {g.shape}, eager {tuple(w.shape)} at {[t.shape for t in inputs]}"
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        )
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1)).softmax(-1)


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_cnn_traced_with_a_batch_of_one_takes_any_batch(tracer):
    """torch.onnx's docs' pattern: an example of batch 1, the batch asked to be dynamic."""
    torch.manual_seed(0)
    model = SmallCNN().eval()
    result, warned = _export(model, (torch.randn(1, 3, 16, 16),), input_names=["input"],
                             dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, tracer=tracer)
    assert not warned, [str(w.message) for w in warned]
    assert _dims(result.model_proto.graph.input[0]) == ["batch", 3, 16, 16]
    assert _dims(result.model_proto.graph.output[0]) == ["batch", 5]
    for batch in (1, 2, 5):
        _assert_runs_like_eager(result, model, [torch.randn(batch, 3, 16, 16)])


class LSTMWithInitialState(torch.nn.Module):
    """PyTorch's suite's test_lstm_post_fix_init_state: the initial state sized by the input."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 6, 1)

    def forward(self, input):
        batch_size = input.size()[1]
        h0 = torch.ones([1, batch_size, 6])
        c0 = torch.ones([1, batch_size, 6])
        return self.lstm(input, (h0, c0))


@pytest.mark.parametrize("tracer", TRACERS)
def test_an_lstm_traced_with_a_batch_of_one_and_its_state_from_the_input_size(tracer):
    torch.manual_seed(0)
    model = LSTMWithInitialState().eval()
    result, warned = _export(model, (torch.randn(5, 1, 4),), input_names=["input"],
                             dynamic_axes={"input": {0: "seq", 1: "batch"}}, tracer=tracer)
    assert not warned, [str(w.message) for w in warned]
    assert _dims(result.model_proto.graph.input[0]) == ["seq", "batch", 4]
    for seq, batch in ((5, 1), (3, 2), (1, 5), (7, 1)):
        _assert_runs_like_eager(result, model, [torch.randn(seq, batch, 4)])


SQUEEZES = {
    "dim": lambda x: torch.squeeze(x, 1),
    "negative_dim": lambda x: torch.squeeze(x, -2),
    "all": lambda x: torch.squeeze(x),
    # traced at size 4, run at 1: an axis traced at 2 or more may be 1 too where the code allows
    "no_op_at_trace": lambda x: torch.squeeze(x, 2),
}


@pytest.mark.parametrize("tracer", TRACERS)
@pytest.mark.parametrize("name", list(SQUEEZES))
def test_squeeze_of_an_axis_traced_at_size_one_decides_at_run_time(name, tracer):
    """PyTorch's suite's test_squeeze_dynamic & co.: the graph squeezes where the size is 1 when
    it runs, as eager does, so the output's rank follows the input's sizes."""
    model = Lambda(SQUEEZES[name])
    result, warned = _export(model, (torch.randn(2, 1, 4),), input_names=["x"],
                             dynamic_axes={"x": {0: "a", 1: "b", 2: "c"}}, tracer=tracer)
    assert not warned, [str(w.message) for w in warned]
    for shape in ((2, 1, 4), (2, 2, 3), (3, 1, 1), (1, 1, 1), (2, 0, 3), (2, 2, 1)):
        _assert_runs_like_eager(result, model, [torch.randn(*shape)])


class Empty(torch.nn.Module):
    """PyTorch's suite's test_numel_empty, and ops over an axis that may be empty."""

    def forward(self, x):
        return x.numel() * x, x.sum(0), torch.cat([x, x * 2]), x.reshape(-1, 3), x.shape[0] + 1


@pytest.mark.parametrize("tracer", TRACERS)
def test_an_axis_traced_empty_takes_every_size(tracer):
    model = Empty()
    result, warned = _export(model, (torch.randn(0, 3),), input_names=["x"], dynamic_axes={"x": {0: "n"}},
                             tracer=tracer)
    assert not warned, [str(w.message) for w in warned]
    assert _dims(result.model_proto.graph.input[0]) == ["n", 3]
    for n in (0, 1, 2, 5):
        _assert_runs_like_eager(result, model, [torch.randn(n, 3)])


class TestsAgainstZero(torch.nn.Module):
    def forward(self, x):
        if x.numel() > 0:
            return x * 2
        return torch.ones(1, 3)


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_test_against_zero_traced_at_one_holds_for_sizes_one_and_up(tracer):
    """An axis traced at 1 is dynamic for the sizes the trace holds for, 1 and up."""
    model = TestsAgainstZero()
    result, warned = _export(model, (torch.randn(1, 3),), input_names=["x"], dynamic_axes={"x": {0: "n"}},
                             tracer=tracer)
    assert not warned, [str(w.message) for w in warned]
    assert "n" in result.sizes_may_be_one
    for n in (1, 2, 5):
        _assert_runs_like_eager(result, model, [torch.randn(n, 3)])


@pytest.mark.parametrize("tracer", TRACERS)
def test_verify_checks_size_one_and_a_larger_size(tracer, capsys):
    model = Lambda(lambda x: torch.squeeze(x, 1) * x.shape[0])
    fastonnx.export(model, (torch.randn(3, 1, 2),), dynamic_axes={"x": {0: "a", 1: "b"}}, tracer=tracer, verify=True)
    out = capsys.readouterr().out
    assert "at a=4, b=2:" in out and "at a=1:" in out and "MISMATCH" not in out
    fastonnx.export(Empty(), (torch.randn(0, 3),), dynamic_axes={"x": {0: "n"}}, tracer=tracer, verify=True)
    out = capsys.readouterr().out
    assert "at n=1:" in out and "at n=2:" in out and "MISMATCH" not in out


@pytest.mark.parametrize("spec", [Dim.AUTO, Dim.DYNAMIC, "batch", Dim("batch", max=64)], ids=str)
def test_dynamic_shapes_traced_at_size_one_are_dynamic_too(spec):
    """torch.onnx's dynamo exporter treats dynamic_shapes as it treats dynamic_axes here."""
    torch.manual_seed(0)
    model = SmallCNN().eval()
    result, warned = _export(model, (torch.randn(1, 3, 16, 16),), dynamic_shapes=({0: spec},))
    assert not warned
    assert isinstance(_dims(result.model_proto.graph.input[0])[0], str)
    for batch in (1, 3):
        _assert_runs_like_eager(result, model, [torch.randn(batch, 3, 16, 16)])


class BroadcastsAgainstFive(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        return x + self.table  # eager: x of 1 or 5 rows


def test_an_axis_torch_cannot_trace_dynamic_at_size_one_is_static_and_says_why():
    model = BroadcastsAgainstFive()
    result, warned = _export(model, (torch.randn(1, 3),), dynamic_axes={"x": {0: "n"}})
    assert len(warned) == 1
    message = str(warned[0].message)
    assert "input `x` axis 0 ('n'): fixed to 1 (torch.export failed to trace it as a dynamic size: " in message
    assert "must match the size of tensor b (5)" in message
    assert _dims(result.model_proto.graph.input[0]) == [1, 3]
    _assert_runs_like_eager(result, model, [torch.randn(1, 3)])


@torch.library.custom_op("fastonnx_test::first_row_if_one", mutates_args=())
def first_row_if_one(x: torch.Tensor) -> torch.Tensor:
    return x * 2 if x.shape[0] == 1 else x + 1


@first_row_if_one.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_decomposition_that_depends_on_a_size_of_one_makes_the_axis_static():
    """The op has no converter: fastonnx traces its Python kernel, whose test of the size would
    hold the graph to its branch; the export is made again with the axis static, as torch.export
    makes it."""
    model = Lambda(first_row_if_one)
    result, warned = _export(model, (torch.randn(1, 3),), dynamic_axes={"x": {0: "n"}})
    assert len(warned) == 1
    message = str(warned[0].message)
    assert ("input `x` axis 0 ('n'): fixed to 1 (exporting it as a dynamic size failed: PyTorch's decomposition of "
            "fastonnx_test.first_row_if_one.default (FX node `first_row_if_one`) tests a dynamic size (Eq(") in message
    assert _dims(result.model_proto.graph.input[0]) == [1, 3]
    _assert_runs_like_eager(result, model, [torch.randn(1, 3)])


def test_a_size_of_one_the_first_layer_fixes_is_not_traced_through_the_rest_first():
    """The trace with the batch of one dynamic stops at the guard that fixes it: only the static
    trace runs the layers after it (a model full of symbolic shapes would be traced twice)."""

    class Later(torch.nn.Module):
        calls = 0

        def forward(self, x):
            Later.calls += 1
            return x.relu()

    class FixesOne(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.later = Later()

        def forward(self, x):
            y = x * 2 if x.size(0) == 1 else x + 1
            y = y.cos() if y.size(1) > 0 else y  # (the next size test, where the trace stops; true at every size)
            return self.later(y)

    model = FixesOne().eval()
    result, warned = _export(model, (torch.randn(1, 3),), dynamic_axes={"x": {0: "batch", 1: "cols"}})
    assert Later.calls == 1
    (message,) = [str(w.message) for w in warned]
    assert "input `x` axis 0 ('batch'): fixed to 1 (the traced code depends on the size being 1, at " in message
    assert "y = x * 2 if x.size(0) == 1 else x + 1" in message
    assert [_dims(i) for i in result.model_proto.graph.input] == [[1, "cols"]]
    _run_and_compare(result, model, (torch.randn(1, 5),))


def test_a_test_of_two_sizes_of_one_that_torch_later_finds_equal_keeps_them_dynamic():
    """`x.size(0) <= y.size(0)` varies with the two batches of one, but `x + y` then makes them
    one size, for which it always holds: the trace is not stopped at the test (the whole trace
    decides, as without stopping early), and the two stay dynamic, sharing a name."""

    class LessThenAdd(torch.nn.Module):
        def forward(self, x, y):
            z = x * 2 if x.size(0) <= y.size(0) else x * 3
            return z + y

    model = LessThenAdd()
    result, warned = _export(model, (torch.randn(1, 3), torch.randn(1, 3)), dynamic_axes={"x": {0: "a"}, "y": {0: "b"}})
    assert [_dims(i) for i in result.model_proto.graph.input] == [["a", 3], ["a", 3]]
    assert not any("fixed to 1" in str(w.message) for w in warned)
    _run_and_compare(result, model, (torch.randn(4, 3), torch.randn(4, 3)))


class SizeTests(torch.nn.Module):
    """A branch on a size's parity and one on its range in the model's own code, and a reshape
    whose -1 makes torch itself guard the sizes (`Mod(numel, 2) == 0`)."""

    def forward(self, x):
        y = x * 2 if x.size(1) % 2 == 0 else x * 3
        y = y.cos() if x.size(2) > 4 else y.sin()
        return y.reshape(x.size(0), -1, 2).sum(-1)


def test_an_axis_a_test_of_the_model_holds_only_partly_for_is_static_with_its_test_and_line():
    """torch.export keeps an axis dynamic where the model's code tests it (`h % 2 == 0`, `w > 4`),
    checking the test at each call of its program. An ONNX graph cannot check it: at an odd `h`
    the file computed `x * 2` where eager computes `x * 3`. Such an axis is static, named in the
    warning with the test and its line; torch's own guards (the reshape's -1) keep theirs dynamic."""
    model = SizeTests()
    result, warned = _export(model, (torch.randn(2, 4, 6),), dynamic_axes={"x": {0: "batch", 1: "h", 2: "w"}})
    assert [_dims(i) for i in result.model_proto.graph.input] == [["batch", 4, 6]]
    (message,) = [str(w.message) for w in warned]
    assert "input `x` axis 1 ('h'): fixed to 4 (the traced code holds only where (x.size(1) % 2) == 0, at " in message
    assert "input `x` axis 2 ('w'): fixed to 6 (the traced code holds only where x.size(2) > 4, at " in message
    assert "y = x * 2 if x.size(1) % 2 == 0 else x * 3" in message
    assert "batch" not in message
    for batch in (2, 5):
        _run_and_compare(result, model, (torch.randn(batch, 4, 6),))


def test_the_torchscript_front_end_makes_an_axis_the_model_tests_static_too():
    """torch.jit.trace keeps the branch the example took and nothing of the test: the file declared
    `h` and `w` dynamic and differed from eager by 2.88 at [3, 5, 4]. The numbers the model's code
    takes from sizes are traced beside, and an axis one of them does not stay the same over is
    static, with its line; the batch, which the code passes on as a size, stays dynamic."""
    model = SizeTests()
    dynamic_axes = {"x": {0: "batch", 1: "h", 2: "w"}}
    result, warned = _export(model, (torch.randn(2, 4, 6),), input_names=["x"], dynamic_axes=dynamic_axes, tracer="jit")
    assert result.tracer == "torch.jit.trace"
    assert [_dims(i) for i in result.model_proto.graph.input] == [["batch", 4, 6]]
    (message,) = [str(w.message) for w in warned]
    assert "input `x` axis 1 ('h'): fixed to 4 (the traced code depends on the size, at " in message
    assert "y = x * 2 if x.size(1) % 2 == 0 else x * 3" in message
    assert "input `x` axis 2 ('w'): fixed to 6 (the traced code depends on the size, at " in message
    assert "batch" not in message
    for batch in (2, 5):
        _run_and_compare(result, model, (torch.randn(batch, 4, 6),))


def test_a_test_against_one_of_an_axis_traced_at_two_is_said_in_the_warning():
    """torch decides `x.size(0) == 1` as False for a size traced at 2 and up, without a guard: the
    graph holds for 2 and up (the file differed from eager by 1.65 at 1, with no warning). The
    axis stays dynamic, and the warning names the test, its line, and what to do; a test that a
    size of 1 answers the same way (`>= 1`) is not in it."""

    class TestsOne(torch.nn.Module):
        def forward(self, x, y):
            z = x * 3 if x.shape[0] == 1 else x * 2
            z = z.cos() if x.shape[1] >= 1 else z
            return z.sum(0) + y.sum(0)

    model = TestsOne()
    args = (torch.randn(2, 3), torch.randn(1, 3))
    result, warned = _export(model, args, input_names=["x", "y"], dynamic_axes={"x": {0: "a", 1: "c"}, "y": {0: "b", 1: "c"}})
    assert [_dims(i) for i in result.model_proto.graph.input] == [["a", "c"], ["b", "c"]]
    (message,) = [str(w.message) for w in warned]
    assert message.startswith("1 dynamic axis/axes traced at 2 or more hold for sizes of 2 and up only")
    assert "  - input `x` axis 0 (the model's code tests x.size(0) == 1, which a size of 1 answers otherwise, at " in message
    assert "z = x * 3 if x.shape[0] == 1 else x * 2" in message
    assert "axis 1" not in message
    for a, b, c in ((2, 1, 3), (3, 4, 5)):
        _run_and_compare(result, model, (torch.randn(a, c), torch.randn(b, c)))


class EvenOrOdd(torch.nn.Module):
    def forward(self, x):
        return (x * 2 if x.size(1) % 2 == 0 else x * 3) + 1


@pytest.mark.parametrize("given", ["module", "exported program"])
def test_an_axis_declared_a_multiple_is_said_to_hold_only_for_multiples(given):
    """`2 * Dim(...)` (what torch.export suggests for a test of parity): torch.export's program
    checks at each call that the size is even; the ONNX graph declares `2*s16`, a name, and
    onnxruntime ran a width of 5 and differed from eager by 1.4, with no warning. The warning
    names the axis and its form."""
    dynamic_shapes = ({0: Dim("b"), 1: 2 * Dim("half")},)
    args = (torch.randn(2, 4),)
    model = EvenOrOdd()
    if given == "module":
        result, warned = _export(model, args, dynamic_shapes=dynamic_shapes)
    else:
        program = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
        result, warned = _export(program, ())
    (message,) = [str(w.message) for w in warned]
    assert message.startswith("1 input axis/axes hold only for sizes of a form the ONNX graph cannot declare")
    dims = _dims(result.model_proto.graph.input[0])
    assert dims[1].startswith("2*") and f"  - input `x` axis 1: {dims[1]}" in message
    assert "Feed only sizes of that form" in message
    for batch, width in ((2, 4), (3, 6), (1, 2)):
        _run_and_compare(result, model, (torch.randn(batch, width),))


def test_a_dim_auto_a_test_of_the_model_narrows_is_static_and_said_so():
    """Dim.AUTO: torch.export would keep the axis dynamic (its program checks `x.size(1) % 2 ==
    0`); the ONNX graph takes the traced size, and one DynamicAxesWarning says why and what to do.
    Dim.DYNAMIC, which must stay dynamic, is a TraceError naming the test."""
    model = SizeTests()
    auto = torch.export.Dim.AUTO
    result, warned = _export(model, (torch.randn(2, 4, 6),), dynamic_shapes=({0: auto, 1: auto, 2: auto},))
    assert [_dims(i) for i in result.model_proto.graph.input] == [["x_dim_0", 4, 6]]
    (message,) = [str(w.message) for w in warned]  # (one for the two axes, found by two traces)
    assert message.startswith("dynamic_shapes: 2 axis/axes given as Dim.AUTO are static in the ONNX graph")
    assert "  - input `x` axis 1: fixed to 4 (the traced code holds only where (x.size(1) % 2) == 0, at " in message
    assert "  - input `x` axis 2: fixed to 6 (the traced code holds only where x.size(2) > 4, at " in message
    assert "torch.cond for a branch" in message
    _run_and_compare(result, model, (torch.randn(3, 4, 6),))
    with pytest.raises(fastonnx.TraceError, match=r"axis 1 is fixed to 4 \(the traced code holds only where \(x\.size\(1\) % 2\) == 0"):
        fastonnx.export(model, (torch.randn(2, 4, 6),), dynamic_shapes=({1: torch.export.Dim.DYNAMIC},))


@torch.jit.script
def _doubled_when_even(x):
    if x.size(0) % 2 == 0:
        return x * 2
    return x * 3


class CallsScriptedParity(torch.nn.Module):
    def forward(self, x):
        return _doubled_when_even(x) + 1


def test_a_test_in_scripted_code_that_narrows_an_axis_takes_the_torchscript_graph():
    """torch.export runs a scripted function's Python, so `x.size(0) % 2 == 0` is a guard there
    (the file computed `x * 2` at an odd batch); the TorchScript graph keeps it as an If, and the
    axis stays dynamic, correct at both parities."""
    model = CallsScriptedParity()
    with pytest.warns(fastonnx.TracerFallbackWarning, match=r"holds only where \(x\.size\(0\) % 2\) == 0"):
        result = fastonnx.export(model, (torch.randn(4, 3),), input_names=["x"], dynamic_axes={"x": {0: "b"}})
    assert result.tracer == "torch.jit.trace"
    assert [_dims(i) for i in result.model_proto.graph.input] == [["b", 3]]
    for batch in (4, 5):
        _run_and_compare(result, model, (torch.randn(batch, 3),))


def test_an_axis_a_test_of_the_model_narrows_is_not_traced_through_the_rest_first():
    """The dynamic trace stops at the test that narrows `cols` (`% 2`): only the trace with it
    static runs the layers after it (swin_t's and mobilevit's first blocks test their sizes)."""

    class Later(torch.nn.Module):
        calls = 0

        def forward(self, x):
            Later.calls += 1
            return x.relu()

    class NarrowsFirst(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.later = Later()

        def forward(self, x):
            y = x * 2 if x.size(1) % 2 == 0 else x * 3
            y = y.cos() if y.size(0) > 0 else y  # (the next size test, where the trace stops; true at every size)
            return self.later(y)

    model = NarrowsFirst().eval()
    result, warned = _export(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "batch", 1: "cols"}})
    assert Later.calls == 1
    (message,) = [str(w.message) for w in warned]
    assert "input `x` axis 1 ('cols'): fixed to 4 (the traced code holds only where (x.size(1) % 2) == 0, at " in message
    assert [_dims(i) for i in result.model_proto.graph.input] == [["batch", 4]]
    for batch in (2, 5):
        _run_and_compare(result, model, (torch.randn(batch, 4),))

"""ScriptModules as torch.onnx's TorchScript exporter takes them: dynamic axes honoured as for
traced modules (a ``torch.jit.ScriptModule`` subclass with ``script_method`` too), inputs of every
type TorchScript gives a graph, each file run in onnxruntime at other sizes on every dynamic axis
against eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from support import flat_tensors, run_ort

import fastonnx
from fastonnx import DynamicAxesWarning


def _export(model, args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(model, args, **kwargs)
    fixed = [str(w.message) for w in caught if issubclass(w.category, DynamicAxesWarning)]
    return result, fixed


def _declared(result) -> list[list]:
    return [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in result.model_proto.graph.input]


def _assert_runs_as_eager(result, model, *calls):
    for args in calls:
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        want = model(*copies)
        got = run_ort(result.model_proto, flat_tensors(args))
        want = flat_tensors(want)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-4, atol=1e-5)


class LenOfRows(torch.jit.ScriptModule):
    """A ScriptModule subclass: Python's signature of a ``script_method`` keeps ``self``, which
    bound the first input and so ignored its dynamic_axes (torch's suite, test_len)."""

    @torch.jit.script_method
    def forward(self, input):
        return len(input.unbind()) + input


class TransposedConv(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 1, 3, stride=2)

    @torch.jit.script_method
    def forward(self, x):
        return self.conv(x).transpose(0, 1)


def test_a_script_method_modules_dynamic_axes_are_honoured():
    model = LenOfRows()
    result, fixed = _export(model, (torch.randn(4, 5),), input_names=["input"], dynamic_axes={"input": {0: "seq"}})
    assert not fixed and _declared(result) == [["seq", 5]]
    _assert_runs_as_eager(result, model, (torch.randn(4, 5),), (torch.randn(7, 5),), (torch.randn(1, 5),))

    model = TransposedConv()
    result, fixed = _export(model, (torch.randn(4, 3, 16, 16),), dynamic_axes={"x": [0, 2]})
    assert not fixed and _declared(result) == [["x_dynamic_axes_1", 3, "x_dynamic_axes_2", 16]]
    _assert_runs_as_eager(result, model, (torch.randn(2, 3, 9, 16),))


def test_dynamic_shapes_of_a_script_method_module():
    model = LenOfRows()
    batch = torch.export.Dim("batch")
    result, fixed = _export(model, (torch.randn(4, 5),), dynamic_shapes={"input": {0: batch}})
    assert not fixed and _declared(result) == [["batch", 5]]
    _assert_runs_as_eager(result, model, (torch.randn(9, 5),))


class WritesFromASize(torch.nn.Module):
    def forward(self, x):
        x[:, x.size(0) :] = 0
        return x


def test_a_view_at_an_offset_made_of_a_size_keeps_the_size_dynamic():
    """A slice starting at ``x.size(0)`` has a storage offset made of that size: checked against
    the example's offset it fixed the axis (torch's suite, test_dynamic_expand_as)."""
    model = torch.jit.script(WritesFromASize())
    result, fixed = _export(model, (torch.ones(2, 5),), dynamic_axes={"x": [0, 1]})
    assert not fixed and _declared(result) == [["x_dynamic_axes_1", "x_dynamic_axes_2"]]
    _assert_runs_as_eager(result, model, (torch.randn(3, 4),), (torch.randn(2, 7),))


class SetsToAnother(torch.nn.Module):
    def forward(self, x, y):
        x.set_(y)
        return x


def test_set_gives_the_shape_eager_gives():
    """``x.set_(y)`` makes ``x`` ``y``: neither the export's eager run nor the translation may
    change the declared shape of ``x`` to ``y``'s (torch's suite, test_set_)."""
    model = torch.jit.script(SetsToAnother())
    x, y = torch.ones(2, 3), torch.randn(4, 6)
    result, fixed = _export(model, (x, y), input_names=["x", "y"], dynamic_axes={"x": [0, 1], "y": [0, 1]})
    assert not fixed
    assert _declared(result) == [["x_dynamic_axes_1", "x_dynamic_axes_2"], ["y_dynamic_axes_1", "y_dynamic_axes_2"]]
    assert x.shape == (2, 3)  # the example is left as given
    _assert_runs_as_eager(result, model, (x, y), (torch.ones(3, 1), torch.randn(5, 2)))


class Unbinds(torch.nn.Module):
    def forward(self, x):
        rows = x.unbind()
        return rows[0] + len(rows)


def test_an_axis_the_scripted_graph_fixes_is_in_the_warning_with_its_line():
    model = torch.jit.script(Unbinds())
    result, fixed = _export(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert len(fixed) == 1
    assert "input `x` axis 0 ('n'): fixed to 3 aten::unbind" in fixed[0] and "test_script_modules.py" in fixed[0]
    assert _declared(result) == [[3, 4]]
    _assert_runs_as_eager(result, model, (torch.randn(3, 4),))


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_script_module_with_a_dynamic_axis_at_size_one(dynamic):
    model = LenOfRows()
    axes = {"input": {0: "seq"}} if dynamic else None
    result, fixed = _export(model, (torch.randn(1, 5),), dynamic_axes=axes)
    assert not fixed
    _assert_runs_as_eager(result, model, *([(torch.randn(1, 5),), (torch.randn(6, 5),)] if dynamic else []))

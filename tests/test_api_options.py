"""The torch.onnx-style options of fastonnx.export: dynamic shapes both ways, names of nested
inputs and outputs, weights as inputs, training modes, verification, reports, verbose output."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim
from torch.onnx import TrainingMode

import fastonnx
from support import check, run_ort


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x, mask):
        h = self.norm(self.proj(x)) * mask.unsqueeze(-1)
        return h, h.sum(dim=1) / mask.sum(dim=1, keepdim=True)


def _encoder_inputs(batch: int, seq: int):
    g = torch.Generator().manual_seed(batch * 100 + seq)
    return torch.randn(batch, seq, 8, generator=g), (torch.rand(batch, seq, generator=g) > 0.3).float() + 0.01


def _dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _run_at_sizes(proto, model, sizes):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for batch, seq in sizes:
        x, mask = _encoder_inputs(batch, seq)
        got = session.run(None, dict(zip(names, (x.numpy(), mask.numpy()))))
        with torch.no_grad():
            want = model(x, mask)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        {"dynamic_axes": {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}},
        {"dynamic_shapes": {"x": {0: Dim("batch"), 1: Dim("seq")}, "mask": {0: Dim("batch"), 1: Dim("seq")}}},
        {"dynamic_shapes": {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}},
        {"dynamic_axes": {"tokens": {0: "batch", 1: "seq"}, "m": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}},
         "input_names": ["tokens", "m"], "output_names": ["hidden", "pooled"]},
    ],
    ids=["dynamic_axes", "Dim", "names", "input_names"],
)
def test_dynamic_dimensions_keep_their_names(options):
    model = Encoder().eval()
    proto = fastonnx.export(model, _encoder_inputs(2, 5), **options).model_proto
    check(proto)
    assert [_dims(i) for i in proto.graph.input] == [["batch", "seq", 8], ["batch", "seq"]]
    assert [_dims(o) for o in proto.graph.output] == [["batch", "seq", 4], ["batch", 4]]
    _run_at_sizes(proto, model, [(2, 5), (1, 9), (7, 3)])


def test_dynamic_auto_names_dimensions_after_the_input():
    model = Encoder().eval()
    proto = fastonnx.export(model, _encoder_inputs(2, 5), dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO})).model_proto
    check(proto)
    assert _dims(proto.graph.input[0]) == ["x_dim_0", 5, 8]
    _run_at_sizes(proto, model, [(3, 5), (6, 5)])


@pytest.mark.parametrize(
    "options, error",
    [
        ({"dynamic_axes": {"x": [0]}, "dynamic_shapes": {"x": {0: Dim.AUTO}}}, "not both"),
        ({"dynamic_shapes": {"nope": {0: Dim.AUTO}}}, "not arguments of this call"),
        ({"dynamic_shapes": {"x": {5: Dim.AUTO}}}, "dimension 5 does not exist"),
        ({"dynamic_shapes": {"x": {0: 3.5}}}, "must be a torch.export.Dim"),
    ],
)
def test_bad_dynamic_dimensions(options, error):
    with pytest.raises((ValueError, TypeError), match=error):
        fastonnx.export(Encoder().eval(), _encoder_inputs(2, 5), **options)


class Nested(torch.nn.Module):
    def forward(self, x, state: tuple, extra: dict):
        h, c = state
        return {"out": x * h, "state": (h + 1, c * extra["scale"])}


def test_nested_inputs_and_outputs_are_flattened_with_documented_names():
    x, h, c, s = (torch.randn(3) for _ in range(4))
    result = fastonnx.export(Nested(), (x, (h, c)), kwargs={"extra": {"scale": s}})
    check(result.model_proto)
    assert result.input_names == ["x", "state_0", "state_1", "extra_scale"]
    # The returned dict's "state" shares its name with the input: outputs take an output_ prefix.
    assert result.output_names == ["out", "output_state_0", "output_state_1"]
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x.numpy(), "state_0": h.numpy(), "state_1": c.numpy(), "extra_scale": s.numpy()})
    np.testing.assert_allclose(got[2], (c * s).numpy())


def test_tuple_outputs_are_numbered():
    result = fastonnx.export(Encoder().eval(), _encoder_inputs(2, 5))
    assert result.output_names == ["output_0", "output_1"]


def test_export_params_false_makes_weights_inputs():
    model = Encoder().eval()
    proto = fastonnx.export(model, _encoder_inputs(2, 5), export_params=False).model_proto
    check(proto)
    assert [i.name for i in proto.graph.input] == ["x", "mask", "proj.weight", "proj.bias", "norm.weight", "norm.bias"]
    assert not [t for t in proto.graph.initializer if t.name.startswith(("proj.", "norm."))]
    feeds = dict(zip(["x", "mask"], (t.numpy() for t in _encoder_inputs(2, 5))))
    feeds.update({k: v.detach().numpy() for k, v in model.state_dict().items()})
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got[1], model(*_encoder_inputs(2, 5))[1].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_keep_initializers_as_inputs_lets_a_runtime_override_them():
    model = Encoder().eval()
    proto = fastonnx.export(model, _encoder_inputs(2, 5), keep_initializers_as_inputs=True).model_proto
    check(proto)
    inputs = [i.name for i in proto.graph.input]
    assert inputs[:2] == ["x", "mask"] and {"proj.weight", "proj.bias"} <= set(inputs)
    # Overridden at run time: the weight must not have been folded into a constant.
    x, mask = _encoder_inputs(2, 5)
    zero = {"proj.weight": np.zeros((4, 8), np.float32)}
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy(), "mask": mask.numpy(), **zero})
    with torch.no_grad():
        model.proj.weight.zero_()
        np.testing.assert_allclose(got[0], model(x, mask)[0].numpy(), rtol=1e-5, atol=1e-6)


class WithDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x)


def test_training_modes():
    x = torch.ones(64, 64)
    model = WithDropout()
    evaluated = fastonnx.export(model, (x,), training=TrainingMode.EVAL)
    assert "Dropout" not in {n.op_type for n in evaluated.model_proto.graph.node}
    trained = fastonnx.export(model.train(), (x,), training=TrainingMode.TRAINING).model_proto
    check(trained)
    (out,) = ort.InferenceSession(trained.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    kept = np.count_nonzero(out) / out.size
    assert 0.35 < kept < 0.65 and np.allclose(out[out != 0], 2.0), "training-mode dropout keeps half, scaled by 2"
    preserved = fastonnx.export(model.eval(), (x,), training=TrainingMode.PRESERVE)
    assert "Dropout" not in {n.op_type for n in preserved.model_proto.graph.node}
    with pytest.raises(TypeError, match="TrainingMode"):
        fastonnx.export(model, (x,), training="yes")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_training_mode_batch_norm_normalizes_with_the_batch_statistics(dtype):
    """As torch.onnx exports it: the output of a training step; the update of the running
    statistics (a buffer mutation) has no place in the graph."""
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, affine=False))
    model = model.to(dtype)
    x = (torch.randn(4, 3, 8, 8) * 2 + 1).to(dtype)
    proto = fastonnx.export(model, (x,), training=TrainingMode.TRAINING).model_proto
    assert model.training
    want = model(x).detach().float()
    tolerance = {"rtol": 1e-3, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 4e-3}
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]).float(), want, **tolerance)


@pytest.mark.parametrize("tracer", ["export", "jit"])
def test_a_batch_norm_applied_twice_in_training_mode(tracer):
    """The second application reads the running statistics only to update them (its output takes
    the batch's): no read of a dropped update."""
    bn, conv = torch.nn.BatchNorm2d(2), torch.nn.Conv2d(2, 2, 3, padding=1)
    model = torch.nn.Sequential(bn, torch.nn.ReLU(), conv, bn)
    x = torch.randn(3, 2, 6, 6)
    proto = fastonnx.export(model, (x,), training=TrainingMode.TRAINING, tracer=tracer).model_proto
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]), model(x).detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("tracer", ["export", "jit"])
def test_running_statistics_read_after_a_training_batch_norm_are_refused(tracer):
    """The update of the running statistics is dropped: a read of them after it would silently
    give the old values."""

    class ReadsStatistics(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x):
            return self.bn(x), self.bn.running_mean * 1

    with pytest.raises(fastonnx.ConversionError, match=r"aten::batch_norm .*reads `\w*running_mean` afterwards"):
        fastonnx.export(ReadsStatistics(), (torch.randn(4, 3),), training=TrainingMode.TRAINING, tracer=tracer)


def test_verify_prints_differences(capsys):
    model = Encoder().eval()
    args = _encoder_inputs(2, 5)
    fastonnx.export(model, args, verify=True)
    printed = capsys.readouterr().out
    assert "max abs diff" in printed and "output_0" in printed and "MISMATCH" not in printed
    result = fastonnx.export(model, args)
    x, mask = args
    diffs = result.verify(x * 2, mask)
    assert [d.name for d in diffs] == ["output_0", "output_1"] and all(d.ok for d in diffs)
    other = Encoder().eval()
    assert not all(d.ok for d in result.verify(*args, model=other))


def test_verify_takes_nan_where_torch_has_nan():
    """logdet of a matrix whose determinant is negative is NaN in both; NaN against NaN is equal
    (the bound computed from torch's NaN failed it)."""

    class LogDet(torch.nn.Module):
        def forward(self, x):
            return torch.logdet(x)

    x = torch.stack([torch.eye(3), torch.diag(torch.tensor([-1.0, 2.0, 3.0]))])
    diffs = fastonnx.export(LogDet(), (x,)).verify(x)
    assert [d.ok for d in diffs] == [True] and diffs[0].max_rel == 0


def test_verify_raises_on_mismatch():
    with pytest.raises(fastonnx.VerificationError, match="output"):
        fastonnx.export(WithDropout().train(), (torch.ones(32, 32),), training=TrainingMode.TRAINING, verify=True)


def test_report_on_success_and_failure(tmp_path):
    path = tmp_path / "enc.onnx"
    fastonnx.export(Encoder().eval(), _encoder_inputs(2, 5), str(path), report=True)
    text = (tmp_path / "enc.onnx.report.md").read_text()
    for section in ("# fastonnx export report", "## Phases", "## ATen ops converted", "aten::linear", "## ONNX ops written"):
        assert section in text

    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x) + torch.special.erfcx(x * 2)

    failed = tmp_path / "failed.md"
    with pytest.raises(fastonnx.UnsupportedOpsError):
        fastonnx.export(Unsupported(), (torch.randn(3),), report=failed)
    text = failed.read_text()
    assert "## Unsupported ops" in text and "aten::special_erfcx | 2" in text


def test_verbose_prints_the_graph(capsys):
    fastonnx.export(Encoder().eval(), _encoder_inputs(2, 5), verbose=True)
    printed = capsys.readouterr().out
    assert "LayerNormalization" in printed or "ReduceMean" in printed
    assert "x" in printed and "output_1" in printed
    # The intermediate values' shapes one per line (onnx.printer writes them all on one line).
    assert max(len(line) for line in printed.splitlines()) < 200
    assert any(line.strip().startswith("float[2,5,") for line in printed.splitlines())


def test_a_dynamic_axes_key_of_nothing_is_ignored_with_a_warning():
    """torch.onnx ignores a dynamic_axes key that names neither an input nor an output (its own
    RNN tests pass `seq_lengths` to models without one): fastonnx too, naming what keys may be."""
    with pytest.warns(fastonnx.DynamicAxesWarning, match=r"dynamic_axes\['nope'\] is ignored: names neither an input "
                                                         r"\(x, mask\) nor an output \(output_0, output_1\)"):
        fastonnx.export(Encoder().eval(), _encoder_inputs(2, 5), dynamic_axes={"nope": [0]})

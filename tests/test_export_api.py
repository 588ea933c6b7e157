"""fastonnx.export's arguments, errors and files."""

from __future__ import annotations

import os

import onnx
import pytest
import torch

import fastonnx
from fastonnx import _lower
from support import check, export_and_compare, run_ort


class TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.lin(x).relu(), (x * y).sum(1)


def _args():
    return torch.randn(2, 4), torch.randn(2, 4)


def test_writes_file_and_result(tmp_path):
    path = tmp_path / "m.onnx"
    result = fastonnx.export(TwoInTwoOut(), _args(), str(path))
    loaded = onnx.load(str(path))
    check(loaded)
    assert loaded.SerializeToString() == result.model_proto.SerializeToString()
    assert [i.name for i in loaded.graph.input] == ["x", "y"]
    assert result.input_names == ["x", "y"]
    assert {"lin.weight", "lin.bias"} <= {i.name for i in loaded.graph.initializer}
    assert not [p for p in os.listdir(tmp_path) if p != "m.onnx"], "temporary files left behind"


def test_lone_tensor_args_and_exported_program():
    model = torch.nn.ReLU()
    x = torch.randn(3)
    assert run_ort(fastonnx.export(model, x).model_proto, [x])[0].shape == (3,)
    ep = torch.export.export(model, (x,))
    proto = fastonnx.export(ep).model_proto
    check(proto)
    assert len(proto.graph.node) == 1
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]), model(x))


def test_input_and_output_names_partial():
    proto = fastonnx.export(TwoInTwoOut(), _args(), input_names=["a"], output_names=["logits"]).model_proto
    assert [i.name for i in proto.graph.input] == ["a", "y"]
    assert proto.graph.output[0].name == "logits"
    check(proto)


def test_output_name_taken_by_an_intermediate_value():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x + 1).relu()

    proto = fastonnx.export(M(), (torch.randn(2),), output_names=["add"]).model_proto
    check(proto)
    assert proto.graph.output[0].name == "add"
    assert len({o for n in proto.graph.node for o in n.output}) == len(proto.graph.node)


def test_passthrough_output_gets_identity():
    class M(torch.nn.Module):
        def forward(self, x):
            return x, x.clone(), torch.nn.functional.dropout(x, 0.5, training=False)

    x = torch.randn(2, 3)
    proto = export_and_compare(M(), (x,))
    assert len({o.name for o in proto.graph.output}) == 3


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"input_names": ["a", "b", "c"]}, ValueError, "3 names but the model has 2 tensor inputs"),
        ({"output_names": ["a", "b", "c"]}, ValueError, "3 names but the model has 2 tensor outputs"),
        ({"input_names": ["a", "a"]}, ValueError, "duplicate names: ['a']"),
        ({"input_names": "x"}, TypeError, "list of non-empty strings"),
        ({"opset_version": 9}, ValueError, "opsets 13 to 28"),
        ({"opset_version": 99}, ValueError, "opsets 13 to 28"),
    ],
)
def test_bad_arguments(kwargs, error, fragment):
    with pytest.raises(error) as info:
        fastonnx.export(TwoInTwoOut(), _args(), **kwargs)
    assert fragment in str(info.value)


def test_bad_model_and_args():
    with pytest.raises(TypeError, match="torch.nn.Module or a torch.export.ExportedProgram"):
        fastonnx.export(lambda x: x, (torch.randn(1),))
    with pytest.raises(TypeError, match="args must be a tuple"):
        fastonnx.export(torch.nn.ReLU(), [torch.randn(1)])


def test_unwritable_path_fails_before_tracing(tmp_path):
    with pytest.raises(fastonnx.WriteError, match="does not exist"):
        fastonnx.export(torch.nn.ReLU(), (torch.randn(1),), str(tmp_path / "missing" / "m.onnx"))


def test_failed_export_leaves_existing_file(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"previous model")

    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x)

    with pytest.raises(fastonnx.UnsupportedOpsError):
        fastonnx.export(Unsupported(), (torch.randn(2),), str(path))
    assert path.read_bytes() == b"previous model"
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_trace_error_keeps_pytorch_message():
    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("this model cannot run")

    with pytest.raises(fastonnx.TraceError, match="torch.export.export failed.*this model cannot run"):
        fastonnx.export(Broken(), (torch.randn(1),))


def test_unsupported_ops_listed_at_once():
    class Many(torch.nn.Module):
        def forward(self, x):
            a = torch.special.erfcx(x)
            b = torch.special.erfcx(a) + torch.special.i0e(x)
            return torch.special.i0e(b) + torch.special.i0e(x)

    with pytest.raises(fastonnx.UnsupportedOpsError) as info:
        fastonnx.export(Many(), (torch.randn(3),))
    ops = {op.overload: op for op in info.value.ops}
    assert ops["aten::special_i0e"].count == 3
    assert ops["aten::special_erfcx"].count == 2
    assert "test_export_api.py" in ops["aten::special_erfcx"].first_source
    assert "special_erfcx: {onnx: ...}" in ops["aten::special_erfcx"].yaml_hint
    assert "2 op(s) have no ONNX converter and no decomposition" in str(info.value)


def test_conversion_error_names_the_node():
    class TrainingBatchNorm(torch.nn.Module):
        def forward(self, x, mean, var):
            return torch.nn.functional.batch_norm(x, mean, var, training=True)

    ep = torch.export.export(TrainingBatchNorm(), (torch.randn(2, 3), torch.zeros(3), torch.ones(3)))
    with pytest.raises(fastonnx.ConversionError, match=r"aten::batch_norm \(FX node `batch_norm`\).*eval mode"):
        fastonnx.export(ep)


def test_model_is_traced_in_eval_mode_and_mode_restored():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(4)).train()
    proto = fastonnx.export(model, (torch.randn(3, 4),)).model_proto
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    x = torch.randn(3, 4)
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]), model(x).detach(), rtol=1e-4, atol=1e-5)


def test_inplace_on_aliased_tensor_is_functionalized():
    class Aliased(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            z = y.view(-1)
            y.add_(1)  # z sees this through the shared storage
            return z, y

    export_and_compare(Aliased(), (torch.randn(2, 3),))


def test_opset_rules_pick_by_target():
    class Mean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=[1], keepdim=True), x.mean()

    x = torch.randn(3, 4)
    for opset in (13, 17, 18, 23, 28):
        proto = export_and_compare(Mean(), (x,), opset_version=opset)
        assert proto.opset_import[0].version == opset
        reduce = next(n for n in proto.graph.node if n.op_type == "ReduceMean")
        assert (len(reduce.input) == 2) == (opset >= 18)


def test_argument_unknown_to_the_generated_converter(monkeypatch):
    """A newer torch may add a trailing defaulted argument: at its default it is dropped,
    otherwise the export fails naming it."""
    registry = dict(_lower._registry())
    op_id, names, static = registry["hardtanh"]
    registry["hardtanh"] = (op_id, names[:-1], static)  # as if max_val were new in this torch
    monkeypatch.setattr(_lower, "_registry", lambda: registry)
    monkeypatch.setattr(_lower, "_PLANS", {})

    export_and_compare(torch.nn.Hardtanh(-1.0, 1.0), (torch.randn(5) * 3,))
    with pytest.raises(fastonnx.ConversionError, match="`max_val`=2.0 is new in this torch"):
        fastonnx.export(torch.nn.Hardtanh(-1.0, 2.0), (torch.randn(5),))


def test_dtype_onnx_lacks_is_a_clear_error():
    """ONNX's Atan has no bfloat16 version: a ConversionError naming the op and the types it
    takes, not a model that fails to load."""

    class Atan(torch.nn.Module):
        def forward(self, x):
            return torch.atan(x)

    x = torch.randn(3, 4).to(torch.bfloat16)
    with pytest.raises(fastonnx.ConversionError, match=r"ONNX Atan \(opset 18\) has no bfloat16 version.*float32"):
        fastonnx.export(Atan(), (x,))


def test_complex_values_are_real_pairs():
    """A complex input or output is a real tensor with a trailing (real, imaginary) dimension."""

    class Spectrum(torch.nn.Module):
        def forward(self, z):
            return torch.view_as_complex(torch.view_as_real(z) * 2), z.real

    z = torch.randn(3, 4, dtype=torch.complex64)
    proto = fastonnx.export(Spectrum(), (z,)).model_proto
    check(proto)
    for value in (proto.graph.input[0], proto.graph.output[0]):
        assert [d.dim_value for d in value.type.tensor_type.shape.dim] == [3, 4, 2]
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    doubled, real = run_ort(proto, [z])
    torch.testing.assert_close(torch.from_numpy(doubled), torch.view_as_real(z * 2))
    torch.testing.assert_close(torch.from_numpy(real), z.real)


def test_complex_input_to_a_converter_that_does_not_take_it():
    """Elementwise ONNX ops would misread (real, imaginary) pairs: a clear error instead."""

    class Square(torch.nn.Module):
        def forward(self, z):
            return z * z

    with pytest.raises(fastonnx.ConversionError, match=r"aten::mul.Tensor .*complex tensors are not supported"):
        fastonnx.export(Square(), (torch.randn(3, dtype=torch.complex64),))


def test_supported_ops():
    ops = fastonnx.supported_ops()
    for name in ("conv2d", "add.Tensor", "relu_", "batch_norm", "max_pool2d", "linear"):
        assert name in ops

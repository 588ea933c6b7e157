"""What a torch.onnx user does first, done the torch.onnx way: input_names that name the
weights too, verbose=True, a transformers model with its default cache, meta-device weights."""

from __future__ import annotations

import pytest
import torch
import transformers

import fastonnx
from support import export_and_compare


class SmallNet(torch.nn.Module):
    """Parameters (conv, linear) and buffers (batch norm's running statistics)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).mean((2, 3)))


def test_input_names_past_the_inputs_name_parameters_then_buffers():
    """The docs' AlexNet spelling: the inputs, then "learned_%d" for the parameters."""
    model = SmallNet().eval()
    params = len(list(model.parameters()))
    input_names = ["actual_input_1"] + ["learned_%d" % i for i in range(params + 2)]
    proto = export_and_compare(model, (torch.randn(1, 3, 8, 8),), input_names=input_names, output_names=["output1"])
    initializers = {i.name for i in proto.graph.initializer}
    assert [i.name for i in proto.graph.input] == ["actual_input_1"]
    # conv.weight, conv.bias, bn.weight, bn.bias, fc.weight, fc.bias, then bn.running_mean, bn.running_var
    assert {f"learned_{i}" for i in range(params + 2)} <= initializers
    dims = {i.name: list(i.dims) for i in proto.graph.initializer}
    assert dims["learned_0"] == [4, 3, 3, 3] and dims["learned_4"] == [2, 4] and dims["learned_7"] == [4]


def test_weights_named_as_graph_inputs_without_export_params():
    model = SmallNet().eval()
    names = ["x", "conv_w", "conv_b"]
    proto = fastonnx.export(model, (torch.randn(1, 3, 8, 8),), input_names=names, export_params=False).model_proto
    assert [i.name for i in proto.graph.input][:3] == names


def test_more_names_than_inputs_and_weights():
    model = SmallNet().eval()
    too_many = ["n%d" % i for i in range(1 + 6 + 3 + 1)]  # bn has a third buffer, num_batches_tracked
    with pytest.raises(fastonnx.ArgumentError, match="12 names but the model has 1 tensor inputs and 9 parameters"):
        fastonnx.export(model, (torch.randn(1, 3, 8, 8),), input_names=too_many + ["extra"])


def test_a_failed_export_is_caught_as_torch_onnx_catches_it():
    class Volumetric(torch.nn.Module):
        def forward(self, x, grid):
            return torch.nn.functional.grid_sample(x, grid, align_corners=False)

    args = (torch.randn(1, 1, 2, 3, 2), torch.randn(1, 3, 2, 4, 3))
    with pytest.raises(torch.onnx.OnnxExporterError, match="opset 20") as caught:
        fastonnx.export(Volumetric(), args, opset_version=18)
    assert isinstance(caught.value, fastonnx.ConversionError)
    with pytest.raises(RuntimeError):  # what torch.onnx's own tests expect of a refused export
        fastonnx.export(model=None, args=args)


def test_verbose_prints_the_graph_without_weight_values(capsys):
    model = torch.nn.Linear(4, 300).eval()
    fastonnx.export(model, (torch.randn(2, 4),), verbose=True, input_names=["x", "w", "b"])
    out = capsys.readouterr().out
    assert "w: float[300, 4]" in out and "b: float[300]" in out and "Gemm" in out
    assert len(out) < 2000  # 1500 weight values would be several times that


def test_transformers_model_with_its_default_cache_says_what_to_do():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (2, 5))
    with pytest.raises(fastonnx.TraceError) as info:
        fastonnx.export(model, (ids,))
    assert "\n" not in str(info.value) and "use_cache" in str(info.value)
    export_and_compare(model, (ids,), kwargs={"use_cache": False})


def test_meta_weights_with_real_inputs():
    with torch.device("meta"):
        model = torch.nn.Linear(4, 3)
    with pytest.raises(fastonnx.ArgumentError, match="2 weight\\(s\\) are on the meta device"):
        fastonnx.export(model, (torch.randn(2, 4),))

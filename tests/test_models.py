"""Whole-net exports: each net in models/nets.py and models/transformers_nets.py must pass the
checker and match eager PyTorch in onnxruntime."""

import onnx
import pytest
from models.nets import TEST_NETS, resnet18
from models.transformers_nets import MODELS
from support import OPSET_MATRIX, assert_matches, export_and_compare

import fastonnx


@pytest.mark.parametrize("opset", OPSET_MATRIX, ids=lambda v: f"opset{v}")
@pytest.mark.parametrize("name", list(TEST_NETS))
def test_net_matches_eager(name, opset):
    model, args = TEST_NETS[name]()
    export_and_compare(model, args, rtol=1e-3, atol=1e-4, opset_version=opset)


@pytest.mark.parametrize("opset", OPSET_MATRIX, ids=lambda v: f"opset{v}")
@pytest.mark.parametrize("name", list(MODELS))
def test_transformer_matches_eager(name, opset):
    model, args, kwargs = MODELS[name]()
    export_and_compare(model, args, kwargs=kwargs, rtol=1e-3, atol=1e-4, opset_version=opset)


def test_export_to_file(tmp_path):
    model, args = resnet18()
    path = tmp_path / "m.onnx"
    fastonnx.export(model, args, str(path))
    assert_matches(onnx.load(str(path)), model, args, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", list(TEST_NETS))
def test_net_matches_eager_through_torchscript(name):
    """The TorchScript front end exports every net the torch.export one does, and it matches."""
    model, args = TEST_NETS[name]()
    export_and_compare(model, args, rtol=1e-3, atol=1e-4, tracer="jit")


@pytest.mark.parametrize("name", list(MODELS))
def test_transformer_matches_eager_through_torchscript(name):
    model, args, kwargs = MODELS[name]()
    export_and_compare(model, args, kwargs=kwargs, rtol=1e-3, atol=1e-4, tracer="jit")

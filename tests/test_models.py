"""Whole-net exports: each net in models/nets.py must pass the checker and match eager PyTorch
in onnxruntime."""

import numpy as np
import onnx
import pytest
import torch
from models.nets import TEST_NETS, resnet18
from support import check, export_and_compare, run_ort

import fastonnx


@pytest.mark.parametrize("name", list(TEST_NETS))
def test_net_matches_eager(name):
    model, args = TEST_NETS[name]()
    export_and_compare(model, args, rtol=1e-3, atol=1e-4)


def test_export_to_file(tmp_path):
    model, args = resnet18()
    path = tmp_path / "m.onnx"
    fastonnx.export(model, args, str(path))
    proto = onnx.load(str(path))
    check(proto)
    (got,) = run_ort(proto, list(args))
    with torch.no_grad():
        want = model(*args)
    scale = max(1.0, float(want.abs().max()))
    torch.testing.assert_close(torch.from_numpy(np.asarray(got)), want, rtol=1e-3, atol=1e-4 * scale)

"""torchvision's models, exported and run in onnxruntime. torchvision's PyPI wheels load only
beside the torch build they were made for: .ci/run runs these with torch 2.15.0 and torchvision
0.29.2; beside torch 2.13's CPU build torchvision does not load, and each test is an expected
failure that says so (never a silent skip)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from support import run_ort

import fastonnx


def _torchvision_loads() -> bool:
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision.ops  # noqa: F401  (fails beside a torch it was not built for)
    except (ImportError, RuntimeError):
        return False
    return True


needs_torchvision = pytest.mark.xfail(not _torchvision_loads(), raises=(ImportError, RuntimeError), strict=True,
                                      reason="torchvision does not load beside this torch (.ci/run runs these "
                                             "with torch 2.15.0 and torchvision 0.29.2)")


@needs_torchvision
def test_raft_optical_flow():
    """RAFT built its correlation pyramid from tensors decompositions made in separate fake
    modes; fastonnx's re-trace raised a bare AssertionError. Now it matches eager."""
    from torchvision.models.optical_flow import raft_small

    torch.manual_seed(0)
    model = raft_small().eval()
    a, b = torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128)
    proto = fastonnx.export(model, (a, b), kwargs={"num_flow_updates": 3}).model_proto
    with torch.no_grad():
        want = model(a, b, num_flow_updates=3)
    got = run_ort(proto, [a, b])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-3, atol=1e-3)


def _op_types(graph) -> set[str]:
    """The op types of a graph and of its If/Loop bodies."""
    found = set()
    for node in graph.node:
        found.add(node.op_type)
        for attr in node.attribute:
            if attr.g.node:
                found |= _op_types(attr.g)
    return found


def _detector(name: str) -> torch.nn.Module:
    """A detection model with random weights scaled so that its scores are distinct: with
    torchvision's initialisation most anchors score alike, and the order of tied boxes is
    arbitrary in PyTorch and in onnxruntime alike."""
    from torchvision.models import detection

    model = getattr(detection, name)(weights=None, weights_backbone=None, num_classes=5).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / max(1, p[0].numel()) ** 0.5)
    return model


@needs_torchvision
@pytest.mark.parametrize("name", ["ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn"])
def test_detection_models_torch_export_refuses(name):
    """torch.export refuses both (data-dependent sizes in their post-processing); the TorchScript
    front end exports them as torch.onnx's TorchScript exporter did (the image size fixed, the
    number of detections dynamic), with torchvision's nms and roi_align as ONNX NonMaxSuppression
    and RoiAlign. The output matches eager at the traced image and at another one."""
    model = _detector(name)
    g = torch.Generator().manual_seed(1)
    image = torch.rand(3, 320, 320, generator=g)
    with pytest.warns(fastonnx.TracerFallbackWarning, match="torch.export refused"):
        result = fastonnx.export(model, ([image],))
    assert result.tracer == "torch.jit.trace"
    ops = _op_types(result.model_proto.graph)
    assert "NonMaxSuppression" in ops and (name.startswith("ssd") or "RoiAlign" in ops)
    for x in (image, torch.rand(3, 320, 320, generator=g)):
        got = run_ort(result.model_proto, [x])
        want = torch.utils._pytree.tree_leaves(model([x]))
        assert len(got) == len(want)
        for g_, w in zip(got, want):
            np.testing.assert_allclose(g_, w.detach().numpy(), rtol=1e-3, atol=1e-3)


@needs_torchvision
@pytest.mark.parametrize("tracer", ["export", "jit"])
def test_roi_pool(tracer):
    """torchvision's roi_pool as ONNX MaxRoiPool (its rois are MaxRoiPool's: batch index, then
    the box); its argmax output, which only a backward pass reads, has no ONNX op, so a model
    that reads it is refused rather than given something else."""
    from torchvision.ops import roi_pool

    class Pool(torch.nn.Module):
        def forward(self, x, rois):
            return roi_pool(x, rois, output_size=(5, 3), spatial_scale=0.5)

    class Argmax(torch.nn.Module):
        def forward(self, x, rois):
            return torch.ops.torchvision.roi_pool(x, rois, 0.5, 5, 3)[1]

    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 4, 16, 16, generator=g)
    rois = torch.tensor([[0, 0.0, 0.0, 20.0, 12.0], [1, 4.0, 6.0, 30.0, 31.0], [0, 8.0, 2.0, 9.0, 3.0]])
    proto = fastonnx.export(Pool(), (x, rois), tracer=tracer).model_proto
    assert "MaxRoiPool" in _op_types(proto.graph)
    np.testing.assert_allclose(run_ort(proto, [x, rois])[0], Pool()(x, rois).numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(fastonnx.ConversionError, match="gives no ONNX value for its output 1, which the model reads"):
        fastonnx.export(Argmax(), (x, rois), tracer=tracer)

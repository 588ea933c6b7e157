"""torchvision's models, exported and run in onnxruntime. torchvision's PyPI wheels load only
beside the torch build they were made for: .ci/run runs these with torch 2.14.1 and torchvision
0.29.1; beside torch 2.13's CPU build torchvision does not load, and each test is an expected
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
                                             "with torch 2.14.1 and torchvision 0.29.1)")


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

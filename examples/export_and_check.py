"""The main job: export a ResNet-18-shaped network (random weights, nothing downloaded) with
fastonnx and a dynamic batch, validate the file with onnx's full checker, and compare
onnxruntime's outputs with PyTorch's at the traced batch and at another one.

    python examples/export_and_check.py [--model resnet18|mlp] [--out model.onnx]

It needs only an installed fastonnx (the network is defined below). Without ``--out`` the model
is written to a temporary directory, which is removed afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

import fastonnx


class BasicBlock(nn.Module):
    """ResNet's two-convolution block with its shortcut (torchvision's architecture)."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


def resnet18(width: int = 16, classes: int = 10) -> nn.Module:
    """ResNet-18's layout (4 stages of 2 blocks), narrower than torchvision's (width 64)."""
    layers: list[nn.Module] = [
        nn.Conv2d(3, width, 7, 2, 3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    inplanes = width
    for stage in range(4):
        planes = width * 2**stage
        layers += [BasicBlock(inplanes, planes, 1 if stage == 0 else 2), BasicBlock(planes, planes)]
        inplanes = planes
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, classes)]
    return nn.Sequential(*layers)


MODELS = {
    "resnet18": (resnet18, (3, 64, 64)),
    "mlp": (lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)), (32,)),
}


def compare(session: ort.InferenceSession, model: nn.Module, x: torch.Tensor) -> float:
    """The largest difference between onnxruntime's output and PyTorch's, relative to the
    output's magnitude."""
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        want = model(x).numpy()
    diff = float(np.max(np.abs(got - want)))
    scale = max(1.0, float(np.max(np.abs(want))))
    print(f"batch {x.shape[0]}: output {list(got.shape)}, max abs diff {diff:.3g} (max |value| {scale:.3g})")
    return diff / scale


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="resnet18", help="the network to export")
    p.add_argument("--out", type=Path, help="where to write the model (default: a temporary directory)")
    a = p.parse_args()

    torch.manual_seed(0)
    build, shape = MODELS[a.model]
    model = build().eval()
    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or Path(tmp) / f"{a.model}.onnx"
        out.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        result = fastonnx.export(model, (torch.randn(2, *shape),), out, dynamic_axes={"input": {0: "batch"}},
                                 input_names=["input"])
        elapsed = time.perf_counter() - t0
        print(f"exported {a.model} to {out} in {elapsed:.2f} s ({out.stat().st_size / 1e6:.1f} MB, "
              f"opset {result.opset_version}; phases: "
              + ", ".join(f"{k} {v:.3f} s" for k, v in result.timings.items()) + ")")

        proto = onnx.load(out)
        onnx.checker.check_model(proto, full_check=True)
        print(f"onnx.checker (full_check): ok, {len(proto.graph.node)} nodes")

        session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
        worst = max(compare(session, model, torch.randn(batch, *shape)) for batch in (2, 5))
    ok = worst <= 1e-4
    print("onnxruntime matches PyTorch" if ok else f"MISMATCH: relative difference {worst:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

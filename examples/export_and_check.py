"""The main job: export a ResNet-18-shaped network (random weights, nothing downloaded) with
fastonnx, validate it with onnx's full checker, and compare onnxruntime's outputs with PyTorch's.

    python examples/export_and_check.py [--model resnet18] [--out model.onnx]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.models import nets  # noqa: E402  (the networks the model tests use)

import fastonnx  # noqa: E402

MODELS = ["mlp", "alexnet", "vgg", "resnet18", "resnet50", "dcgan_generator", "dcgan_discriminator", "super_resolution"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=MODELS, default="resnet18")
    p.add_argument("--out", default="model.onnx")
    a = p.parse_args()

    model, args = getattr(nets, a.model)()
    t0 = time.perf_counter()
    result = fastonnx.export(model, args, a.out)
    elapsed = time.perf_counter() - t0
    size = Path(a.out).stat().st_size
    print(f"exported {a.model} to {a.out} in {elapsed:.2f} s ({size / 1e6:.1f} MB, "
          f"opset {result.opset_version}, phases: "
          + ", ".join(f"{k} {v:.3f} s" for k, v in result.timings.items()) + ")")

    proto = onnx.load(a.out)
    onnx.checker.check_model(proto, full_check=True)
    print(f"onnx.checker (full_check): ok, {len(proto.graph.node)} nodes")

    session = ort.InferenceSession(a.out, providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), args)}
    got = session.run(None, feeds)
    with torch.no_grad():
        want = model(*args)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    worst = 0.0
    for g, w in zip(got, want):
        w = w.numpy()
        diff = float(np.max(np.abs(g - w))) if w.size else 0.0
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        worst = max(worst, diff / scale)
        print(f"output {g.shape}: max abs diff {diff:.3g} (max |value| {scale:.3g})")
    ok = worst <= 1e-4
    print("onnxruntime matches PyTorch" if ok else f"MISMATCH: relative difference {worst:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

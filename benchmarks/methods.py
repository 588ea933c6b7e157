"""The exporters being compared, each a function (model, args, out_dir) -> extra facts. An
exporter names the file it wrote (`onnx_path`) instead of counting its nodes, so that parsing the
model back, which no exporter needs, stays out of the timed call."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import torch


def _trace(model, args):
    with torch.no_grad():
        return torch.export.export(model, args)


def torch_export(model, args, out: Path) -> dict:
    _trace(model, args)
    return {}


def floor(model, args, out: Path) -> dict:
    """torch.export plus writing every weight's raw bytes once: what any exporter that traces with
    torch.export and writes the weights must at least spend."""
    ep = _trace(model, args)
    with open(out / "weights.bin", "wb") as f:
        seen = set()
        for t in list(ep.state_dict.values()) + list(ep.constants.values()):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                f.write(memoryview(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()))
    return {}


def fastonnx_export(model, args, out: Path) -> dict:
    import fastonnx

    result = fastonnx.export(model, args, str(out / "model.onnx"), verbose=False)
    return {"phases": result.timings, "onnx_path": out / "model.onnx"}


def fastonnx_jit(model, args, out: Path) -> dict:
    """fastonnx through its TorchScript front end (torch.jit.trace instead of torch.export)."""
    import fastonnx

    result = fastonnx.export(model, args, str(out / "model.onnx"), verbose=False, tracer="jit")
    return {"phases": result.timings, "onnx_path": out / "model.onnx"}


def fastonnx_to_devnull(model, args, out: Path) -> dict:
    """fastonnx with the model written to /dev/null: everything fastonnx computes, the transposed
    weights included, without the disk, whose cost on a VM is not linear in the bytes (fresh
    page-cache memory is backed by the host on first touch). For the linearity target."""
    import fastonnx

    result = fastonnx.export(model, args, verbose=False)
    t0 = time.perf_counter()
    result.native.write(os.devnull)  # the native writer itself: save() writes a temporary beside its path
    result.timings["write"] = time.perf_counter() - t0
    return {"phases": result.timings}


def dynamo(model, args, out: Path, optimize: bool = True) -> dict:
    torch.onnx.export(model, args, str(out / "model.onnx"), dynamo=True, optimize=optimize, verbose=False)
    return {"onnx_path": out / "model.onnx"}


def dynamo_unoptimized(model, args, out: Path) -> dict:
    return dynamo(model, args, out, optimize=False)


def torchscript(model, args, out: Path) -> dict:
    with torch.no_grad():
        torch.onnx.export(model, args, str(out / "model.onnx"), dynamo=False, verbose=False)
    return {"onnx_path": out / "model.onnx"}


def jit_trace(model, args, out: Path) -> dict:
    """torch.jit.trace alone: the TorchScript exporter's tracing front end."""
    with torch.no_grad():
        torch.jit.trace(model, args, strict=False, check_trace=False)
    return {}


TORCH_EXPORT = "torch.export"
FLOOR = "floor"
FASTONNX = "fastonnx"
FASTONNX_DEVNULL = "fastonnx to /dev/null"
FASTONNX_JIT = "fastonnx tracer=jit"
DYNAMO = "dynamo"
DYNAMO_NOOPT = "dynamo optimize=False"
TORCHSCRIPT = "torchscript"
JIT_TRACE = "jit.trace"
# label -> (function, whether a failure is a result rather than a bug of ours)
METHODS: dict[str, tuple[Callable, bool]] = {
    TORCH_EXPORT: (torch_export, False),
    FLOOR: (floor, False),
    FASTONNX: (fastonnx_export, False),
    FASTONNX_DEVNULL: (fastonnx_to_devnull, False),
    FASTONNX_JIT: (fastonnx_jit, False),
    DYNAMO: (dynamo, True),
    DYNAMO_NOOPT: (dynamo_unoptimized, True),
    TORCHSCRIPT: (torchscript, True),
    JIT_TRACE: (jit_trace, True),
}
# The other torch.export-based exporter, in each of its configurations.
OTHER_TORCH_EXPORT_BASED = (DYNAMO, DYNAMO_NOOPT)

"""Running the exported model in onnxruntime beside eager PyTorch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.utils._pytree as pytree


@dataclass(frozen=True)
class OutputDiff:
    name: str
    max_abs: float
    max_rel: float
    ok: bool


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def compare(
    model_bytes: bytes,
    input_names: list[str],
    output_names: list[str],
    model,
    args: tuple,
    kwargs: dict | None,
    rtol: float,
    atol: float,
) -> list[OutputDiff]:
    """Run both and compare each output: max absolute and relative difference, and whether every
    element is within ``atol + rtol * |expected|``."""
    import onnxruntime as ort

    kwargs = kwargs or {}
    inputs = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    if len(inputs) != len(input_names):
        raise ValueError(f"the model takes {len(input_names)} tensor inputs ({input_names}), got {len(inputs)}")
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    actual = session.run(None, {n: _numpy(t) for n, t in zip(input_names, inputs)})
    with torch.no_grad():
        # A returned number is a 0-d output of the ONNX model; None is no output.
        expected = [
            torch.as_tensor(x)
            for x in pytree.tree_leaves(model(*args, **kwargs))
            if isinstance(x, (torch.Tensor, int, float))
        ]
    if len(expected) != len(actual):
        raise ValueError(f"PyTorch returns {len(expected)} tensors and numbers, the ONNX model {len(actual)} outputs")
    diffs = []
    for name, got, torch_value in zip(output_names, actual, expected):
        want = _numpy(torch_value)
        if want.dtype == np.bool_ or got.dtype == np.bool_:
            bad = float(np.count_nonzero(got != want))
            diffs.append(OutputDiff(name, bad, bad, bad == 0))
            continue
        got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
        diff = np.atleast_1d(np.abs(got64 - want64))  # writable also for 0-d outputs
        same_nan = np.isnan(got64) & np.isnan(want64)
        diff[same_nan] = 0
        rel = diff / np.maximum(np.abs(want64), np.finfo(np.float64).tiny)
        ok = bool(np.all(diff <= atol + rtol * np.abs(want64))) and got.shape == want.shape
        diffs.append(OutputDiff(name, float(diff.max(initial=0)), float(rel.max(initial=0)), ok))
    return diffs


def format_diffs(diffs: list[OutputDiff]) -> str:
    width = max([len(d.name) for d in diffs] + [6])
    lines = [f"{'output':{width}}  {'max abs diff':>12}  {'max rel diff':>12}"]
    lines += [f"{d.name:{width}}  {d.max_abs:12.3g}  {d.max_rel:12.3g}{'' if d.ok else '  MISMATCH'}" for d in diffs]
    return "\n".join(lines)

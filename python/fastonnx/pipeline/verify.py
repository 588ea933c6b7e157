"""Running the exported model in onnxruntime beside eager PyTorch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.utils._pytree as pytree

from ..frontends.jit.trace import plain_containers


class EagerFailed(Exception):
    """Eager PyTorch raised on the inputs given: there is nothing to compare against."""


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
    ran = session.run(None, {n: _numpy(t) for n, t in zip(input_names, inputs)})
    # A sequence output (a ScriptModule's list whose length the graph computes) is its items, as
    # eager's list is.
    actual, output_names = (
        [],
        [
            f"{name}[{i}]" if isinstance(got, list) else name
            for name, got in zip(output_names, ran)
            for i in range(len(got) if isinstance(got, list) else 1)
        ],
    )
    for got in ran:
        actual.extend(got if isinstance(got, list) else [got])
    try:
        with torch.no_grad():
            eager = model(*args, **kwargs)
    except Exception as e:  # the model's own failure, whatever it raises
        raise EagerFailed(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    # A returned number is a 0-d output of the ONNX model; None is no output, or an empty optional
    # (a ScriptModule's, which onnxruntime gives as None).
    leaves = pytree.tree_leaves(plain_containers(eager), is_leaf=lambda x: x is None)
    expected = [
        None if x is None else torch.as_tensor(x)
        for x in leaves
        if x is None or isinstance(x, (torch.Tensor, int, float))
    ]
    if len(expected) != len(actual):
        expected = [x for x in expected if x is not None]
    if len(expected) != len(actual):
        raise ValueError(f"PyTorch returns {len(expected)} tensors and numbers, the ONNX model {len(actual)} outputs")
    diffs = []
    for name, got, torch_value in zip(output_names, actual, expected):
        if got is None or torch_value is None:
            same = got is None and torch_value is None
            diffs.append(OutputDiff(name, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same))
            continue
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
        rel[same_nan] = 0
        # (NaN where both are NaN: a bound of NaN would fail a NaN torch computes too)
        close = (diff <= atol + rtol * np.abs(want64)) | same_nan
        ok = bool(np.all(close)) and got.shape == want.shape
        diffs.append(OutputDiff(name, float(diff.max(initial=0)), float(rel.max(initial=0)), ok))
    return diffs


def resized_inputs(
    model_proto, input_names: list[str], args: tuple, kwargs: dict | None, size_for: Callable[[str, int], int | None]
):
    """The example inputs with each dynamic axis of the ONNX inputs resized to ``size_for(its
    dimension name, its size in the example)`` (None: left as it is), and the sizes chosen; None
    when no axis changes. An axis grows by its first slice repeated (integer inputs keep valid
    values), or by zeros when it is empty; it shrinks to its first slices. Axes of one name take
    one size, the first one chosen."""
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    dims = {i.name: [d.dim_param for d in i.type.tensor_type.shape.dim] for i in model_proto.graph.input}
    sizes: dict[str, int] = {}
    tensors = iter(input_names)
    resized = []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            resized.append(leaf)
            continue
        t = leaf
        for axis, name in enumerate(dims.get(next(tensors), [])):
            if not name:
                continue
            if name not in sizes:
                wanted = size_for(name, leaf.shape[axis])
                if wanted is None or wanted == leaf.shape[axis]:
                    continue
                sizes[name] = wanted
            t = _resized(t, axis, sizes[name])
        resized.append(t)
    if not sizes:
        return None
    new_args, new_kwargs = pytree.tree_unflatten(resized, spec)
    return new_args, new_kwargs, sizes


def _resized(t: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    have = t.shape[axis]
    if size <= have:
        return t.narrow(axis, 0, size)
    if have == 0:
        return torch.zeros(*[size if a == axis else n for a, n in enumerate(t.shape)], dtype=t.dtype)
    first = t.narrow(axis, 0, 1)
    return torch.cat([t, first.expand(*[size - have if a == axis else -1 for a in range(t.dim())])], axis)


def format_diffs(diffs: list[OutputDiff]) -> str:
    width = max([len(d.name) for d in diffs] + [6])
    lines = [f"{'output':{width}}  {'max abs diff':>12}  {'max rel diff':>12}"]
    lines += [f"{d.name:{width}}  {d.max_abs:12.3g}  {d.max_rel:12.3g}{'' if d.ok else '  MISMATCH'}" for d in diffs]
    return "\n".join(lines)

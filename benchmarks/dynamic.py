"""Dynamic exports: vision models with every input dimension ``Dim.AUTO``, where tracing is full
of symbolic shapes and costs the most. torch.export alone against fastonnx.export, each model and
method in a fresh process, in the same run; fastonnx's phases reported; fastonnx's file then runs
in onnxruntime at other sizes than traced and is compared with eager.

    python -m benchmarks.dynamic [--models swin_t,maxvit_t,mobilevitv2_050] [--timeout S] [--together]

The models need torchvision and timm (random weights, nothing downloaded). The target: fastonnx's
total at most 1.15x torch.export alone on each model. Each child also reports its process CPU time,
which a shared, loaded machine inflates far less than the wall time; ``--together`` runs the two
methods of a model at the same time (one core each), so that both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .children import child_env

HERE = Path(__file__).resolve().parent
METHODS = ("torch.export", "fastonnx")
TARGET = 1.15
# (model, example input shape, other input shapes to run in onnxruntime): maxvit_t's blocks need a
# multiple of its window grid (224 = 7 * 32), swin_t pads; mobilevitv2's patches need multiples of
# 64 (its `math.ceil(h / 2) * 2 != h` test; fastonnx then keeps those axes static, see README
# "Sizes the model's code tests", and the check runs the traced size there).
MODELS = {
    "swin_t": ((1, 3, 224, 224), [(2, 3, 224, 224), (3, 3, 160, 192)]),
    "maxvit_t": ((1, 3, 224, 224), [(2, 3, 224, 224)]),
    "mobilevitv2_050": ((1, 3, 256, 256), [(2, 3, 256, 256), (3, 3, 192, 320)]),
}


def _model(name: str):
    import torch

    torch.manual_seed(0)
    if name == "mobilevitv2_050":
        import timm

        model = timm.create_model(name, pretrained=False)
    else:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
    return model.eval()


def _child(name: str, method: str, out: str) -> None:
    """One method on one model in this process: prints one JSON line."""
    import warnings

    import torch
    from torch.export import Dim

    warnings.simplefilter("ignore")
    model = _model(name)
    shape, others = MODELS[name]
    x = torch.randn(shape)
    dynamic_shapes = ({axis: Dim.AUTO for axis in range(len(shape))},)
    if method == "torch.export":
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.no_grad():
            torch.export.export(model, (x,), dynamic_shapes=dynamic_shapes, strict=False)
        print(json.dumps({"total": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
        return
    import fastonnx

    path = os.path.join(out, "model.onnx")
    t0, c0 = time.perf_counter(), time.process_time()
    result = fastonnx.export(model, (x,), path, dynamic_shapes=dynamic_shapes, verbose=False)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    try:
        checks = _check(model, path, shape, others)
    except Exception as e:  # noqa: BLE001 - reported beside the times, which stand
        checks = [{"shape": list(shape), "ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}]
    timings = {"total": total, "cpu": cpu, "phases": result.timings}
    print(json.dumps({**timings, "checks": checks, "fastonnx": fastonnx.__file__}))


def _check(model, path: str, shape: tuple, others: list[tuple]) -> list[dict]:
    """The largest difference from eager in onnxruntime, at the traced size and at each other (an
    axis the model fixes, which fastonnx keeps static and warns about, at its traced size)."""
    import onnxruntime
    import torch

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    static = [isinstance(d, int) for d in session.get_inputs()[0].shape]
    checks = []
    for other in [shape, *others]:
        size = tuple(traced if fixed else wanted for traced, wanted, fixed in zip(shape, other, static))
        x = torch.randn(size, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            want = model(x).numpy()
        got = session.run(None, {name: x.numpy()})[0]
        ok = got.shape == want.shape and bool(abs(got - want).max() <= 1e-3 + 1e-3 * abs(want).max())
        checks.append({"shape": list(size), "ok": ok, "max_diff": float(abs(got - want).max()) if ok else None})
    return checks


def _run(name: str, methods: tuple[str, ...], timeout: float) -> dict[str, dict]:
    """Each of ``methods`` on ``name`` in a fresh process, all at the same time (``--together``)
    or one after the other."""
    env = child_env()
    with tempfile.TemporaryDirectory() as out:
        procs = {}
        for method in methods:
            folder = Path(out, method)
            folder.mkdir()
            # into files, not pipes: a child waiting on a full pipe while its sibling is read would
            # be timed waiting
            with open(folder / "stdout", "w") as stdout, open(folder / "stderr", "w") as stderr:
                procs[method] = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.dynamic", "--child", name, method, str(folder)],
                    stdout=stdout,
                    stderr=stderr,
                    env=env,
                    cwd=HERE.parent,
                )
        deadline = time.monotonic() + timeout
        return {method: _finish(proc, Path(out, method), deadline, timeout) for method, proc in procs.items()}


def _finish(proc: subprocess.Popen, folder: Path, deadline: float, timeout: float) -> dict:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"error": f"did not finish in {timeout:.0f} s"}
    lines = [line for line in (folder / "stdout").read_text().splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exited {proc.returncode}: {(folder / 'stderr').read_text().strip()[-500:]}"}
    return json.loads(lines[-1])


def _table(results: dict[str, dict[str, dict]]) -> str:
    phases = ("trace", "functionalize", "decompose", "lower", "convert", "passes", "write")
    rows = [
        "| model | torch.export (s) | fastonnx (s) | ratio | CPU: torch.export (s) | CPU: fastonnx (s) | CPU ratio | "
        + " | ".join(phases)
        + " | onnxruntime vs eager |",
        "|---" * (8 + len(phases)) + "|",
    ]
    for name, by_method in results.items():
        floor, ours = by_method["torch.export"], by_method["fastonnx"]
        cells = [name]
        cells.append(f"{floor['total']:.1f}" if "total" in floor else floor["error"])
        cells.append(f"{ours['total']:.1f}" if "total" in ours else ours["error"])
        ratio = ours["total"] / floor["total"] if "total" in ours and "total" in floor else None
        cells.append(f"{ratio:.2f}x" + ("" if ratio <= TARGET else " (over target)") if ratio is not None else "-")
        cells += [f"{m['cpu']:.1f}" if "cpu" in m else "-" for m in (floor, ours)]
        cells.append(f"{ours['cpu'] / floor['cpu']:.2f}x" if "cpu" in ours and "cpu" in floor else "-")
        cells += [f"{ours.get('phases', {}).get(p, 0.0):.2f}" for p in phases]
        checks = ours.get("checks", [])
        cells.append(
            ", ".join(f"{'x'.join(map(str, c['shape']))} {'ok' if c['ok'] else 'DIFFERS'}" for c in checks) or "-"
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--timeout", type=float, default=1800.0, help="per model and method, in seconds")
    parser.add_argument("--json", type=Path, help="also write the results there")
    parser.add_argument(
        "--together", action="store_true", help="run the two methods of a model at the same time (one core each)"
    )
    options = parser.parse_args()
    results: dict[str, dict[str, dict]] = {}
    for name in options.models.split(","):
        if options.together:
            results[name] = _run(name, METHODS, options.timeout)
        else:
            results[name] = {m: r for method in METHODS for m, r in _run(name, (method,), options.timeout).items()}
        print(f"{name}: " + json.dumps(results[name]), file=sys.stderr, flush=True)
    print(_table(results))
    if options.json is not None:
        options.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

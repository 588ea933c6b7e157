"""Export wall time: fastonnx against torch.export alone, the disk floor and torch.onnx.export.

    python benchmarks/export_speed.py [--runs N] [--models mlp,resnet18]

The floor is torch.export plus writing every parameter and buffer's raw bytes once to a file:
no exporter that traces with torch.export and writes the weights can beat it. Every method
writes into the same temporary directory; each timing is the median of N runs after one warm-up.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import logging
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.models import nets  # noqa: E402  (the nets have a single source: the test suite)

try:
    import fastonnx
except ImportError as e:
    fastonnx = None
    fastonnx_import_error = e

MODELS = {"mlp": nets.mlp, "resnet18": nets.resnet18, "resnet50": nets.resnet50}


def run_torch_export(model, args, out: Path) -> None:
    torch.export.export(model, args)


def run_floor(model, args, out: Path) -> None:
    ep = torch.export.export(model, args)
    with open(out / "weights.bin", "wb") as f:
        for t in ep.state_dict.values():
            t.detach().contiguous().numpy().tofile(f)


def run_fastonnx(model, args, out: Path) -> dict[str, float]:
    return fastonnx.export(model, args, str(out / "model.onnx")).timings


def run_dynamo(model, args, out: Path) -> None:
    torch.onnx.export(model, args, str(out / "model.onnx"), dynamo=True)


def run_dynamo_unoptimized(model, args, out: Path) -> None:
    torch.onnx.export(model, args, str(out / "model.onnx"), dynamo=True, optimize=False)


def run_torchscript(model, args, out: Path) -> None:
    torch.onnx.export(model, args, str(out / "model.onnx"), dynamo=False)


TORCH_EXPORT = "torch.export"
FLOOR = "floor (torch.export + raw weights)"
# (label, function, whether a failure is reported rather than raised): the torch.onnx exporters
# are baselines, so their failures are results; fastonnx's must surface.
METHODS: list[tuple[str, Callable, bool]] = [
    (TORCH_EXPORT, run_torch_export, False),
    (FLOOR, run_floor, False),
    ("fastonnx.export", run_fastonnx, False),
    ("torch.onnx.export(dynamo=True)", run_dynamo, True),
    ("torch.onnx.export(dynamo=True, optimize=False)", run_dynamo_unoptimized, True),
    ("torch.onnx.export(dynamo=False)", run_torchscript, True),
]


def time_once(fn: Callable, model, args, tmp: Path) -> tuple[float, dict | None]:
    """One call writing into a fresh directory, removed afterwards so the disk holds one model at
    a time. torch.onnx's progress prints and deprecation warnings are silenced to keep the
    table readable."""
    out = Path(tempfile.mkdtemp(dir=tmp))
    gc.collect()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        phases = fn(model, args, out)
        elapsed = time.perf_counter() - t0
    shutil.rmtree(out)
    return elapsed, phases


def median_phases(phases: list[dict]) -> str:
    return ", ".join(f"{k} {statistics.median(p[k] for p in phases):.4f}" for k in phases[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per method (median reported)")
    parser.add_argument("--models", default="mlp,resnet18", help=f"comma-separated, from {', '.join(MODELS)}")
    opts = parser.parse_args()
    names = opts.models.split(",")
    # torch.onnx logs a warning per missing torchvision op on every export.
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    if opts.runs < 1:
        parser.error("--runs must be at least 1")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {list(MODELS)}")

    results: dict[str, dict[str, float]] = {}
    notes = []
    if fastonnx is None:
        notes.append(f"fastonnx: unavailable ({fastonnx_import_error})")
    with tempfile.TemporaryDirectory(prefix="export_speed-") as tmp:
        for name in names:
            model, args = MODELS[name]()
            methods = [m for m in METHODS if m[1] is not run_fastonnx or fastonnx is not None]
            times: dict[str, list[float]] = {label: [] for label, _, _ in methods}
            phases: list[dict] = []
            # Round-robin (a warm-up round, then one call per method per round) so load on the
            # machine that drifts during the run hits every method alike.
            for round_ in range(opts.runs + 1):
                for label, fn, may_fail in methods:
                    if label not in times:
                        continue
                    try:
                        elapsed, extra = time_once(fn, model, args, Path(tmp))
                    except Exception as e:
                        if not may_fail:
                            raise
                        notes.append(f"{name}, {label}: failed ({type(e).__name__}: {e})")
                        del times[label]
                        continue
                    if round_:
                        times[label].append(elapsed)
                        if extra:
                            phases.append(extra)
                print(f"  {name}: round {round_} of {opts.runs} done", file=sys.stderr, flush=True)
            results[name] = {label: statistics.median(t) for label, t in times.items()}
            if phases:
                notes.append(f"{name}, fastonnx phases (median s): {median_phases(phases)}")
    print_table(results, opts.runs)
    for note in notes:
        print(note)


def print_table(results: dict[str, dict[str, float]], runs: int) -> None:
    print(f"median of {runs} runs (after 1 warm-up), torch {torch.__version__}\n")
    print("| model | method | median s | / floor | / torch.export |")
    print("|---|---|---:|---:|---:|")
    for name, medians in results.items():
        floor, export = medians[FLOOR], medians[TORCH_EXPORT]
        for label, seconds in medians.items():
            print(f"| {name} | {label} | {seconds:.4f} | {seconds / floor:.2f} | {seconds / export:.2f} |")


if __name__ == "__main__":
    main()

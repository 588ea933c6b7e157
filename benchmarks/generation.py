"""Export for generation: the prefill + decode export of ``export_for_generation`` with fastonnx
(``FastOnnxExporter``) against transformers' own ``OnnxExporter`` (torch.onnx's dynamo path) and
against transformers' ``DynamoExporter``, which only traces (torch.export alone, the floor of
both). Each exporter runs on each architecture (the tiny random-weight configs of the tests) in a
fresh process: one warm-up call, then the median of --runs calls. Every call includes the
``generate`` run transformers uses to capture the stages' inputs, the same for all three.

    python -m benchmarks.generation [--runs N] [--archs llama,gpt2,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPORTERS = ("torch.export", "fastonnx", "transformers OnnxExporter")


def _exporter(name: str):
    from transformers.exporters import DynamoExporter, OnnxExporter

    from fastonnx.integrations.transformers import FastOnnxExporter

    return {"torch.export": DynamoExporter, "fastonnx": FastOnnxExporter,
            "transformers OnnxExporter": OnnxExporter}[name]()


def _child(arch: str, exporter: str, runs: int) -> None:
    """One exporter on one architecture in this process: prints the call times, or the error."""
    import contextlib
    import io
    import warnings

    import transformers
    from transformers.exporters import DynamoConfig, OnnxConfig

    from tests.models.generation import build, prompt

    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    model = build(arch)
    config = (DynamoConfig if exporter == "torch.export" else OnnxConfig)(dynamic=True)
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # torch.onnx's progress lines
            _exporter(exporter).export_for_generation(model, prompt(2, 5), config)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"times": times[1:]}))


def _measure(arch: str, exporter: str, runs: int) -> dict:
    # The repository root for `tests.models`; fastonnx as this process imports it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.generation", "--child", arch, exporter, str(runs)],
                          capture_output=True, text=True, env=env, cwd=HERE.parent)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        error = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return {"error": error[-1][:160] if error else f"exited {proc.returncode}"}
    return {"median": statistics.median(json.loads(lines[-1])["times"])}


def main() -> None:
    from tests.models.generation import ARCHITECTURES

    p = argparse.ArgumentParser(prog="python -m benchmarks.generation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="timed calls per exporter and architecture, after a warm-up")
    p.add_argument("--archs", default=",".join(ARCHITECTURES))
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        _child(opts.child[0], opts.child[1], int(opts.child[2]))
        return
    print("| architecture | torch.export s | fastonnx s | transformers OnnxExporter s | OnnxExporter / fastonnx | "
          "fastonnx / torch.export |")
    print("|---|---:|---:|---:|---:|---:|")
    for arch in opts.archs.split(","):
        m = {e: _measure(arch, e, opts.runs) for e in EXPORTERS}
        cells = [f"{m[e]['median']:.2f}" if "median" in m[e] else f"fails: {m[e]['error']}" for e in EXPORTERS]
        ok = all("median" in m[e] for e in EXPORTERS)
        speedup = f"{m['transformers OnnxExporter']['median'] / m['fastonnx']['median']:.1f}x" if ok else "-"
        over = (f"{m['fastonnx']['median'] / m['torch.export']['median']:.2f}"
                if "median" in m["fastonnx"] and "median" in m["torch.export"] else "-")
        print(f"| {arch} | " + " | ".join(cells) + f" | {speedup} | {over} |", flush=True)


if __name__ == "__main__":
    main()

"""Compile latency of the torch.compile backend: the first call of ``torch.compile(model,
backend="fastonnx")`` (capture, export, onnxruntime session, run) against the first call with
torch.compile's default backend (Inductor), and the eager call as the reference. Each backend and
model runs in a fresh process with an empty Inductor cache, so neither side reuses a compilation
from an earlier run. Times are medians over --runs processes.

    python -m benchmarks.compile_latency [--runs N] [--models mlp,resnet18,gpt2_tiny]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .children import child_env

HERE = Path(__file__).resolve().parent
BACKENDS = ("eager", "fastonnx", "inductor")


def _model(name: str):
    import torch

    from .models import build

    if name != "gpt2_tiny":
        return build(name)
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, use_cache=False)
    return transformers.GPT2Model(config).eval(), (torch.randint(0, 1000, (1, 32)),)


def _child(name: str, backend: str) -> None:
    """One backend on one model in this process: prints the first and second call times."""
    import warnings

    import torch

    warnings.simplefilter("ignore")
    model, args = _model(name)
    fn = model if backend == "eager" else torch.compile(model, backend=backend)
    times = []
    with torch.no_grad():
        for _ in range(2):
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
    print(json.dumps({"first": times[0], "second": times[1]}))


def _measure(name: str, backend: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = child_env(TORCHINDUCTOR_CACHE_DIR=cache)
        proc = subprocess.run([sys.executable, "-m", "benchmarks.compile_latency", "--child", name, backend],
                              capture_output=True, text=True, env=env, cwd=HERE.parent)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{backend} on {name} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return json.loads(lines[-1])


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="fresh processes per backend and model")
    p.add_argument("--models", default="mlp,resnet18,gpt2_tiny")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        _child(*opts.child)
        return
    print("| model | backend | first call s | second call s | first call / Inductor's |")
    print("|---|---|---:|---:|---:|")
    for name in opts.models.split(","):
        medians = {}
        for backend in BACKENDS:
            runs = [_measure(name, backend) for _ in range(opts.runs)]
            medians[backend] = {k: statistics.median(r[k] for r in runs) for k in ("first", "second")}
        for backend, m in medians.items():
            print(f"| {name} | {backend} | {m['first']:.3f} | {m['second']:.4f} | "
                  f"{m['first'] / medians['inductor']['first']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

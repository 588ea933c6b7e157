"""python -m benchmarks: every exporter on every model, each in its own subprocess; a Markdown
report (tables, phase breakdown, the targets checked) and a plot of export time against LLaMA's
layer count.

The floor is torch.export plus writing the weights' raw bytes once to the same disk: no exporter
that traces with torch.export and writes the weights can beat it. Times are medians of --runs
calls after one warm-up call in the same process; the machine is shared and noisy, so read the
ratios, which are measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from .children import child_env
from .methods import (
    DYNAMO,
    DYNAMO_NOOPT,
    FASTONNX,
    FASTONNX_DEVNULL,
    FASTONNX_JIT,
    FLOOR,
    JIT_TRACE,
    METHODS,
    OTHER_TORCH_EXPORT_BASED,
    TORCH_EXPORT,
    TORCHSCRIPT,
)
from .models import LLAMA_LAYERS, MODELS

HERE = Path(__file__).resolve().parent
# The TorchScript exporter takes tens of minutes on the large transformers (and was deprecated
# for that): it runs on the CNNs and the small models only.
TORCHSCRIPT_MODELS = {"mlp", "resnet18", "resnet50", "llama2"}
# The write to /dev/null is for the linearity target only.
DEVNULL_MODELS = set(LLAMA_LAYERS)


def run_worker(model: str, method: str, runs: int, tmp: str) -> dict:
    env = child_env()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.worker", model, method, str(runs), tmp],
                          capture_output=True, text=True, env=env, cwd=HERE.parent)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"worker exited {proc.returncode}: {proc.stderr.strip()[-500:]}"}
    return json.loads(lines[-1])


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kib = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        mem = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        pass
    import onnx
    import onnxruntime

    versions = f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}"
    try:
        import onnxscript

        versions += f", onnxscript {onnxscript.__version__}"
    except ImportError:
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}; Python {platform.python_version()}, {versions}"


def median(xs: list[float]) -> float:
    return statistics.median(xs)


class Report:
    def __init__(self, results: dict[str, dict[str, dict]], runs: int):
        self.results = results
        self.runs = runs

    def time(self, model: str, method: str) -> float | None:
        r = self.results.get(model, {}).get(method)
        return median(r["times"]) if r and "times" in r else None

    def phases(self, model: str, method: str = FASTONNX) -> dict[str, float]:
        r = self.results.get(model, {}).get(method, {})
        extras = [e["phases"] for e in r.get("extras", []) if "phases" in e]
        return {k: median([e[k] for e in extras]) for k in extras[0]} if extras else {}

    def nodes(self, model: str, method: str) -> int | None:
        r = self.results.get(model, {}).get(method, {})
        counts = [e["nodes"] for e in r.get("extras", []) if "nodes" in e]
        return counts[0] if counts else None

    def after_trace(self, model: str, method: str = FASTONNX) -> float | None:
        total, phases = self.time(model, method), self.phases(model, method)
        return total - phases["trace"] if total is not None and "trace" in phases else None

    def floor_write(self, model: str) -> float | None:
        floor, export = self.time(model, FLOOR), self.time(model, TORCH_EXPORT)
        return floor - export if floor is not None and export is not None else None

    def weights(self, model: str) -> float:
        return next((r["weights"] for r in self.results.get(model, {}).values() if "weights" in r), 0) or 1

    def markdown(self) -> str:
        out = ["# fastonnx export benchmarks\n",
               f"Run {datetime.date.today().isoformat()} on {machine()}.",
               f"Each time is the median of {self.runs} calls after one warm-up call, each exporter in a process of its",
               "own (peak RSS is that process's, model construction included). *floor* = `torch.export.export` + writing",
               "the weights' raw bytes once to the same disk. Ratios are to the floor and to `torch.export` alone measured",
               "in the same run. Before each call the previous call's files are deleted and the page cache is synced, so",
               "no call waits for another's write-back. *fastonnx to /dev/null* writes the model to /dev/null: what",
               "fastonnx computes without the disk (on this VM, page-cache memory not touched for a while is backed by",
               "the host again on first touch, so a write's cost per byte grows with its size).\n",
               "Reproduce: `python -m benchmarks` (see `python -m benchmarks --help`).\n"]
        out += self.targets()
        out.append("\n## Times\n")
        out.append("| model | method | median s | / floor | / torch.export | peak RSS GiB | ONNX nodes |")
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for model, methods in self.results.items():
            floor, export = self.time(model, FLOOR), self.time(model, TORCH_EXPORT)
            for method, r in methods.items():
                if "error" in r:
                    out.append(f"| {model} | {method} | failed: {r['error'][:120]} | | | | |")
                    continue
                t = median(r["times"])
                nodes = self.nodes(model, method)
                out.append(f"| {model} | {method} | {t:.3f} | {t / floor:.2f} | {t / export:.2f} | "
                           f"{r['peak_rss'] / 2**30:.2f} | {nodes if nodes is not None else ''} |")
        out.append("\n## Where fastonnx's time goes (median seconds per phase)\n")
        keys = ["trace", "functionalize", "decompose", "lower", "convert", "passes", "write"]
        out.append("| model | " + " | ".join(keys) + " | total | after tracing |")
        out.append("|---|" + "---:|" * (len(keys) + 2))
        for model in self.results:
            ph = self.phases(model)
            if ph:
                total = self.time(model, FASTONNX)
                out.append(f"| {model} | " + " | ".join(f"{ph.get(k, 0):.3f}" for k in keys) +
                           f" | {total:.3f} | {self.after_trace(model):.3f} |")
        out += self.torchscript_note()
        out.append("\n![export time against layer count](llama_layers.png)\n")
        return "\n".join(out) + "\n"

    def targets(self) -> list[str]:
        lines = ["## Targets\n", "| target | measured | met |", "|---|---|:---:|"]

        def row(target: str, measured: str, ok: bool | None) -> None:
            lines.append(f"| {target} | {measured} | {'yes' if ok else ('n/a' if ok is None else '**no**')} |")

        for model in ("llama16", "gpt2", "bert", "resnet50"):
            t, floor = self.time(model, FASTONNX), self.time(model, FLOOR)
            if t and floor:
                row(f"{model}: end to end <= 1.15 x floor", f"{t / floor:.2f} x ({t:.2f} s / {floor:.2f} s)", t / floor <= 1.15)
        for model, factor in (("llama16", 4), ("gpt2", 3), ("bert", 3)):
            t, d = self.time(model, FASTONNX), self.time(model, DYNAMO)
            if t and d:
                row(f"{model}: >= {factor}x faster than dynamo (defaults)", f"{d / t:.1f}x ({d:.2f} s / {t:.2f} s)", d / t >= factor)
        for model in self.results:
            t = self.time(model, FASTONNX)
            others = {m: self.time(model, m) for m in OTHER_TORCH_EXPORT_BASED if self.time(model, m)}
            if t and others:
                best = min(others, key=others.get)
                row(f"{model}: faster than the fastest other torch.export-based exporter",
                    f"{others[best] / t:.1f}x faster than {best} ({others[best]:.2f} s)", t < others[best])
        for model in self.results:
            fj, ts = self.time(model, FASTONNX_JIT), self.time(model, TORCHSCRIPT)
            if fj and ts:
                row(f"{model}: tracer=jit <= the TorchScript exporter", f"{fj / ts:.2f} x ({fj:.3f} s / {ts:.3f} s)", fj <= ts)
        t, e = self.time("mlp", FASTONNX), self.time("mlp", TORCH_EXPORT)
        if t and e:
            row("mlp: <= 2 x torch.export (no fixed per-call cost)", f"{t / e:.2f} x ({t * 1000:.0f} ms / {e * 1000:.0f} ms)", t / e <= 2)
        a16, a64 = self.after_trace("llama16"), self.after_trace("llama64")
        if a16 and a64:
            row("linear: time after tracing, llama64 / llama16 <= 4.5", f"{a64 / a16:.2f} ({a64:.2f} s / {a16:.2f} s)", a64 / a16 <= 4.5)
        d16, d64 = self.after_trace("llama16", FASTONNX_DEVNULL), self.after_trace("llama64", FASTONNX_DEVNULL)
        if d16 and d64:
            row("linear, the model written to /dev/null (no disk): llama64 / llama16 <= 4.5",
                f"{d64 / d16:.2f} ({d64:.2f} s / {d16:.2f} s)", d64 / d16 <= 4.5)
        f16, f64 = (self.floor_write(m) for m in ("llama16", "llama64"))
        if f16 and f64:
            row("for reference: the floor's own write (floor - torch.export), llama64 / llama16",
                f"{f64 / f16:.2f} ({f64:.2f} s / {f16:.2f} s) for {self.weights('llama64') / self.weights('llama16'):.2f}x the bytes",
                None)
        for model, methods in self.results.items():
            f, e = methods.get(FASTONNX, {}), methods.get(TORCH_EXPORT, {})
            if "peak_rss" in f and "peak_rss" in e:
                allowed = e["peak_rss"] + 0.10 * f["weights"]
                row(f"{model}: peak RSS <= torch.export's + 10% of weights",
                    f"{f['peak_rss'] / 2**30:.2f} GiB vs {allowed / 2**30:.2f} GiB allowed", f["peak_rss"] <= allowed)
        for model in ("gpt2", "llama2", "llama16", "llama64"):
            n, d = self.nodes(model, FASTONNX), self.nodes(model, DYNAMO)
            if n and d:
                row(f"{model}: ONNX nodes <= dynamo optimize=True's", f"{n} vs {d}", n <= d)
        return lines

    def torchscript_note(self) -> list[str]:
        lines = ["\n## The TorchScript exporter\n",
                 "It traces with `torch.jit.trace`, cheaper than `torch.export` on CNNs; where it still works:\n",
                 "| model | jit.trace s | torch.export s | torchscript export s | fastonnx s | fastonnx tracer=jit s "
                 "| fastonnx tracer=jit / torchscript |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for model in self.results:
            ts, fo, fj = self.time(model, TORCHSCRIPT), self.time(model, FASTONNX), self.time(model, FASTONNX_JIT)
            jt, ex = self.time(model, JIT_TRACE), self.time(model, TORCH_EXPORT)
            if ts and jt and ex:
                cells = [f"{fo:.3f}" if fo else "", f"{fj:.3f}" if fj else "", f"{fj / ts:.2f}" if fj else ""]
                lines.append(f"| {model} | {jt:.3f} | {ex:.3f} | {ts:.3f} | " + " | ".join(cells) + " |")
        lines.append("\nWith `tracer=\"jit\"` fastonnx traces with `torch.jit.trace` as the TorchScript exporter does; "
                     "the target is a total at most the TorchScript exporter's.")
        return lines

    def plot(self, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        models = [m for m in LLAMA_LAYERS if m in self.results]
        for method in (TORCH_EXPORT, FLOOR, FASTONNX, DYNAMO, DYNAMO_NOOPT):
            pts = [(LLAMA_LAYERS[m], self.time(m, method)) for m in models if self.time(m, method)]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=method)
        ax.set_xlabel("LLaMA layers (hidden 1024, input 1x128)")
        ax.set_ylabel("export time, s (median)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        ax.set_title("Export time against graph size")
        fig.tight_layout()
        fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="timed calls per exporter and model (after one warm-up)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, from {', '.join(METHODS)}")
    p.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="the Markdown report (the plot goes beside it)")
    opts = p.parse_args()
    models, methods = opts.models.split(","), opts.methods.split(",")
    for name, known in (("model", MODELS), ("method", METHODS)):
        unknown = [x for x in (models if name == "model" else methods) if x not in known]
        if unknown:
            p.error(f"unknown {name}(s) {unknown}; choose from {list(known)}")
    if opts.runs < 1:
        p.error("--runs must be at least 1")

    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="fastonnx-bench-") as tmp:
        for model in models:
            results[model] = {}
            for method in methods:
                if method in (TORCHSCRIPT, JIT_TRACE) and model not in TORCHSCRIPT_MODELS:
                    continue
                if method == FASTONNX_DEVNULL and model not in DEVNULL_MODELS:
                    continue
                r = run_worker(model, method, opts.runs, tmp)
                if "error" in r and not METHODS[method][1]:
                    sys.exit(f"{method} failed on {model}: {r['error']}\n{r.get('traceback', '')}")
                results[model][method] = r
                shown = f"{median(r['times']):.3f} s" if "times" in r else r["error"][:100]
                print(f"{model:10s} {method:24s} {shown}", file=sys.stderr, flush=True)
    report = Report(results, opts.runs)
    opts.out.write_text(report.markdown())
    (opts.out.parent / (opts.out.stem + ".json")).write_text(json.dumps(results, indent=1))
    report.plot(opts.out.parent / "llama_layers.png")
    print(report.markdown())


if __name__ == "__main__":
    main()

"""Export for onnxruntime-genai: ``python -m fastonnx export-hf CKPT OUT --genai`` against
onnxruntime-genai's own exporter, its model builder (``python -m onnxruntime_genai.models.builder
-i CKPT -o OUT -p fp32 -e cpu``), on checkpoint directories written here (random weights,
``save_pretrained``, the byte-level BPE tokenizer of ``tests/models/checkpoints.py``).

1. Export time of one LLaMA checkpoint (--checkpoint: the issue's, 4 layers, hidden 512, 8 heads,
   2 KV heads, intermediate 1376, vocabulary 32000; or "1b", LLaMA-3.2-1B's shape, 16 layers,
   hidden 2048, 1.24B parameters, 4.9 GB; float32): fastonnx, the builder, and fastonnx's trace
   alone (a fastonnx export whose process stops when ``FastOnnxExporter.trace``, torch.export,
   returns: the floor of any exporter that traces), each command in a fresh process, in turn for
   --rounds rounds after a warm-up round; wall and CPU time (user + system) and peak RSS of
   each process. Within fastonnx's own process, the time its trace took.
2. Size on disk of each output (model.onnx and its data), and of both int4 outputs (fastonnx's
   ``--precision int4`` and the builder's ``-p int4``, one export each).
3. Decode latency in onnxruntime-genai, 1 intra-op thread (genai_config's session_options): a
   prompt of 64 tokens then 64 generated greedily, the models in turn in one process for
   --decode-rounds rounds after a warm-up round (0: not measured); the greedy tokens against
   eager transformers'.
4. Per decoder-only architecture of ``tests/models/generation.py`` (tiny configs): both exports
   once each, whether onnxruntime-genai loads each output and whether its greedy tokens (a prompt
   of 7, 8 new) are eager ``generate``'s.

    python -m benchmarks.genai [--checkpoint issue|1b] [--rounds N] [--decode-rounds N]
                               [--archs llama,gpt2,...] [--out PATH]

Writes the report (Markdown) to --out and the measurements beside it as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The LLaMA checkpoints to export, by --checkpoint: the issue's, LLaMA's layout at a size a CPU
# exports in seconds, where every exporter's fixed cost (imports, a trace) is most of the time; and
# LLaMA-3.2-1B's shape, the smallest deployed size, where reading and writing the weights is.
CHECKPOINTS = {
    "issue": dict(
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=1376,
        vocab_size=32000,
    ),
    "1b": dict(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
    ),
}
DESCRIPTIONS = {
    "issue": "The issue's checkpoint: LLaMA, 4 layers, hidden 512, 8 heads, 2 KV heads, intermediate 1376, "
    "vocabulary 32000",
    "1b": "A checkpoint of LLaMA-3.2-1B's shape: 16 layers, hidden 2048, 32 heads, 8 KV heads, intermediate 8192, "
    "vocabulary 128256, tied embeddings, 1.24B parameters",
}
PROMPT, NEW = 64, 64
ARCH_PROMPT, ARCH_NEW = 7, 8
EXPORTS = ("fastonnx", "builder", "trace")
EXPORT_NAMES = {
    "fastonnx": "fastonnx `export-hf --genai`",
    "builder": "builder `-p fp32 -e cpu`",
    "trace": "fastonnx's trace alone (torch.export)",
}


class _Traced(Exception):
    """Raised past export_genai once the trace returned: the process measures the trace alone."""


def _child_export(kind: str, checkpoint: str, output: str) -> None:
    """``python -m fastonnx export-hf CHECKPOINT OUTPUT --genai`` in this process, timing the
    ``FastOnnxExporter.trace`` call genai.py makes; with kind "trace", stops after it; kind
    "int4" adds ``--precision int4``."""
    import io
    import warnings

    from fastonnx.__main__ import main as cli
    from fastonnx.integrations.transformers import FastOnnxExporter

    traced = FastOnnxExporter.trace
    times: dict[str, float] = {}

    def trace(self, *args, **kwargs):
        start = time.perf_counter()
        result = traced(self, *args, **kwargs)
        times["trace"] = time.perf_counter() - start
        if kind == "trace":
            raise _Traced
        return result

    FastOnnxExporter.trace = trace
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(_Traced):
            precision = ["--precision", "int4"] if kind == "int4" else []
            cli(["export-hf", checkpoint, output, "--genai", "--quiet", *precision])
    times["call"] = time.perf_counter() - start
    print(json.dumps(times))


def _child_checkpoints(named_dirs: list[str]) -> None:
    """NAME=DIRECTORY: a checkpoint of CHECKPOINTS ("issue", "1b") or an architecture's tiny one."""
    import torch
    import transformers

    from tests.models.checkpoints import write_checkpoint
    from tests.models.generation import build

    transformers.logging.set_verbosity_error()
    for item in named_dirs:
        name, directory = item.split("=", 1)
        if name in CHECKPOINTS:
            torch.manual_seed(0)
            model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CHECKPOINTS[name])).eval()
        else:
            model = build(name)
        write_checkpoint(model, directory)


def _eager_tokens(checkpoint: str, prompt, new: int) -> list[int]:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             do_sample=False)
    return out[0].tolist()


def genai_model(directory: str, threads: int | None = None):
    import onnxruntime_genai as og

    config = og.Config(directory)
    if threads is not None:
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
    return og.Model(config)


def generate(model, prompt, new: int) -> tuple[list[int], float, list[float], float]:
    """Greedy generation of exactly ``new`` tokens: the tokens, the prompt's time (append_tokens
    runs the model on it), each later step's time and the process CPU time of the whole. The
    first generate_next_token only picks from the prompt's logits: it is no decode step."""
    import numpy as np
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + new, min_length=len(prompt) + new, do_sample=False)
    generator = og.Generator(model, params)
    cpu = time.process_time()
    start = time.perf_counter()
    generator.append_tokens(np.array([prompt], dtype=np.int32))
    prefill = time.perf_counter() - start
    steps = []
    while not generator.is_done():
        start = time.perf_counter()
        generator.generate_next_token()
        steps.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    return generator.get_sequence(0).tolist(), prefill, steps[1:], cpu


def _child_decode(checkpoint: str, rounds: int, named_dirs: list[str]) -> None:
    """The models in turn, ``rounds`` rounds after a warm-up one, 1 intra-op thread each."""
    import numpy as np

    dirs = dict(item.split("=", 1) for item in named_dirs)
    vocab = json.loads(Path(checkpoint, "config.json").read_text())["vocab_size"]
    prompt = np.random.default_rng(0).integers(3, vocab, PROMPT).tolist()
    models = {name: genai_model(d, threads=1) for name, d in dirs.items()}
    results = {name: {"prefill": [], "steps": [], "cpu": [], "tokens": None} for name in models}
    names = list(models)
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[: r % len(names)]:
            tokens, prefill, steps, cpu = generate(models[name], prompt, NEW)
            results[name]["tokens"] = tokens
            if r:
                results[name]["prefill"].append(prefill)
                results[name]["steps"].extend(steps)
                results[name]["cpu"].append(cpu)
    eager = _eager_tokens(checkpoint, prompt, NEW)
    for r in results.values():
        r["equal_eager"] = r.pop("tokens") == eager
    print(json.dumps(results))


def _child_greedy(spec: str) -> None:
    """For each architecture's checkpoint and output directories (a JSON ``{arch: [checkpoint,
    {exporter: directory}]}``): whether onnxruntime-genai loads each output, whether its greedy
    tokens are eager transformers'."""
    from tests.models.generation import prompt

    ids = prompt(1, ARCH_PROMPT)["input_ids"][0].tolist()
    results: dict[str, dict] = {}
    for arch, (checkpoint, dirs) in json.loads(spec).items():
        eager = _eager_tokens(checkpoint, ids, ARCH_NEW)
        results[arch] = {}
        for name, directory in dirs.items():
            try:
                model = genai_model(directory)
            except Exception as e:  # noqa: BLE001 - reported in the table
                results[arch][name] = {"loads": False, "error": _first_line(str(e))}
                continue
            try:
                tokens = generate(model, ids, ARCH_NEW)[0]
            except Exception as e:  # noqa: BLE001
                results[arch][name] = {"loads": True, "error": _first_line(str(e))}
                continue
            results[arch][name] = {"loads": True, "equal_eager": tokens == eager}
            if tokens != eager:
                results[arch][name] |= {"tokens": tokens[ARCH_PROMPT:], "eager": eager[ARCH_PROMPT:]}
    print(json.dumps(results))


def _first_line(text: str) -> str:
    """An error's first line; of onnxruntime's "Non-zero status code returned while running ...
    Status Message: ...", the message."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line.rpartition("Status Message: ")[2][:200]


def _env() -> dict[str, str]:
    # The repository root for `tests.models` and `benchmarks`; fastonnx as this process imports it.
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}


def _run(command: list[str], cwd: str | None = None) -> dict:
    """One command in a fresh process: its wall and CPU time (user + system) and peak RSS, the
    JSON line it printed, or its error (the exception's line of its stderr). Its output goes to
    files, so that it never waits on a full pipe while timed; ``os.wait4`` gives this process's
    own resource use (RUSAGE_CHILDREN's peak would be the largest of every child so far)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True, env=_env(), cwd=cwd or ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    cpu = usage.ru_utime + usage.ru_stime
    if returncode != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        # The exception's line: the last one a traceback does not indent.
        error = next((line for line in reversed(lines) if not line.startswith((" ", "\t"))), "")
        return {"error": error.strip()[:240] or f"exited {returncode}"}
    result = {"wall": wall, "cpu": cpu, "peak_rss": usage.ru_maxrss * 1024}
    printed = [line for line in stdout.splitlines() if line.startswith("{")]
    if printed:
        result["child"] = json.loads(printed[-1])
    return result


def _child(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.genai", "--child", *args]


def _export_command(kind: str, checkpoint: str, output: str, cache: str, precision: str = "fp32") -> list[str]:
    if kind == "builder":
        return [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", checkpoint, "-o", output,
                "-p", precision, "-e", "cpu", "-c", cache]
    return _child("export", kind, checkpoint, output)


def _fresh(path: str) -> None:
    """The previous output deleted and nothing left to write back: each export starts alike."""
    shutil.rmtree(path, ignore_errors=True)
    os.sync()


def _size(directory: str) -> dict[str, int]:
    files = {f: os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)}
    return {"model": sum(n for f, n in files.items() if f.startswith("model.onnx")), "directory": sum(files.values())}


def measure(tmp: str, which: str, rounds: int, decode_rounds: int, archs: list[str]) -> dict:
    checkpoint, cache = os.path.join(tmp, which), os.path.join(tmp, "cache")
    results: dict = {"load_before": os.getloadavg(), "checkpoint": which}
    arch_checkpoints = {arch: os.path.join(tmp, arch, "checkpoint") for arch in archs}
    made = _run(_child("checkpoints", f"{which}={checkpoint}", *(f"{a}={d}" for a, d in arch_checkpoints.items())))
    if "error" in made:
        sys.exit(f"writing the checkpoints failed: {made['error']}")
    outputs = {kind: os.path.join(tmp, f"out-{kind}") for kind in EXPORTS}
    runs: dict[str, list[dict]] = {kind: [] for kind in EXPORTS}
    for r in range(rounds + 1):  # the first round warms up the page cache and Python's bytecode
        for kind in EXPORTS[r % 3:] + EXPORTS[: r % 3]:
            _fresh(outputs[kind])
            result = _run(_export_command(kind, checkpoint, outputs[kind], cache))
            if "error" in result:
                sys.exit(f"{kind} failed on the {which} checkpoint: {result['error']}")
            if r:
                runs[kind].append(result)
            print(f"round {r} {kind:8s} {result['wall']:.2f} s wall {result['cpu']:.2f} s CPU", file=sys.stderr,
                  flush=True)
    results["export"] = runs
    int4 = os.path.join(tmp, "out-builder-int4")
    results["builder_int4"] = _run(_export_command("builder", checkpoint, int4, cache, "int4"))
    ours4 = os.path.join(tmp, "out-fastonnx-int4")
    results["fastonnx_int4"] = _run(_export_command("int4", checkpoint, ours4, cache))
    if "error" in results["fastonnx_int4"]:
        sys.exit(f"fastonnx --precision int4 failed: {results['fastonnx_int4']['error']}")
    weights = sum(os.path.getsize(os.path.join(checkpoint, f)) for f in os.listdir(checkpoint)
                  if f.endswith(".safetensors"))
    results["size"] = {"checkpoint": weights, "fastonnx": _size(outputs["fastonnx"]),
                       "builder": _size(outputs["builder"]), "builder int4": _size(int4),
                       "fastonnx int4": _size(ours4)}
    if decode_rounds:
        decode = _run(_child("decode", checkpoint, str(decode_rounds), f"fastonnx={outputs['fastonnx']}",
                             f"builder={outputs['builder']}", f"fastonnx int4={ours4}", f"builder int4={int4}"))
        if "error" in decode:
            sys.exit(f"decoding failed: {decode['error']}")
        results["decode"] = decode["child"]
        print("decode done", file=sys.stderr, flush=True)
    results["archs"] = _measure_archs(arch_checkpoints, cache)
    results["load_after"] = os.getloadavg()
    return results


def _measure_archs(checkpoints: dict[str, str], cache: str) -> dict:
    """Each architecture's two exports, then one process checking every output."""
    results, outputs = {}, {}
    for arch, checkpoint in checkpoints.items():
        root = os.path.dirname(checkpoint)
        results[arch], outputs[arch] = {}, {}
        for kind in ("fastonnx", "builder"):
            output = os.path.join(root, kind)
            result = _run(_export_command(kind, checkpoint, output, cache))
            if "error" in result:
                result["error"] = result["error"].replace(checkpoint, "CKPT")
            else:
                outputs[arch][kind] = output
            results[arch][kind] = result
        print(f"{arch}: {json.dumps(results[arch])[:300]}", file=sys.stderr, flush=True)
    spec = {arch: [checkpoints[arch], dirs] for arch, dirs in outputs.items() if dirs}
    greedy = _run(_child("greedy", json.dumps(spec)))
    for arch, found in greedy.get("child", {}).items():
        for kind, r in found.items():
            results[arch][kind]["genai"] = r
    if "error" in greedy:
        for arch in spec:
            results[arch]["greedy_error"] = greedy["error"]
    return results


def machine() -> str:
    import onnx
    import onnxruntime
    import onnxruntime_genai
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as f:
        cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
            f"onnxruntime-genai {onnxruntime_genai.__version__}")


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def report(results: dict, rounds: int, decode_rounds: int, command: str) -> str:
    which = results.get("checkpoint", "issue")
    out = ["# Export for onnxruntime-genai: fastonnx against the model builder\n",
           f"Run {datetime.date.today().isoformat()} on {machine()}; a machine shared with other developers "
           f"(load average {results['load_before'][0]:.1f} at the start, {results['load_after'][0]:.1f} at the end; "
           f"the run took {results['minutes']:.0f} minutes), so read the ratios, measured in the same run. "
           "Reproduce:\n", f"    {command}\n",
           f"{DESCRIPTIONS[which]}, float32, random weights, `save_pretrained` and the byte-level BPE tokenizer of "
           "`tests/models/checkpoints.py`.\n"]
    export = results["export"]
    out += [f"## Export time ({which} checkpoint, float32)\n",
            f"Each command in a fresh process, the three in turn (each round starting with the next), {rounds} rounds "
            "after a warm-up round; medians. Wall and CPU (user + system) are the whole process's: Python's start, "
            "imports, reading the checkpoint, writing the output. *trace* is fastonnx's own process stopped when "
            "`FastOnnxExporter.trace` (torch.export of the model on the meta device, as `genai.py` calls it) "
            "returns; *in-process trace* is that call's time inside the fastonnx export; *peak RSS* is the "
            "process's largest.\n",
            "| exporter | wall s | CPU s | in-process trace s | peak RSS | wall / builder | CPU / builder "
            "| wall / trace process | CPU / trace process |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    wall = {k: _median([r["wall"] for r in v]) for k, v in export.items()}
    cpu = {k: _median([r["cpu"] for r in v]) for k, v in export.items()}
    for kind in EXPORTS:
        traces = [r["child"]["trace"] for r in export[kind] if "trace" in r.get("child", {})]
        trace = f"{_median(traces):.2f}" if traces else ""
        rss = max((r["peak_rss"] for r in export[kind] if "peak_rss" in r), default=0)
        out.append(f"| {EXPORT_NAMES[kind]} | {wall[kind]:.2f} | {cpu[kind]:.2f} | {trace} | {_mb(rss)} | "
                   f"{wall[kind] / wall['builder']:.2f} | {cpu[kind] / cpu['builder']:.2f} | "
                   f"{wall[kind] / wall['trace']:.2f} | {cpu[kind] / cpu['trace']:.2f} |")
    int4, ours4 = results["builder_int4"], results.get("fastonnx_int4", {})
    if "wall" in int4 and "wall" in ours4:
        out.append(f"\nint4, one run each: the builder with `-p int4 -e cpu` {int4['wall']:.2f} s wall, "
                   f"{int4['cpu']:.2f} s CPU, {_mb(int4.get('peak_rss', 0))} peak RSS; fastonnx `--genai --precision "
                   f"int4` {ours4['wall']:.2f} s wall, {ours4['cpu']:.2f} s CPU, {_mb(ours4.get('peak_rss', 0))} peak "
                   f"RSS ({ours4['cpu'] / int4['cpu']:.2f} of the builder's CPU).")
    out.append("\nEvery round, wall / CPU s: " + "; ".join(
        f"{kind} " + ", ".join(f"{r['wall']:.1f} / {r['cpu']:.1f}" for r in export[kind]) for kind in EXPORTS) + ".\n")
    size = results["size"]
    out += ["## Size on disk\n",
            f"The checkpoint's safetensors: {_mb(size['checkpoint'])}.\n",
            "| output | model.onnx + data | whole directory | / builder fp32 |", "|---|---:|---:|---:|"]
    for name in ("fastonnx", "builder", "fastonnx int4", "builder int4"):
        if name not in size:
            continue
        s = size[name]
        ratio = s["model"] / size["builder"]["model"]
        out.append(f"| {name} | {_mb(s['model'])} | {_mb(s['directory'])} | {ratio:.3f} |")
    decode = results.get("decode", {})
    if decode:
        out += ["\n## Decode latency in onnxruntime-genai (CPU, 1 intra-op thread)\n",
                f"A prompt of {PROMPT} random tokens, then {NEW} tokens generated greedily; the three models loaded "
                f"in one process, one generation each in turn, {decode_rounds} rounds after a warm-up round. "
                "*prefill*: `append_tokens` on the prompt; *per token*: the median of every later "
                f"`generate_next_token` (one decode step each, {NEW - 1} per generation); *CPU*: the process's CPU "
                "time for one whole generation.\n",
                "| model | prefill ms | per token ms | CPU per generation ms | per token / the builder's at its "
                "precision | greedy tokens = eager transformers |",
                "|---|---:|---:|---:|---:|:---:|"]
    for name, r in decode.items():
        step = _median(r["steps"])
        base = _median(decode["builder int4" if "int4" in name else "builder"]["steps"])
        out.append(f"| {name} | {_median(r['prefill']) * 1e3:.1f} | {step * 1e3:.2f} | {_median(r['cpu']) * 1e3:.0f} "
                   f"| {step / base:.2f} | {'yes' if r['equal_eager'] else 'no'} |")
    if decode:
        out.append("\nint4 weights change the logits: the int4 model's greedy tokens are not expected to be eager's.")
    if not results["archs"]:
        return "\n".join(out) + "\n"
    out += ["\n## Architectures (tiny random-weight configs of `tests/models/generation.py`)\n",
            "Each export once, in a fresh process (wall / CPU s; for fastonnx, its trace's time in brackets); "
            f"*loads*: `og.Model` on the output; *= eager*: greedy tokens (a prompt of {ARCH_PROMPT}, {ARCH_NEW} new) "
            "equal to eager `model.generate(do_sample=False)`.\n",
            "| architecture | fastonnx s (trace s) | loads | = eager | builder s | loads | = eager |",
            "|---|---:|:---:|:---:|---:|:---:|:---:|"]
    for arch, r in results["archs"].items():
        cells = []
        for name in ("fastonnx", "builder"):
            e = r[name]
            if "error" in e:
                refused = "unsupported: " if name == "builder" else "fails: "
                cells += [refused + e["error"].replace("|", "\\|"), "", ""]
                continue
            trace = e.get("child", {}).get("trace")
            cells.append(f"{e['wall']:.1f} / {e['cpu']:.1f}" + (f" ({trace:.1f})" if trace else ""))
            g = e.get("genai", {})
            cells.append("yes" if g.get("loads") else f"**no**: {g.get('error', r.get('greedy_error', '?'))}")
            if g.get("loads"):
                cells.append("yes" if g.get("equal_eager") else
                             (f"fails to run: {g['error']}" if "error" in g else
                              f"**no** ({g['tokens']} vs {g['eager']})"))
            else:
                cells.append("")
        out.append(f"| {arch} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, args = sys.argv[2], sys.argv[3:]
        if kind == "export":
            _child_export(*args)
        elif kind == "checkpoints":
            _child_checkpoints(args)
        elif kind == "decode":
            _child_decode(args[0], int(args[1]), args[2:])
        elif kind == "greedy":
            _child_greedy(args[0])
        return
    from tests.models.generation import ARCHITECTURES, ENCODER_DECODER

    decoders = [a for a in ARCHITECTURES if a not in ENCODER_DECODER]
    p = argparse.ArgumentParser(prog="python -m benchmarks.genai", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", choices=sorted(CHECKPOINTS), default="issue",
                   help="the LLaMA checkpoint of the export times (1b: 4.9 GB on disk, twice that in memory "
                   "for the builder)")
    p.add_argument("--rounds", type=int, default=3, help="export rounds after the warm-up round")
    p.add_argument("--decode-rounds", type=int, default=10, help="decode rounds after the warm-up round; 0: none")
    p.add_argument("--archs", default=",".join(decoders), help="comma-separated; none: ''")
    p.add_argument("--out", type=Path, default=HERE / "GENAI.md", help="the report (its JSON goes beside it)")
    opts = p.parse_args()
    archs = [a for a in opts.archs.split(",") if a]
    unknown = [a for a in archs if a not in decoders]
    if unknown:
        p.error(f"unknown or not decoder-only: {unknown}; choose from {decoders}")
    command = "python -m benchmarks.genai " + " ".join(sys.argv[1:])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fastonnx-bench-genai-") as tmp:
        results = measure(tmp, opts.checkpoint, opts.rounds, opts.decode_rounds, archs)
    results["minutes"] = (time.perf_counter() - start) / 60
    text = report(results, opts.rounds, opts.decode_rounds, command.strip())
    opts.out.write_text(text)
    opts.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()

"""Exporting a model larger than memory: weights streamed from a safetensors checkpoint.

    python -m benchmarks.streaming DIR [--shape 8b|2b|1b-half|tiny] [--dtype float32|bfloat16]
                                       [--run copy|reference[:DTYPE]]... [--no-cp] [--cp-by-file]
                                       [--spare-gb N] [--compare] [--keep] [--reuse] [--cold] [--rounds N]

Writes a LLaMA-3-shaped checkpoint of random weights to DIR (config.json and shards of at most
2 GB, each written and freed before the next: the whole is never in memory), then in the same
run measures on the same disk: ``cp`` of the checkpoint, and ``python -m fastonnx export-hf``
of it in a subprocess, once per --run (wall time and its peak RSS, from /usr/bin/time; each
output deleted before the next, and a run whose output would leave less than --spare-gb free not
made). Prints one JSON line. Everything written is deleted at the end unless --keep. --no-cp
skips the copy, which needs as much free disk again as the checkpoint (--cp-by-file: one shard's).
--compare runs each exported model in onnxruntime and the eager model loaded from the same
checkpoint (from_pretrained) on the same tokens, and reports the largest difference of the logits.
--reuse takes the checkpoint a run with --keep left in DIR instead of writing it again (writing the
8B one takes minutes), and keeps it. --cold evicts the checkpoint's files from the page cache
(posix_fadvise DONTNEED, after a sync) before each timed command, so that cp and each export read
the checkpoint from the disk alike (otherwise whichever runs first after the checkpoint was written
finds part of it in memory); Python's and torch's own files stay cached, as on a machine in use.
--rounds N times cp and the exports N times in turn, for a shared disk whose speed drifts from
minute to minute: each round's ratios are of figures taken minutes apart, and the median is
reported beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

SHAPES = {
    # Meta-Llama-3-8B.
    "8b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
    ),
    # The same family at about 2B parameters (untied embeddings), 8 GB in float32.
    "2b": dict(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
    ),
    # LLaMA-3.2-1B's shape with 8 of its 16 layers (0.75B parameters, tied): the eager model and
    # onnxruntime's session fit in memory side by side for --compare.
    "1b-half": dict(
        hidden_size=2048,
        num_hidden_layers=8,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        hidden_size=256,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=512,
        vocab_size=1024,
    ),
}
SHARD_BYTES = 2 << 30


def config(shape: str):
    import transformers

    return transformers.LlamaConfig(**{"tie_word_embeddings": False, **SHAPES[shape]}, use_cache=False)


def make_checkpoint(directory: str, shape: str, dtype: torch.dtype) -> int:
    """Writes the checkpoint shard by shard; returns its size in bytes."""
    import transformers
    from safetensors.torch import save_file

    cfg = config(shape)
    os.makedirs(directory, exist_ok=True)
    cfg.save_pretrained(directory)
    with torch.device("meta"):
        # Tied weights once, as transformers saves them (LLaMA has no persistent buffers).
        names = {k: tuple(v.shape) for k, v in transformers.LlamaForCausalLM(cfg).named_parameters()}
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    weight_map = {}
    generator = torch.Generator().manual_seed(0)

    def flush() -> None:
        index = len(set(weight_map.values())) + 1
        file = f"model-{index:05d}.safetensors"
        save_file(shards[-1], os.path.join(directory, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in shards[-1]})
        shards[-1] = {}

    held = 0
    for name, dims in names.items():
        t = (torch.randn(dims, generator=generator) * 0.02).to(dtype)
        if held and held + t.numel() * t.element_size() > SHARD_BYTES:
            flush()
            held = 0
        shards[-1][name] = t
        held += t.numel() * t.element_size()
        size += t.numel() * t.element_size()
    flush()
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size}, "weight_map": weight_map}, f)
    return size


def evict(directory: str) -> None:
    """Writes back the disk's dirty pages and evicts the checkpoint's files from the page cache."""
    subprocess.run(["sync"], check=True)
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed_cp(directory: str, by_file: bool) -> float:
    """Seconds to copy the checkpoint with ``cp`` on the same disk, plus a ``sync``. ``by_file``
    copies one file at a time, deleting each copy before the next (untimed): the same bytes read
    and written, needing one shard's free space instead of the checkpoint's."""
    copy = directory.rstrip("/") + ".copy"
    if not by_file:
        t0 = time.perf_counter()
        subprocess.run(["cp", "-r", directory, copy], check=True)
        subprocess.run(["sync"], check=True)  # the export's bytes are on disk when it returns; so are cp's
        seconds = time.perf_counter() - t0
        shutil.rmtree(copy)
        return seconds
    seconds = 0.0
    for name in sorted(os.listdir(directory)):
        t0 = time.perf_counter()
        subprocess.run(["cp", os.path.join(directory, name), copy], check=True)
        subprocess.run(["sync"], check=True)
        seconds += time.perf_counter() - t0
        os.remove(copy)
    return seconds


def timed_export(directory: str, output: str, mode: str, out_dtype: str | None) -> tuple[float, int]:
    """Wall seconds (with a final sync, as for cp) and the export's peak RSS in bytes, as
    /usr/bin/time reports it: getrusage's RUSAGE_CHILDREN would start from this process's own
    peak (a forked child inherits its parent's high-water mark), which made the checkpoint."""
    cmd = ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "fastonnx", "export-hf", directory, output, "--quiet"]
    cmd += ["--reference"] if mode == "reference" else []
    cmd += ["--genai", "--precision", mode.removeprefix("genai-")] if mode.startswith("genai-") else []
    cmd += ["--dtype", out_dtype] if out_dtype else []
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"export failed:\n{done.stderr}")
    subprocess.run(["sync"], check=True)
    seconds = time.perf_counter() - t0
    return seconds, int(done.stderr.split()[-1]) * 1024


def compare(directory: str, model_path: str) -> float:
    """The largest difference between onnxruntime's logits and the eager model's."""
    import numpy as np
    import onnxruntime as ort
    import transformers

    ids = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(1))  # export-hf traces 1 x 8
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    (onnx_logits,) = session.run(None, {"input_ids": ids.numpy()})
    del session
    eager = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = eager(ids).logits.float().numpy()
    return float(np.abs(onnx_logits.astype(np.float32) - expected).max())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory")
    p.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument(
        "--run",
        action="append",
        metavar="MODE[:DTYPE]",
        help="an export to time, in turn (its output deleted before the next): copy or reference, and the dtype "
        "export-hf converts the weights to, or genai-int4 / genai-int8 (export-hf --genai --precision int4: the "
        "onnxruntime-genai directory, weights quantized while streamed); repeatable (default: copy)",
    )
    p.add_argument("--no-cp", action="store_true")
    p.add_argument("--cp-by-file", action="store_true", help="time cp one file at a time (see timed_cp)")
    p.add_argument(
        "--spare-gb",
        type=float,
        default=5.0,
        help="an export whose output would leave less free disk than this is not run (reported as not fitting)",
    )
    p.add_argument("--compare", action="store_true")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--reuse", action="store_true", help="export the checkpoint a --keep run left in DIR")
    p.add_argument("--cold", action="store_true", help="evict the checkpoint from the page cache before each command")
    p.add_argument("--rounds", type=int, default=1, help="time cp and the exports this many times in turn")
    args = p.parse_args()
    directory = os.path.abspath(args.directory)
    t0 = time.perf_counter()
    if args.reuse:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            size = json.load(f)["metadata"]["total_size"]
        args.keep = True
    else:
        size = make_checkpoint(directory, args.shape, getattr(torch, args.dtype))
    made = time.perf_counter() - t0
    stored = getattr(torch, args.dtype).itemsize
    with open(os.path.join(directory, "config.json")) as f:
        written = json.load(f)
    shape = next((k for k, v in SHAPES.items() if all(written.get(a) == b for a, b in v.items())), "?")
    result: dict = {"shape": shape, "dtype": args.dtype, "checkpoint_bytes": size, "make_seconds": round(made, 1)}
    result["cold"] = args.cold
    before = (lambda: evict(directory)) if args.cold else lambda: None
    try:
        result["rounds"] = [one_round(args, directory, size, stored, before) for _ in range(args.rounds)]
        if args.rounds > 1:
            result["median_export_over_cp"] = {
                run: statistics.median(r[run]["export_over_cp"] for r in result["rounds"] if "export_over_cp" in r[run])
                for run in result["rounds"][0]
                if run != "cp_seconds" and any("export_over_cp" in r[run] for r in result["rounds"])
            }
        print(json.dumps(result))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


def one_round(args, directory: str, size: int, stored: int, before) -> dict:
    """cp, then each --run export, timed: {"cp_seconds": s, RUN: {...}}."""
    before()
    cp = None if args.no_cp else timed_cp(directory, args.cp_by_file)
    out: dict = {"cp_seconds": round(cp, 1) if cp else None}
    for run in args.run or ["copy"]:
        mode, _, out_dtype = run.partition(":")
        # In the checkpoint's directory: reference mode's model must sit beside the shards. A genai
        # export writes a directory of its own, beside the checkpoint's.
        genai = mode.startswith("genai-")
        model = directory.rstrip("/") + "-" + mode if genai else os.path.join(directory, "model.onnx")
        itemsize = getattr(torch, out_dtype).itemsize if out_dtype else stored
        output_bytes = size * itemsize // stored if mode == "copy" else size // stored // 2 if "int" in mode else 0
        entry: dict = {"mode": mode, "out_dtype": out_dtype or args.dtype}
        free = shutil.disk_usage(directory).free
        if free - output_bytes < args.spare_gb * 2**30:
            entry["not_run"] = f"{output_bytes / 2**30:.1f} GB of output, {free / 2**30:.1f} GB free"
        else:
            before()
            seconds, rss = timed_export(directory, model, mode, out_dtype or None)
            files = (
                [os.path.join(model, f) for f in ("model.onnx", "model.onnx.data")]
                if genai
                else [model, model + ".data"]
            )
            entry.update(
                export_seconds=round(seconds, 1),
                peak_rss_bytes=rss,
                output_bytes=sum(os.path.getsize(f) for f in files if os.path.exists(f)),
            )
            if cp:
                entry["export_over_cp"] = round(seconds / cp, 2)
            if args.compare and not genai:
                entry["max_logit_difference"] = compare(directory, model)
            if genai:
                shutil.rmtree(model, ignore_errors=True)
            for f in files:
                if os.path.exists(f):
                    os.remove(f)
        out[run] = entry
    return out


if __name__ == "__main__":
    main()

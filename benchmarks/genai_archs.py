"""Per architecture, at about 100M parameters: fastonnx's ``export-hf --genai`` (fp32 and
``--precision int4``) against onnxruntime-genai's model builder (``-p fp32`` and ``-p int4``,
``-e cpu``) on the same checkpoint, written here (random weights, ``save_pretrained``, the
byte-level BPE tokenizer of ``tests/models/checkpoints.py``; nothing downloaded).

For each architecture: the export time of each (one fresh process each), the size on disk, and
in onnxruntime-genai with 1 intra-op thread: a prompt of --past tokens (its time: prefill) then
--new tokens generated greedily (per token: the median step), the four directories in turn for
--rounds rounds after a warm-up round; and over those --new tokens, how many of each model's
greedy tokens equal eager transformers' (the fp32 models should give all; int4's agreement is
beside the builder int4's).

    python -m benchmarks.genai_archs [--archs llama,mistral,...] [--past 128] [--new 64] [--rounds 3]
                                     [--layers 10] [--against builder|plain] [--out benchmarks/GENAI_ARCHS.md]

``--against plain`` compares fastonnx's fused export with its own plain one instead
(``export_genai(optimize_for=None)``, the same quantization): for the architectures the builder
does not take (gpt2, gpt_neox, opt, falcon, starcoder2; GENAI_PLAIN.md).

Writes the report (Markdown) to --out and the measurements beside it as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from .genai import _child, _export_command, _fresh, _run, _size, genai_model, generate, machine

HERE = Path(__file__).resolve().parent
# The architectures both exporters support (the list).
ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "granite", "olmo", "smollm3")
PLAIN_ARCHS = ("gpt2", "gpt_neox", "opt", "falcon", "starcoder2")


def kinds(against: str) -> tuple[str, ...]:
    return tuple(f"{who} {p}" for p in ("fp32", "int4") for who in ("fastonnx", against))


def config(arch: str, layers: int):
    """About 100M parameters at 10 layers: hidden 768, 12 heads of 64, 4 KV heads, MLP 2048,
    vocabulary 32000 (embedding and head untied)."""
    import transformers

    sizes = dict(
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=layers,
        num_attention_heads=12,
        num_key_value_heads=4,
        head_dim=64,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    try:
        return transformers.AutoConfig.for_model(arch, **sizes)
    except AttributeError:  # falcon computes head_dim (hidden / heads: 64 here too)
        return transformers.AutoConfig.for_model(arch, **{k: v for k, v in sizes.items() if k != "head_dim"})


def _child_checkpoint(arch: str, layers: str, directory: str) -> None:
    import torch
    import transformers

    from tests.models.checkpoints import write_checkpoint

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config(arch, int(layers))).eval()
    write_checkpoint(model, directory)
    print(json.dumps({"parameters": sum(p.numel() for p in model.parameters())}))


def _child_plain(precision: str, checkpoint: str, output: str) -> None:
    """fastonnx's genai directory with no fused op (optimize_for=None), quantized as the fused one."""
    import torch
    import transformers

    from fastonnx.integrations.genai import export_genai

    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    export_genai(model, output, optimize_for=None, quantize="int4" if precision == "int4" else None)


def _child_decode(checkpoint: str, past: str, new: str, rounds: str, *named_dirs: str) -> None:
    """The directories in turn, ROUNDS rounds after a warm-up one, 1 intra-op thread each; the
    agreement of each one's greedy tokens with eager's."""
    import numpy as np
    import torch
    import transformers

    dirs = dict(item.split("=", 1) for item in named_dirs)
    vocab = json.loads(Path(checkpoint, "config.json").read_text())["vocab_size"]
    prompt = np.random.default_rng(0).integers(3, vocab, int(past)).tolist()
    models = {name: genai_model(d, threads=1) for name, d in dirs.items()}
    out = {name: {"prefill": [], "steps": [], "tokens": None} for name in models}
    names = list(models)
    for r in range(int(rounds) + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            tokens, prefill, steps, _ = generate(models[name], prompt, int(new))
            out[name]["tokens"] = tokens[len(prompt) :]
            if r:
                out[name]["prefill"].append(prefill)
                out[name]["steps"].extend(steps)
    transformers.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    ids = torch.tensor([prompt])
    with torch.no_grad():
        eager = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=int(new), min_new_tokens=int(new), do_sample=False
        )[0, len(prompt) :].tolist()
    for r in out.values():
        tokens = r.pop("tokens")
        # Greedy decoding diverges for good after its first different token: count the prefix.
        r["agree"] = next((i for i, (a, b) in enumerate(zip(tokens, eager)) if a != b), len(eager))
        r["prefill"] = statistics.median(r["prefill"])
        r["per_token"] = statistics.median(r["steps"])
        r.pop("steps")
    print(json.dumps(out))


def measure(tmp: str, archs: list[str], layers: int, past: int, new: int, rounds: int, against: str) -> dict:
    results: dict = {"load_before": os.getloadavg()}
    cache = os.path.join(tmp, "cache")
    for arch in archs:
        root = os.path.join(tmp, arch)
        checkpoint = os.path.join(root, "checkpoint")
        made = _run(
            [sys.executable, "-m", "benchmarks.genai_archs", "--child", "checkpoint", arch, str(layers), checkpoint]
        )
        if "error" in made:
            results[arch] = {"error": made["error"]}
            print(f"{arch}: checkpoint failed: {made['error']}", file=sys.stderr, flush=True)
            continue
        entry: dict = {"parameters": made["child"]["parameters"], "export": {}, "size": {}}
        dirs = {}
        for kind in kinds(against):
            exporter, precision = kind.split()
            output = os.path.join(root, kind.replace(" ", "-"))
            _fresh(output)
            if exporter == "builder":
                command = _export_command("builder", checkpoint, output, cache, precision)
            elif exporter == "plain":
                command = [
                    sys.executable,
                    "-m",
                    "benchmarks.genai_archs",
                    "--child",
                    "plain",
                    precision,
                    checkpoint,
                    output,
                ]
            else:
                command = _child("export", "int4" if precision == "int4" else "fastonnx", checkpoint, output)
            result = _run(command)
            entry["export"][kind] = result
            if "error" not in result:
                dirs[kind] = output
                entry["size"][kind] = _size(output)["model"]
            print(f"{arch} {kind}: {json.dumps(result)[:200]}", file=sys.stderr, flush=True)
        decode = _run(
            [
                sys.executable,
                "-m",
                "benchmarks.genai_archs",
                "--child",
                "decode",
                checkpoint,
                str(past),
                str(new),
                str(rounds),
                *(f"{k}={d}" for k, d in dirs.items()),
            ]
        )
        entry["decode"] = decode.get("child", {"error": decode.get("error")})
        print(f"{arch} decode: {json.dumps(entry['decode'])[:400]}", file=sys.stderr, flush=True)
        results[arch] = entry
        for kind in kinds(against):  # the next architecture's checkpoints need the disk
            _fresh(os.path.join(root, kind.replace(" ", "-")))
        _fresh(checkpoint)
    results["load_after"] = os.getloadavg()
    return results


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "–"


def report(results: dict, archs: list[str], past: int, new: int, rounds: int, command: str, against: str) -> str:
    other = "the model builder" if against == "builder" else "its own plain export (no fused op)"
    lines = [
        f"# onnxruntime-genai per architecture: fastonnx against {other}, at about 100M parameters",
        "",
        f"`{command}` on {datetime.date.today().isoformat()}; {machine()}",
        f"Load average before {results['load_before'][0]:.1f}, after {results['load_after'][0]:.1f}.",
        "",
        f"Decode: a prompt of {past} tokens, then {new} greedy tokens, 1 intra-op thread, the four models in turn "
        f"for {rounds} rounds after a warm-up one; medians. Ratios are fastonnx over {against} at the same "
        "precision (below 1: fastonnx is faster or smaller). Tokens: how many of the greedy tokens equal eager "
        "transformers' before the first that differs.",
        "",
        f"| arch | params | precision | per token (fastonnx / {against}) | ratio | prefill ratio | tokens = eager "
        f"(fastonnx / {against}) | size ratio | export s (fastonnx / {against}) |",
        "|---|---:|---|---|---:|---:|---|---:|---|",
    ]
    for arch in archs:
        entry = results.get(arch, {})
        if "error" in entry:
            lines.append(f"| {arch} | | | checkpoint failed: {entry['error']} | | | | | |")
            continue
        for precision in ("fp32", "int4"):
            ours, theirs = f"fastonnx {precision}", f"{against} {precision}"
            d = entry["decode"]
            exports = entry["export"]
            cells = []
            for kind in (ours, theirs):
                if "error" in exports[kind]:
                    cells.append(f"export failed: {exports[kind]['error'][:80]}")
                elif kind not in d:
                    cells.append(f"decode failed: {str(d.get('error'))[:80]}")
                else:
                    cells.append(f"{d[kind]['per_token'] * 1e3:.2f} ms")
            both = ours in d and theirs in d
            lines.append(
                "| {} | {:.0f}M | {} | {} / {} | {} | {} | {} / {} | {} | {} / {} |".format(
                    arch,
                    entry["parameters"] / 1e6,
                    precision,
                    *cells,
                    _ratio(d[ours]["per_token"], d[theirs]["per_token"]) if both else "–",
                    _ratio(d[ours]["prefill"], d[theirs]["prefill"]) if both else "–",
                    d.get(ours, {}).get("agree", "–"),
                    d.get(theirs, {}).get("agree", "–"),
                    _ratio(entry["size"].get(ours), entry["size"].get(theirs)),
                    f"{exports[ours].get('wall', 0):.1f}",
                    f"{exports[theirs].get('wall', 0):.1f}",
                )
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        {"checkpoint": _child_checkpoint, "decode": _child_decode, "plain": _child_plain}[sys.argv[2]](*sys.argv[3:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", help="comma-separated; default: the builder's nine, or with --against plain five others")
    p.add_argument("--against", choices=("builder", "plain"), default="builder")
    p.add_argument("--layers", type=int, default=10)
    p.add_argument("--past", type=int, default=128, help="the prompt's length")
    p.add_argument("--new", type=int, default=64, help="tokens generated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=HERE / "GENAI_ARCHS.md")
    args = p.parse_args()
    archs = [a for a in (args.archs or ",".join(ARCHS if args.against == "builder" else PLAIN_ARCHS)).split(",") if a]
    with tempfile.TemporaryDirectory(prefix="genai-archs-") as tmp:
        results = measure(tmp, archs, args.layers, args.past, args.new, args.rounds, args.against)
    command = "python -m benchmarks.genai_archs " + " ".join(sys.argv[1:])
    args.out.write_text(report(results, archs, args.past, args.new, args.rounds, command, args.against))
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    print(args.out.read_text())


if __name__ == "__main__":
    main()

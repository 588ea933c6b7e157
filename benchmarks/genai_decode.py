"""Decode latency of onnxruntime-genai directories at a long past, 1 and 2 threads.

    python -m benchmarks.genai_decode NAME=DIR... [--past 128,1024] [--steps 32] [--rounds 3]
                                      [--threads 1,2] [--vocab 32000]

For each past length and thread count: every directory loaded with that many intra-op threads, a
prompt of PAST random tokens appended (its time: *prefill*), then STEPS tokens generated greedily
(*per token*: the median of every ``generate_next_token`` after the first, which only picks from
the prompt's logits). The directories run in turn within each round (each round starting with the
next), ROUNDS rounds after a warm-up round, so that a shared machine's drift falls on all of them
alike: read the ratios. Prints one line per measurement and the JSON of all of them at the end.

``benchmarks/genai.py`` exports and compares at a past of about 64-128 tokens; this one takes
directories already written (``export-hf --genai [--precision int4]``, the builder's ``-p fp32`` and
``-p int4``), for the issue's longer pasts and two threads.
"""

from __future__ import annotations

import argparse
import json
import statistics


def measure(dirs: dict[str, str], past: int, steps: int, rounds: int, threads: int, vocab: int) -> dict:
    import numpy as np

    from .genai import genai_model, generate

    models = {name: genai_model(directory, threads) for name, directory in dirs.items()}
    prompt = np.random.default_rng(0).integers(3, vocab, past).tolist()
    out = {name: {"prefill": [], "steps": []} for name in models}
    names = list(models)
    for r in range(rounds + 1):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            _, prefill, times, _ = generate(models[name], prompt, steps + 1)
            if r:
                out[name]["prefill"].append(prefill)
                out[name]["steps"].extend(times)
    return {
        name: {"prefill_ms": 1e3 * statistics.median(v["prefill"]), "per_token_ms": 1e3 * statistics.median(v["steps"])}
        for name, v in out.items()
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+", metavar="NAME=DIR")
    p.add_argument("--past", default="128,1024")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--vocab", type=int, default=32000, help="the prompt's tokens are drawn below it")
    args = p.parse_args()
    dirs = dict(item.split("=", 1) for item in args.dirs)
    results = []
    for past in (int(x) for x in args.past.split(",")):
        for threads in (int(x) for x in args.threads.split(",")):
            for name, r in measure(dirs, past, args.steps, args.rounds, threads, args.vocab).items():
                results.append({"past": past, "threads": threads, "model": name, **r})
                print(
                    f"past {past:5d} threads {threads} {name:16s} prefill {r['prefill_ms']:8.1f} ms "
                    f"per token {r['per_token_ms']:6.2f} ms",
                    flush=True,
                )
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""Export a language model for generation with a KV cache, and generate with it in ONNX Runtime.

transformers' exporters split the model into a prefill graph (the prompt, an empty cache) and a
decode graph (one token and the cache so far), with dynamic batch, prompt and past length;
fastonnx converts each. The exported graphs then generate greedily, token by token, on
transformers' ONNX Runtime runner, and the tokens are compared with ``model.generate``.

    python examples/export_llm_for_generation.py [--model PATH_OR_HUB_ID] [--out exported_llm]

Without ``--model`` a small Llama with random weights is built (nothing is downloaded).
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
import transformers
import transformers.exporters.exporter_dynamo as exporter_dynamo
from transformers.exporters import ExportedModel, OnnxConfig

from fastonnx.integrations.transformers import FastOnnxExporter


def small_llama() -> transformers.PreTrainedModel:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return transformers.LlamaForCausalLM(config).eval()


def generate(exported: ExportedModel, input_ids: torch.Tensor, new_tokens: int, eos: int | None,
             pad: int | None) -> torch.Tensor:
    """Greedy generation on the exported graphs, as ``model.generate`` does it: the prefill on
    the prompt, then one decode step per token, each taking the cache the previous graph
    returned; a sequence that produced ``eos`` continues with ``pad``."""
    batch, length = input_ids.shape
    positions = torch.arange(length).expand(batch, length)
    out = exported.runners["prefill"](input_ids=input_ids, position_ids=positions)
    tokens, finished = [], torch.zeros(batch, dtype=torch.bool)
    for step in range(new_tokens):
        if step:
            position = torch.full((batch, 1), length + step - 1)
            out = exported.runners["decode"](input_ids=tokens[-1][:, None], position_ids=position, cache=out.cache)
        token = out.logits[:, -1].argmax(-1)
        if eos is not None:
            token = torch.where(finished, pad if pad is not None else eos, token)
            finished |= token == eos
        tokens.append(token)
        if finished.all():
            break
    return torch.cat([input_ids, torch.stack(tokens, 1)], 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a local model directory or a Hugging Face model id (default: a small random Llama)")
    p.add_argument("--out", default="exported_llm", help="the directory to write the graphs in (default: exported_llm)")
    p.add_argument("--new-tokens", type=int, default=8, help="tokens to generate with each (default: 8)")
    a = p.parse_args()
    model = (transformers.AutoModelForCausalLM.from_pretrained(a.model).eval() if a.model else small_llama())

    # Trace on a batch of 2 and a prompt of 6; generate on a batch of 3 and a prompt of 11.
    g = torch.Generator().manual_seed(0)
    traced = torch.randint(0, model.config.vocab_size, (2, 6), generator=g)
    sample = {"input_ids": traced, "attention_mask": torch.ones_like(traced)}
    t0 = time.perf_counter()
    # transformers advises explicit dynamic_shapes over dynamic=True, for a faster trace; this
    # example keeps dynamic=True (every axis dynamic), so the advice is left out.
    logging.getLogger(exporter_dynamo.__file__).setLevel(logging.ERROR)
    exported = FastOnnxExporter().export_for_generation(model, sample, OnnxConfig(dynamic=True))
    print(f"exported prefill and decode in {time.perf_counter() - t0:.2f} s")
    for name, component in exported.components.items():
        inputs = ", ".join(f"{v.name}{list(v.shape)}" for v in component.program.graph.inputs)
        print(f"  {name}: {inputs}")

    exported.save_pretrained(a.out)
    loaded = ExportedModel.from_pretrained(a.out)
    print(f"saved to {a.out}/ and loaded back: {sorted(loaded.components)}")

    prompt = torch.randint(0, model.config.vocab_size, (3, 11), generator=g)
    config = model.generation_config
    eos = config.eos_token_id[0] if isinstance(config.eos_token_id, list) else config.eos_token_id
    onnx_tokens = generate(loaded, prompt, a.new_tokens, eos, config.pad_token_id)
    with torch.no_grad():
        eager_tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=a.new_tokens,
                                      do_sample=False)
    print("ONNX Runtime:", onnx_tokens[0, -a.new_tokens:].tolist())
    print("PyTorch:     ", eager_tokens[0, -a.new_tokens:].tolist())
    if not torch.equal(onnx_tokens, eager_tokens):
        raise SystemExit("the exported graphs generate other tokens than the model")
    print(f"the exported graphs generate the model's tokens for each of {prompt.shape[0]} prompts")


if __name__ == "__main__":
    main()

"""The benchmark models: built with random weights from configs (nothing is downloaded)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.models import nets  # noqa: E402  (the CNNs have one source: the test suite)

SEQ = 128


def _tokens(vocab: int) -> tuple:
    return (torch.randint(0, vocab, (1, SEQ), generator=torch.Generator().manual_seed(0)),)


def gpt2() -> tuple[torch.nn.Module, tuple]:
    import transformers

    config = transformers.GPT2Config(use_cache=False)  # 12 layers, 768 wide: GPT-2 small
    return transformers.GPT2LMHeadModel(config), _tokens(config.vocab_size)


def bert() -> tuple[torch.nn.Module, tuple]:
    import transformers

    config = transformers.BertConfig()  # BERT-base: 12 layers, 768 wide
    return transformers.BertModel(config), _tokens(config.vocab_size)


def llama(layers: int) -> Callable[[], tuple[torch.nn.Module, tuple]]:
    def build() -> tuple[torch.nn.Module, tuple]:
        import transformers

        config = transformers.LlamaConfig(
            hidden_size=1024, num_attention_heads=16, num_key_value_heads=4, intermediate_size=2816,
            vocab_size=32000, num_hidden_layers=layers, use_cache=False,
        )
        return transformers.LlamaForCausalLM(config), _tokens(config.vocab_size)

    return build


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple]]] = {
    "mlp": nets.mlp,
    "resnet18": nets.resnet18,
    "resnet50": nets.resnet50,
    "gpt2": gpt2,
    "bert": bert,
    "llama2": llama(2),
    "llama16": llama(16),
    "llama64": llama(64),
}
# The LLaMA models by layer count, for the linearity plot.
LLAMA_LAYERS = {"llama2": 2, "llama16": 16, "llama64": 64}


def build(name: str) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model.eval(), args

"""Checkpoint directories written by the tests, as a user's would be: a model's
``save_pretrained`` (config.json, generation_config.json, model.safetensors) and a word-level
tokenizer made with ``tokenizers`` (tokenizer.json, tokenizer_config.json). Nothing is
downloaded."""

from __future__ import annotations

import os

import tokenizers
import transformers

# Special tokens first, as in most vocabularies: ids 0, 1 and 2.
SPECIAL = ("<pad>", "<s>", "</s>")
PAD, BOS, EOS = range(3)


def word_tokenizer(vocab_size: int) -> transformers.PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer of ``vocab_size`` tokens (w3, w4, ...), unknown words
    mapped to <pad>."""
    words = list(SPECIAL) + [f"w{i}" for i in range(len(SPECIAL), vocab_size)]
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=SPECIAL[PAD])
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=SPECIAL[PAD],
        bos_token=SPECIAL[BOS],
        eos_token=SPECIAL[EOS],
        unk_token=SPECIAL[PAD],
    )


def with_special_tokens(model: transformers.PreTrainedModel) -> transformers.PreTrainedModel:
    """The tokenizer's special ids in the model's config and generation config (architectures'
    defaults, such as gpt2's eos 50256, lie outside a small test vocabulary)."""
    for config in (model.config, model.generation_config):
        config.pad_token_id, config.bos_token_id, config.eos_token_id = PAD, BOS, EOS
    return model


def write_checkpoint(model: transformers.PreTrainedModel, directory: str | os.PathLike) -> str:
    """``model`` saved with a tokenizer of its vocabulary, as ``from_pretrained`` reads it."""
    with_special_tokens(model).save_pretrained(directory)
    word_tokenizer(model.config.vocab_size).save_pretrained(directory)
    return os.fspath(directory)

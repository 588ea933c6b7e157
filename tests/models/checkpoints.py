"""Checkpoint directories written by the tests, as a user's would be: a model's
``save_pretrained`` (config.json, generation_config.json, model.safetensors) and a GPT-2-style
byte-level BPE tokenizer of the model's vocabulary (tokenizer.json, tokenizer_config.json), which
transformers, onnxruntime-genai's ``og.Tokenizer`` (onnxruntime-extensions) and its model builder
all read. Nothing is downloaded or trained."""

from __future__ import annotations

import itertools
import os

import transformers

# Special tokens first, as in most vocabularies: ids 0, 1 and 2.
SPECIAL = ("<pad>", "<s>", "</s>")
PAD, BOS, EOS = range(3)


def bpe_tokenizer(vocab_size: int) -> transformers.GPT2Tokenizer:
    """A byte-level BPE tokenizer of exactly ``vocab_size`` tokens: the special tokens, the
    lowercase letters and the space (``Ġ``, byte-level's spelling), then merges enumerated
    rather than trained: each existing token followed by each letter, shortest first, so every id
    decodes to text and the same input always gives the same ids. Saved, its tokenizer_config.json
    names GPT2Tokenizer: onnxruntime-extensions reads that class and no word-level model (a
    ``tokenizers`` WordLevel tokenizer saves as TokenizersBackend, which it cannot parse)."""
    letters = ["\u0120", *"abcdefghijklmnopqrstuvwxyz"]
    tokens = letters[: vocab_size - len(SPECIAL)]
    merges = []
    for prefix in itertools.count():
        if len(SPECIAL) + len(tokens) >= vocab_size:
            break
        for letter in letters[: vocab_size - len(SPECIAL) - len(tokens)]:
            merges.append((tokens[prefix], letter))
            tokens.append(tokens[prefix] + letter)
    return transformers.GPT2Tokenizer(
        vocab={token: i for i, token in enumerate([*SPECIAL, *tokens])},
        merges=merges,
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
    bpe_tokenizer(model.config.vocab_size).save_pretrained(directory)
    return os.fspath(directory)

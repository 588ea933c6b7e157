"""The ``genai_config.json`` onnxruntime-genai reads beside a decoder graph, from the checkpoint's
``config.json`` and ``generation_config.json`` (as transformers loaded them) and from what the
exported graph takes: its input and output names and its cache's shape.

The fields and their meaning are onnxruntime-genai's (``src/config.h``); its model builder
writes the same ones. ``type`` is the checkpoint's ``model_type`` where onnxruntime-genai knows
it as a language model, else ``decoder``, its generic decoder-only type: a fastonnx graph
computes everything the model does (rotary positions, the mask, soft-capping) itself, so the
runtime only has to feed it.
"""

from __future__ import annotations

import dataclasses

from ..errors import ArgumentError

# onnxruntime-genai 0.18's language-model types (``ModelType::IsLLM``, src/models/model_type.h)
# that are also transformers' model_type names and that it runs as a plain decoder: not "gpt2",
# whose model class takes the old cache of keys and values stacked in one tensor per layer.
GENAI_LLM_TYPES = frozenset(
    {
        "chatglm",
        "ernie4_5",
        "gemma",
        "gemma2",
        "gemma3_text",
        "granite",
        "llama",
        "mistral",
        "nemotron",
        "olmo",
        "phi",
        "phi3",
        "qwen2",
        "qwen3",
        "smollm3",
    }
)
# The generation_config defaults onnxruntime-genai's search takes (its own defaults where unset).
_SEARCH_DEFAULTS = {
    "do_sample": False,
    "num_beams": 1,
    "num_return_sequences": 1,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
    "length_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "diversity_penalty": 0.0,
}


@dataclasses.dataclass(frozen=True)
class DecoderSignature:
    """What onnxruntime-genai needs to know of the exported graph to feed it."""

    filename: str
    inputs: dict[str, str]  # genai's role -> the graph's name (a %d template for the cache)
    outputs: dict[str, str]
    num_hidden_layers: int
    num_key_value_heads: int
    head_size: int
    # Every layer's past and present can be one buffer of max_length (GroupQueryAttention appends
    # in place), rather than a past of the current length that the graph copies into a new present.
    shares_kv_buffer: bool = False


def genai_type(model_type: str) -> str:
    return model_type if model_type in GENAI_LLM_TYPES else "decoder"


def context_length(config) -> int | None:
    """The longest sequence the model was made for (transformers' attribute_map gives gpt2's
    n_positions the common name)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _special_token(generation_config, config, field: str):
    """generation_config.json's id, else config.json's (an id of 0 is an id: no truthiness)."""
    value = _token_id(getattr(generation_config, field, None))
    return _token_id(getattr(config, field, None)) if value is None else value


def _token_id(value):
    # genai takes one bos and pad id and one eos id or a list of them.
    if isinstance(value, (list, tuple)):
        return list(value) if len(value) != 1 else value[0]
    return value


def genai_config(config, generation_config, signature: DecoderSignature, context: int) -> dict:
    """The JSON document, as onnxruntime-genai's ``Config`` parses it."""
    gen = generation_config
    bos, eos, pad = (_special_token(gen, config, f"{name}_token_id") for name in ("bos", "eos", "pad"))
    if pad is None:  # genai pads a batch of prompts on the left with it; eos is what transformers uses
        pad = eos[0] if isinstance(eos, list) else eos
    for field, value in (("bos_token_id", bos), ("eos_token_id", eos), ("pad_token_id", pad)):
        for token in value if isinstance(value, list) else [value]:
            if token is not None and not 0 <= token < config.vocab_size:
                raise ArgumentError(
                    f"the checkpoint's {field} is {token}, outside its vocabulary of {config.vocab_size} tokens: "
                    f"onnxruntime-genai refuses to load such a model; set {field} in generation_config.json "
                    "(and config.json) to a token of the vocabulary"
                )
    model = {
        "type": genai_type(config.model_type),
        "context_length": context,
        "vocab_size": config.vocab_size,
        "decoder": {
            "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
            "filename": signature.filename,
            "hidden_size": config.hidden_size,
            "head_size": signature.head_size,
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": signature.num_key_value_heads,
            "num_hidden_layers": signature.num_hidden_layers,
            "inputs": signature.inputs,
            "outputs": signature.outputs,
        },
    }
    for key, value in (("bos_token_id", bos), ("eos_token_id", eos), ("pad_token_id", pad)):
        if value is not None:
            model[key] = value
    search = {key: _search_value(gen, key, default) for key, default in _SEARCH_DEFAULTS.items()}
    search |= {
        "max_length": context,
        "min_length": 0,
        "early_stopping": True,
        # Shared: genai gives every layer one buffer of max_length as past and present, and the
        # graph's GroupQueryAttention appends to it in place. Not shared: the graph concatenates the
        # past and the new keys, so the past must be of the current length.
        "past_present_share_buffer": signature.shares_kv_buffer,
    }
    return {"model": model, "search": dict(sorted(search.items()))}


def _search_value(generation_config, key: str, default):
    value = getattr(generation_config, key, None)
    return default if value is None else value

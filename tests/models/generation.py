"""Generative language models for export with a KV cache: tiny random-weight configs of the
architectures users export for generation (decoder-only and encoder-decoder), and the inputs of
``generate``. Nothing is downloaded."""

from __future__ import annotations

import torch
import transformers

VOCAB = 96
_COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, head_dim=8, pad_token_id=0)
# Per architecture, where its config names things its own way.
_CONFIGS = {
    "llama": _COMMON,
    "mistral": _COMMON,
    "qwen2": _COMMON,
    "qwen3": _COMMON,
    "gemma": _COMMON,
    "gemma2": dict(_COMMON, sliding_window=16),
    "phi3": _COMMON,
    "gpt2": dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=128),
    "gpt_neox": dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, max_position_embeddings=128),
    "opt": dict(vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=128, word_embed_proj_dim=32),
    "falcon": dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
                   new_decoder_architecture=True),
    "granite": _COMMON,
    "olmo": _COMMON,
    "stablelm": dict(_COMMON, partial_rotary_factor=0.5),
    "starcoder2": _COMMON,
    "smollm3": _COMMON,
    "t5": dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
               decoder_start_token_id=0),
    "bart": dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128),
}
ARCHITECTURES = list(_CONFIGS)
ENCODER_DECODER = {"t5", "bart"}


def build(arch: str, dtype: torch.dtype = torch.float32) -> transformers.PreTrainedModel:
    """The architecture's generative model (a causal LM, or a seq2seq LM), seeded."""
    torch.manual_seed(0)  # transformers initializes weights from the global generator
    config = transformers.AutoConfig.for_model(arch, **_CONFIGS[arch])
    auto = transformers.AutoModelForSeq2SeqLM if arch in ENCODER_DECODER else transformers.AutoModelForCausalLM
    return auto.from_config(config, dtype=dtype).eval()


def prompt(batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``generate`` inputs: random token ids and a full attention mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, length, dtype=torch.long)}

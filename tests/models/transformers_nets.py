"""Well-known transformer architectures from Hugging Face transformers, built from small configs
with random weights (nothing is downloaded), plus two sequence models written here.

Each builder returns ``(model.eval(), args, kwargs)``. Weights and inputs are seeded, so every
call builds the same model.
"""

from __future__ import annotations

import math

import torch
import transformers
from torch import nn

_SEED = 0
_VOCAB = 96
_BATCH, _SEQ = 2, 12
# Small but complete: every layer type of the architecture, several layers and heads.
_HIDDEN = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


def _ids(g: torch.Generator, seq: int = _SEQ) -> torch.Tensor:
    return torch.randint(4, _VOCAB, (_BATCH, seq), generator=g)


def _seeded(build):
    def builder():
        torch.manual_seed(_SEED)  # transformers initializes weights from the global generator
        g = torch.Generator().manual_seed(_SEED)
        model, args, kwargs = build(g)
        return model.eval(), args, kwargs

    builder.__name__ = build.__name__
    return builder


@_seeded
def bert(g):
    model = transformers.BertModel(transformers.BertConfig(vocab_size=_VOCAB, **_HIDDEN))
    ids = _ids(g)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0  # padding in the second sequence
    return model, (ids,), {"attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


@_seeded
def gpt2(g):
    config = transformers.GPT2Config(vocab_size=_VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    return transformers.GPT2LMHeadModel(config), (_ids(g),), {}


@_seeded
def llama(g):
    config = transformers.LlamaConfig(vocab_size=_VOCAB, num_key_value_heads=2, use_cache=False, **_HIDDEN)
    return transformers.LlamaForCausalLM(config), (_ids(g),), {}


@_seeded
def t5(g):
    config = transformers.T5Config(
        vocab_size=_VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, use_cache=False
    )
    return transformers.T5Model(config), (_ids(g),), {"decoder_input_ids": _ids(g, 7)}


@_seeded
def bart(g):
    config = transformers.BartConfig(
        vocab_size=_VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False,
    )
    return transformers.BartModel(config), (_ids(g),), {"decoder_input_ids": _ids(g, 7)}


@_seeded
def vit(g):
    config = transformers.ViTConfig(image_size=32, patch_size=8, **_HIDDEN)
    return transformers.ViTModel(config), (torch.randn(_BATCH, 3, 32, 32, generator=g),), {}


@_seeded
def whisper(g):
    config = transformers.WhisperConfig(
        vocab_size=_VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
        max_source_positions=20, max_target_positions=32, pad_token_id=1, bos_token_id=2, eos_token_id=3,
        decoder_start_token_id=2, use_cache=False,
    )
    features = torch.randn(_BATCH, 16, 40, generator=g)  # 40 frames: two convolutions, stride 2 -> 20 positions
    return transformers.WhisperModel(config), (features,), {"decoder_input_ids": _ids(g, 7)}


@_seeded
def clip(g):
    config = transformers.CLIPConfig(
        text_config=dict(vocab_size=_VOCAB, max_position_embeddings=32, **_HIDDEN),
        vision_config=dict(image_size=32, patch_size=8, **_HIDDEN),
        projection_dim=16,
    )
    pixels = torch.randn(_BATCH, 3, 32, 32, generator=g)
    return transformers.CLIPModel(config), (_ids(g),), {"pixel_values": pixels}


@_seeded
def fnet(g):
    # Token mixing by a 2-D Fourier transform (fftn over sequence and hidden, real part): complex
    # values inside the graph, a real model around them.
    config = transformers.FNetConfig(vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                     max_position_embeddings=64, use_tpu_fourier_optimizations=False)
    return transformers.FNetModel(config), (_ids(g),), {}


class WordLanguageModel(nn.Module):
    """PyTorch's word_language_model example: embedding, a two-layer LSTM, a tied decoder."""

    def __init__(self, vocab: int = _VOCAB, size: int = 32, layers: int = 2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, size)
        self.rnn = nn.LSTM(size, size, layers, dropout=0.2)
        self.decoder = nn.Linear(size, vocab)
        self.decoder.weight = self.encoder.weight

    def forward(self, tokens: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output).log_softmax(-1), hidden


@_seeded
def lstm_word_lm(g):
    model = WordLanguageModel()
    tokens = torch.randint(0, _VOCAB, (_SEQ, _BATCH), generator=g)  # (seq, batch): not batch_first
    hidden = (torch.randn(2, _BATCH, 32, generator=g), torch.randn(2, _BATCH, 32, generator=g))
    return model, (tokens, hidden), {}


class TransformerClassifier(nn.Module):
    """nn.TransformerEncoder over embeddings with sinusoidal positions and a padding mask."""

    def __init__(self, vocab: int = _VOCAB, size: int = 32, classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, size, padding_idx=0)
        layer = nn.TransformerEncoderLayer(size, nhead=4, dim_feedforward=64, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(size, classes)
        position = torch.arange(64).unsqueeze(1)
        freq = torch.exp(torch.arange(0, size, 2) * (-math.log(10000.0) / size))
        table = torch.zeros(64, size)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("positions", table)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.positions[: tokens.shape[1]]
        x = self.encoder(x, src_key_padding_mask=tokens == 0)
        return self.head(x.mean(dim=1))


@_seeded
def transformer_encoder(g):
    tokens = _ids(g)
    tokens[1, -4:] = 0  # padding
    return TransformerClassifier(), (tokens,), {}


MODELS = {
    f.__name__: f
    for f in (bert, gpt2, llama, t5, bart, vit, whisper, clip, fnet, lstm_word_lm, transformer_encoder)
}

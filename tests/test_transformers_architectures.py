"""Three transformers architectures (tiny configs, random weights, nothing downloaded), exported
from input_ids and attention_mask of [1, 16] with the sequence axis dynamic, against eager
PyTorch in onnxruntime at the traced length and at another:

- glm4_moe_lite: multi-head latent attention (a key and a value per head, so as many key-value
  heads as heads: with fewer, eager PyTorch fails too) and routed experts;
- openai_privacy_filter: experts set to transformers' "eager" implementation, a Python loop over
  the experts the data routes to, traced with "grouped_mm" (converters/transformers.py);
- llama4_text: a rotary embedding in complex numbers (torch.polar, complex products, views and
  unsqueezes of complex tensors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as T
from support import check, run_ort

import fastonnx

_VOCAB = 96
_COMMON = dict(vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, use_cache=False)

CONFIGS = {
    "glm4_moe_lite": lambda: T.Glm4MoeLiteConfig(
        **_COMMON, num_key_value_heads=4, intermediate_size=64, moe_intermediate_size=16, n_routed_experts=8,
        num_experts_per_tok=2, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=12,
        v_head_dim=16,
    ),
    "openai_privacy_filter": lambda: T.OpenAIPrivacyFilterConfig(
        **_COMMON, num_key_value_heads=2, intermediate_size=32, head_dim=8, num_local_experts=8,
        num_experts_per_tok=2, sliding_window=8, pad_token_id=0, eos_token_id=1,
    ),
    "llama4_text": lambda: T.Llama4TextConfig(
        **_COMMON, num_key_value_heads=2, intermediate_size=32, intermediate_size_mlp=64, head_dim=8,
        num_local_experts=4, attention_chunk_size=8,
    ),
}
MODELS = {
    "glm4_moe_lite": T.Glm4MoeLiteForCausalLM,
    "openai_privacy_filter": T.OpenAIPrivacyFilterForTokenClassification,
    "llama4_text": T.Llama4ForCausalLM,
}
_AXES = {1: "sequence"}


def _inputs(g: torch.Generator, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(4, _VOCAB, (batch, length), generator=g)
    return ids, torch.ones_like(ids)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_architecture_matches_eager(name):
    torch.manual_seed(0)
    model = MODELS[name](CONFIGS[name]()).eval()
    experts = model.config._experts_implementation
    g = torch.Generator().manual_seed(0)
    ids, mask = _inputs(g, 1, 16)
    proto = fastonnx.export(
        model, (ids,), kwargs={"attention_mask": mask}, dynamic_shapes=(_AXES, _AXES)
    ).model_proto
    check(proto)
    assert model.config._experts_implementation == experts, "the model's experts implementation was not restored"
    for length in (16, 9):
        ids, mask = _inputs(g, 1, length)
        mask[0, -2:] = 0  # padding
        with torch.no_grad():
            expected = model(ids, attention_mask=mask).logits
        (logits,) = run_ort(proto, [ids, mask])[:1]
        np.testing.assert_allclose(logits, expected.numpy(), rtol=1e-4, atol=1e-4)

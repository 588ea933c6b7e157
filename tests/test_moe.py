"""Mixture-of-experts language models from transformers (tiny configs, random weights, nothing
downloaded) export with a dynamic token count and match eager PyTorch in onnxruntime. Their
experts run through transformers::grouped_mm_fallback (fastonnx's converter) after an
aten::histc of the routed expert ids."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as T

import fastonnx
from support import run_ort

_COMMON = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,
)
_ROUTED = dict(num_experts_per_tok=2)

CONFIGS = {
    "olmoe": lambda: T.OlmoeConfig(**_COMMON, **_ROUTED, num_experts=4),
    "qwen2_moe": lambda: T.Qwen2MoeConfig(
        **_COMMON, **_ROUTED, num_experts=4, moe_intermediate_size=16, shared_expert_intermediate_size=16
    ),
    "qwen3_moe": lambda: T.Qwen3MoeConfig(**_COMMON, **_ROUTED, num_experts=4, moe_intermediate_size=16, head_dim=8),
    "mixtral": lambda: T.MixtralConfig(**_COMMON, **_ROUTED, num_local_experts=4),
    "granitemoe": lambda: T.GraniteMoeConfig(**_COMMON, **_ROUTED, num_local_experts=4),
    "deepseek_v3": lambda: T.DeepseekV3Config(
        **{**_COMMON, "num_key_value_heads": 4},  # multi-head latent attention: a key and value per head
        **_ROUTED,
        n_routed_experts=4,
        moe_intermediate_size=16,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
    ),
    "phimoe": lambda: T.PhimoeConfig(**_COMMON, **_ROUTED, num_local_experts=4),
    "minimax": lambda: T.MiniMaxConfig(
        **_COMMON, **_ROUTED, num_local_experts=4, head_dim=8, layer_types=["full_attention"] * 2
    ),
    "ernie4_5_moe": lambda: T.Ernie4_5_MoeConfig(
        **_COMMON, moe_num_experts=4, moe_k=2, moe_intermediate_size=16, moe_layer_start_index=0
    ),
    "hunyuan_v1_moe": lambda: T.HunYuanMoEV1Config(**_COMMON, num_experts=4, moe_topk=2, head_dim=8),
    "qwen3_next": lambda: T.Qwen3NextConfig(
        **_COMMON,
        **_ROUTED,
        num_experts=4,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
        head_dim=8,
        layer_types=["full_attention"] * 2,
    ),
    "granitemoeshared": lambda: T.GraniteMoeSharedConfig(
        **_COMMON, **_ROUTED, num_local_experts=4, shared_intermediate_size=16
    ),
    "gpt_oss": lambda: T.GptOssConfig(
        **_COMMON, **_ROUTED, num_local_experts=4, head_dim=8, sliding_window=8, layer_types=["full_attention"] * 2
    ),
}


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return T.AutoModelForCausalLM.from_config(CONFIGS[name]()).eval()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_moe_model_matches_eager_with_dynamic_tokens(name):
    model = _model(name)
    g = torch.Generator().manual_seed(0)
    traced = torch.randint(0, 64, (2, 5), generator=g)
    proto = fastonnx.export(model, (traced,), dynamic_shapes=({0: "batch", 1: "seq"},)).model_proto
    ops = {n.op_type for n in proto.graph.node}
    assert "MatMul" in ops
    for batch, seq in ((2, 5), (1, 9), (3, 2)):
        ids = torch.randint(0, 64, (batch, seq), generator=g)
        with torch.no_grad():
            expected = model(ids).logits
        (logits,) = run_ort(proto, [ids])[:1]
        np.testing.assert_allclose(logits, expected.numpy(), rtol=1e-3, atol=1e-4)


def test_grouped_mm_with_rows_no_expert_took():
    """Rows past offs[-1] (expert-parallel sentinels) are zeros, as the kernel leaves them."""
    import transformers.integrations.moe  # noqa: F401 (registers the op)

    class M(torch.nn.Module):
        def forward(self, x, w, offs):
            return torch.ops.transformers.grouped_mm_fallback(x, w, offs)

    x, w = torch.randn(7, 3), torch.randn(3, 3, 4)
    offs = torch.tensor([2, 2, 5], dtype=torch.int32)
    proto = fastonnx.export(M(), (x, w, offs), dynamic_shapes=({0: "rows"}, None, None)).model_proto
    (out,) = run_ort(proto, [x, w, offs])
    np.testing.assert_allclose(out, M()(x, w, offs).numpy(), rtol=1e-5, atol=1e-6)

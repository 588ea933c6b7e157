"""Attention."""

import torch
from row import SampleRule, from_opinfo, hand_written, kwarg, tensor
from torch.testing._internal.opinfo.core import SampleInput

sdpa = torch.nn.functional.scaled_dot_product_attention

# torch's CPU kernel runs a blocked online softmax accumulating in float32; onnxruntime a plain
# softmax. OpInfo's values (up to 9) make scores in the hundreds, where the order of operations
# shows in the last bits (float32) and in an ulp or two of the output (float16).
ATTENTION_TOLERANCE = {torch.float32: (1.3e-6, 1e-4), torch.float16: (1e-3, 5e-3)}


def _attention(dtype):
    """What OpInfo's samples leave out: bool masks (with a fully masked row), broadcast float
    masks, an explicit scale, grouped-query heads and a causal mask over more keys than queries."""
    q, kv = (2, 4, 5, 8), (2, 4, 7, 8)
    bool_mask = torch.rand(5, 7) > 0.4
    bool_mask[1] = False  # every key masked for query 1: torch gives zeros there
    yield SampleInput(tensor(q, dtype), args=(tensor(kv, dtype), tensor(kv, dtype)), kwargs={"attn_mask": bool_mask})
    yield SampleInput(
        tensor(q, dtype), args=(tensor(kv, dtype), tensor(kv, dtype)), kwargs={"attn_mask": tensor((2, 1, 5, 7), dtype)}
    )
    yield SampleInput(tensor(q, dtype), args=(tensor(kv, dtype), tensor(kv, dtype)), kwargs={"scale": 0.3})
    causal = {"is_causal": True, "scale": 2.0}
    yield SampleInput(tensor(q, dtype), args=(tensor(kv, dtype), tensor(kv, dtype)), kwargs=causal)
    yield SampleInput(
        tensor((2, 6, 5, 8), dtype),
        args=(tensor((2, 2, 7, 8), dtype), tensor((2, 2, 7, 8), dtype)),
        kwargs={"enable_gqa": True, "is_causal": True},
    )
    yield SampleInput(tensor((3, 5, 8), dtype), args=(tensor((3, 7, 8), dtype), tensor((3, 7, 6), dtype)))


ROWS = (
    from_opinfo(
        "nn.functional.scaled_dot_product_attention",
        "scaled_dot_product_attention",
        sample_filter=SampleRule(
            "dropout_p > 0 drops attention weights at random", lambda s: kwarg("dropout_p", 0.0)(s) > 0
        ),
        tolerance=ATTENTION_TOLERANCE,
    ),
    hand_written(
        "scaled_dot_product_attention",
        id="scaled_dot_product_attention.masks",
        fn=sdpa,
        samples=_attention,
        dtypes=(torch.float32, torch.float16),
        tolerance=ATTENTION_TOLERANCE,
    ),
)

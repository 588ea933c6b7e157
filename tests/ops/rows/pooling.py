"""Pooling."""

import torch.nn.functional as F
from row import SampleRule, from_opinfo, hand_written, kwarg, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _avg_pool_divisor(dtype):
    """divisor_override with ceil_mode windows that run past the padding, batched or not."""
    for shape, kernel, stride, padding, ceil_mode, divisor in [
        ((1, 2, 7, 6), 3, 2, 1, True, 5),
        ((2, 7, 7), (3, 2), (2, 3), (1, 0), True, 4),
        ((1, 1, 6, 6), 2, 2, 0, False, 3),
        ((1, 3, 8, 5), (4, 3), 3, (2, 1), True, 7),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(kernel, stride, padding, ceil_mode), kwargs={"divisor_override": divisor})


ROWS = (
    from_opinfo(
        "nn.functional.max_pool2d",
        "max_pool2d",
        sample_filter=SampleRule("return_indices=True is max_pool2d_with_indices, not in this row", kwarg("return_indices", False)),
    ),
    from_opinfo("nn.functional.avg_pool2d", "avg_pool2d"),
    from_opinfo("nn.functional.adaptive_avg_pool2d", "adaptive_avg_pool2d"),
    hand_written("avg_pool2d", id="avg_pool2d.divisor_override", fn=F.avg_pool2d, samples=_avg_pool_divisor),
)

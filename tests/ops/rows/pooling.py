"""Pooling."""

import torch
import torch.nn.functional as F
from row import SampleRule, aten, from_opinfo, hand_written, kwarg, tensor
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


def _avg_pool3d_divisor(dtype):
    for shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor in [
        ((1, 2, 5, 6, 7), 3, 2, 1, True, True, 5),
        ((2, 5, 5, 5), (3, 2, 2), (2, 3, 1), (1, 0, 1), True, False, 4),
        ((1, 1, 4, 6, 6), 2, 2, 0, False, True, 3),
    ]:
        yield SampleInput(
            tensor(shape, dtype), args=(kernel, stride, padding, ceil_mode, count_include_pad), kwargs={"divisor_override": divisor}
        )


# Ceil mode where the last window would start in the right padding: torch drops it, ONNX's
# pooling ops before opset 22 keep it. (spatial rank, input shape, kernel, stride, padding)
_DROPPED_WINDOW = [
    (1, (1, 2, 5), 2, 2, 1),
    (2, (2, 3, 5, 6), (2, 3), 2, 1),
    (2, (3, 5, 5), 2, 2, 1),
    (3, (1, 1, 5, 5, 5), 1, 3, 0),
]
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _max_pool_dropped_window(dtype):
    for rank, shape, kernel, stride, padding in _DROPPED_WINDOW:
        args = (_MAX_POOL[rank], kernel, stride, padding)
        yield SampleInput(tensor(shape, dtype), args=args, kwargs={"ceil_mode": True, "return_indices": True})


def _avg_pool_dropped_window(dtype):
    for rank, shape, kernel, stride, padding in _DROPPED_WINDOW:
        for count_include_pad in (True, False):
            yield SampleInput(tensor(shape, dtype), args=(_AVG_POOL[rank], kernel, stride, padding, True, count_include_pad))


def _adaptive_avg_pool(rank):
    def samples(dtype):
        for shape, out in [((1, 3, 8, 8, 8)[: rank + 2], 4), ((2, 3, 7, 9, 5)[: rank + 2], 3), ((3, 10, 6, 6)[: rank + 1], 1)]:
            yield SampleInput(tensor(shape, dtype), args=([out] * rank,))
        yield SampleInput(tensor((2, 3, 7, 9, 5)[: rank + 2], dtype), args=([5, 4, 2][:rank],))

    return samples


_WITH_INDICES = SampleRule("return_indices=True is max_pool*d_with_indices, another row", kwarg("return_indices", False))
_WITHOUT_INDICES = SampleRule(
    "return_indices=False is max_pool*d, another row", lambda sample: not sample.kwargs.get("return_indices", False)
)
# Windows of unequal size are averaged one axis at a time, each step rounding to float16; torch
# accumulates a whole window in float32 and rounds once.
ADAPTIVE_AVG_TOLERANCE = {torch.float16: (1e-3, 5e-3)}

ROWS = (
    *(
        row
        for rank in (1, 2, 3)
        for row in (
            from_opinfo(f"nn.functional.max_pool{rank}d", f"max_pool{rank}d", sample_filter=_WITH_INDICES),
            from_opinfo(
                f"nn.functional.max_pool{rank}d",
                f"max_pool{rank}d_with_indices",
                id=f"max_pool{rank}d_with_indices",
                sample_filter=_WITHOUT_INDICES,
            ),
        )
    ),
    hand_written(
        "max_pool1d_with_indices",
        "max_pool2d_with_indices",
        "max_pool3d_with_indices",
        id="max_pool.dropped_window",
        fn=lambda x, fn, *args, **kwargs: fn(x, *args, **kwargs),
        samples=_max_pool_dropped_window,
        dtypes=(torch.float32, torch.int64),
    ),
    from_opinfo("nn.functional.avg_pool1d", "avg_pool1d"),
    from_opinfo("nn.functional.avg_pool2d", "avg_pool2d"),
    from_opinfo("nn.functional.avg_pool3d", "avg_pool3d"),
    hand_written("avg_pool2d", id="avg_pool2d.divisor_override", fn=F.avg_pool2d, samples=_avg_pool_divisor),
    hand_written(
        "avg_pool3d", id="avg_pool3d.divisor_override", fn=F.avg_pool3d, samples=_avg_pool3d_divisor, dtypes=(torch.float32, torch.int64)
    ),
    hand_written(
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        id="avg_pool.dropped_window",
        fn=lambda x, fn, *args: fn(x, *args),
        samples=_avg_pool_dropped_window,
        dtypes=(torch.float32, torch.int64),
    ),
    from_opinfo("nn.functional.adaptive_avg_pool1d", "adaptive_avg_pool1d", tolerance=ADAPTIVE_AVG_TOLERANCE),
    from_opinfo("nn.functional.adaptive_avg_pool2d", "adaptive_avg_pool2d", tolerance=ADAPTIVE_AVG_TOLERANCE),
    from_opinfo("nn.functional.adaptive_avg_pool3d", "adaptive_avg_pool3d", tolerance=ADAPTIVE_AVG_TOLERANCE),
    hand_written("_adaptive_avg_pool2d", fn=aten._adaptive_avg_pool2d, samples=_adaptive_avg_pool(2)),
    hand_written("_adaptive_avg_pool3d", fn=aten._adaptive_avg_pool3d, samples=_adaptive_avg_pool(3)),
    from_opinfo("nn.functional.adaptive_max_pool1d", "adaptive_max_pool1d"),
    from_opinfo("nn.functional.adaptive_max_pool2d", "adaptive_max_pool2d"),
    from_opinfo("nn.functional.adaptive_max_pool3d", "adaptive_max_pool3d"),
)

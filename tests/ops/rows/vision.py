"""Vision ops (grid sampling, unfold/fold, pixel_unshuffle, embedding_bag) and pooling gradients."""

import torch
import torch.nn.functional as F
from row import SampleRule, aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

_GRID_SAMPLE_16 = SampleRule("ONNX GridSample is new in opset 16", opsets=range(16))
_GRID_SAMPLE_5D_20 = SampleRule(
    "ONNX GridSample takes 5-D inputs from opset 20", lambda sample: sample.input.dim() == 5, opsets=range(20)
)
# torch 2.15 samples bicubic on 5-D inputs; ONNX's GridSample has N-cubic, which onnxruntime's
# kernel refuses ("Only support GridSample Cubic mode in 4-D cases"), so no parity is measured.
_GRID_SAMPLE_TRICUBIC = SampleRule(
    "onnxruntime's GridSample runs cubic mode on 4-D inputs only",
    lambda sample: sample.input.dim() == 5 and sample.kwargs.get("mode") == "bicubic",
    opsets=range(20, 1000),
)


# onnxruntime computes the sampling coordinates in float16 (torch in float32): a coordinate one
# float16 ulp off moves the sample by up to size/2 * 2**-10 pixels.
GRID_SAMPLE_TOLERANCE = {torch.float16: (1e-2, 5e-2)}
# Sums of several float16 gradients: onnxruntime and torch round them at different points.
GRADIENT_TOLERANCE = {torch.float16: (2e-3, 1e-2)}


def _embedding_bag(dtype):
    """aten._embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx): every mode, empty bags (repeated
    offsets, a trailing one), padding_idx inside and outside bags, include_last_offset,
    per-sample weights, int32 indices."""
    weight = tensor((10, 4), dtype)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 4])
    for mode in (0, 1, 2):
        for offsets, include_last, padding_idx in [
            ([0, 4, 4, 6], False, -1),
            ([0, 4, 4, 6, 9], False, 4),
            ([0, 3, 3, 9], True, -1),
            ([0, 2, 5, 9], True, 4),
        ]:
            args = (torch.tensor(offsets), False, mode, False, None, include_last, padding_idx)
            yield SampleInput(weight, args=(indices, *args))
    for offsets, padding_idx in [([0, 3, 3, 6], -1), ([0, 5], 2)]:
        per_sample = tensor((9,), dtype)
        yield SampleInput(weight, args=(indices, torch.tensor(offsets), False, 0, False, per_sample, False, padding_idx))
    yield SampleInput(weight, args=(indices.int(), torch.tensor([0, 4, 6], dtype=torch.int32), False, 2, False, None, False, 3))


def _fold(dtype):
    # (input shape, output_size, kernel_size, dilation, padding, stride)
    for shape, size, kernel, dilation, padding, stride in [
        ((2, 3 * 4, 12), (4, 5), 2, 1, 0, 1),
        ((1, 2 * 6, 9), (5, 6), (2, 3), 1, 1, 2),
        ((2 * 4, 6), (6, 6), 2, (2, 1), (1, 0), (2, 3)),
        ((1, 3 * 9, 4), (5, 5), 3, 1, 0, 2),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(size, kernel, dilation, padding, stride))


def _adaptive_avg_pool2d_backward(dtype):
    for shape, out in [((2, 3, 7, 9), (3, 4)), ((1, 2, 8, 8), (4, 4)), ((3, 5, 6), (4, 5)), ((1, 1, 5, 5), (1, 1))]:
        yield SampleInput(tensor(shape[:-2] + out, dtype), args=(tensor(shape, dtype),))


def _avg_pool2d_backward(dtype):
    # (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    for shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor in [
        ((2, 3, 7, 6), 3, 2, 1, True, True, None),
        ((1, 2, 8, 8), (2, 3), (2, 2), (1, 0), False, False, None),
        ((3, 7, 7), 3, 1, 1, False, False, None),
        ((1, 2, 5, 6), 2, 2, 1, True, False, 3),
    ]:
        x = tensor(shape, dtype)
        grad = tensor(F.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor).shape, dtype)
        yield SampleInput(grad, args=(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor))


def _max_pool2d_backward(dtype):
    # (input shape, kernel, stride, padding, dilation, ceil_mode): overlapping windows share maxima
    for shape, kernel, stride, padding, dilation, ceil_mode in [
        ((2, 3, 7, 6), 3, 1, 1, 1, False),
        ((1, 2, 8, 9), (2, 3), 2, (1, 0), 1, True),
        ((3, 7, 7), 2, 2, 0, 2, False),
        ((1, 2, 5, 5), 2, 2, 1, 1, True),
    ]:
        x = tensor(shape, dtype)
        out, indices = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        yield SampleInput(tensor(out.shape, dtype), args=(x, kernel, stride, padding, dilation, ceil_mode, indices))


ROWS = (
    from_opinfo("grid_sampler_2d", "grid_sampler_2d", tolerance=GRID_SAMPLE_TOLERANCE, xfails=(_GRID_SAMPLE_16,)),
    from_opinfo(
        "nn.functional.grid_sample",
        "grid_sampler",
        tolerance=GRID_SAMPLE_TOLERANCE,
        xfails=(_GRID_SAMPLE_16, _GRID_SAMPLE_5D_20, _GRID_SAMPLE_TRICUBIC),
    ),
    from_opinfo("nn.functional.unfold", "im2col"),
    hand_written("col2im", fn=F.fold, samples=_fold),
    from_opinfo("nn.functional.pixel_unshuffle", "pixel_unshuffle"),
    from_opinfo(
        "nn.functional.embedding_bag",
        "embedding_bag.padding_idx",
        sample_filter=SampleRule(
            "2-D indices get their offsets from arange and max_norm renormalizes through embedding_renorm_: other ops",
            lambda sample: sample.args[0].dim() == 2 or sample.kwargs.get("max_norm") is not None,
        ),
    ),
    hand_written("_embedding_bag", fn=aten._embedding_bag, samples=_embedding_bag, dtypes=(torch.float32, torch.float16)),
    # The result only: with include_last_offset, torch's eager and export-time (meta) sizes of the
    # bag_size and max_indices outputs of this overload disagree.
    hand_written(
        "embedding_bag",
        id="embedding_bag.aten",
        fn=lambda weight, *args: aten.embedding_bag(weight, *args[:-1])[0],  # no padding_idx
        samples=_embedding_bag,
    ),
    hand_written(
        "_adaptive_avg_pool2d_backward",
        fn=aten._adaptive_avg_pool2d_backward,
        samples=_adaptive_avg_pool2d_backward,
        dtypes=(torch.float32, torch.float16),
        tolerance=GRADIENT_TOLERANCE,
    ),
    hand_written(
        "avg_pool2d_backward",
        fn=aten.avg_pool2d_backward,
        samples=_avg_pool2d_backward,
        dtypes=(torch.float32, torch.float16),
        tolerance=GRADIENT_TOLERANCE,
    ),
    hand_written(
        "max_pool2d_with_indices_backward",
        fn=aten.max_pool2d_with_indices_backward,
        samples=_max_pool2d_backward,
        dtypes=(torch.float32, torch.float16),
        tolerance=GRADIENT_TOLERANCE,
    ),
)

"""Fake quantization: QuantizeLinear/DequantizeLinear pairs. Values are drawn on the grid's
half steps only by chance: the samples check that rounding, the zero point, the range's clipping
(a range narrower than the 8-bit type's too) and per-channel scales agree with torch."""

import torch
from row import SampleRule, aten, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

RANGES = [(-128, 127), (0, 255), (0, 127)]
NO_KERNEL_AT_28 = (SampleRule("onnxruntime 1.32 has no kernel for QuantizeLinear of opset 28", opsets=range(28, 1000)),)


def _per_tensor(dtype):
    for lo, hi in RANGES:
        for zero_point in (0, lo + 3):
            yield SampleInput(tensor((6, 4, 3), dtype, low=-3, high=3), args=(0.05, zero_point, lo, hi))


def _tensor_qparams(dtype):
    for lo, hi in RANGES:
        scale, zero_point = torch.tensor([0.04]), torch.tensor([lo + 5], dtype=torch.int32)
        yield SampleInput(tensor((2, 5), dtype, low=-3, high=3), args=(scale, zero_point, lo, hi))
        yield SampleInput(tensor((5,), dtype, low=-3, high=3), args=(scale[0], zero_point[0].long(), lo, hi))


def _per_channel(dtype):
    for lo, hi in RANGES:
        scales = torch.tensor([0.02, 0.05, 0.1, 0.2])
        zero_points = torch.tensor([lo, lo + 1, lo + 7, (lo + hi) // 2], dtype=torch.int32)
        yield SampleInput(tensor((3, 4, 2), dtype, low=-5, high=5), args=(scales, zero_points, 1, lo, hi))
        yield SampleInput(tensor((4, 3), dtype, low=-5, high=5), args=(scales, zero_points, 0, lo, hi))


ROWS = (
    hand_written(
        "fake_quantize_per_tensor_affine",
        fn=lambda x, *a: torch.fake_quantize_per_tensor_affine(x, *a),
        samples=_per_tensor,
        dtypes=(torch.float32,),
        xfails=NO_KERNEL_AT_28,
    ),
    hand_written(
        "fake_quantize_per_tensor_affine.tensor_qparams",
        fn=lambda x, *a: aten.fake_quantize_per_tensor_affine.tensor_qparams(x, *a),
        samples=_tensor_qparams,
        dtypes=(torch.float32,),
        xfails=NO_KERNEL_AT_28,
    ),
    hand_written(
        "fake_quantize_per_channel_affine",
        fn=lambda x, *a: torch.fake_quantize_per_channel_affine(x, *a),
        samples=_per_channel,
        dtypes=(torch.float32,),
        xfails=NO_KERNEL_AT_28,
    ),
)
